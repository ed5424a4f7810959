"""More answers to lesson 01's exercises, for testing the graders (the first ones are in tests/answers.py)."""
from answers import Wrong

REFERENCE = {}

WRONG = [
    Wrong("softmax", "float16 in, float64 out", """\
x = x.astype(np.float64)
e = np.exp(x - x.max(axis=axis, keepdims=True))
return e / e.sum(axis=axis, keepdims=True)""",
          "float16 in, float16 out"),
    Wrong("attention_steps", "the number of keys for d_k", """\
scores = keys @ q
scaled = scores / math.sqrt(len(keys))
weights = np.exp(scaled) / np.exp(scaled).sum()
return dict(scores=scores, scaled=scaled, weights=weights, output=weights @ values)""",
          "not the number of keys len(keys)"),
    Wrong("attention_steps", "scales q in place", """\
q /= math.sqrt(len(q))
scaled = keys @ q
weights = np.exp(scaled) / np.exp(scaled).sum()
return dict(scores=scaled * math.sqrt(len(q)), scaled=scaled, weights=weights,
            output=weights @ values)""",
          "changed its input q in place"),
    Wrong("attention", "the number of keys for d_k", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2])
if mask is not None:
    scores = scores + mask
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "not the number of keys k.shape[-2]"),
    Wrong("attention", "`if mask:` on an array", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
if mask:
    scores = scores + mask
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "test `if mask is not None:`"),
    Wrong("attention", "mask multiplied, not added", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
if mask is not None:
    scores = scores * mask
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "add the mask to the scaled scores before the softmax"),
]

ALTERNATIVES = [
    ("softmax", "float32 inside, the input's dtype out", """\
work = x.astype(np.float32)
e = np.exp(work - work.max(axis=axis, keepdims=True))
return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)"""),
    ("attention", "einsum", """\
scores = np.einsum("...td,...sd->...ts", q, k) / np.sqrt(q.shape[-1])
if mask is not None:
    scores = scores + mask
scores = scores - scores.max(axis=-1, keepdims=True)
weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
return np.einsum("...ts,...sd->...td", weights, v), weights"""),
    ("attention_steps", "a loop over the keys", """\
d_k = q.shape[0]
scores = np.array([np.dot(q, key) for key in keys])
scaled = scores / d_k ** 0.5
weights = np.exp(scaled) / np.sum(np.exp(scaled))
output = sum(w * value for w, value in zip(weights, values))
return {"scores": scores, "scaled": scaled, "weights": weights, "output": output}"""),
]
