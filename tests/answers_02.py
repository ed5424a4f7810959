"""Answers to lesson 02's exercises (causal masking), for testing the graders."""
from answers import Wrong

# The course's causal_mask and attention are off limits in these exercises, so the references
# are plain answers (masked_attention may use ref.softmax).
REFERENCE = {
    "causal_mask": "return np.triu(np.full((T, T), -np.inf), k=1)",
    "masked_attention": """\
T = q.shape[-2]
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + np.triu(np.full((T, T), -np.inf), k=1)
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
    "future_leak": """\
changed = x.copy()
changed[k:] = changed[k:] + np.random.default_rng(0).normal(size=changed[k:].shape)
return np.any(layer(x)[:k] != layer(changed)[:k], axis=-1)""",
}


def _masked(scores="q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + causal_mask(T)",
            result="weights @ v, weights", T="q.shape[-2]"):
    """A masked_attention body with one piece swapped for a mistake."""
    return f"""\
T = {T}
scores = {scores}
weights = ref.softmax(scores, axis=-1)
return {result}"""


def _leak(change="changed[k:] = changed[k:] + np.random.default_rng(0).normal(size=changed[k:].shape)",
          compare="np.any(a[:k] != b[:k], axis=-1)",
          copy="changed = x.copy()"):
    """A future_leak body with one piece swapped for a mistake."""
    return f"{copy}\n{change}\na, b = layer(x), layer(changed)\nreturn {compare}"


WRONG = [
    # 02 causal_mask
    Wrong("causal_mask", "hides the diagonal", "return np.triu(np.full((T, T), -np.inf), k=0)",
          "the diagonal is hidden", inject=True),
    Wrong("causal_mask", "shows the future, hides the past",
          "return np.tril(np.full((T, T), -np.inf), k=-1)", "the mask is transposed"),
    Wrong("causal_mask", "boolean", "return np.tril(np.ones((T, T), dtype=bool))",
          "the mask is boolean"),
    Wrong("causal_mask", "large negative instead of -inf",
          "return np.triu(np.full((T, T), -1e9), k=1)",
          "use -np.inf for hidden entries, the mask M the lesson defines"),
    Wrong("causal_mask", "ones where allowed",
          "return np.where(np.triu(np.ones((T, T)), k=1) == 1, -np.inf, 1.0)",
          "allowed entries are not 0"),
    Wrong("causal_mask", "0 times -inf", "return np.triu(np.ones((T, T)), k=1) * -np.inf",
          "0 * -inf is NaN"),
    Wrong("causal_mask", "a fixed 8 x 8 table, sliced",
          "table = np.triu(np.full((8, 8), -np.inf), k=1)\nreturn table[:T, :T]",
          "build the mask from T on every call"),
    Wrong("causal_mask", "a fixed 256 x 256 table, sliced",
          "table = np.triu(np.full((256, 256), -np.inf), k=1)\nreturn table[:T, :T]",
          "build the mask from T on every call"),
    Wrong("causal_mask", "calls ref.causal_mask, which the exercise forbids", "return ref.causal_mask(T)",
          "calls course_lib's causal_mask"),
    Wrong("causal_mask", "one row too many",
          "return np.triu(np.full((T + 1, T + 1), -np.inf), k=1)", "one row per query i"),
    # 02 masked_attention
    Wrong("masked_attention", "no mask",
          _masked(scores="q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])"),
          "positions attend to later positions", inject=True),
    Wrong("masked_attention", "mask applied after the softmax", """\
T = q.shape[-2]
weights = ref.softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), axis=-1)
weights = weights * np.tril(np.ones((T, T)))
return weights @ v, weights""",
          "apply the mask to the scores before the softmax"),
    Wrong("masked_attention", "mask hides the diagonal",
          _masked(scores="q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) "
                         "+ np.triu(np.full((T, T), -np.inf))"),
          "the mask hides the diagonal"),
    Wrong("masked_attention", "no 1/sqrt(d_k)",
          _masked(scores="q @ np.swapaxes(k, -1, -2) + causal_mask(T)"),
          "divide the scores by sqrt(d_k)"),
    Wrong("masked_attention", "mask sized from the key width", _masked(T="q.shape[-1]"),
          "the second-to-last axis of q"),
    Wrong("masked_attention", "len(q) for T", _masked(T="len(q)"), "take T from q.shape[-2]"),
    Wrong("masked_attention", "returns (weights, output)", _masked(result="weights, weights @ v"),
          "return output, weights in that order"),
    Wrong("masked_attention", "a fixed 8 x 8 mask, sliced", _masked(
        scores="q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + "
               "np.triu(np.full((8, 8), -np.inf), k=1)[:T, :T]"), "build the mask from T on every call"),
    Wrong("masked_attention", "a fixed 64 x 64 mask, sliced", _masked(
        scores="q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + "
               "np.triu(np.full((64, 64), -np.inf), k=1)[:T, :T]"), "build the mask from T on every call"),
    Wrong("masked_attention", "calls ref.attention, which the exercise forbids",
          "return ref.attention(q, k, v, causal_mask(q.shape[-2]))", "calls course_lib's attention"),
    Wrong("masked_attention", "computed in float32",
          "q, k, v = (a.astype(np.float32) for a in (q, k, v))\n" + _masked(),
          "compute in the inputs' dtype, float64"),
    Wrong("masked_attention", "weights rounded", _masked(result="weights @ v, np.round(weights, 3)"),
          "compute in the inputs' dtype, float64, without rounding"),
    # 02 future_leak
    Wrong("future_leak", "compares with a tolerance",
          _leak(compare="np.array([not np.allclose(a[t], b[t]) for t in range(k)], dtype=bool)"),
          "compare exactly", inject=True),
    Wrong("future_leak", "changes only position k", _leak(change="changed[k] = changed[k] + 1.0"),
          "not only position k"),
    Wrong("future_leak", "changes from position k - 1",
          _leak(change="changed[k - 1:] = changed[k - 1:] + 1.0"), "change rows k onward only"),
    Wrong("future_leak", "sums the differences", _leak(compare="(b - a)[:k].sum(axis=-1) != 0"),
          "summing the differences"),
    Wrong("future_leak", "changes x in place", _leak(copy="changed = x"),
          "changed its input x in place"),
    Wrong("future_leak", "one answer for all positions", _leak(compare="bool(np.any(a[:k] != b[:k]))"),
          "a single True/False"),
    Wrong("future_leak", "reduces over positions", _leak(compare="np.any(a[:k] != b[:k], axis=0)"),
          "reduce over the features, the last axis"),
    Wrong("future_leak", "every position", _leak(compare="np.any(a != b, axis=-1)"),
          "leave them out"),
    Wrong("future_leak", "True where unchanged", _leak(compare="np.all(a[:k] == b[:k], axis=-1)"),
          "True means the position's output changed"),
    Wrong("future_leak", "adds 1 to every feature", _leak(change="changed[k:] = changed[k:] + 1.0"),
          "by different amounts in different features"),
    Wrong("future_leak", "doubles the rows", _leak(change="changed[k:] *= 2"),
          "by different amounts in different features"),
    Wrong("future_leak", "changes feature 0 only", _leak(change="changed[k:, 0] += 1.0"),
          "not one column"),
    Wrong("future_leak", "changes the last feature only, randomly",
          _leak(change="changed[k:, -1] += np.random.default_rng(0).normal(size=len(x) - k)"),
          "not one column"),
    Wrong("future_leak", "a torch tensor", "import torch\n" + _leak(
        compare="torch.from_numpy(np.any(a[:k] != b[:k], axis=-1))"), "got a torch tensor"),
    Wrong("future_leak", "integers 0 and 1", _leak(compare="np.any(a[:k] != b[:k], axis=-1).astype(int)"),
          "keep the booleans"),
    Wrong("future_leak", "np.where 1 / 0", _leak(compare="np.where(np.any(a[:k] != b[:k], axis=-1), 1, 0)"),
          "keep the booleans"),
    Wrong("future_leak", "a list of booleans", _leak(compare="[bool(r) for r in np.any(a[:k] != b[:k], axis=-1)]"),
          "wrap a list of booleans in np.array"),
]

# Right answers written differently from the reference: each must pass its checker.
ALTERNATIVES = [
    ("causal_mask", "np.where",
     "return np.where(np.arange(T)[None, :] > np.arange(T)[:, None], -np.inf, 0.0)"),
    ("future_leak", "a loop with random new values", """\
rng = np.random.default_rng(1)
changed = np.concatenate([x[:k], rng.normal(size=x[k:].shape)])
before, after = layer(x), layer(changed)
return np.array([not np.array_equal(before[t], after[t]) for t in range(k)], dtype=bool)"""),
    ("future_leak", "rows replaced by large random values, compared with all", """\
changed = x.copy()
changed[k:] = 100 * np.random.default_rng(5).standard_normal(changed[k:].shape)
return ~np.all(layer(x)[:k] == layer(changed)[:k], axis=1)"""),
    ("masked_attention", "einsum and np.where", """\
T, d = q.shape[-2], q.shape[-1]
s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(d)
s = np.where(np.tri(T, dtype=bool), s, -np.inf)
e = np.exp(s - s.max(axis=-1, keepdims=True))
w = e / e.sum(axis=-1, keepdims=True)
return np.einsum("...ij,...jd->...id", w, v), w"""),
    ("causal_mask", "upper triangle of -inf by a comparison", """\
i, j = np.indices((T, T))
mask = np.zeros((T, T))
mask[j > i] = -np.inf
return mask"""),
]
