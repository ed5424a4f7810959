"""Checkers for lesson 02, causal masking."""
import numpy as np

from course_lib import attention as ref
from course_lib.checks.core import Checker, pair, random_qkv
from course_lib.checks.lesson01 import attention_hint, swapped


def check_causal_mask(fn):
    """Check causal_mask(T): a (T, T) float array, 0 where j <= i and -inf where j > i."""
    __tracebackhide__ = True
    c = Checker("causal_mask", fn)
    for T in (1, 2, 4, 5):
        case = f"causal_mask({T})"
        got = c.array(c.call(T, case=case), "the mask", case)
        want = ref.causal_mask(T)
        c.shape(got, (T, T), "the mask", case, hint="one row per query i, one column per key j")
        if got.dtype == bool:
            c.fail("the mask is boolean", case=case, expected=want, got=got,
                   hint="return the additive float mask: 0.0 where allowed, -np.inf where "
                        "hidden, so that it can be added to the scores")
        if np.isnan(got).any():
            c.fail("the mask contains NaN", case=case, expected=want, got=got,
                   hint="0 * -inf is NaN: multiplying a 0/1 matrix by -np.inf turns its zeros "
                        "into NaN; put -np.inf only where it belongs, e.g. "
                        "np.where(hidden, -np.inf, 0.0) or np.triu(np.full((T, T), -np.inf), k=1)")
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
            hint = ("use -np.inf for hidden entries, the mask M the lesson defines: a large "
                    "negative number also gives weights of 0 here, but if every key of a row is "
                    "hidden it silently averages them instead of giving NaN, and its size must "
                    "beat any score; -inf needs no such care" if np.any(finite) else
                    "every key after the query (j > i, above the diagonal) must be -inf, "
                    "or the position can see the future")
            c.fail("some future positions are not hidden", case=case, expected=want, got=got,
                   hint=hint)
        c.close(got, want, "the mask", case, hint="0 on and below the diagonal, -inf above it")
    c.done()


def check_masked_attention(fn):
    """Check masked_attention(q, k, v) -> (output, weights): causal self-attention."""
    __tracebackhide__ = True
    c = Checker("masked_attention", fn)
    q, k, v = random_qkv(0, T=4, S=4, D=3, Dv=2)
    case = "random q (4, 3), k (4, 3), v (4, 2)"
    shapes = ("the mask must be (T, T) with T = q.shape[-2], the number of positions; print the "
              "shapes of your scores and mask")
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
               hint="apply the mask to the scores before the softmax, not to the weights "
                    "after it, so the visible weights are renormalised")
    c.close(out[0], v[0], "the first position's output", case,
            hint="position 0 sees only itself, so its output must be exactly v[0]")
    c.close(w, want_w, "weights", case, hint=attention_hint(q, k, w, ref.causal_mask(4)) or
            "weights = softmax(q @ k^T / sqrt(d_k) + causal mask)")
    c.close(out, want_out, "output", case, hint="output = weights @ v")

    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    q2[-1], k2[-1], v2[-1] = 50.0, -50.0, 99.0
    case = "the same q, k, v with the last position's q, k, v changed"
    out2 = c.array(pair(c, c.call(q2, k2, v2, case=case), case, "output, weights")[0], "output", case)
    c.close(out2[:-1], out[:-1], "earlier positions' outputs", case,
            hint="changing the last token must not change any earlier output: no position "
                 "may see the future")

    q, k, v = random_qkv(1, T=3, S=3, D=4, Dv=5, lead=(2,))
    case = "a batch: q (2, 3, 4), k (2, 3, 4), v (2, 3, 5)"
    batch_hint = ("work on the last two axes only: np.swapaxes(k, -1, -2) rather than k.T, "
                  "and take T from q.shape[-2], so the (T, T) mask broadcasts over the batch")
    out, w = pair(c, c.call(q, k, v, case=case, crash_hint=batch_hint), case, "output, weights")
    want_out, want_w = ref.attention(q, k, v, ref.causal_mask(3))
    c.close(c.array(out, "output", case), want_out, "output", case, hint=batch_hint)
    c.done()
