"""Checkers for lesson 01, attention by hand."""
import math

import numpy as np
import torch
import torch.nn.functional as F

from course_lib import attention as ref
from course_lib.checks.core import Checker, checker, matches, pair, random_qkv, seed
from course_lib.checks.domain import each

# The course's own versions, and torch's, of what these exercises ask the learner to write.
SOFTMAXES = {"course_lib's softmax (ref.softmax)": ref.softmax, "torch.softmax": torch.softmax,
             "F.softmax": F.softmax}
ATTENTIONS = {"course_lib's attention (ref.attention)": ref.attention,
              "course_lib's scaled_dot_product_attention": ref.scaled_dot_product_attention,
              "F.scaled_dot_product_attention": F.scaled_dot_product_attention}


@checker
def check_softmax(fn):
    """Check softmax(x, axis=-1): right values, along the given axis, stable for large inputs.

    The result has the input's dtype and its precision (float64 to float64's tolerance);
    float16 must be computed in float32, since a long float16 sum stalls. NumPy has no
    bfloat16, so float16 is the half precision tried here. The course's softmax and
    torch's are off limits.
    """
    __tracebackhide__ = True
    c = Checker("softmax", fn, forbidden=SOFTMAXES)
    keepdims = ("if shapes failed to line up, a reduction lost its axis: pass keepdims=True "
                "to max and sum so the result broadcasts against x")

    def run(x, axis, case):
        __tracebackhide__ = True
        got = c.array(c.call(x, axis=axis, case=case, crash_hint=keepdims), "the result", case)
        c.shape(got, x.shape, "the result", case, hint="softmax returns one weight per input")
        if x.dtype == np.float16 and got.dtype != np.float16:
            c.fail("the result has the wrong dtype", case=case, expected="float16",
                   got=str(got.dtype),
                   hint="return the input's dtype: float16 in, float16 out (compute in float32, "
                        "then convert back with .astype(x.dtype))")
        if x.dtype == np.float64 and got.dtype != np.float64:
            c.fail("the result has the wrong dtype", case=case, expected="float64",
                   got=str(got.dtype),
                   hint="float64 in, float64 out: compute in the input's dtype (only float16 "
                        "needs the detour through float32)")
        return got.astype(np.float64)

    def close(got, x, axis, case, hint):
        __tracebackhide__ = True
        c.close(got, ref.softmax(x.astype(np.float64), axis=axis), "the result", case, hint=hint,
                input_dtype=x.dtype)

    x = np.array([1.0, 2.0, 3.0])
    case = "softmax(np.array([1.0, 2.0, 3.0]))"
    close(run(x, -1, case), x, -1, case, hint="softmax(x)_i = exp(x_i) / sum_j exp(x_j), "
          "computed in float64 to float64's precision (no rounding)")

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
    close(got, x, -1, case, hint="normalise along the last axis")

    case = "softmax(np.array([[1., 2., 3.], [1., 1., 5.]]), axis=0)"
    close(run(x, 0, case), x, 0, case, hint="use the `axis` argument instead of a fixed axis")

    x = np.arange(24.0).reshape(2, 3, 4) / 5
    case = "softmax(np.arange(24.).reshape(2, 3, 4) / 5, axis=1)"
    close(run(x, 1, case), x, 1, case,
          hint="reduce along `axis` with keepdims=True so it works for any number of dims")

    stability = "subtract the maximum before exponentiating: exp(1000) overflows to inf and inf/inf is NaN"
    for x, case in ((np.array([1000.0, 1001.0, 1002.0]), "softmax(np.array([1000., 1001., 1002.]))"),
                    (np.array([-1000.0, -1001.0]), "softmax(np.array([-1000., -1001.]))")):
        got = run(x, -1, case)
        c.finite(got, "the result", case, hint=stability)
        close(got, x, -1, case, hint=stability)

    x = np.array([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]])
    case = "softmax(np.array([[1000., 1001., 1002.], [0., 1., 2.]]), axis=-1)"
    got = run(x, -1, case)
    c.finite(got, "the result", case,
             hint="subtract each slice's own maximum, taken along `axis`, not the maximum of "
                  "the whole array: the second row's exponentials all underflow to 0")
    close(got, x, -1, case, hint=stability)

    only_max = ("shift by each slice's own maximum along `axis`: it is the one "
                "shift that keeps every exponent <= 0 (no overflow) and one exponent at 0 (no "
                "0/0); the mean or the minimum overflow when the values spread widely, and a "
                "-inf entry (a masked position) makes the mean -inf")
    for x, case in ((np.array([-1000.0, 0.0, 1000.0]), "softmax(np.array([-1000., 0., 1000.]))"),
                    (np.array([[0.0, -np.inf, 1.0], [-np.inf, 2.0, -np.inf]]),
                     "softmax(np.array([[0., -inf, 1.], [-inf, 2., -inf]])), a masked row"),
                    (np.array([[-5e4, -5e4 - 3.0, -5e4 - 1.0], [2.0, 1.0, 0.0]]),
                     "softmax(np.array([[-50000., -50003., -50001.], [2., 1., 0.]])), a row of "
                     "very negative scores")):
        got = run(x, -1, case)
        c.finite(got, "the result", case, hint=only_max)
        close(got, x, -1, case, hint=only_max)

    half = "in float16 "
    for x, case in ((np.array([10.0, 12.0], dtype=np.float16),
                     "softmax(np.array([10., 12.], dtype=np.float16))"),
                    (np.array([-3e4, -3e4 - 8.0], dtype=np.float16),
                     "softmax(np.array([-30000., -30008.], dtype=np.float16)), very negative")):
        got = run(x, -1, case)
        c.finite(got, "the result", case,
                 hint=half + "exp(12) = 162755 overflows (the largest float16 is 65504) and "
                      "exp(-30000) underflows to 0; subtracting the maximum keeps every "
                      "exponential <= 1 and the largest at 1")
        close(got, x, -1, case, hint=stability)

    # A long float16 sum stalls (above 2048, adding 1 changes nothing): computed in float16 the
    # weights come out too large, by far more than float16's rounding. Compared relatively.
    x = np.zeros((3000, 2), dtype=np.float16)
    x[:, 1] = np.linspace(-2.0, 2.0, 3000)
    case = ("softmax(x, axis=0) for x = np.zeros((3000, 2), dtype=np.float16) with "
            "x[:, 1] = np.linspace(-2, 2, 3000): 3,000 weights per column")
    got = run(x, 0, case)
    want = ref.softmax(x, axis=0)                                  # float16, computed in float32
    if not np.allclose(got, want.astype(np.float64), rtol=4e-3, atol=1e-7):
        ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want))
        worst = np.unravel_index(np.nanargmax(ulps), ulps.shape)
        c.fail(f"the result is not right: weight {tuple(map(int, worst))} is {got[worst]:.5g} "
               f"where {want[worst]:.5g} is right, {ulps[worst]:.0f} units in the last place "
               f"of float16 away (rounding allows about 4)", case=case, expected=want, got=got,
               hint="compute float16 input in float32 (x.astype(np.float32)) and convert the "
                    "result back: summed in float16, 3,000 exponentials stall near 2048, where "
                    "adding 1 rounds back to the same number (lesson 01's bfloat16 sum that "
                    "stalled at 4.0)")
    c.ok()

    def one(c, args, case):
        __tracebackhide__ = True
        x, axis = args
        got = run(x, axis, case)
        c.finite(got, "the result", case, hint=only_max)
        close(got, x, axis, case, hint="softmax along `axis`, each slice on its own: the "
              "exponentials of x minus the slice's maximum over their sum, in the input's "
              "precision (float16 computed in float32)")
    # any shape, axis and dtype, values spread up to 1e4, rows with -inf in them
    each(c, _draw_softmax, one, n=30, stream=10)
    c.done()


def _draw_softmax(d):
    """An array of 1 to 3 axes (one of them sometimes 2,049 to 3,000 long for float16), any axis,
    float64 or float16, values of any spread, and -inf entries that leave each slice a finite one."""
    dtype = d.choice((np.float64, np.float16))
    shape = [d.integer(1, 6) for _ in range(d.integer(1, 3))]
    axis = d.integer(-len(shape), len(shape) - 1)
    if dtype == np.float16 and d.boolean(0.3):
        shape[axis] = d.integer(2_049, 3_000)       # a float16 sum that stalls past 2,048
    rng = np.random.default_rng(d.seed())
    spread = d.choice((1.0, 10.0, 1e3, 1e4) if dtype == np.float64 else (1.0, 8.0, 3e4))
    x = rng.normal(size=shape) * spread + d.choice((0.0, spread, -spread))
    if dtype == np.float16:
        x = np.clip(x, -6e4, 6e4)
    if d.boolean(0.3):                          # masked entries, each slice keeping its maximum
        hidden = rng.random(shape) < 0.4
        hidden &= x < x.max(axis=axis, keepdims=True)
        x = np.where(hidden, -np.inf, x)
    x = x.astype(dtype)
    name = "float16" if dtype == np.float16 else "float64"
    masked = ", some entries -inf" if np.isinf(x).any() else ""
    return (x, axis), (f"softmax(x, axis={axis}) for random x of shape {tuple(shape)}, {name}, "
                       f"spread {spread:g}{masked}")


_KEYS = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
_VALUES = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])


def swapped(c, out, w, want_out, want_w, case):
    """Fail with the right hint when (weights, output) came back instead of (output, weights)."""
    __tracebackhide__ = True
    shapes_swapped = ((out.shape, w.shape) != (want_out.shape, want_w.shape)
                      and (out.shape, w.shape) == (want_w.shape, want_out.shape))
    if shapes_swapped or (not matches(out, want_out) and matches(out, want_w)
                          and matches(w, want_out)):
        c.fail("the pair is in the wrong order", case=case,
               expected=f"output {want_out.shape}, weights {want_w.shape}",
               got=f"shapes {out.shape}, {w.shape}",
               hint="return output, weights in that order: the output first, then the weights")


def attention_hint(q, k, weights, mask=None):
    """Name the usual mistake that explains these weights, if one does."""
    __tracebackhide__ = True
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2)
    if mask is not None:  # scaling the mask changes nothing: -inf stays -inf, 0 stays 0
        scores = scores + mask
    if matches(weights, ref.softmax(scores)):
        return f"divide the scores by sqrt(d_k) (here sqrt({d_k})) before the softmax"
    if matches(weights, ref.softmax(scores / d_k)):
        return f"divide by the square root of d_k, sqrt({d_k}), not by d_k itself"
    n_keys = k.shape[-2]
    if n_keys != d_k and matches(weights, ref.softmax(scores / math.sqrt(n_keys))):
        return (f"d_k is the key width q.shape[-1] = {d_k}, not the number of keys "
                f"k.shape[-2] = {n_keys}")
    if matches(weights, ref.softmax(scores / math.sqrt(d_k), axis=-2)):
        return ("take the softmax over the keys, the last axis (axis=-1): each query's "
                "weights must sum to 1")
    return None


@checker
def check_attention(fn):
    """Check attention(q, k, v, mask=None) -> (output, weights) against the reference.

    Any T, S and batch axes, to float64's precision; the course's attention and torch's fused
    kernel are off limits (a softmax, the learner's or ref.softmax, is not).
    """
    __tracebackhide__ = True
    c = Checker("attention", fn, forbidden=ATTENTIONS)

    def run(q, k, v, case, mask=None, crash_hint=None):
        __tracebackhide__ = True
        kwargs = {} if mask is None else {"mask": mask}
        result = c.call(q, k, v, case=case, crash_hint=crash_hint, **kwargs)
        out, w = pair(c, result, case, "output, weights")
        out, w = c.array(out, "output", case), c.array(w, "weights", case)
        want_out, want_w = ref.attention(q, k, v, mask)
        swapped(c, out, w, want_out, want_w, case)
        c.shape(w, want_w.shape, "weights", case,
                hint="scores are q @ k^T: (..., T, d_k) @ (..., d_k, S) gives one row per query, "
                     "one column per key; transpose only the last two axes of k "
                     "(np.swapaxes(k, -1, -2)), not all of them")
        c.shape(out, want_out.shape, "output", case,
                hint="the output is weights @ v: one row per query, as wide as the values")
        c.finite(w, "weights", case, hint="use a stable softmax (subtract the maximum first)")
        if not matches(w, want_w):
            hint = attention_hint(q, k, w, mask) or "weights = softmax(q @ k^T / sqrt(d_k) + mask)"
            if w.shape == want_w.shape and np.allclose(w, want_w, atol=1e-3):
                hint = ("keep full precision: the weights are checked to float64's precision, "
                        "so do not round them (printing rounds for you)")
            c.fail("the attention weights are not right", case=case, expected=want_w, got=w, hint=hint)
        precision = ("compute in the inputs' dtype, float64, without rounding: the result is "
                     "checked to float64's precision")
        c.close(w, want_w, "weights", case, hint=precision, input_dtype=q.dtype)
        c.close(out, want_out, "output", case, input_dtype=q.dtype,
                hint="output = weights @ v (values, not keys)" if not matches(out, want_out)
                else precision)

    q = np.array([[1.0, 0.0]])
    run(q, _KEYS, _VALUES, "the lesson's example: q = [[1, 0]], keys and values from the lesson")

    q, k, v = random_qkv(seed(0), T=2, S=5, D=3, Dv=4)
    run(q, k, v, "random q (2, 3), k (5, 3), v (5, 4)")

    q, k, v = random_qkv(seed(1), T=4, S=4, D=3, Dv=2)
    mask = ref.causal_mask(4)
    masked = "random q (4, 3), k (4, 3), v (4, 2) with mask=causal_mask(4)"
    result = c.call(q, k, v, mask=mask, case=masked,
                    crash_hint="test whether a mask was given by comparing it with None; "
                               "`if mask:` asks an array for one truth value, which NumPy "
                               "refuses")
    w = c.array(pair(c, result, masked, "output, weights")[1], "weights", masked)
    if w.shape == (4, 4) and np.any(np.triu(np.nan_to_num(w, nan=1.0), k=1) != 0):
        c.fail("weights are non-zero where the mask is -inf", case=masked,
               expected=ref.attention(q, k, v, mask)[1], got=w,
               hint="add the mask to the scaled scores before the softmax: "
                    "scores + mask, where mask holds 0 or -inf")
    run(q, k, v, masked, mask=mask)

    q, k, v = random_qkv(seed(2), T=3, S=5, D=4, Dv=2, lead=(2,))
    run(q, k, v, "a batch: q (2, 3, 4), k (2, 5, 4), v (2, 5, 2)",
        crash_hint="work on the last two axes only: np.swapaxes(k, -1, -2) rather than k.T, "
                   "which also reverses the batch axes")

    q, k, v = random_qkv(seed(3), T=2, S=3, D=2, Dv=2)
    run(q * 100, k * 100, v, "large scores: q and k scaled by 100")

    q, k, v = random_qkv(seed(4), T=6, S=2, D=3, Dv=4)
    run(q, k, v, "more queries than keys: q (6, 3), k (2, 3), v (2, 4)")

    q, k, v = random_qkv(seed(5), T=9, S=12, D=6, Dv=3, lead=(2, 3))
    run(q, k, v, "longer and two batch axes: q (2, 3, 9, 6), k (2, 3, 12, 6), v (2, 3, 12, 3)",
        crash_hint="work on the last two axes only: np.swapaxes(k, -1, -2), and nothing that "
                   "assumes a length or a number of batch axes")

    q, k, v = random_qkv(seed(6), T=11, S=11, D=5, Dv=2, lead=(3,))
    run(q, k, v, "a batch with one mask for all: q, k (3, 11, 5), v (3, 11, 2), "
        "mask=causal_mask(11)", mask=ref.causal_mask(11),
        crash_hint="add the (T, S) mask to the (..., T, S) scores: it broadcasts over the batch")
    # any batch axes, lengths and widths, scores up to the hundreds, masks causal or not
    each(c, _draw_attention, lambda c, args, case: run(*args[:3], case, mask=args[3]), n=25,
         stream=11)
    c.done()


def _draw_attention(d):
    """q (..., T, D), k (..., S, D), v (..., S, Dv) with 0 to 2 batch axes, and no mask, a causal
    one (T = S) or one hiding random keys (each query keeping one)."""
    lead = tuple(d.integer(1, 3) for _ in range(d.integer(0, 2)))
    T, S = d.length(lo=1, small=8, tables=(128,), p_long=0.1), d.integer(1, 12)
    D, Dv, scale = d.integer(1, 8), d.integer(1, 5), d.choice((1.0, 3.0, 30.0))
    kind = d.choice(("none", "causal", "random"))
    if kind == "causal":
        S = T
    q, k, v = random_qkv(d.seed(), T=T, S=S, D=D, Dv=Dv, lead=lead)
    q, k = q * scale, k * scale
    mask, said = None, ""
    if kind == "causal":
        mask, said = ref.causal_mask(T), f", mask=causal_mask({T})"
    elif kind == "random":
        rng = np.random.default_rng(d.seed())
        hidden = rng.random((T, S)) < 0.5
        hidden[np.arange(T), rng.integers(0, S, T)] = False     # every query sees a key
        mask, said = np.where(hidden, -np.inf, 0.0), ", a random (T, S) mask of 0 and -inf"
    case = (f"random q {lead + (T, D)}, k {lead + (S, D)}, v {lead + (S, Dv)}, q and k scaled "
            f"by {scale:g}{said}")
    return (q, k, v, mask), case


@checker
def check_attention_steps(fn):
    """Check attention_steps(q, keys, values) -> dict of scores, scaled, weights, output.

    Any number of keys and any width, to float64's precision; the softmax is by hand (the
    course's, torch's and the course's attention are off limits).
    """
    __tracebackhide__ = True
    c = Checker("attention_steps", fn, forbidden={**SOFTMAXES, **ATTENTIONS})
    rng = np.random.default_rng(seed(0))
    cases = [
        (np.array([1.0, 0.0]), _KEYS, _VALUES, "q = [1, 0] with the lesson's keys and values"),
        (np.array([0.0, 1.0]), _KEYS, _VALUES, "q = [0, 1] with the lesson's keys and values"),
        (np.array([2.0, -1.0, 0.5]), rng.normal(size=(4, 3)), rng.normal(size=(4, 2)),
         "q = [2, -1, 0.5] with 4 random keys of width 3 and values of width 2"),
        (rng.normal(size=6), rng.normal(size=(9, 6)), rng.normal(size=(9, 5)),
         "a random q of width 6 with 9 random keys and values of width 5"),
    ]
    for q, keys, values, case in cases:
        _steps_one(c, (q, keys, values), case)
    # any key width, number of keys and value width, scores small and large
    each(c, _draw_steps, _steps_one, n=25, stream=12)
    c.done()


_STAGES = ("scores", "scaled", "weights", "output")


def _draw_steps(d):
    D, S, Dv, scale = d.integer(1, 9), d.integer(1, 16), d.integer(1, 6), d.choice((1.0, 5.0))
    rng = np.random.default_rng(d.seed())
    q, keys, values = rng.normal(size=D) * scale, rng.normal(size=(S, D)), rng.normal(size=(S, Dv))
    return (q, keys, values), (f"a random q of width {D} (scale {scale:g}) with {S} random keys "
                               f"and values of width {Dv}")


def _steps_one(c, args, case):
    """Check attention_steps on one (q, keys, values)."""
    __tracebackhide__ = True
    q, keys, values = args
    stages = _STAGES
    got = c.call(q, keys, values, case=case)
    if not isinstance(got, dict) or set(stages) - set(got):
        c.fail("expected a dict with the keys " + ", ".join(repr(s) for s in stages), case=case,
               got=sorted(got) if isinstance(got, dict) else type(got).__name__,
               hint="return dict(scores=..., scaled=..., weights=..., output=...)")
    for s in stages:
        if isinstance(got[s], np.ndarray) and got[s].dtype in (np.float32, np.float16):
            c.fail(f"'{s}' is {got[s].dtype}, from float64 inputs", case=case,
                   hint="compute in the inputs' dtype, float64: the steps are checked to "
                        "float64's precision")
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
    if matches(got["scores"], values @ q if values.shape[1] == d_k else np.full(1, np.nan)):
        hints["scores"] = "the scores compare the query with the keys, not the values"
    if matches(got["scaled"], scores) or matches(got["scaled"], scores / d_k):
        hints["scaled"] = f"divide by the square root of the key width: sqrt({d_k}), not 1 or {d_k}"
    elif len(keys) != d_k and matches(got["scaled"], scores / math.sqrt(len(keys))):
        hints["scaled"] = (f"d_k is the key width len(q) = {d_k}, not the number of keys "
                           f"len(keys) = {len(keys)}")
    elif matches(got["scaled"], scores / math.sqrt(2)) and d_k != 2:
        hints["scaled"] = f"d_k is the key width len(q) = {d_k} here; sqrt(2) only fits the lesson's keys"
    if matches(got["weights"], np.exp(want["scaled"])):
        hints["weights"] = "normalise: divide the exponentials by their sum so the weights sum to 1"
    if matches(got["output"], want["weights"] @ keys):
        hints["output"] = "the output mixes the values, not the keys: weights @ values"
    for s in stages:
        if got[s].shape == want[s].shape and np.allclose(got[s], want[s], atol=1e-3):
            hints[s] = ("keep full precision: the steps are checked to float64's precision, "
                        "so do not round them (printing rounds for you)")
        c.close(got[s], want[s], f"'{s}'", case, hint=hints[s], input_dtype=np.float64)


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "attention_steps": (
        "Follow the four steps of the worked example for one query: a dot product of q with each "
        "key, a division by the square root of the key width, a softmax, and a weighted sum of "
        "the values.",
        "d_k is the width of these keys, `len(q)` or `keys.shape[1]`, not the 2 of the example: the "
        "check also tries 3-dimensional keys. And the weights must sum to 1 over the keys.",
        "`keys @ q` gives all S scores at once, shape (S,); the output is `weights @ values`, "
        "shape (d_v,). Return the four arrays in a dict under the names the statement gives.",
    ),
    "softmax": (
        "Softmax does not change when one constant is subtracted from all the inputs of a slice. "
        "Subtract each slice's own maximum before exponentiating, so every exponent is at most 0.",
        "Take the maximum along `axis` with `keepdims=True`, or the shapes will not line up for "
        "the subtraction and the division; a single global maximum is not enough when slices "
        "differ by thousands. A slice that holds -inf (a mask) must still work.",
        "Keep the input's dtype: float16 in, float16 out. You may compute in float32 and convert "
        "the result back with `.astype(x.dtype)`, but do not return float64 for float32 input.",
    ),
    "attention": (
        "Every query at once: one matrix product of Q with the transposed keys gives a (T, S) score "
        "matrix, scale it, add the mask if there is one, softmax each row, and multiply by V.",
        "With leading batch axes, `k.T` reverses every axis; swap only the last two. Scale by the "
        "square root of the key width (the last axis of q), and add the mask after scaling, "
        "before the softmax.",
        "Return a pair `(output, weights)`: output (..., T, d_v) and weights (..., T, S). The "
        "course's stable softmax (`ref.softmax`) may be used here.",
    ),
}


# Questions on this lesson's ideas: `answer("01-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "01-scale": Number(
        prompt="Section 2 measured that q·k of random q and k (entries of mean 0 and variance "
               "1) has variance d_k. At d_k = 64, what is the variance of the *scaled* score "
               "q·k / √d_k?",
        after="## 2. Why divide by $\\sqrt{d_k}$: an experiment",
        value=1.0, tolerance=0.05,
        why="dividing a number by c divides its variance by c², so dividing by √64 = 8 divides "
            "the variance 64 by 64; the scaled scores have the same spread at every width.",
        wrong=((60, 68, "that is the variance before the scale; the question asks about "
                        "q·k / √d_k."),
               (7.5, 8.5, "dividing by c divides the variance by c², not by c: dividing by "
                          "√d_k divides it by d_k."),
               (0.01, 0.02, "that divides the variance by d_k twice; dividing by √d_k divides "
                            "it by d_k once.")),
        otherwise="the variance of q·k is d_k; work out what dividing by √d_k does to a "
                  "variance."),
    "01-stable": Number(
        prompt="The stable softmax subtracts the maximum before exponentiating. For the input "
               "`[1000, 1001, 1002]` of section 3, what is the sum of the exponentials it "
               "computes (the denominator)?",
        after="### Exercise 2: stable softmax",
        value=1.503, tolerance=0.002,
        why="after subtracting 1002 the exponents are -2, -1 and 0: e⁻² + e⁻¹ + 1 ≈ 0.135 + "
            "0.368 + 1 = 1.503. The largest term is exactly 1, so the sum lies between 1 and "
            "the number of inputs and can neither overflow nor be 0.",
        wrong=((11.0, 11.2, "that subtracts the minimum, 1000, not the maximum; it happens not "
                            "to overflow here, but with inputs 100 apart it would."),
               (0.99, 1.01, "1 is only the largest term, e⁰; the other two inputs add their "
                            "own exponentials."),
               (2.9, 3.1, "that takes every exponential as 1; only the largest input's shifted "
                          "value is 0.")),
        otherwise="subtract 1002 from each input, exponentiate each, and add."),
    "01-longer": Choice(
        prompt="Along the query `[1, 0]` the worked example gave weights 0.401, 0.198, 0.401. "
               "Make the query longer in the same direction, `[3, 0]`, then `[10, 0]`: where "
               "do the weights go?",
        after="Sharper does not always mean one token",
        choices={
            "a": ("token 3 (key [1, 1]) takes nearly all of the weight",
                  "along [1, 0] keys [1, 0] and [1, 1] score the same, x·1 each; a longer query "
                  "scales both scores alike, and a tie stays a tie."),
            "b": ("they stay 0.401, 0.198, 0.401: the direction is the same",
                  "the softmax is not unchanged by scaling its inputs: a longer query makes "
                  "every score larger and the gaps between them too."),
            "c": ("tokens 1 and 3 keep about half each and token 2's weight goes towards 0",
                  "the two tied keys share the weight, about half each, and the gap to token "
                  "2 grows with the length: [3, 0] gave 0.472, 0.057, 0.472."),
            "d": ("all three move towards 1/3",
                  "that is what a *shorter* query does: scores near 0 give nearly equal "
                  "weights. A longer one sharpens them."),
        },
        right="c"),
    "01-saturate": Choice(
        prompt="Without the scale, at d_k = 512 the largest of 16 weights averaged 0.949. What "
               "does that do to training a model whose scores are that large?",
        after="unscaled scores saturate the softmax",
        choices={
            "a": ("the gradients reaching the queries and keys through the softmax are near 0, "
                  "so they barely learn",
                  "the derivative of weight i with respect to score j is w_i(δ_ij − w_j), "
                  "close to 0 when one weight is close to 1."),
            "b": ("it learns faster: attention that decides firmly is what training wants",
                  "sharpness that comes from the width, not from learning, arrives before the "
                  "model knows where to look, and a saturated softmax passes almost no "
                  "gradient back to change it."),
            "c": ("the softmax overflows and gives NaN",
                  "saturation is not overflow: the experiment ran in float64 and the stable "
                  "softmax subtracts the maximum, so every weight was finite."),
            "d": ("nothing: the scale only matters in float16",
                  "the experiment was in float64 and still saturated; the scale is about the "
                  "spread of the scores, which grows as √d_k in any precision."),
        },
        right="a"),
}
