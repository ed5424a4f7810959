"""Answers to lesson 02's exercises (causal masking), for testing the graders."""
from answers import Wrong

REFERENCE = {
    "causal_mask": """\
from course_lib.attention import causal_mask as reference
return reference(T)""",
    "masked_attention": """\
from course_lib.attention import attention, causal_mask
return attention(q, k, v, causal_mask(q.shape[-2]))""",
    "future_leak": """\
changed = x.copy()
changed[k:] = changed[k:] + 1.0
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


def _leak(change="changed[k:] = changed[k:] + 1.0", compare="np.any(a[:k] != b[:k], axis=-1)",
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
          "T = q.shape[-2]"),
    Wrong("masked_attention", "len(q) for T", _masked(T="len(q)"), "take T from q.shape[-2]"),
    Wrong("masked_attention", "returns (weights, output)", _masked(result="weights, weights @ v"),
          "return output, weights in that order"),
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
    ("future_leak", "integers 0 and 1", """\
changed = x.copy()
changed[k:] *= -3
return (~np.all(layer(x)[:k] == layer(changed)[:k], axis=1)).astype(int)"""),
    ("causal_mask", "upper triangle of -inf by a comparison", """\
i, j = np.indices((T, T))
mask = np.zeros((T, T))
mask[j > i] = -np.inf
return mask"""),
]
