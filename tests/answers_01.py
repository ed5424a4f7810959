"""Answers to lesson 01's exercises (attention by hand), for testing the graders."""
from answers import Wrong

REFERENCE = {
    "softmax": """\
from course_lib.attention import softmax as reference
return reference(x, axis=axis)""",
    "attention_steps": """\
from course_lib.attention import attention
output, weights = attention(q[None, :], keys, values)
scores = keys @ q
return dict(scores=scores, scaled=scores / len(q) ** 0.5, weights=weights[0], output=output[0])""",
    "attention": """\
from course_lib.attention import attention as reference
return reference(q, k, v, mask)""",
}


def _steps(scale="math.sqrt(len(q))", weights="np.exp(scaled) / np.exp(scaled).sum()",
           mixed="values"):
    """An attention_steps body with one piece swapped for a mistake."""
    return f"""\
scores = keys @ q
scaled = scores / {scale}
weights = {weights}
return dict(scores=scores, scaled=scaled, weights=weights, output=weights @ {mixed})"""


def _softmax(shift="x.max(axis=axis, keepdims=True)", total="e.sum(axis=axis, keepdims=True)"):
    """A softmax body with one piece swapped for a mistake."""
    return f"e = np.exp(x - {shift})\nreturn e / {total}"


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
          "shift by each slice's maximum"),
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
          "test `if mask is not None:`"),
    Wrong("attention", "mask multiplied, not added", _attention(apply="scores = scores * mask"),
          "add the mask to the scaled scores before the softmax"),
]

# Right answers written differently from the reference: each must pass its checker.
ALTERNATIVES = [
    ("softmax", "log-sum-exp", """\
m = x.max(axis=axis, keepdims=True)
lse = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
return np.exp(x - lse)"""),
    ("softmax", "shift in a new array", """\
shifted = x - np.max(x, axis=axis, keepdims=True)
return np.exp(shifted) / np.sum(np.exp(shifted), axis=axis, keepdims=True)"""),
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
