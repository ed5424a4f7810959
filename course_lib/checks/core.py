"""What every checker shares: calling the learner's function safely and phrasing the feedback.

A checker raises AssertionError with feedback on the first thing that fails: which
exercise, what failed, the input, expected against got, and a hint. On success it
prints one line. A NotImplementedError from an unfinished exercise passes straight
through, so a blank exercise fails at its check cell with its own message.
`__tracebackhide__` keeps the checkers' own frames out of the traceback pytest shows,
and each failure shows in a notebook as its feedback only (course_lib.checks.rendering).
A checker wrapped in `@checker` only ever fails with feedback: any other exception raised
while it checks (say, on something odd that the learner's function returned) becomes an
AssertionError that names the exercise. `Checker(..., forbidden=...)` reports an answer
that calls a function its exercise forbids.

A checker runs in one of two places. In a learner's own check cell it calls the function
itself (direct). In the grader it is given a stand-in for the learner's function
(course_lib.grading.remote), which sends each call, as data, to the learner's process and
answers with what happened there; `Checker.call` and `Checker.follow` are the only places
that touch the learner's function or what it made, and read the same either way. The inputs
come from `seed(n)`: n itself in direct mode, so that a learner's feedback is reproducible,
and n offset by a seed the grader draws (`seeded`) when it grades.
"""
import contextlib
import functools
import inspect
import sys
import threading

import numpy as np
import torch

from course_lib.checks import report
from course_lib.checks.rendering import explain, recorded, show_warnings

_GRADING = threading.local()   # base: the grading seed of the checks this thread runs (none: direct)
LEARNER_SIDE = {}              # label -> a checker's function that may run in the learner's process


def seed(n=0):
    """The seed for a check's n-th random input: n itself, offset by the grader's seed when it grades."""
    base = getattr(_GRADING, "base", None)
    return n if base is None else (base + n) % 2 ** 63


def grading():
    """Whether the checks this thread runs are the grader's (inside `seeded`), not a learner's own."""
    return getattr(_GRADING, "base", None) is not None


class Stopped(AssertionError):
    """Feedback after which nothing more can be checked: the learner's process has ended (a crash,
    os._exit, the time limit). A drawn input is not shrunk past it (course_lib.checks.domain)."""


@contextlib.contextmanager
def seeded(base):
    """Run the checks inside with inputs drawn from the grading seed `base` (the grader's); yields
    the list of the Checkers they make (each counts the cases that passed)."""
    previous = getattr(_GRADING, "base", None), getattr(_GRADING, "made", None)
    _GRADING.base, _GRADING.made = int(base), []
    try:
        yield _GRADING.made
    finally:
        _GRADING.base, _GRADING.made = previous


def label_of(fn):
    """How a function is named on both sides of the grader's calls: course_lib's by module and
    qualified name (from its code, whichever way it is reached), others by __module__ and __qualname__."""
    fn = inspect.unwrap(fn) if callable(fn) else fn
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    lib = _LIB
    if code is not None and code.co_filename.startswith(lib):
        rel = code.co_filename[len(lib):-3].replace("/", ".").removesuffix(".__init__")
        return f"course_lib.{rel}.{code.co_qualname}"
    module = getattr(fn, "__module__", None) or getattr(getattr(fn, "__self__", None), "__name__", None)
    if module is None and hasattr(fn, "__objclass__"):
        module = f"{fn.__objclass__.__module__}.{fn.__objclass__.__qualname__}"
    return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', type(fn).__name__))}"


_LIB = __file__[:__file__.rindex("checks")]   # course_lib's folder, ending with its separator


def learner_side(fn):
    """Register a checker's function that may run in the learner's process: one the checker passes
    as an argument (a layer for future_leak), or an observer of a call (`Checker.follow`). The
    grader's watch there does not count its calls as the checker's own; it runs as it is."""
    LEARNER_SIDE[label_of(fn)] = fn
    return fn


def exercise_names():
    """Every exercise's name, from the checkers' index (no checker is imported)."""
    from course_lib import checks
    return frozenset(name[6:] for name in checks._WHERE if name.startswith("check_"))


def watched_functions(module):
    """{label: function} of the functions a checker module names in its module-level tuples, lists,
    sets and dicts: the ones its exercises forbid, and the course's own that it watches for."""
    found = {}
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list, set, frozenset)) else ()
        for item in items:
            if callable(item) and not isinstance(item, type) and label_of(item) not in LEARNER_SIDE:
                found[label_of(item)] = item
    return found


SHOWN_CHARACTERS = 2_000   # the most of a value's text a feedback message shows


def show(x, rows=4, cols=6):
    """A short, readable rendering of a value for feedback messages.

    A large array is cut to its first rows and columns (of its first 2-D slice) and its
    shape is named, so a message stays a few lines long.
    """
    if isinstance(x, torch.Tensor):
        x = x.detach().float().cpu().numpy() if x.dtype == torch.bfloat16 else x.detach().cpu().numpy()
    if isinstance(x, (list, tuple)) and len(x) > rows * cols:   # a long list: its head and length
        head = repr(list(x[:rows * cols]))
        return f"{head[:-1]}, ...] ({len(x):,} items)"
    if not isinstance(x, np.ndarray):
        text = repr(x)
        return text if len(text) <= SHOWN_CHARACTERS else \
            f"{text[:SHOWN_CHARACTERS]}... ({len(text):,} characters)"
    shape = x.shape
    cut = x[(0,) * max(x.ndim - 2, 0)] if x.ndim > 2 else x
    if cut.ndim == 2:
        cut = cut[:rows, :cols]
    elif cut.ndim == 1:
        cut = cut[:rows * cols]
    text = np.array2string(cut, precision=3, suppress_small=True, threshold=rows * cols,
                           separator=", ", formatter=_small_floats(cut)
                           ).replace("\n", "\n            ")
    if cut.shape != shape:
        where = "[" + ", ".join(["0"] * max(x.ndim - 2, 0) + [":"] * min(x.ndim, 2)) + "]"
        text += f"\n            (the first rows and columns of {where}, of shape {shape})"
    return text


def _significant(v):
    """A float with four significant digits: 0.0003342, 1.604, 3.162e+16, inf."""
    v = float(v)
    if not np.isfinite(v) or v == 0 or 1e-4 <= abs(v) < 1e6:
        return np.format_float_positional(v, precision=4, unique=True, fractional=False,
                                          trim=".")
    return np.format_float_scientific(v, precision=3, unique=False)


def _small_floats(cut):
    """A formatter for an array some of whose values three decimals would show as 0 (3,000
    float16 weights of about 0.0003 each): every value with four significant digits, so that an
    expected and a got that differ show differently. None (NumPy's own) otherwise."""
    if cut.dtype.kind != "f" or not cut.size:
        return None
    finite = np.abs(cut[np.isfinite(cut) & (cut != 0)])
    if not finite.size or finite.min() >= 5e-4:
        return None
    return {"float_kind": _significant}


def tolerance(dtype):
    """(atol, rtol) for comparing a result computed in `dtype`: a few units in the last place."""
    name = str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else np.dtype(dtype).name
    return {"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}.get(name, (1e-6, 1e-4))


def input_tolerance(dtype):
    """(atol, rtol) for a result computed from inputs of `dtype`: float64 inputs at float64's precision.

    Unlike `tolerance`, float64 gets its own (tight) tolerance here, so that a result rounded
    or computed in float32 from float64 inputs is told apart from one computed in float64.
    """
    name = str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else np.dtype(dtype).name
    return (1e-10, 1e-8) if name == "float64" else tolerance(dtype)


def _snapshot(value):
    """A copy of an array or tensor argument, to pass or to compare with; None for anything else."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return None


def _message(e):
    """str(e), or a stand-in when the learner's exception cannot show itself."""
    try:
        return str(e)
    except Exception:
        return f"<a {type(e).__name__} whose message could not be shown>"


def _write_back(target, value):
    """Put what the learner's function wrote into an array argument back into the checker's array.

    Called directly, the array already holds it; from the grader, it comes back with the reply.
    """
    if value is None or target is value:
        return
    if isinstance(target, np.ndarray) and isinstance(value, np.ndarray) and target.shape == value.shape:
        if not np.array_equal(target, value, equal_nan=True):
            target[...] = value
    elif isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor) and target.shape == value.shape:
        if not torch.equal(torch.nan_to_num(target.detach()), torch.nan_to_num(value.detach())):
            with torch.no_grad():
                target.copy_(value)


def _unchanged(before, after):
    if isinstance(before, np.ndarray):
        return isinstance(after, np.ndarray) and before.shape == after.shape and \
            np.array_equal(before, after, equal_nan=True)
    return isinstance(after, torch.Tensor) and before.shape == after.shape and \
        torch.equal(torch.nan_to_num(before), torch.nan_to_num(after.detach()))


class Checker:
    """Calls the learner's function and turns the first failed property into feedback."""

    def __init__(self, exercise, fn, forbidden=None):
        """`forbidden` maps a name the learner knows (e.g. "F.cross_entropy") to a function that
        their answer must not call, directly or through anything else (torch's own layers too)."""
        self.exercise = exercise
        self.fn = fn
        self.passed = 0
        self.forbidden = dict(forbidden or {})
        self.takes_tensors = False    # whether the last call's array arguments were torch tensors
        self.last_case = None         # the input of the last call, for feedback on a crash
        self.raised = None            # what the learner's function raised in the last call, called
                                      # directly (from the grader: its type and message only)
        self.seen = {}                # what the last call's observers saw (see `call`)
        self._last = None             # (result, arguments as passed) of the last direct call
        if _runs():
            _runs()[-1].append(self)
        if getattr(_GRADING, "made", None) is not None:
            _GRADING.made.append(self)
        remote = getattr(fn, "remote", None)
        kind = remote.kind if remote is not None else (None if callable(fn) else type(fn).__name__)
        if kind is not None:
            self.fail(f"expected a function, got {kind}",
                      hint=f"pass the function itself, e.g. check_{exercise}({exercise}), "
                           f"without calling it")

    def fail(self, what, *, case=None, expected=None, got=None, hint, stopped=False):
        __tracebackhide__ = True
        lines = [f"Exercise '{self.exercise}': {what}"]
        if case is not None:
            lines.append(f"  input:    {case}")
        if expected is not None:
            lines.append(f"  expected: {show(expected)}")
        if got is not None:
            lines.append(f"  got:      {show(got)}")
        lines.append(f"Hint: {hint}")
        raise explain((Stopped if stopped else AssertionError)("\n".join(lines)), raised=self.raised)

    def call(self, *args, case, crash_hint=None, none_hint=None, mutable=(), watch=(), around=None,
             observe=None, catch=False, **kwargs):
        """The learner's fn(*args, **kwargs), with feedback for a crash, a None, or an input changed in place.

        `crash_hint` is the hint for an exception, or a function (kind, message) -> hint.

        Array and tensor arguments are passed as copies, so an answer that edits its input
        cannot change the checker's data; those named in `mutable` (by position or keyword)
        are passed as they are, since the exercise writes into them. A tensor that requires
        grad is passed as it is too, so gradients can reach it, and compared afterwards.
        Anything else (a list, a dict, a model, an optimizer) is passed as it is: from the
        grader it comes back as the call left it.

        What else the call is watched for goes into `self.seen`: "watched", the names of the
        functions in `watch` that ran during it (course_lib's own answers, say); with `around`
        (a `learner_side` class of context manager: a TorchFunctionMode, say), "around", what
        its instance's report() said after the call ran inside it, where it ran; with `observe`
        (a `learner_side` function), "observed", observe(result, *args) run where the call
        ran, after it. With
        catch=True what the function raised is not feedback here: `self.seen["raised"]` holds
        (type name, message), for the caller to diagnose, and the result is None.
        """
        __tracebackhide__ = True
        fn, remote = self.fn, getattr(self.fn, "remote", None)
        names = (remote.names(len(args)) if remote is not None else _parameter_names(fn, len(args))) + list(kwargs)
        given = list(args) + list(kwargs.values())
        passed, before, written = [], [], []
        for i, (name, value) in enumerate(zip(names, given)):
            copy = _snapshot(value)
            if copy is None or i in mutable or name in mutable:
                passed.append(value)
                before.append(None)
                written.append(copy is not None)    # an array the exercise writes into
            elif isinstance(value, torch.Tensor) and value.requires_grad:
                passed.append(value)
                before.append(copy)
                written.append(False)
            else:
                passed.append(copy if remote is None else value)
                before.append(value)
                written.append(False)
        self.last_case = case
        self.raised = None
        self.takes_tensors = any(isinstance(v, torch.Tensor) for v in given)
        shown = {label_of(f): name for name, f in self.forbidden.items()}
        watched = {label_of(f): f.__qualname__ for f in watch}
        if remote is not None:
            seen = remote.call(passed[:len(args)], dict(zip(kwargs, passed[len(args):])), case=case,
                               labels=list(shown) + list(watched), around=around, observe=observe)
            called = [label for label in seen["labels"] if label in shown]
            seen["called"] = shown[called[0]] if called else None
            seen["watched"] = list(dict.fromkeys(watched[label] for label in seen["labels"] if label in watched))
            after = seen["after"]
            for target, now in zip(passed, after):   # lists, dicts, models as the call left them
                _mirror(target, now)
        else:
            seen = self._invoke(fn, passed, len(args), kwargs, watch, around, observe)
            after = passed
        self.seen = seen
        seen["changed"] = [name for name, was, now in zip(names, before, after)
                           if was is not None and not _unchanged(was, now)] if "result" in seen else []
        for target, value, w in zip(passed, after, written):
            if w:
                _write_back(target, value)
        if "ended" in seen:   # the learner's process is gone: nothing more can be checked
            self.fail(seen["ended"], case=case, stopped=True,
                      hint="run your function on this input in a cell of its own: an endless loop, "
                           "os._exit or exit(), a crash or a huge allocation ends it")
        if "raised" in seen and catch:
            return None
        if "raised" in seen:  # the learner's bug, reported as feedback rather than a traceback
            kind, text = seen["raised"]
            if callable(crash_hint):   # a hint chosen by what was raised
                crash_hint = crash_hint(kind, text)
            hint = crash_hint or ("run your function on this input in a cell of its own and "
                                  "print the shapes of the arrays inside it")
            if "leaf Variable that requires grad is being used in an in-place" in text:
                hint = ("your function changed an input in place (+=, x[...] = ..., a method "
                        "ending in _): build new tensors instead (x = x + ...), so that gradients "
                        "can reach the input and the caller keeps it as it was")
            self.fail(f"your function raised {kind}: {text}", case=case, hint=hint)
        if seen["called"]:
            self.fail(f"your function calls {seen['called']}, which this exercise asks you not to use",
                      case=case, hint=f"write the computation yourself, as the exercise describes: "
                                      f"{seen['called']} does the whole job, so using it shows "
                                      f"nothing of how it works")
        for name in seen["changed"]:
            self.fail(f"your function changed its input {name} in place", case=case,
                      hint=f"build new arrays rather than writing into {name} (x = x - m "
                           f"rather than x -= m, no {name}[...] = ...): the caller still "
                           f"needs {name} as it was")
        result = seen["result"]
        if result is None:
            self.fail("your function returned None", case=case,
                      hint=none_hint or "finish it with a `return` of the result; a function "
                                        "without one returns None")
        return result

    def _invoke(self, fn, passed, n, kwargs, watch, around, observe):
        """The one place the learner's function runs in this process: what it returned or raised, the
        first forbidden function it called and what else it was watched for."""
        spy = Watch(self.forbidden, watch)
        inside = around() if around is not None else contextlib.nullcontext()
        seen = {}
        try:
            with spy, inside:
                result = fn(*passed[:n], **dict(zip(kwargs, passed[n:])))
            seen["result"] = result
        except NotImplementedError:
            raise
        except Exception as e:
            self.raised = e   # its frames are shown with the feedback
            seen["raised"] = (type(e).__name__, _message(e))
            result = None
        seen.update(called=spy.called, watched=list(spy.watched))
        if around is not None:
            seen["around"] = inside.report()
        if spy.thread and "raised" not in seen:
            seen.update(raised=("RuntimeError", "the grader runs your function where it cannot start a "
                                "thread (it started one: a ThreadPoolExecutor, threading.Thread?)"))
            del seen["result"]
        self._last = (result, passed[:n], dict(zip(kwargs, passed[n:])))
        if observe is not None:
            seen["observed"] = _observe_here(observe, self._last, {})
        return seen

    def follow(self, observer, **data):
        """observer(result, *args, **data) on the last call, run where that call ran (a
        `learner_side` function: a backward pass through the result, say); returns its value,
        or {"raised": (type name, message)} for what it raised."""
        __tracebackhide__ = True
        remote = getattr(self.fn, "remote", None)
        if remote is not None:
            seen = remote.follow(observer, data, case=self.last_case)
            if "ended" in seen:
                self.fail(f"your function's result ended the grader's process ({seen['ended']})",
                          case=self.last_case, stopped=True,
                          hint="run your function on this input in a cell of its own")
            return seen["observed"]
        return _observe_here(observer, self._last, data)

    def array(self, value, what, case):
        """The value as a NumPy array (a torch tensor is converted), or feedback that it is neither.

        The feedback names what the exercise works with: a torch tensor when the learner's
        function was given tensors, a NumPy array otherwise.
        """
        __tracebackhide__ = True
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu()
            value = (value.float() if value.dtype == torch.bfloat16 else value).numpy()
        if not isinstance(value, np.ndarray):
            if self.takes_tensors:
                self.fail(f"{what} should be a torch tensor, got {type(value).__name__}", case=case,
                          hint="build it with torch operations on the inputs, and return the "
                               "tensor itself")
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

    def close(self, value, expected, what, case, hint, atol=None, dtype=None, input_dtype=None):
        """Fail unless value equals expected to the tolerance of `dtype` (default: value's dtype).

        With `input_dtype`, the tolerance is `input_tolerance(input_dtype)` instead: float64
        inputs demand float64's precision.
        """
        __tracebackhide__ = True
        if input_dtype is not None:
            tol_atol, rtol = input_tolerance(input_dtype)
        else:
            tol_atol, rtol = tolerance(dtype if dtype is not None else value.dtype)
        atol = max(tol_atol, atol or 0.0)
        if value.shape != expected.shape or not np.allclose(value, expected, atol=atol, rtol=rtol):
            self.fail(f"{what} is not right", case=case, expected=expected, got=value, hint=hint)
        self.ok()

    def ok(self):
        __tracebackhide__ = True
        self.passed += 1

    def done(self):
        __tracebackhide__ = True
        print(f"{self.exercise}: {self.passed} checks passed")


def _runs():
    """For each `checker` running in this thread, the Checkers it made, the newest last."""
    if not hasattr(_GRADING, "runs"):
        _GRADING.runs = []
    return _GRADING.runs


@learner_side   # its methods run in the learner's process, in each subclass's instance
class TorchCalls(torch.overrides.TorchFunctionMode):
    """A `learner_side` base for the `around` of a call: notes which of the torch functions a
    subclass's FORBIDDEN ({torch's name: the name the learner knows}) ran under it, at torch's
    dispatch, however they were reached: F.cross_entropy, torch._C._nn.cross_entropy_loss, an
    aten op or overload (torch.ops.aten._log_softmax, log_softmax.int), one called from C by
    map() or functools.partial, which a profiler does not see. report() lists them."""
    FORBIDDEN = {}

    def __init__(self):
        super().__init__()
        self.called = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.FORBIDDEN.get(getattr(func, "__name__", "").split(".")[0].lstrip("_"))
        if name and name not in self.called:
            self.called.append(name)
        return func(*args, **(kwargs or {}))

    def report(self):
        return list(self.called)


class Watch:
    """While active, notes the first call of a forbidden function, the watched functions that ran
    (by their code, whichever name or module reached them; a builtin by its identity), and
    whether a thread was started (which the grader's process cannot). A profiler already set
    (a debugger, coverage) is put back afterwards."""

    def __init__(self, forbidden, watched=()):
        import _thread
        self.codes, self.builtins, self.called = {}, {}, None
        for name, fn in forbidden.items():
            code = getattr(inspect.unwrap(fn), "__code__", None)
            if code is not None:
                self.codes[code] = name
            else:
                self.builtins[id(fn)] = name
        self.looked = {inspect.unwrap(f).__code__: f.__qualname__ for f in watched}
        self.watched, self.thread = [], False
        self.start = id(_thread.start_new_thread)

    def _profile(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            if self.called is None:
                self.called = self.codes.get(code)
            name = self.looked.get(code)
            if name is not None and name not in self.watched:
                self.watched.append(name)
        elif event == "c_call":
            if self.called is None:
                self.called = self.builtins.get(id(arg))
            if id(arg) == self.start:
                self.thread = True

    def __enter__(self):
        self.previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self.previous)
        return False


def _observe_here(observer, last, data):
    """observer(result, *args, **data) on the last call made in this process, or what it raised."""
    if last is None:
        raise RuntimeError("a checker followed up a call that was never made: a bug in course_lib.checks")
    result, args, _ = last
    try:
        return observer(result, *args, **data)
    except Exception as e:
        return {"raised": (type(e).__name__, _message(e))}


def _mirror(target, after):
    """Make the checker's `target` what the grader's call left it in the learner's process (`after`),
    as a call made here would have: a list or dict, a module of the course, an optimizer, a generator."""
    if target is after:
        return
    if isinstance(target, list) and isinstance(after, list):
        target[:] = after
    elif isinstance(target, dict) and isinstance(after, dict):
        target.clear()
        target.update(after)
    elif isinstance(target, torch.nn.Module) and type(after) is type(target):
        load_module_state(target, after.state_dict(), {k: p.grad for k, p in after.named_parameters()},
                          {k: p.requires_grad for k, p in after.named_parameters()}, after.training)
    elif isinstance(target, torch.optim.Optimizer) and type(after) is type(target):
        target.load_state_dict(after.state_dict())
    elif isinstance(target, torch.Generator) and isinstance(after, torch.Generator):
        target.set_state(after.get_state())
    elif isinstance(target, torch.Tensor) and isinstance(after, torch.Tensor) and target.requires_grad:
        _write_back(target, after)


def load_module_state(m, state, grads, requires_grad, training):
    """Give module `m` this state: values (and their dtype), gradients, requires_grad, train or eval mode."""
    floats = {v.dtype for v in state.values() if v.is_floating_point()}
    if len(floats) == 1:
        m.to(next(iter(floats)))
    m.load_state_dict(state)
    for name, p in m.named_parameters():
        p.requires_grad_(bool(requires_grad.get(name, p.requires_grad)))
        p.grad = grads.get(name)
    m.train(bool(training))


def checker(check):
    """Wrap a check_<name> function so that it only ever fails with feedback.

    AssertionError (the feedback) and NotImplementedError (an unfinished exercise) pass
    through; any other exception raised while checking, say on an odd value the learner's
    function returned, becomes an AssertionError that names the exercise, the input of
    the last call, and the error.
    """
    name = check.__name__.removeprefix("check_")

    @functools.wraps(check)
    def run(fn):
        __tracebackhide__ = True
        _runs().append([])
        caught = []
        try:
            with recorded() as caught:
                result = check(fn)
        except (AssertionError, NotImplementedError) as e:
            raise explain(e, caught)   # shown as its message, without the checkers' frames
        except Exception as e:  # a checker only ever fails with its own message
            made = _runs()[-1]
            case = made[-1].last_case if made else None
            text = f"{type(e).__name__}: {_message(e)}".splitlines()[0][:300]
            lines = [f"Exercise '{name}': the check could not go on with what your function "
                     f"returned ({text})"]
            if case is not None:
                lines.append(f"  input:    {case}")
            if "inplace" in text or "in-place" in text:
                hint = ("your function edits in place (x -= ..., x[...] = ..., x.exp_()) a "
                        "tensor that autograd still needs to compute the gradient: build a "
                        "new tensor instead (x = x - ...)")
            else:
                hint = ("call your function on this input in a cell of its own and compare "
                        "what it returns (its type, shape and dtype, and each item of a pair or "
                        "dict) with what the exercise asks for")
            lines.append(f"Hint: {hint}")
            raise explain(AssertionError("\n".join(lines)), caught) from None
        finally:
            _runs().pop()
        show_warnings(caught)   # after the pass line, each once
        return result

    run.feedback_only = True   # tests/test_checks.py asserts every check_<name> carries it
    return report.reported(name, run)   # each outcome to the hub's live view, where there is one


def _parameter_names(fn, n):
    """The names of fn's first n parameters, for feedback; positions where they are unknown."""
    try:
        names = [p for p in inspect.signature(fn).parameters][:n]
    except (TypeError, ValueError):
        names = []
    return names + [f"argument {i + 1}" for i in range(len(names), n)]


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


# Torch exercises (lessons 04, 08): results checked against a float64 reference.

HALF = (torch.float16, torch.bfloat16)


def _tensor_tolerance(dtype):
    """Absolute and relative tolerance for a result in `dtype`, against a float64 reference."""
    return {torch.float16: 1e-2, torch.bfloat16: 3e-2}.get(dtype, 1e-5)


def tensors_close(got, want, dtype):
    """Whether two tensors agree to within a tolerance that follows the result's dtype."""
    tol = _tensor_tolerance(dtype)
    return got.shape == want.shape and bool(torch.allclose(got, want, atol=tol, rtol=tol))


def tensor_result(c, out, x, shape, case, what, finite_hint):
    """The learner's result as a float64 tensor, after the checks every exercise shares:
    not None, a torch tensor, the right shape and dtype, finite."""
    __tracebackhide__ = True
    if out is None:
        c.fail("your function returned None", case=case,
               hint=f"end the function with `return` and {what}")
    if isinstance(out, np.ndarray):
        c.fail("expected a torch tensor, got a NumPy array", case=case,
               hint="stay in torch (torch.sqrt, x.pow(2).mean(...), @): a NumPy round trip "
                    "also cuts the gradients that training needs")
    if not isinstance(out, torch.Tensor):
        c.fail("expected a torch tensor", case=case, got=type(out).__name__,
               hint=f"return {what}, a single tensor")
    c.shape(out, shape, "the result", case,
            hint=f"the result has the same shape as the input, {tuple(shape)}")
    if out.dtype != x.dtype:
        c.fail("the result has the wrong dtype", case=case, expected=str(x.dtype),
               got=str(out.dtype),
               hint="return the result in the input's dtype: compute in float32 if you like, "
                    "then convert back with .to(x.dtype)")
    c.ok()
    got = out.detach().double()
    if not bool(torch.isfinite(got).all()):
        c.fail("the result contains inf or NaN", case=case, got=got, hint=finite_hint)
    c.ok()
    return got




def gradients_flow(c, fn, inputs, names, reference, case, extra=()):
    """The learner's function must pass gradients to every input, equal to the reference's.

    `extra` holds further arguments (not tensors to differentiate, e.g. a number of heads)
    passed after the inputs to both functions. A backward pass that fails (after an in-place
    edit of a tensor autograd needed, say) is feedback, not torch's error.
    """
    __tracebackhide__ = True
    mine = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = c.call(*mine, *extra, case=case)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        c.fail("no gradient flows through your function", case=case,
               hint="use torch operations only: .detach(), .item(), NumPy or torch.no_grad() "
                    "cut the graph, and the layer could not be trained")
    seen = c.follow(backward, inputs=list(range(len(mine))))
    if "raised" in seen:
        c.fail(f"the backward pass through your function failed: {seen['raised']}", case=case,
               hint="an in-place edit (+=, masked_fill_, x[...] = ...) overwrote a tensor that "
                    "autograd kept for the backward pass: build a new tensor instead "
                    "(scores = scores + mask, scores.masked_fill(...))")
    theirs = [t.detach().double().requires_grad_(True) for t in inputs]
    reference(*theirs, *extra).sum().backward()
    for name, grad, b in zip(names, seen["grads"], theirs):
        if grad is None:
            c.fail(f"no gradient flows back to {name}", case=case,
                   hint="use torch operations only: .detach(), .item(), NumPy or "
                        "torch.no_grad() cut the graph, and the layer could not be trained")
        if not (isinstance(grad, torch.Tensor) and grad.shape == b.grad.shape
                and torch.allclose(grad.double(), b.grad, atol=1e-4, rtol=1e-3)):
            c.fail(f"the gradient with respect to {name} is not right", case=case,
                   expected=b.grad, got=grad,
                   hint="the forward values are right, so something in between is not an "
                        "ordinary torch operation: build the result from x with torch only")
    c.ok()


@learner_side
def backward(out, *args, inputs=(), weight=None):
    """Back-propagate (out * weight).sum() (weight 1 when None) through the learner's graph, where it was
    made (a `Checker.follow` observer): {"graph": whether out carries one, "grads": for each argument
    in `inputs`, its .grad (a module's: {parameter name: .grad})}, or {"raised": torch's error in one line}.
    """
    if not isinstance(out, torch.Tensor) or out.grad_fn is None and not out.requires_grad:
        return {"graph": False, "grads": [None] * len(inputs)}
    try:
        total = out.double() if weight is None else out.double() * weight
        total.sum().backward()
    except Exception as e:  # the learner's graph, reported as feedback rather than a traceback
        return {"raised": f"{type(e).__name__}: {torch_error(e)}"}
    grads = []
    for i in inputs:
        a = args[i]
        if isinstance(a, torch.nn.Module):
            grads.append({k: None if p.grad is None else p.grad.detach().clone() for k, p in a.named_parameters()})
        else:
            grads.append(None if a.grad is None else a.grad.detach().clone())
    return {"graph": True, "grads": grads}


def torch_error(e):
    """The first sentence-line of a torch error, without torch's own hint about anomaly mode."""
    return str(e).split(" Hint:")[0].splitlines()[0] if str(e) else type(e).__name__


def name_the_mistake(c, got, want, mistakes, dtype, formula, case):
    """Fail, with the hint of the first (result, hint) in `mistakes` that `got` matches, else the formula.

    Call it once `got` is known to differ from `want`; a result None in `mistakes` is skipped.
    """
    __tracebackhide__ = True
    for wrong, hint in mistakes:
        if wrong is not None and tensors_close(got, wrong, dtype):
            c.fail("the result is not right", case=case, expected=want, got=got, hint=hint)
    if dtype in HALF:
        c.fail("the result is not right", case=case, expected=want, got=got,
               hint=f"{formula}; compute it in float32 (x.float()) and convert the "
                    f"result back with .to(x.dtype)")
    c.fail("the result is not right", case=case, expected=want, got=got, hint=formula)
