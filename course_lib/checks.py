"""Checkers for the exercises: each tries the learner's function on small cases, coarse to subtle.

A checker raises AssertionError with feedback on the first thing that fails: which
exercise, what failed, the input, expected against got, and a hint. On success it
prints one line. A NotImplementedError from an unfinished exercise passes straight
through, so a blank exercise fails at its check cell with its own message.
`__tracebackhide__` keeps the checkers' own frames out of the traceback IPython shows.
"""
import math

import numpy as np
import torch

from course_lib import attention as ref

__all__ = ["check_next_token_targets", "check_softmax", "check_attention",
           "check_attention_steps", "check_causal_mask", "check_masked_attention"]


def _show(x):
    """A short, readable rendering of a value for feedback messages."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return np.array2string(x, precision=3, suppress_small=True, threshold=20,
                               separator=", ").replace("\n", "\n            ")
    return repr(x)


class _Checker:
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
            lines.append(f"  expected: {_show(expected)}")
        if got is not None:
            lines.append(f"  got:      {_show(got)}")
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


def _matches(value, expected):
    return value.shape == expected.shape and np.allclose(value, expected, atol=1e-6, rtol=1e-4)


def _pair(c, result, case, names):
    __tracebackhide__ = True
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        c.fail(f"expected a pair ({names})", case=case, got=type(result).__name__,
               hint=f"end with `return {names}`")
    c.ok()
    return result


# Lesson 00 ------------------------------------------------------------------------------

def check_next_token_targets(fn):
    """Check next_token_targets(ids) -> (inputs, targets) with targets[t] == ids[t + 1]."""
    __tracebackhide__ = True
    c = _Checker("next_token_targets", fn)
    for ids in (torch.arange(10, 16), torch.tensor([72, 105, 33]), torch.tensor([7, 7, 9, 7])):
        case = f"ids = {ids.tolist()}"
        inputs, targets = _pair(c, c.call(ids, case=case), case, "inputs, targets")
        inputs, targets = torch.as_tensor(inputs), torch.as_tensor(targets)
        T = len(ids) - 1
        if len(inputs) != T or len(targets) != T:
            c.fail("inputs and targets must each have len(ids) - 1 entries", case=case,
                   expected=(T, T), got=(len(inputs), len(targets)),
                   hint="the last id has no next token to predict and the first is never a "
                        "target, so drop one id from each end")
        if torch.equal(inputs, ids[1:]) and torch.equal(targets, ids[:-1]):
            c.fail("each position predicts the previous token", case=case,
                   expected=ids[1:].tolist(), got=targets.tolist(),
                   hint="position t sees ids[:t + 1] and predicts the next id, ids[t + 1]: "
                        "inputs come from the front of ids, targets from one step later")
        if torch.equal(inputs, targets):
            c.fail("targets equal inputs, so the model is asked to copy its input", case=case,
                   expected=ids[1:].tolist(), got=targets.tolist(),
                   hint="shift the targets by one: targets[t] = ids[t + 1] (the off-by-one "
                        "pitfall: unshifted targets make the loss collapse and teach nothing)")
        if not (torch.equal(inputs, ids[:-1]) and torch.equal(targets, ids[1:])):
            c.fail("inputs or targets hold the wrong ids", case=case,
                   expected=(ids[:-1].tolist(), ids[1:].tolist()),
                   got=(inputs.tolist(), targets.tolist()),
                   hint="inputs are every id but the last, targets every id but the first")
        c.ok()
    c.done()


# Lesson 01 ------------------------------------------------------------------------------

def check_softmax(fn):
    """Check softmax(x, axis=-1): right values, along the given axis, stable for large inputs."""
    __tracebackhide__ = True
    c = _Checker("softmax", fn)
    keepdims = ("if shapes failed to line up, a reduction lost its axis: pass keepdims=True "
                "to max and sum so the result broadcasts against x")

    def run(x, axis, case):
        __tracebackhide__ = True
        got = c.array(c.call(x, axis=axis, case=case, crash_hint=keepdims), "the result", case)
        c.shape(got, x.shape, "the result", case, hint="softmax returns one weight per input")
        return got.astype(np.float64)

    x = np.array([1.0, 2.0, 3.0])
    case = "softmax(np.array([1.0, 2.0, 3.0]))"
    c.close(run(x, -1, case), ref.softmax(x), "the result", case,
            hint="softmax(x)_i = exp(x_i) / sum_j exp(x_j)")

    x = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 5.0]])
    case = "softmax(np.array([[1., 2., 3.], [1., 1., 5.]]), axis=-1)"
    got = run(x, -1, case)
    if not np.allclose(got.sum(axis=-1), 1.0):
        if np.isclose(got.sum(), 1.0):
            hint = ("you divided by the sum over the whole array; sum along `axis` only, "
                    "with keepdims=True, so each slice sums to 1")
        elif np.allclose(got.sum(axis=0), 1.0):
            hint = "you normalised over axis 0; use the `axis` argument (here the last axis)"
        else:
            hint = "divide each exponential by the sum of its own slice's exponentials"
        c.fail("the rows do not each sum to 1", case=case, expected=np.ones(2),
               got=got.sum(axis=-1), hint=hint)
    c.close(got, ref.softmax(x), "the result", case, hint="normalise along the last axis")

    case = "softmax(np.array([[1., 2., 3.], [1., 1., 5.]]), axis=0)"
    c.close(run(x, 0, case), ref.softmax(x, axis=0), "the result", case,
            hint="use the `axis` argument instead of a fixed axis")

    x = np.arange(24.0).reshape(2, 3, 4) / 5
    case = "softmax(np.arange(24.).reshape(2, 3, 4) / 5, axis=1)"
    c.close(run(x, 1, case), ref.softmax(x, axis=1), "the result", case,
            hint="reduce along `axis` with keepdims=True so it works for any number of dims")

    stability = "subtract the maximum before exponentiating: exp(1000) overflows to inf and inf/inf is NaN"
    for x, case in ((np.array([1000.0, 1001.0, 1002.0]), "softmax(np.array([1000., 1001., 1002.]))"),
                    (np.array([-1000.0, -1001.0]), "softmax(np.array([-1000., -1001.]))")):
        got = run(x, -1, case)
        c.finite(got, "the result", case, hint=stability)
        c.close(got, ref.softmax(x), "the result", case, hint=stability)

    x = np.array([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]])
    case = "softmax(np.array([[1000., 1001., 1002.], [0., 1., 2.]]), axis=-1)"
    got = run(x, -1, case)
    c.finite(got, "the result", case,
             hint="subtract each slice's own maximum (x.max(axis=axis, keepdims=True)), not "
                  "the maximum of the whole array: the second row's exponentials all underflow to 0")
    c.close(got, ref.softmax(x), "the result", case, hint=stability)

    x = np.array([10.0, 12.0], dtype=np.float16)
    case = "softmax(np.array([10., 12.], dtype=np.float16))"
    got = run(x, -1, case)
    c.finite(got, "the result", case,
             hint="in float16 exp(12) = 162755 overflows (the largest float16 is 65504); "
                  "subtracting the maximum keeps every exponential <= 1")
    c.close(got, ref.softmax(x.astype(np.float64)), "the result", case, hint=stability, atol=1e-3)
    c.done()


_KEYS = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
_VALUES = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])


def _random_qkv(seed, T, S, D, Dv, lead=()):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(*lead, T, D)), rng.normal(size=(*lead, S, D)),
            rng.normal(size=(*lead, S, Dv)))


def _attention_hint(q, k, weights, mask=None):
    """Name the usual mistake that explains these weights, if one does."""
    __tracebackhide__ = True
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2)
    if mask is not None:  # scaling the mask changes nothing: -inf stays -inf, 0 stays 0
        scores = scores + mask
    if _matches(weights, ref.softmax(scores)):
        return f"divide the scores by sqrt(d_k) (here sqrt({d_k})) before the softmax"
    if _matches(weights, ref.softmax(scores / d_k)):
        return f"divide by the square root of d_k, sqrt({d_k}), not by d_k itself"
    if _matches(weights, ref.softmax(scores / math.sqrt(d_k), axis=-2)):
        return ("take the softmax over the keys, the last axis (axis=-1): each query's "
                "weights must sum to 1")
    return None


def check_attention(fn):
    """Check attention(q, k, v, mask=None) -> (output, weights) against the reference."""
    __tracebackhide__ = True
    c = _Checker("attention", fn)

    def run(q, k, v, case, mask=None, crash_hint=None):
        __tracebackhide__ = True
        kwargs = {} if mask is None else {"mask": mask}
        result = c.call(q, k, v, case=case, crash_hint=crash_hint, **kwargs)
        out, w = _pair(c, result, case, "output, weights")
        out, w = c.array(out, "output", case), c.array(w, "weights", case)
        want_out, want_w = ref.attention(q, k, v, mask)
        c.shape(w, want_w.shape, "weights", case,
                hint="scores are q @ k^T: (..., T, d_k) @ (..., d_k, S) gives one row per query, "
                     "one column per key; transpose only the last two axes of k "
                     "(np.swapaxes(k, -1, -2)), not all of them")
        c.shape(out, want_out.shape, "output", case,
                hint="the output is weights @ v: one row per query, as wide as the values")
        c.finite(w, "weights", case, hint="use a stable softmax (subtract the maximum first)")
        if not _matches(w, want_w):
            hint = _attention_hint(q, k, w, mask) or "weights = softmax(q @ k^T / sqrt(d_k) + mask)"
            c.fail("the attention weights are not right", case=case, expected=want_w, got=w, hint=hint)
        c.close(out, want_out, "output", case, hint="output = weights @ v (values, not keys)")

    q = np.array([[1.0, 0.0]])
    run(q, _KEYS, _VALUES, "the lesson's example: q = [[1, 0]], keys and values from the lesson")

    q, k, v = _random_qkv(0, T=2, S=5, D=3, Dv=4)
    run(q, k, v, "random q (2, 3), k (5, 3), v (5, 4)")

    q, k, v = _random_qkv(1, T=4, S=4, D=3, Dv=2)
    mask = ref.causal_mask(4)
    masked = "random q (4, 3), k (4, 3), v (4, 2) with mask=causal_mask(4)"
    result = c.call(q, k, v, mask=mask, case=masked)
    w = c.array(_pair(c, result, masked, "output, weights")[1], "weights", masked)
    if w.shape == (4, 4) and np.any(np.triu(np.nan_to_num(w, nan=1.0), k=1) != 0):
        c.fail("weights are non-zero where the mask is -inf", case=masked,
               expected=ref.attention(q, k, v, mask)[1], got=w,
               hint="add the mask to the scaled scores before the softmax: "
                    "scores + mask, where mask holds 0 or -inf")
    run(q, k, v, masked, mask=mask)

    q, k, v = _random_qkv(2, T=3, S=5, D=4, Dv=2, lead=(2,))
    run(q, k, v, "a batch: q (2, 3, 4), k (2, 5, 4), v (2, 5, 2)",
        crash_hint="work on the last two axes only: np.swapaxes(k, -1, -2) rather than k.T, "
                   "which also reverses the batch axes")

    q, k, v = _random_qkv(3, T=2, S=3, D=2, Dv=2)
    run(q * 100, k * 100, v, "large scores: q and k scaled by 100")
    c.done()


def check_attention_steps(fn):
    """Check attention_steps(q, keys, values) -> dict of scores, scaled, weights, output."""
    __tracebackhide__ = True
    c = _Checker("attention_steps", fn)
    rng = np.random.default_rng(0)
    cases = [
        (np.array([1.0, 0.0]), _KEYS, _VALUES, "q = [1, 0] with the lesson's keys and values"),
        (np.array([0.0, 1.0]), _KEYS, _VALUES, "q = [0, 1] with the lesson's keys and values"),
        (np.array([2.0, -1.0, 0.5]), rng.normal(size=(4, 3)), rng.normal(size=(4, 2)),
         "q = [2, -1, 0.5] with 4 random keys of width 3 and values of width 2"),
    ]
    stages = ("scores", "scaled", "weights", "output")
    for q, keys, values, case in cases:
        got = c.call(q, keys, values, case=case)
        if not isinstance(got, dict) or set(stages) - set(got):
            c.fail("expected a dict with the keys " + ", ".join(repr(s) for s in stages), case=case,
                   got=sorted(got) if isinstance(got, dict) else type(got).__name__,
                   hint="return dict(scores=..., scaled=..., weights=..., output=...)")
        got = {s: np.asarray(c.array(np.asarray(got[s], dtype=float), s, case)) for s in stages}
        d_k = len(q)
        scores = keys @ q
        want = dict(scores=scores, scaled=scores / math.sqrt(d_k))
        want["weights"] = np.exp(want["scaled"]) / np.exp(want["scaled"]).sum()
        want["output"] = want["weights"] @ values
        hints = dict(
            scores="score j is the dot product of the query with key j: keys @ q",
            scaled=f"divide the scores by sqrt(d_k), where d_k = len(q) is the key width "
                   f"(here sqrt({d_k}))",
            weights="exponentiate the scaled scores, then divide by their sum so the weights sum to 1",
            output="the output is the weighted sum of the values: weights @ values",
        )
        if _matches(got["scores"], values @ q if values.shape[1] == d_k else np.full(1, np.nan)):
            hints["scores"] = "the scores compare the query with the keys, not the values"
        if _matches(got["scaled"], scores) or _matches(got["scaled"], scores / d_k):
            hints["scaled"] = f"divide by the square root of the key width: sqrt({d_k}), not 1 or {d_k}"
        elif _matches(got["scaled"], scores / math.sqrt(2)) and d_k != 2:
            hints["scaled"] = f"d_k is the key width len(q) = {d_k} here; sqrt(2) only fits the lesson's keys"
        if _matches(got["weights"], np.exp(want["scaled"])):
            hints["weights"] = "normalise: divide the exponentials by their sum so the weights sum to 1"
        if _matches(got["output"], want["weights"] @ keys):
            hints["output"] = "the output mixes the values, not the keys: weights @ values"
        for s in stages:
            c.close(got[s], want[s], f"'{s}'", case, hint=hints[s], atol=1e-3)
    c.done()


# Lesson 02 ------------------------------------------------------------------------------

def check_causal_mask(fn):
    """Check causal_mask(T): a (T, T) float array, 0 where j <= i and -inf where j > i."""
    __tracebackhide__ = True
    c = _Checker("causal_mask", fn)
    for T in (1, 2, 4, 5):
        case = f"causal_mask({T})"
        got = c.array(c.call(T, case=case), "the mask", case)
        want = ref.causal_mask(T)
        c.shape(got, (T, T), "the mask", case, hint="one row per query i, one column per key j")
        if got.dtype == bool:
            c.fail("the mask is boolean", case=case, expected=want, got=got,
                   hint="return the additive float mask: 0.0 where allowed, -np.inf where "
                        "hidden, so that it can be added to the scores")
        upper, lower = np.triu_indices(T, k=1), np.tril_indices(T)
        if np.any(got[lower] == 1):
            c.fail("allowed entries are not 0", case=case, expected=want, got=got,
                   hint="allowed entries must be 0.0 so adding the mask leaves those scores unchanged")
        if T > 1 and np.all(got[upper] == 0) and np.all(got[np.tril_indices(T, k=-1)] == -np.inf):
            c.fail("the mask is transposed: it hides the past and shows the future",
                   case=case, expected=want, got=got,
                   hint="row i is the query, column j the key: hide j > i, above the "
                        "diagonal (np.triu(..., k=1))")
        if np.any(np.diag(got) != 0):
            c.fail("the diagonal is hidden", case=case, expected=want, got=got,
                   hint="a position may attend to itself: M[i, i] must be 0; with np.triu "
                        "use k=1 so the diagonal stays 0")
        if T > 1 and np.any(got[upper] != -np.inf):
            finite = np.isfinite(got[upper]) & (got[upper] != 0)
            hint = ("use -np.inf for hidden entries, not a large negative number: only -inf "
                    "gives a weight of exactly 0" if np.any(finite) else
                    "every key after the query (j > i, above the diagonal) must be -inf, "
                    "or the position can see the future")
            c.fail("some future positions are not hidden", case=case, expected=want, got=got,
                   hint=hint)
        c.close(got, want, "the mask", case, hint="0 on and below the diagonal, -inf above it")
    c.done()


def check_masked_attention(fn):
    """Check masked_attention(q, k, v) -> (output, weights): causal self-attention."""
    __tracebackhide__ = True
    c = _Checker("masked_attention", fn)
    q, k, v = _random_qkv(0, T=4, S=4, D=3, Dv=2)
    case = "random q (4, 3), k (4, 3), v (4, 2)"
    shapes = ("the mask must be (T, T) with T = q.shape[-2], the number of positions; print the "
              "shapes of your scores and mask")
    out, w = _pair(c, c.call(q, k, v, case=case, crash_hint=shapes), case, "output, weights")
    out, w = c.array(out, "output", case), c.array(w, "weights", case)
    want_out, want_w = ref.attention(q, k, v, ref.causal_mask(4))
    c.shape(w, (4, 4), "weights", case, hint="one row per query, one column per key: q @ k^T")
    c.shape(out, (4, 2), "output", case, hint="output = weights @ v")
    if np.any(np.isnan(w[0])):
        c.fail("the first position's weights are NaN", case=case, expected=want_w, got=w,
               hint="the mask hides the diagonal, so position 0 sees no key at all and its "
                    "softmax is 0/0; a position must be allowed to attend to itself")
    if np.any(np.triu(w, k=1) != 0):
        c.fail("positions attend to later positions", case=case, expected=want_w, got=w,
               hint="add the causal mask (0 where j <= i, -inf where j > i) to the scaled "
                    "scores before the softmax")
    if not np.allclose(w.sum(axis=-1), 1.0):
        c.fail("the weights of each position do not sum to 1", case=case,
               expected=np.ones(4), got=w.sum(axis=-1),
               hint="apply the mask to the scores before the softmax, not to the weights "
                    "after it, so the visible weights are renormalised")
    c.close(out[0], v[0], "the first position's output", case,
            hint="position 0 sees only itself, so its output must be exactly v[0]")
    c.close(w, want_w, "weights", case, hint=_attention_hint(q, k, w, ref.causal_mask(4)) or
            "weights = softmax(q @ k^T / sqrt(d_k) + causal mask)")
    c.close(out, want_out, "output", case, hint="output = weights @ v")

    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    q2[-1], k2[-1], v2[-1] = 50.0, -50.0, 99.0
    case = "the same q, k, v with the last position's q, k, v changed"
    out2 = c.array(_pair(c, c.call(q2, k2, v2, case=case), case, "output, weights")[0], "output", case)
    c.close(out2[:-1], out[:-1], "earlier positions' outputs", case,
            hint="changing the last token must not change any earlier output: no position "
                 "may see the future")

    q, k, v = _random_qkv(1, T=3, S=3, D=4, Dv=5, lead=(2,))
    case = "a batch: q (2, 3, 4), k (2, 3, 4), v (2, 3, 5)"
    batch_hint = ("work on the last two axes only: np.swapaxes(k, -1, -2) rather than k.T, "
                  "and take T from q.shape[-2], so the (T, T) mask broadcasts over the batch")
    out, w = _pair(c, c.call(q, k, v, case=case, crash_hint=batch_hint), case, "output, weights")
    want_out, want_w = ref.attention(q, k, v, ref.causal_mask(3))
    c.close(c.array(out, "output", case), want_out, "output", case, hint=batch_hint)
    c.done()
