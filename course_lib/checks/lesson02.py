"""Checkers for lesson 02, causal masking."""
import numpy as np

from course_lib import attention as ref
from course_lib.checks.core import Checker, checker, learner_side, pair, random_qkv, seed
from course_lib.checks.domain import each
from course_lib.checks.lesson01 import ATTENTIONS, attention_hint, swapped

_TABLE = ("build the mask from T on every call: a table of fixed size, sliced with [:T, :T], is "
          "too small for a longer sequence (a model's context is set by its config, not by the "
          "examples you tried)")


@checker
def check_causal_mask(fn):
    """Check causal_mask(T): a (T, T) float array, 0 where j <= i and -inf where j > i, for any T."""
    __tracebackhide__ = True
    c = Checker("causal_mask", fn, forbidden={"course_lib's causal_mask (ref.causal_mask)":
                                              ref.causal_mask})
    for T in (1, 2, 4, 5, 9, 16, 300, 1_030):   # 1,030: past GPT-2's 1,024 positions
        _mask_one(c, T, f"causal_mask({T})")
    # lengths past every other table a learner might slice (128, 256, 512)
    each(c, _draw_length, _mask_one, n=20, stream=20)
    c.done()


def _draw_length(d):
    T = d.length(tables=(128, 256, 512))
    return T, f"causal_mask({T})"


def _mask_one(c, T, case):
    """Check causal_mask for one T."""
    __tracebackhide__ = True
    got = c.array(c.call(T, case=case, crash_hint=_TABLE if T > 8 else None), "the mask", case)
    want = ref.causal_mask(T)
    shape_hint = "one row per query i, one column per key j"
    if T > 8 and got.ndim == 2 and got.shape[0] == got.shape[1] and got.shape[0] < T:
        shape_hint = _TABLE
    c.shape(got, (T, T), "the mask", case, hint=shape_hint)
    if got.dtype == bool:
        c.fail("the mask is boolean", case=case, expected=want, got=got,
               hint="return the additive float mask: 0.0 where allowed, -np.inf where "
                    "hidden, so that it can be added to the scores")
    if np.isnan(got).any():
        c.fail("the mask contains NaN", case=case, expected=want, got=got,
               hint="0 * -inf is NaN: multiplying a 0/1 matrix by -np.inf turns its zeros "
                    "into NaN; don't multiply, choose: write -np.inf only into the hidden "
                    "entries (a selection by a boolean mask, or the upper triangle of a "
                    "matrix of -inf) and 0.0 everywhere else")
    upper, lower = np.triu_indices(T, k=1), np.tril_indices(T)
    if np.any(got[lower] == 1):
        c.fail("allowed entries are not 0", case=case, expected=want, got=got,
               hint="allowed entries must be 0.0 so adding the mask leaves those scores unchanged")
    if T > 1 and np.all(got[upper] == 0) and np.all(got[np.tril_indices(T, k=-1)] == -np.inf):
        c.fail("the mask is transposed: it hides the past and shows the future",
               case=case, expected=want, got=got,
               hint="row i is the query, column j the key: hide j > i, the keys after "
                    "the query, above the diagonal (the upper triangle, not the lower)")
    if np.any(np.diag(got) != 0):
        c.fail("the diagonal is hidden", case=case, expected=want, got=got,
               hint="a position may attend to itself: M[i, i] must be 0; with np.triu "
                    "use k=1 so the diagonal stays 0")
    if T > 1 and np.any(got[upper] != -np.inf):
        finite = np.isfinite(got[upper]) & (got[upper] != 0)
        hint = ("use -np.inf for hidden entries, the mask M the lesson defines: a large "
                "negative number also gives weights of 0 here, but if every key of a row is "
                "hidden it silently averages them instead of giving NaN, and its size must "
                "beat any score; -inf needs no such care" if np.any(finite) else
                "every key after the query (j > i, above the diagonal) must be -inf, "
                "or the position can see the future")
        c.fail("some future positions are not hidden", case=case, expected=want, got=got,
               hint=hint)
    c.close(got, want, "the mask", case, hint="0 on and below the diagonal, -inf above it")


@checker
def check_masked_attention(fn):
    """Check masked_attention(q, k, v) -> (output, weights): causal self-attention, any T.

    The course's attention and torch's fused kernel are off limits (ref.softmax is allowed).
    """
    __tracebackhide__ = True
    c = Checker("masked_attention", fn, forbidden=ATTENTIONS)
    q, k, v = random_qkv(seed(0), T=4, S=4, D=3, Dv=2)
    case = "random q (4, 3), k (4, 3), v (4, 2)"
    shapes = ("the mask must be (T, T), T the number of positions (the second-to-last axis of "
              "q); print the shapes of your scores and mask")
    out, w = pair(c, c.call(q, k, v, case=case, crash_hint=shapes), case, "output, weights")
    out, w = c.array(out, "output", case), c.array(w, "weights", case)
    want_out, want_w = ref.attention(q, k, v, ref.causal_mask(4))
    swapped(c, out, w, want_out, want_w, case)
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
               hint=_precision(w, want_w) or
               "apply the mask to the scores before the softmax, not to the weights "
               "after it, so the visible weights are renormalised")
    c.close(out[0], v[0], "the first position's output", case,
            hint="position 0 sees only itself, so its output must be exactly v[0]")
    c.close(w, want_w, "weights", case, hint=attention_hint(q, k, w, ref.causal_mask(4)) or
            _precision(w, want_w) or "weights = softmax(q @ k^T / sqrt(d_k) + causal mask)",
            input_dtype=q.dtype)
    c.close(out, want_out, "output", case, hint="output = weights @ v", input_dtype=q.dtype)

    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    q2[-1], k2[-1], v2[-1] = 50.0, -50.0, 99.0
    case = "the same q, k, v with the last position's q, k, v changed"
    out2 = c.array(pair(c, c.call(q2, k2, v2, case=case), case, "output, weights")[0], "output", case)
    c.close(out2[:-1], out[:-1], "earlier positions' outputs", case,
            hint="changing the last token must not change any earlier output: no position "
                 "may see the future")

    q, k, v = random_qkv(seed(1), T=3, S=3, D=4, Dv=5, lead=(2,))
    case = "a batch: q (2, 3, 4), k (2, 3, 4), v (2, 3, 5)"
    batch_hint = ("work on the last two axes only: np.swapaxes(k, -1, -2) rather than k.T, "
                  "and take T from q.shape[-2], so the (T, T) mask broadcasts over the batch")
    out, w = pair(c, c.call(q, k, v, case=case, crash_hint=batch_hint), case, "output, weights")
    want_out, want_w = ref.attention(q, k, v, ref.causal_mask(3))
    c.close(c.array(out, "output", case), want_out, "output", case, hint=batch_hint,
            input_dtype=q.dtype)

    for n, T, lead in ((2, 12, (3,)), (3, 130, ())):
        q, k, v = random_qkv(seed(n), T=T, S=T, D=4, Dv=3, lead=lead)
        _masked_one(c, (q, k, v), f"a longer sequence: q, k {(*lead, T, 4)}, v {(*lead, T, 3)}, "
                                  f"longer than any example before it")
    # any batch axes and length (past tables of 128 and 256), widths and spread of scores
    each(c, _draw_qkv, _masked_one, n=20, stream=21)
    c.done()


def _draw_qkv(d):
    lead = tuple(d.integer(1, 3) for _ in range(d.integer(0, 2)))
    T = d.length(tables=(128, 256))
    if T > 16:
        lead = lead[:1]
    D, Dv, scale = d.integer(1, 8), d.integer(1, 5), d.choice((1.0, 4.0, 30.0))
    q, k, v = random_qkv(d.seed(), T=T, S=T, D=D, Dv=Dv, lead=lead)
    return (q * scale, k * scale, v), (f"random q, k {(*lead, T, D)} scaled by {scale:g}, "
                                       f"v {(*lead, T, Dv)}")


def _masked_one(c, args, case):
    """Check masked_attention on one (q, k, v)."""
    __tracebackhide__ = True
    q, k, v = args
    T = q.shape[-2]
    out, w = pair(c, c.call(q, k, v, case=case, crash_hint=_TABLE), case, "output, weights")
    out, w = c.array(out, "output", case), c.array(w, "weights", case)
    want_out, want_w = ref.attention(q, k, v, ref.causal_mask(T))
    c.shape(w, want_w.shape, "weights", case, hint=_TABLE)
    c.close(w, want_w, "weights", case, input_dtype=q.dtype,
            hint=attention_hint(q, k, w, ref.causal_mask(T)) or
            "weights = softmax(q @ k^T / sqrt(d_k) + causal mask), the mask built for this T")
    c.close(out, want_out, "output", case, hint="output = weights @ v", input_dtype=q.dtype)


def _precision(got, want):
    """A hint when `got` is right but for rounding (float32, or rounded to a few decimals)."""
    if got.shape == want.shape and np.allclose(got, want, atol=1e-3):
        return ("compute in the inputs' dtype, float64, without rounding: the result is "
                "checked to float64's precision")
    return None


# Layers for check_future_leak: each maps x (T, C) to (T, C) and reads the future or not.

@learner_side
def _prefix_mean(x):
    """Causal: row t is the mean of rows 0..t."""
    return np.cumsum(x, axis=0) / np.arange(1, len(x) + 1)[:, None]


@learner_side
def _whole_mean(x):
    """Not causal: every row is the mean of all rows, added to its own."""
    return x + x.mean(axis=0, keepdims=True)


@learner_side
def _two_ahead(x):
    """Row t adds row t + 2, when there is one."""
    ahead = np.zeros_like(x)
    ahead[:-2] = x[2:]
    return x + ahead


@learner_side
def _cancelling(x):
    """Columns 0 and 1 of row t hold +s and -s, s the sum of the later rows: they cancel in a sum."""
    later = np.cumsum(x[::-1].sum(axis=1))[::-1]      # later[t] = sum of rows t..T-1
    future = np.append(later[1:], 0.0)                 # rows t + 1 .. T - 1
    out = _prefix_mean(x)
    out[:, 0], out[:, 1] = future, -future
    return out


@learner_side
def _tiny_leak(x):
    """Causal but for a leak of 1e-9 times the last row's sum, far below allclose's tolerance."""
    return _prefix_mean(x) + 1e-9 * x[-1].sum()


@learner_side
def _one_feature_ahead(x):
    """Row t's feature 0 adds feature 2 of row t + 1: a leak through one feature only."""
    out = _prefix_mean(x)
    out[:-1, 0] += x[1:, 2]
    return out


@learner_side
def _order_ahead(x):
    """Row t adds the rank of each feature within row t + 1: it reads only the order of the
    next row's features, which adding the same number to all of them leaves exactly as it is."""
    out = _prefix_mean(x)
    out[:-1] += np.argsort(np.argsort(x[1:], axis=-1), axis=-1)
    return out


def _perturbed(x, k, change=None):
    """A copy of x whose rows k onward are changed: by random amounts, or by `change`."""
    changed = x.copy()
    rows = changed[k:]
    rows += np.random.default_rng(7).normal(size=rows.shape) if change is None else change
    return changed


@checker
def check_future_leak(fn):
    """Check future_leak(layer, x, k): which positions t < k see a change in x[k:].

    The answer is a (k,) NumPy array of dtype bool; the layers leak through any feature,
    by very little, and through the order of a row's features, which a shift of all of them
    by the same amount hides.
    """
    __tracebackhide__ = True
    c = Checker("future_leak", fn)
    # T = 6 positions, C = 16 features: so many that a random change of a row keeps the
    # order of its features (which _order_ahead reads) about once in a million draws or less
    x = np.random.default_rng(seed(0)).normal(size=(6, 16))
    cases = [
        (_prefix_mean, 3, "a causal layer (row t is the mean of rows 0..t)"),
        (_whole_mean, 3, "a layer that mixes in the mean of all rows"),
        (_two_ahead, 3, "a layer where row t reads row t + 2"),
        (_cancelling, 2, "a layer whose columns 0 and 1 change by +d and -d"),
        (_tiny_leak, 4, "a layer that leaks 1e-9 times the last row"),
        (_one_feature_ahead, 3, "a layer where row t reads feature 2 of row t + 1"),
        (_order_ahead, 4, "a layer where row t reads the order of row t + 1's features"),
        (_prefix_mean, 0, "the causal layer with k = 0"),
        (_prefix_mean, 6, "the causal layer with k = T = 6"),
    ]
    for layer, k, what in cases:
        _leak_one(c, (layer, x, k), f"future_leak(layer, x, k={k}), x of shape {x.shape}, {what}")
    # any T, C and k, every kind of layer (16 features or more where a layer reads their order)
    each(c, _draw_leak, _leak_one, n=20, stream=22)
    c.done()


_LAYERS = ((_prefix_mean, "a causal layer (row t is the mean of rows 0..t)"),
           (_whole_mean, "a layer that mixes in the mean of all rows"),
           (_two_ahead, "a layer where row t reads row t + 2"),
           (_cancelling, "a layer whose columns 0 and 1 change by +d and -d"),
           (_tiny_leak, "a layer that leaks 1e-9 times the last row"),
           (_one_feature_ahead, "a layer where row t reads feature 2 of row t + 1"),
           (_order_ahead, "a layer where row t reads the order of row t + 1's features"))


def _draw_leak(d):
    layer, what = d.choice(_LAYERS)
    T = d.integer(1, 24)
    C = d.integer(16, 20) if layer is _order_ahead else d.integer(3, 16)
    k = d.integer(0, T)
    x = np.random.default_rng(d.seed()).normal(size=(T, C))
    return (layer, x, k), f"future_leak(layer, x, k={k}), random x of shape {x.shape}, {what}"


def _leak_one(c, args, case):
    """Check future_leak on one (layer, x, k)."""
    __tracebackhide__ = True
    layer, x, k = args
    got = c.call(layer, x, k, case=case,
                 none_hint="end with `return` and the array of k booleans")
    want = _leaks(layer, x, k)
    got = _booleans(c, got, k, x.shape, case)
    if not np.array_equal(got, want):
        c.fail("the positions that see the future are not right", case=case,
               expected=want, got=got, hint=_leak_hint(got, want, layer, x, k))
    c.ok()


def _leaks(layer, x, k):
    """Which positions t < k see a change of x[k:]: by random amounts, or by reversing the
    order of each row's features (negating them), a change no layer here can miss."""
    seen = layer(x)[:k]
    random, negated = layer(_perturbed(x, k))[:k], layer(_perturbed(x, k, -2 * x[k:]))[:k]
    return np.any(seen != random, axis=-1) | np.any(seen != negated, axis=-1)


def _booleans(c, got, k, shape, case):
    """The learner's answer as a (k,) boolean NumPy array, or feedback about its shape or type."""
    __tracebackhide__ = True
    if hasattr(got, "detach"):
        c.fail("expected a NumPy array, got a torch tensor", case=case,
               hint="the layer maps NumPy arrays, so stay in NumPy: compare with != and reduce "
                    "with np.any(..., axis=-1), which gives a boolean NumPy array")
    if not isinstance(got, (np.ndarray, np.bool_, bool)):
        c.fail("expected a NumPy array of booleans", case=case, got=type(got).__name__,
               hint="build it with NumPy: comparing two arrays with != and reducing with np.any "
                    "gives a boolean NumPy array; or wrap a list of booleans in np.array(...)")
    got = np.asarray(got)
    if got.shape != (k,):
        hint = ("return one boolean for each position before k, reduced over that "
                "position's features: ")
        if got.shape == ():
            hint += "a single True/False does not say which positions leak"
        elif got.ndim == 1 and len(got) == shape[0]:
            hint += "positions from k on are the ones you changed, so leave them out"
        else:
            hint += "reduce over the features, the last axis, so each position gives one answer"
        c.fail("the answer has the wrong shape", case=case, expected=(k,), got=got.shape,
               hint=hint)
    if got.dtype != bool:
        c.fail("expected booleans", case=case, expected="dtype bool", got=f"dtype {got.dtype}",
               hint="True where the position's output changed, False where it stayed the same: "
                    "compare with != and reduce with np.any, and keep the booleans (no "
                    ".astype(int), no 0/1): the exercise asks for dtype bool")
    return got


def _leak_hint(got, want, layer, x, k):
    """Name the usual mistake that explains `got`, if one does."""
    if not want.all() and np.array_equal(got, ~want):
        return "True means the position's output changed (it sees the future), False unchanged"
    if k > 0:
        one_early = x.copy()
        one_early[k - 1:] = one_early[k - 1:] + 1.0
        if np.array_equal(got, np.any(layer(x)[:k] != layer(one_early)[:k], axis=-1)):
            return ("change rows k onward only (x[k:]); changing row k - 1 as well changes "
                    "the input that position k - 1 may read")
    if layer is _tiny_leak:
        return ("compare exactly (a != b), not with np.allclose or a tolerance: a leak can be "
                "tiny and still be a leak; with the mask, earlier outputs are bit for bit the same")
    if layer is _cancelling:
        return ("compare every entry on its own, and call the position changed if any of its "
                "features changed: summing the differences lets a rise in one feature cancel a "
                "fall in another")
    if layer is _one_feature_ahead:
        return ("change every feature of the rows from k on, not one column: a layer may read "
                "the future through any feature")
    if layer is _order_ahead:
        return ("change the rows from k on by different amounts in different features (random "
                "values, say): a layer may read only how a row's features compare, and adding "
                "the same number to all of them changes nothing it sees")
    if 0 < k < len(x):
        only_k = x.copy()
        only_k[k] = only_k[k] + 1.0
        if np.array_equal(got, np.any(layer(x)[:k] != layer(only_k)[:k], axis=-1)):
            return ("change every position from k on (x[k:]), not only position k: a layer "
                    "may read any later position")
    return ("run the layer on x and on a copy whose rows k onward are changed, then compare "
            "the outputs of positions 0..k-1 exactly")


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "causal_mask": (
        "Entry (i, j) is 0 where key j is at or before query i, and -inf where j > i: the part "
        "strictly above the diagonal.",
        "Two usual mistakes: hiding the diagonal too (a token must see itself, or the first row is "
        "all -inf and its softmax is NaN), and building a boolean mask or a 0/1 mask where the "
        "lesson adds 0 / -inf to the scores.",
        "Start from a (T, T) array filled with -inf and keep only its strictly upper triangle; "
        "the result must be float, of shape (T, T) for any T.",
    ),
    "masked_attention": (
        "This is lesson 01's attention with one more step: add your causal mask to the scaled "
        "scores before the softmax. The number of positions T comes from the inputs.",
        "Build the mask for this call's T (the second-to-last axis of q), not for a fixed length, "
        "and add it after the division by the square root of the key width.",
        "Return `(output, weights)` as lesson 01 does; the weights of row i must be exactly 0 for "
        "every column j > i.",
    ),
    "future_leak": (
        "Run the layer twice, on x and on a copy of x whose rows from k on are changed, and "
        "compare the two outputs position by position for t < k.",
        "Change every channel of the future rows, not one, since a leak may run through any of "
        "them; compare exactly (`!=`), not with a tolerance, since a leak can be tiny; and never "
        "edit x itself.",
        "The answer for each position is one bool: did any number of its output row change? "
        "Reduce over the channel axis, keep the first k positions, and return a NumPy bool "
        "array of shape (k,).",
    ),
}


# Questions on this lesson's ideas: `answer("02-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "02-diagonal": Choice(
        prompt="Build the mask with `np.triu(..., k=0)` instead of `k=1`, so that it hides the "
               "diagonal too, and run section 2's masked attention on the three tokens. What "
               "becomes of token 1's weights?",
        after="## 2. Masked attention on three tokens",
        choices={
            "a": ("weight 1 on itself, as before",
                  "hiding the diagonal takes away the one key token 1 could see: its own."),
            "b": ("all NaN: every score in its row is −∞, and the softmax divides 0 by 0",
                  "with every key hidden, e^−∞ = 0 everywhere and the sum is 0 (a stable "
                  "softmax gets −∞ − (−∞), also NaN). Token 2 can then read only token 1."),
            "c": ("all 0, and its output the zero vector",
                  "a softmax weight is an exponential over the sum of the exponentials: work "
                  "out that sum when every exponential is 0, and what the division then gives."),
            "d": ("spread evenly, 1/3 each",
                  "an even spread needs equal finite scores; −∞ on every key is no score at "
                  "all."),
        },
        right="b"),
    "02-even": Number(
        prompt="With the causal mask, the query at position 4 (counting from 0) of a sequence "
               "of 8 has the same score against every key it may see. What weight does it "
               "give each of those keys?",
        after="Each row can see one more key than the row above it",
        value=0.2, tolerance=0.002,
        why="position 4 sees keys 0 to 4, itself included: five equal scores, weight 1/5 each; "
            "the three later keys get exactly 0.",
        wrong=((0.12, 0.13, "1/8 spreads the weight over all 8 keys, the three future ones "
                            "too; the mask gives those exactly 0."),
               (0.24, 0.26, "1/4 leaves out one of the keys it may see: the mask keeps "
                            "j <= i, the query's own position included."),
               (0.16, 0.17, "1/6 counts one key too many: positions 0 to 4 are the keys it "
                            "may see.")),
        otherwise="count the keys with j <= i for i = 4, and share the weight evenly."),
    "02-decay": Number(
        prompt="Section 4's cell stepped AdamW once on a weight whose loss gradient was 0. Do "
               "it with other numbers: a weight of 2.0, gradient 0, lr = 1e-3 and weight decay "
               "λ = 0.1. What is the weight after one step of `torch.optim.AdamW`?",
        after="**The optimiser.**",
        value=1.9998, tolerance=0.00002,
        why="with a gradient of 0 only the decoupled decay acts: w ← w·(1 − lr·λ) = "
            "2 × (1 − 1e-4) = 1.9998.",
        wrong=((1.9989, 1.9991, "that is Adam with an L2 term: λw goes through Adam's division "
                                "by √v and the step becomes a whole lr. AdamW decays the weight "
                                "apart from the gradient step."),
               (1.99985, 1.99995, "that subtracts lr·λ; the decay multiplies the weight by "
                                  "(1 − lr·λ), so it shrinks in proportion to its size."),
               (1.99999, 2.00001, "weight decay acts even when the gradient is 0: it is "
                                  "applied apart from the gradient step.")),
        otherwise="only the weight decay acts here; the section says what it multiplies the "
                  "weight by."),
    "02-nomask": Choice(
        prompt="Trained without the mask, the model's training loss ended far below the masked "
               "model's (the lesson asserts below half of it). Why?",
        after="## 4. The missing-mask pitfall",
        choices={
            "a": ("it is the better model: it found patterns the masked model missed",
                  "when it has to predict honestly, with nothing later to read, its loss is "
                  "worse than guessing evenly, above ln 256 = 5.545 (the lesson asserts it)."),
            "b": ("it memorised the training text",
                  "500 steps of 32 windows of 16 bytes see 256,000 bytes, a few per cent of "
                  "the corpus, and the masked model saw the same windows."),
            "c": ("position t reads token t + 1, its own target, from the input",
                  "without the mask every position sees the whole window, the byte it is "
                  "asked to predict among them, and learns to copy it."),
            "d": ("without −∞ in the scores the softmax is better conditioned",
                  "the −∞ entries give weights of exactly 0 and no numerical trouble; the "
                  "difference is what each position may read."),
        },
        right="c"),
}
