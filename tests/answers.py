"""Answers to the exercises, for testing the graders: a call of the reference, and known-wrong ones.

Each answer is the body that replaces an exercise's solution region in its lesson, so it
runs against the lesson's own function signature. A wrong answer names the mistake and a
phrase the checker's feedback must contain: failing is not enough, it must fail with the
right hint. Those marked `inject` are also run inside the exercise notebook.
"""
from dataclasses import dataclass

REFERENCE = {
    "next_token_targets": """\
from course_lib.data import split_inputs_targets
inputs, targets = split_inputs_targets(ids[None])
return inputs[0], targets[0]""",
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
    "causal_mask": """\
from course_lib.attention import causal_mask as reference
return reference(T)""",
    "masked_attention": """\
from course_lib.attention import attention, causal_mask
return attention(q, k, v, causal_mask(q.shape[-2]))""",
}


@dataclass(frozen=True)
class Wrong:
    exercise: str
    name: str
    body: str
    hint: str            # must appear in the checker's feedback
    inject: bool = False


WRONG = [
    # 00 next_token_targets
    Wrong("next_token_targets", "unshifted targets", "return ids[:-1], ids[:-1]",
          "shift the targets by one", inject=True),
    Wrong("next_token_targets", "predicts the previous token", "return ids[1:], ids[:-1]",
          "predicts the previous token"),
    Wrong("next_token_targets", "keeps the last id as input", "return ids, ids[1:]",
          "drop one id from each end"),
    # 01 attention_steps
    Wrong("attention_steps", "hard-coded sqrt(2)", """\
scores = keys @ q
scaled = scores / math.sqrt(2)
weights = np.exp(scaled) / np.exp(scaled).sum()
return dict(scores=scores, scaled=scaled, weights=weights, output=weights @ values)""",
          "sqrt(2) only fits the lesson's keys", inject=True),
    Wrong("attention_steps", "no scaling", """\
scores = keys @ q
weights = np.exp(scores) / np.exp(scores).sum()
return dict(scores=scores, scaled=scores, weights=weights, output=weights @ values)""",
          "divide by the square root of the key width"),
    Wrong("attention_steps", "unnormalised weights", """\
scores = keys @ q
scaled = scores / math.sqrt(len(q))
weights = np.exp(scaled)
return dict(scores=scores, scaled=scaled, weights=weights, output=weights @ values)""",
          "divide the exponentials by their sum"),
    Wrong("attention_steps", "mixes the keys", """\
scores = keys @ q
scaled = scores / math.sqrt(len(q))
weights = np.exp(scaled) / np.exp(scaled).sum()
return dict(scores=scores, scaled=scaled, weights=weights, output=weights @ keys)""",
          "mixes the values, not the keys"),
    # 01 softmax
    Wrong("softmax", "no max subtraction", """\
e = np.exp(x)
return e / e.sum(axis=axis, keepdims=True)""",
          "subtract the maximum before exponentiating", inject=True),
    Wrong("softmax", "sum over the whole array", """\
e = np.exp(x - x.max(axis=axis, keepdims=True))
return e / e.sum()""",
          "divided by the sum over the whole array"),
    Wrong("softmax", "always axis 0", """\
e = np.exp(x - x.max(axis=0, keepdims=True))
return e / e.sum(axis=0, keepdims=True)""",
          "normalised over axis 0"),
    Wrong("softmax", "one maximum for the whole array", """\
e = np.exp(x - x.max())
return e / e.sum(axis=axis, keepdims=True)""",
          "subtract each slice's own maximum"),
    Wrong("softmax", "reductions without keepdims", """\
e = np.exp(x - x.max(axis=axis))
return e / e.sum(axis=axis)""",
          "keepdims=True"),
    # 01 attention
    Wrong("attention", "no 1/sqrt(d_k)", """\
scores = q @ np.swapaxes(k, -1, -2)
if mask is not None:
    scores = scores + mask
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "divide the scores by sqrt(d_k)", inject=True),
    Wrong("attention", "divides by d_k", """\
scores = q @ np.swapaxes(k, -1, -2) / q.shape[-1]
if mask is not None:
    scores = scores + mask
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "not by d_k itself"),
    Wrong("attention", "softmax over the queries", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
if mask is not None:
    scores = scores + mask
weights = ref.softmax(scores, axis=-2)
return weights @ v, weights""",
          "softmax over the keys, the last axis"),
    Wrong("attention", "ignores the mask", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "add the mask to the scaled scores before the softmax"),
    Wrong("attention", "k.T on a batch", """\
scores = q @ k.T / math.sqrt(q.shape[-1])
if mask is not None:
    scores = scores + mask
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "np.swapaxes(k, -1, -2) rather than k.T"),
    Wrong("attention", "mixes the keys", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
if mask is not None:
    scores = scores + mask
weights = ref.softmax(scores, axis=-1)
return weights @ k, weights""",
          "values, not keys"),
    # 02 causal_mask
    Wrong("causal_mask", "hides the diagonal", "return np.triu(np.full((T, T), -np.inf), k=0)",
          "the diagonal is hidden", inject=True),
    Wrong("causal_mask", "shows the future, hides the past",
          "return np.tril(np.full((T, T), -np.inf), k=-1)", "the mask is transposed"),
    Wrong("causal_mask", "boolean", "return np.tril(np.ones((T, T), dtype=bool))",
          "the mask is boolean"),
    Wrong("causal_mask", "large negative instead of -inf", "return np.triu(np.full((T, T), -1e9), k=1)",
          "use -np.inf for hidden entries, the mask M the lesson defines"),
    Wrong("causal_mask", "ones where allowed",
          "return np.where(np.triu(np.ones((T, T)), k=1) == 1, -np.inf, 1.0)",
          "allowed entries are not 0"),
    # 02 masked_attention
    Wrong("masked_attention", "no mask", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "positions attend to later positions", inject=True),
    Wrong("masked_attention", "mask applied after the softmax", """\
T = q.shape[-2]
weights = ref.softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), axis=-1)
weights = weights * np.tril(np.ones((T, T)))
return weights @ v, weights""",
          "apply the mask to the scores before the softmax"),
    Wrong("masked_attention", "mask hides the diagonal", """\
T = q.shape[-2]
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + np.triu(np.full((T, T), -np.inf))
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "the mask hides the diagonal"),
    Wrong("masked_attention", "no 1/sqrt(d_k)", """\
T = q.shape[-2]
scores = q @ np.swapaxes(k, -1, -2) + causal_mask(T)
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "divide the scores by sqrt(d_k)"),
    Wrong("masked_attention", "mask sized from the key width", """\
d = q.shape[-1]
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d) + causal_mask(d)
weights = ref.softmax(scores, axis=-1)
return weights @ v, weights""",
          "T = q.shape[-2]"),
]


WRONG += [
    # 00: what a class writes besides the three above
    Wrong("next_token_targets", "targets as floats", "return ids[:-1], ids[1:].float()",
          "must hold integer token ids"),
    Wrong("next_token_targets", "forgets to return", "inputs, targets = ids[:-1], ids[1:]",
          "finish it with a `return`"),
    Wrong("next_token_targets", "returns one tensor", "return ids[1:]", "expected a pair"),
    # 01 softmax: shifts that are not the maximum, in-place edits, half precision
    Wrong("softmax", "shifts by the mean", """\
e = np.exp(x - x.mean(axis=axis, keepdims=True))
return e / e.sum(axis=axis, keepdims=True)""",
          "the mean or the minimum overflow"),
    Wrong("softmax", "shifts by the minimum", """\
e = np.exp(x - x.min(axis=axis, keepdims=True))
return e / e.sum(axis=axis, keepdims=True)""",
          "the mean or the minimum overflow"),
    Wrong("softmax", "shifts by the first entry", """\
e = np.exp(x - np.take(x, [0], axis=axis))
return e / e.sum(axis=axis, keepdims=True)""",
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
    # 01 attention: the pair in the wrong order
    Wrong("attention", "returns (weights, output)", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
if mask is not None:
    scores = scores + mask
weights = ref.softmax(scores, axis=-1)
return weights, weights @ v""",
          "return output, weights in that order"),
    # 02 causal_mask
    Wrong("causal_mask", "0 times -inf", "return np.triu(np.ones((T, T)), k=1) * -np.inf",
          "0 * -inf is NaN"),
    # 02 masked_attention
    Wrong("masked_attention", "returns (weights, output)", """\
scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + causal_mask(q.shape[-2])
weights = ref.softmax(scores, axis=-1)
return weights, weights @ v""",
          "return output, weights in that order"),
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
    ("causal_mask", "np.where", "return np.where(np.arange(T)[None, :] > np.arange(T)[:, None], -np.inf, 0.0)"),
    ("next_token_targets", "two slices", "inputs = ids[:-1]\ntargets = ids[1:]\nreturn inputs, targets"),
    ("block_forward", "a loop over the sublayers", """\
for norm, sublayer in ((block.norm1, block.attn), (block.norm2, block.mlp)):
    x = x + sublayer(norm(x))
return x"""),
    ("count_params", "from the model's shapes", """\
V, P, C, L = config.vocab_size, config.max_len, config.d_model, config.n_layers
return V * C + P * C + L * (12 * C * C + 9 * C) + 2 * C"""),
]


def _add_later_lessons():
    """Merge the answers of lessons 03 on, kept one file per lesson: tests/answers_NN.py."""
    import importlib
    from pathlib import Path
    for path in sorted(Path(__file__).parent.glob("answers_[0-9][0-9].py")):
        module = importlib.import_module(path.stem)
        REFERENCE.update(module.REFERENCE)
        WRONG.extend(module.WRONG)
        ALTERNATIVES.extend(getattr(module, "ALTERNATIVES", []))


_add_later_lessons()
