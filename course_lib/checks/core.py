"""What every checker shares: calling the learner's function safely and phrasing the feedback.

A checker raises AssertionError with feedback on the first thing that fails: which
exercise, what failed, the input, expected against got, and a hint. On success it
prints one line. A NotImplementedError from an unfinished exercise passes straight
through, so a blank exercise fails at its check cell with its own message.
`__tracebackhide__` keeps the checkers' own frames out of the traceback IPython shows.
"""
import numpy as np
import torch


def show(x):
    """A short, readable rendering of a value for feedback messages."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return np.array2string(x, precision=3, suppress_small=True, threshold=20,
                               separator=", ").replace("\n", "\n            ")
    return repr(x)


class Checker:
    """Calls the learner's function and turns the first failed property into feedback."""

    def __init__(self, exercise, fn):
        self.exercise = exercise
        self.fn = fn
        self.passed = 0
        if not callable(fn):
            self.fail(f"expected a function, got {type(fn).__name__}",
                      hint=f"pass the function itself, e.g. check_{exercise}({exercise}), "
                           f"without calling it")

    def fail(self, what, *, case=None, expected=None, got=None, hint):
        __tracebackhide__ = True
        lines = [f"Exercise '{self.exercise}': {what}"]
        if case is not None:
            lines.append(f"  input:    {case}")
        if expected is not None:
            lines.append(f"  expected: {show(expected)}")
        if got is not None:
            lines.append(f"  got:      {show(got)}")
        lines.append(f"Hint: {hint}")
        raise AssertionError("\n".join(lines))

    def call(self, *args, case, crash_hint=None, **kwargs):
        __tracebackhide__ = True
        try:
            return self.fn(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as e:  # the learner's bug, reported as feedback rather than a traceback
            hint = crash_hint or ("run your function on this input in a cell of its own and "
                                  "print the shapes of the arrays inside it")
            self.fail(f"your function raised {type(e).__name__}: {e}", case=case, hint=hint)

    def array(self, value, what, case):
        """The value as a float NumPy array, or feedback that it isn't one."""
        __tracebackhide__ = True
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        if not isinstance(value, np.ndarray):
            self.fail(f"{what} should be a NumPy array, got {type(value).__name__}", case=case,
                      hint="build it with NumPy operations on the inputs")
        return value

    def shape(self, value, expected, what, case, hint):
        __tracebackhide__ = True
        if tuple(value.shape) != tuple(expected):
            self.fail(f"{what} has the wrong shape", case=case, expected=tuple(expected),
                      got=tuple(value.shape), hint=hint)
        self.ok()

    def finite(self, value, what, case, hint):
        __tracebackhide__ = True
        if not np.all(np.isfinite(value)):
            self.fail(f"{what} contains inf or NaN", case=case, got=value, hint=hint)
        self.ok()

    def close(self, value, expected, what, case, hint, atol=1e-6):
        __tracebackhide__ = True
        if value.shape != expected.shape or not np.allclose(value, expected, atol=atol, rtol=1e-4):
            self.fail(f"{what} is not right", case=case, expected=expected, got=value, hint=hint)
        self.ok()

    def ok(self):
        __tracebackhide__ = True
        self.passed += 1

    def done(self):
        __tracebackhide__ = True
        print(f"{self.exercise}: {self.passed} checks passed")


def matches(value, expected):
    return value.shape == expected.shape and np.allclose(value, expected, atol=1e-6, rtol=1e-4)


def pair(c, result, case, names):
    __tracebackhide__ = True
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        c.fail(f"expected a pair ({names})", case=case, got=type(result).__name__,
               hint=f"end with `return {names}`")
    c.ok()
    return result


def random_qkv(seed, T, S, D, Dv, lead=()):
    """Seeded NumPy q (..., T, D), k (..., S, D), v (..., S, Dv)."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(*lead, T, D)), rng.normal(size=(*lead, S, D)),
            rng.normal(size=(*lead, S, Dv)))
