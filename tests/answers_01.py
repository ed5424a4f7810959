"""Answers to lesson 01's exercises (attention by hand), for testing the graders."""
from answers import Wrong

# The course's softmax and attention are off limits in these exercises, so the references are
# plain answers (attention may use ref.softmax).
REFERENCE = {
    "softmax": """\
x = np.asarray(x)
work = x.astype(np.float32) if x.dtype == np.float16 else x
e = np.exp(work - work.max(axis=axis, keepdims=True))
return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)""",
    "attention_steps": """\
scores = keys @ q
scaled = scores / len(q) ** 0.5
e = np.exp(scaled)
weights = e / e.sum()
return dict(scores=scores, scaled=scaled, weights=weights, output=weights @ values)""",
    "attention": """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
if mask is not None:
    scores = scores + mask
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
}


def _steps(scale="math.sqrt(len(q))", weights="np.exp(scaled) / np.exp(scaled).sum()",
           mixed="values"):
    """An attention_steps body with one piece swapped for a mistake."""
    return f"""\
scores = keys @ q
scaled = scores / {scale}
weights = {weights}
return dict(scores=scores, scaled=scaled, weights=weights, output=weights @ {mixed})"""


def _softmax(shift="x.max(axis=axis, keepdims=True)", total="e.sum(axis=axis, keepdims=True)",
             result="e / {}"):
    """A softmax body with one piece swapped for a mistake (float16 computed in float32)."""
    return ("w = x.astype(np.float32) if x.dtype == np.float16 else x\n"
            f"e = np.exp(w - {shift.replace('x.', 'w.').replace('(x', '(w')})\n"
            f"return ({result.format(total)}).astype(x.dtype)")


def _attention(scale="math.sqrt(q.shape[-1])", kt="np.swapaxes(k, -1, -2)",
               test="if mask is not None:", apply="scores = scores + mask", axis=-1,
               result="weights @ v, weights"):
    """An attention body with one piece swapped for a mistake."""
    return f"""\
scores = q @ {kt} / {scale}
{test}
    {apply}
weights = ref.softmax(scores, axis={axis})
return {result}"""


WRONG = [
    # 01 attention_steps
    Wrong("attention_steps", "hard-coded sqrt(2)", _steps(scale="math.sqrt(2)"),
          "sqrt(2) only fits the lesson's keys", inject=True),
    Wrong("attention_steps", "no scaling", _steps(scale="1"),
          "divide by the square root of the key width"),
    Wrong("attention_steps", "unnormalised weights", _steps(weights="np.exp(scaled)"),
          "divide the exponentials by their sum"),
    Wrong("attention_steps", "mixes the keys", _steps(mixed="keys"),
          "mixes the values, not the keys"),
    Wrong("attention_steps", "the number of keys for d_k", _steps(scale="math.sqrt(len(keys))"),
          "not the number of keys len(keys)"),
    Wrong("attention_steps", "calls ref.softmax, which the exercise forbids",
          _steps(weights="ref.softmax(scaled)"), "calls course_lib's softmax"),
    Wrong("attention_steps", "calls torch.softmax", _steps(
        weights="torch.softmax(torch.from_numpy(scaled), dim=-1).numpy()"), "calls torch.softmax"),
    Wrong("attention_steps", "calls ref.attention", """\
output, weights = ref.attention(q[None, :], keys, values)
scores = keys @ q
return dict(scores=scores, scaled=scores / len(q) ** 0.5, weights=weights[0], output=output[0])""",
          "calls course_lib's attention"),
    Wrong("attention_steps", "weights rounded to 3 decimals",
          _steps(weights="np.round(np.exp(scaled) / np.exp(scaled).sum(), 3)"), "do not round them"),
    Wrong("attention_steps", "scores rounded to 4 decimals", """\
scores = np.round(keys @ q, 4)
scaled = scores / math.sqrt(len(q))
weights = np.exp(scaled) / np.exp(scaled).sum()
return dict(scores=scores, scaled=scaled, weights=weights, output=weights @ values)""",
          "do not round them"),
    Wrong("attention_steps", "computed in float32", "q, keys, values = (a.astype(np.float32) for a in (q, keys, values))\n"
          + _steps(), "is float32, from float64 inputs"),
    Wrong("attention_steps", "scores in float32 only", _steps().replace("scores = keys @ q", "scores = (keys @ q).astype(np.float32)"),
          "is float32, from float64 inputs"),
    Wrong("attention_steps", "the first four keys only", "keys, values = keys[:4], values[:4]\n" + _steps(),
          "score j is the dot product"),
    # The checker cannot convert these: it says so, as feedback, instead of raising numpy's error.
    Wrong("attention_steps", "strings in the dict",
          "return dict(scores='1', scaled='0.7', weights='a', output='b')",
          "the check could not go on with what your function returned"),
    Wrong("attention_steps", "ragged lists in the dict",
          "return dict(scores=[1, [2, 3]], scaled=[0], weights=[0], output=[0])",
          "the check could not go on with what your function returned"),
    Wrong("attention_steps", "scales q in place", """\
q /= math.sqrt(len(q))
scaled = keys @ q
weights = np.exp(scaled) / np.exp(scaled).sum()
return dict(scores=scaled * math.sqrt(len(q)), scaled=scaled, weights=weights,
            output=weights @ values)""",
          "changed its input q in place"),
    # 01 softmax
    Wrong("softmax", "no max subtraction", _softmax(shift="0"),
          "subtract the maximum before exponentiating", inject=True),
    Wrong("softmax", "sum over the whole array", _softmax(total="e.sum()"),
          "divided by the sum over the whole array"),
    Wrong("softmax", "always axis 0", _softmax(shift="x.max(axis=0, keepdims=True)",
                                               total="e.sum(axis=0, keepdims=True)"),
          "normalised over axis 0"),
    Wrong("softmax", "one maximum for the whole array", _softmax(shift="x.max()"),
          "subtract each slice's own maximum"),
    Wrong("softmax", "reductions without keepdims",
          _softmax(shift="x.max(axis=axis)", total="e.sum(axis=axis)"), "keepdims=True"),
    Wrong("softmax", "shifts by the mean", _softmax(shift="x.mean(axis=axis, keepdims=True)"),
          "the mean or the minimum overflow"),
    Wrong("softmax", "shifts by the minimum", _softmax(shift="x.min(axis=axis, keepdims=True)"),
          "the mean or the minimum overflow"),
    Wrong("softmax", "shifts by the first entry", _softmax(shift="np.take(x, [0], axis=axis)"),
          "shift by each slice's own maximum"),
    Wrong("softmax", "float16 computed in float16, the long sum stalls", """\
shifted = x - x.max(axis=axis, keepdims=True)
e = np.exp(shifted)
return e / e.sum(axis=axis, keepdims=True)""", "summed in float16, 3,000 exponentials stall"),
    Wrong("softmax", "float16 in float16 by np.add.reduce", """\
e = np.exp(x - x.max(axis=axis, keepdims=True))
return e / np.add.reduce(e, axis=axis, keepdims=True)""", "summed in float16, 3,000 exponentials stall"),
    Wrong("softmax", "calls ref.softmax, which the exercise forbids", "return ref.softmax(x, axis=axis)",
          "calls course_lib's softmax"),
    Wrong("softmax", "calls torch.softmax",
          "return torch.softmax(torch.from_numpy(x).float(), dim=axis).numpy().astype(x.dtype)",
          "calls torch.softmax"),
    Wrong("softmax", "rounded to 3 decimals", _softmax(result="np.round(e / {}, 3)"),
          "to float64's precision (no rounding)"),
    Wrong("softmax", "rounded to 5 decimals", _softmax(result="np.round(e / {}, 5)"),
          "to float64's precision (no rounding)"),
    Wrong("softmax", "float64 computed in float32 and converted back", """\
w = x.astype(np.float32)
e = np.exp(w - w.max(axis=axis, keepdims=True))
return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)""", "to float64's precision"),
    Wrong("softmax", "float64 in, float32 out", """\
w = x.astype(np.float32)
e = np.exp(w - w.max(axis=axis, keepdims=True))
return e / e.sum(axis=axis, keepdims=True)""", "float64 in, float64 out"),
    Wrong("softmax", "shifts by the maximum only when it is positive",
          _softmax(shift="np.maximum(x.max(axis=axis, keepdims=True), 0)"),
          "subtract the maximum before exponentiating"),
    Wrong("softmax", "subtracts in place", """\
x -= x.max(axis=axis, keepdims=True)
e = np.exp(x)
return e / e.sum(axis=axis, keepdims=True)""",
          "changed its input x in place"),
    Wrong("softmax", "forgets to return", """\
e = np.exp(x - x.max(axis=axis, keepdims=True))
out = e / e.sum(axis=axis, keepdims=True)""",
          "finish it with a `return`"),
    Wrong("softmax", "float16 in, float64 out", """\
x = x.astype(np.float64)
e = np.exp(x - x.max(axis=axis, keepdims=True))
return e / e.sum(axis=axis, keepdims=True)""",
          "float16 in, float16 out"),
    # 01 attention
    Wrong("attention", "no 1/sqrt(d_k)", _attention(scale="1"),
          "divide the scores by sqrt(d_k)", inject=True),
    Wrong("attention", "divides by d_k", _attention(scale="q.shape[-1]"), "not by d_k itself"),
    Wrong("attention", "softmax over the queries", _attention(axis=-2),
          "softmax over the keys, the last axis"),
    Wrong("attention", "ignores the mask", _attention(apply="pass"),
          "add the mask to the scaled scores before the softmax"),
    Wrong("attention", "k.T on a batch", _attention(kt="k.T"),
          "np.swapaxes(k, -1, -2) rather than k.T"),
    Wrong("attention", "mixes the keys", _attention(result="weights @ k, weights"),
          "values, not keys"),
    Wrong("attention", "returns (weights, output)", _attention(result="weights, weights @ v"),
          "return output, weights in that order"),
    Wrong("attention", "the number of keys for d_k", _attention(scale="math.sqrt(k.shape[-2])"),
          "not the number of keys k.shape[-2]"),
    Wrong("attention", "`if mask:` on an array", _attention(test="if mask:"),
          "comparing it with None"),
    Wrong("attention", "mask multiplied, not added", _attention(apply="scores = scores * mask"),
          "add the mask to the scaled scores before the softmax"),
    Wrong("attention", "calls ref.attention, which the exercise forbids",
          "return ref.attention(q, k, v, mask)", "calls course_lib's attention"),
    Wrong("attention", "calls torch's fused kernel", """\
import torch.nn.functional as F
t = torch.from_numpy
m = None if mask is None else t(mask)
out = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=m).numpy()
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + (0 if mask is None else mask)
return out, ref.softmax(scores, axis=-1)""", "calls F.scaled_dot_product_attention"),
    Wrong("attention", "computed in float32",
          "q, k, v = (a.astype(np.float32) for a in (q, k, v))\n" + _attention(),
          "compute in the inputs' dtype, float64"),
    Wrong("attention", "weights rounded to 3 decimals",
          _attention(result="weights @ v, np.round(weights, 3)"), "do not round them"),
    Wrong("attention", "weights and output rounded",
          _attention(result="np.round(weights @ v, 3), np.round(weights, 3)"), "do not round them"),
    Wrong("attention", "k.transpose(0, 2, 1): one batch axis only", _attention(
        kt="(k.transpose(0, 2, 1) if k.ndim == 3 else k.T)"),
          "nothing that assumes a length or a number of batch axes"),
    Wrong("attention", "returns (None, None)", "return None, None", "output should be a NumPy array"),
]

# Right answers written differently from the reference: each must pass its checker.
ALTERNATIVES = [
    ("softmax", "log-sum-exp", """\
w = x.astype(np.float32) if x.dtype == np.float16 else x
m = w.max(axis=axis, keepdims=True)
lse = m + np.log(np.exp(w - m).sum(axis=axis, keepdims=True))
return np.exp(w - lse).astype(x.dtype)"""),
    ("softmax", "shift in a new array", """\
work = x.astype(np.promote_types(x.dtype, np.float32))
shifted = work - np.max(work, axis=axis, keepdims=True)
return (np.exp(shifted) / np.sum(np.exp(shifted), axis=axis, keepdims=True)).astype(x.dtype)"""),
    ("softmax", "float64 inside, the input's dtype out", """\
work = x.astype(np.float64)
e = np.exp(work - work.max(axis=axis, keepdims=True))
return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)"""),
    ("attention", "einsum", """\
scores = np.einsum("...td,...sd->...ts", q, k) / np.sqrt(q.shape[-1])
if mask is not None:
    scores = scores + mask
scores = scores - scores.max(axis=-1, keepdims=True)
weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
return np.einsum("...ts,...sd->...td", weights, v), weights"""),
    ("softmax", "np.apply_along_axis over each slice", """\
def one(row):
    row = row.astype(np.float32) if row.dtype == np.float16 else row
    e = np.exp(row - row.max())
    return e / e.sum()
return np.apply_along_axis(one, axis, x).astype(x.dtype)"""),
    ("attention", "stable softmax inlined, with swapaxes", """\
s = np.matmul(q, np.swapaxes(k, -2, -1)) * q.shape[-1] ** -0.5
s = s if mask is None else s + mask
e = np.exp(s - s.max(axis=-1, keepdims=True))
w = e / e.sum(axis=-1, keepdims=True)
return np.matmul(w, v), w"""),
    ("attention_steps", "lists instead of arrays", """\
scores = keys @ q
scaled = scores / np.sqrt(q.size)
e = np.exp(scaled)
w = e / e.sum()
return dict(scores=list(scores), scaled=list(scaled), weights=list(w), output=list(w @ values))"""),
    ("attention_steps", "a loop over the keys", """\
d_k = q.shape[0]
scores = np.array([np.dot(q, key) for key in keys])
scaled = scores / d_k ** 0.5
weights = np.exp(scaled) / np.sum(np.exp(scaled))
output = sum(w * value for w, value in zip(weights, values))
return {"scores": scores, "scaled": scaled, "weights": weights, "output": output}"""),
]
