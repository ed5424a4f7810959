"""Answers to lesson 02's exercise future_leak, and more for its others, for testing the graders.

causal_mask and masked_attention's reference and first wrong answers are in tests/answers.py.
"""
from answers import Wrong

REFERENCE = {
    "future_leak": """\
changed = x.copy()
changed[k:] = changed[k:] + 1.0
return np.any(layer(x)[:k] != layer(changed)[:k], axis=-1)""",
}


def _leak(change="changed[k:] = changed[k:] + 1.0", compare="np.any(a[:k] != b[:k], axis=-1)",
          copy="changed = x.copy()"):
    """A future_leak body with one piece swapped for a mistake."""
    return f"{copy}\n{change}\na, b = layer(x), layer(changed)\nreturn {compare}"


WRONG = [
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
    # 02 causal_mask and masked_attention: more of what a class writes
    Wrong("causal_mask", "one row too many", "return np.triu(np.full((T + 1, T + 1), -np.inf), k=1)",
          "one row per query i"),
    Wrong("masked_attention", "len(q) for T", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + causal_mask(len(q))
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "take T from q.shape[-2]"),
]

ALTERNATIVES = [
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
