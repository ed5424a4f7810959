"""Answers to lesson 03's exercises (multi-head attention): the reference, and known-wrong ones."""
from answers import Wrong

# The course's split_heads, merge_heads and attention are off limits in these exercises, so
# the references are plain answers (multi_head_attention may use course_lib's split and merge).
REFERENCE = {
    "split_heads": """\
B, T, C = x.shape
return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)""",
    "merge_heads": """\
B, H, T, D = x.shape
return x.transpose(1, 2).reshape(B, T, H * D)""",
    "multi_head_attention": """\
B, T, C = x.shape
dtype = x.dtype
x, w_qkv, w_proj = x.float(), w_qkv.float(), w_proj.float()
q, k, v = (ref.split_heads(t, n_heads) for t in (x @ w_qkv.T).chunk(3, dim=-1))
scores = q @ k.transpose(-2, -1) / math.sqrt(C // n_heads)
scores = scores + torch.full((T, T), float("-inf")).triu(1)
return (ref.merge_heads(torch.softmax(scores, dim=-1) @ v) @ w_proj.T).to(dtype)""",
}

# The body of a multi-head attention with each step spelled out, and {slots} for the mistakes.
_MHA = """\
B, T, C = x.shape
dtype = x.dtype
x, w_qkv, w_proj = x.float(), w_qkv.float(), w_proj.float()
H, D = n_heads, C // n_heads
q, k, v = (x @ w_qkv.T).chunk(3, dim=-1)
q, k, v = ({split} for t in (q, k, v))
scores = q @ k.transpose(-2, -1) / {scale}
{mask}
a = torch.softmax(scores, dim=-1) @ v
merged = {merge}
return ({out}).to(dtype)"""

_RIGHT = dict(split="t.view(B, T, H, D).transpose(1, 2)", scale="math.sqrt(D)",
              mask="scores = scores + torch.full((T, T), float('-inf')).triu(1)",
              merge="a.transpose(1, 2).reshape(B, T, C)", out="merged @ w_proj.T")


def _mha(**mistake):
    return _MHA.format(**{**_RIGHT, **mistake})


WRONG = [
    # 03 split_heads
    Wrong("split_heads", "reshape without transpose", """\
B, T, C = x.shape
return x.reshape(B, n_heads, T, C // n_heads)""",
          "heads mix positions", inject=True),
    Wrong("split_heads", "view (B, T, D, H)", """\
B, T, C = x.shape
return x.view(B, T, C // n_heads, n_heads).permute(0, 3, 1, 2)""",
          "view(B, T, H, D), not view(B, T, D, H)"),
    Wrong("split_heads", "view (B, T, D, H) then transpose(1, 3)", """\
B, T, C = x.shape
return x.view(B, T, C // n_heads, n_heads).transpose(1, 3)""",
          "positions come before the head size"),
    Wrong("split_heads", "no transpose", """\
B, T, C = x.shape
return x.view(B, T, n_heads, C // n_heads)""",
          "move it forward with .transpose(1, 2)"),
    Wrong("split_heads", "returns NumPy", """\
B, T, C = x.shape
return x.numpy().reshape(B, T, n_heads, C // n_heads).transpose(0, 2, 1, 3)""",
          "should be a torch tensor"),
    Wrong("split_heads", "detached", """\
B, T, C = x.shape
return x.detach().view(B, T, n_heads, C // n_heads).transpose(1, 2)""", "keep the result connected to x"),
    Wrong("split_heads", "a copy through NumPy", """\
B, T, C = x.shape
parts = x.detach().numpy().reshape(B, T, n_heads, C // n_heads).transpose(0, 2, 1, 3)
return torch.tensor(parts)""", "keep the result connected to x"),
    Wrong("split_heads", "calls ref.split_heads, which the exercise forbids",
          "return ref.split_heads(x, n_heads)", "calls course_lib's split_heads"),
    # 03 merge_heads
    Wrong("merge_heads", "reshape without transposing back", """\
B, H, T, D = x.shape
return x.reshape(B, T, H * D)""",
          "transpose back before merging", inject=True),
    Wrong("merge_heads", "view after transpose", """\
B, H, T, D = x.shape
return x.transpose(1, 2).view(B, T, H * D)""",
          "no longer contiguous"),
    Wrong("merge_heads", "interleaved channels", """\
B, H, T, D = x.shape
return x.permute(0, 2, 3, 1).reshape(B, T, H * D)""",
          "the channels are interleaved"),
    Wrong("merge_heads", "transposed but not merged", "return x.transpose(1, 2)",
          "reshape to (B, T, H * D)"),
    Wrong("merge_heads", "detached", """\
B, H, T, D = x.shape
return x.detach().transpose(1, 2).reshape(B, T, H * D)""", "keep the result connected to x"),
    Wrong("merge_heads", "a round trip through NumPy", """\
B, H, T, D = x.shape
return torch.from_numpy(x.detach().numpy().transpose(0, 2, 1, 3).reshape(B, T, H * D))""",
          "keep the result connected to x"),
    Wrong("merge_heads", "calls ref.merge_heads, which the exercise forbids", "return ref.merge_heads(x)",
          "calls course_lib's merge_heads"),
    # 03 multi_head_attention
    Wrong("multi_head_attention", "no causal mask", _mha(mask=""),
          "add the causal mask", inject=True),
    Wrong("multi_head_attention", "scaled by sqrt(C)", _mha(scale="math.sqrt(C)"),
          "not by sqrt(C)"),
    Wrong("multi_head_attention", "no output projection", _mha(out="merged"),
          "finish with the output projection"),
    Wrong("multi_head_attention", "output projection not transposed", _mha(out="merged @ w_proj"),
          "merged_heads @ w_proj.T, not @ w_proj"),
    Wrong("multi_head_attention", "split by reshape without transpose",
          _mha(split="t.reshape(B, H, T, D)"), "heads mix positions"),
    Wrong("multi_head_attention", "no transposes at all",
          _mha(split="t.reshape(B, H, T, D)", merge="a.reshape(B, T, C)"), "heads mix positions"),
    Wrong("multi_head_attention", "split with view (B, T, D, H)",
          _mha(split="t.view(B, T, D, H).permute(0, 3, 1, 2)"),
          "view(B, T, H, D), not view(B, T, D, H)"),
    Wrong("multi_head_attention", "merge without transposing back", _mha(merge="a.reshape(B, T, C)"),
          "transpose back before merging"),
    Wrong("multi_head_attention", "one head of width C",
          _mha(split="t.view(B, T, 1, C).transpose(1, 2)", scale="math.sqrt(C)"),
          "this is one head of width C"),
    Wrong("multi_head_attention", "float64 mask from NumPy",
          _mha(mask="scores = scores + torch.from_numpy(causal_mask(T))").replace(").to(dtype)", ")"),
          "float64"),
    Wrong("multi_head_attention", "calls course_lib's multi_head_attention",
          "return ref.multi_head_attention(x, w_qkv, w_proj, n_heads)", "calls course_lib's multi_head_attention"),
    Wrong("multi_head_attention", "torch's fused kernel", """\
import torch.nn.functional as F
B, T, C = x.shape
q, k, v = (ref.split_heads(t, n_heads) for t in (x @ w_qkv.T).chunk(3, dim=-1))
return ref.merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)) @ w_proj.T""",
          "calls F.scaled_dot_product_attention"),
    Wrong("multi_head_attention", "torch.nn.MultiheadAttention", """\
B, T, C = x.shape
layer = torch.nn.MultiheadAttention(C, n_heads, bias=False, batch_first=True)
with torch.no_grad():
    layer.in_proj_weight.copy_(w_qkv)
    layer.out_proj.weight.copy_(w_proj)
mask = torch.full((T, T), float("-inf")).triu(1)
return layer(x, x, x, attn_mask=mask, need_weights=False)[0]""", "calls torch.nn.MultiheadAttention"),
    Wrong("multi_head_attention", "a fixed 8 x 8 mask, sliced",
          _mha(mask="scores = scores + torch.full((8, 8), float('-inf')).triu(1)[:T, :T]"),
          "build the causal mask for this T"),
    Wrong("multi_head_attention", "a fixed 10 x 10 mask, sliced",
          _mha(mask="scores = scores + torch.full((10, 10), float('-inf')).triu(1)[:T, :T]"),
          "build the causal mask for this T"),
    Wrong("multi_head_attention", "the softmax's output edited in place", _mha(
        merge="(a.mul_(1.0)).transpose(1, 2).reshape(B, T, C)").replace(
        "a = torch.softmax(scores, dim=-1) @ v", "w = torch.softmax(scores, dim=-1)\nw.mul_(1.0)\na = w @ v"),
          "the backward pass through your function failed"),
    Wrong("multi_head_attention", "a softmax by hand, all in place", _mha().replace(
        "a = torch.softmax(scores, dim=-1) @ v",
        "scores.sub_(scores.amax(-1, keepdim=True)).exp_()\nscores.div_(scores.sum(-1, keepdim=True))\n"
        "a = scores @ v"), "the backward pass through your function failed"),
    Wrong("multi_head_attention", "computed under torch.no_grad()", "with torch.no_grad():\n" + "\n".join(
        "    " + line for line in _mha().splitlines()), "no gradient flows through your function"),
    Wrong("multi_head_attention", "a softmax through NumPy", _mha().replace(
        "a = torch.softmax(scores, dim=-1) @ v",
        "a = torch.from_numpy(ref.softmax(scores.detach().numpy(), axis=-1)) @ v"),
          "the gradient with respect to x is not right"),
    Wrong("multi_head_attention", "adds to its input in place", "x += 0\n" + _mha(),
          "your function changed an input in place"),
    Wrong("multi_head_attention", "float16 computed in float16, a mask in its dtype",
          _mha().replace("x, w_qkv, w_proj = x.float(), w_qkv.float(), w_proj.float()\n", "").replace(
              "float('-inf')).triu(1)", "float('-inf'), dtype=x.dtype).triu(1)"),
          "the softmax NaN, lesson 01's pitfall"),
    Wrong("multi_head_attention", "half precision meeting a float32 mask",
          _mha().replace("x, w_qkv, w_proj = x.float(), w_qkv.float(), w_proj.float()\n", ""),
          "compute in float32 (x and both weights converted with .float())"),
    Wrong("multi_head_attention", "computed in float32, returned in float32",
          _mha().replace(").to(dtype)", ")"), "the output has the wrong dtype"),
    Wrong("multi_head_attention", "x @ w_qkv without .T", """\
q, k, v = (x @ w_qkv).chunk(3, dim=-1)
return q""", "nn.Linear's convention"),
]

# Right answers written differently from the reference: each must pass its checker.
ALTERNATIVES = [
    ("split_heads", "unflatten and permute", "return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)"),
    ("split_heads", "a stack of channel slices", """\
D = x.shape[-1] // n_heads
return torch.stack([x[..., h * D:(h + 1) * D] for h in range(n_heads)], dim=1)"""),
    ("merge_heads", "the heads concatenated", "return torch.cat(x.unbind(1), dim=-1)"),
    ("multi_head_attention", "masked_fill and einsum, in float64 inside", """\
B, T, C = x.shape
dtype = x.dtype
x, w_qkv, w_proj = x.double(), w_qkv.double(), w_proj.double()
D = C // n_heads
q, k, v = (t.view(B, T, n_heads, D).transpose(1, 2) for t in torch.split(x @ w_qkv.T, C, dim=-1))
scores = torch.einsum("bhid,bhjd->bhij", q, k) * D ** -0.5
scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
out = torch.einsum("bhij,bhjd->bhid", scores.softmax(-1), v)
return (out.transpose(1, 2).reshape(B, T, C) @ w_proj.T).to(dtype)"""),
]
