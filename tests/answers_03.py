"""Answers to lesson 03's exercises (multi-head attention): the reference, and known-wrong ones."""
from answers import Wrong

REFERENCE = {
    "split_heads": """\
from course_lib.attention import split_heads as reference
return reference(x, n_heads)""",
    "merge_heads": """\
from course_lib.attention import merge_heads as reference
return reference(x)""",
    "multi_head_attention": """\
from course_lib.attention import multi_head_attention as reference
return reference(x, w_qkv, w_proj, n_heads)""",
}

# The body of a multi-head attention with each step spelled out, and {slots} for the mistakes.
_MHA = """\
B, T, C = x.shape
H, D = n_heads, C // n_heads
q, k, v = (x @ w_qkv.T).chunk(3, dim=-1)
q, k, v = ({split} for t in (q, k, v))
scores = q @ k.transpose(-2, -1) / {scale}
{mask}
a = torch.softmax(scores, dim=-1) @ v
merged = {merge}
return {out}"""

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
          _mha(mask="scores = scores + torch.from_numpy(causal_mask(T))"), "float64"),
    Wrong("multi_head_attention", "x @ w_qkv without .T", """\
q, k, v = (x @ w_qkv).chunk(3, dim=-1)
return q""", "nn.Linear's convention"),
]
