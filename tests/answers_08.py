"""Answers to lesson 08's exercises (the modern block), for testing the graders."""
from answers import Wrong

REFERENCE = {
    "rms_norm": """\
from course_lib.blocks import RMSNorm
norm = RMSNorm(x.shape[-1], eps=eps)
return torch.func.functional_call(norm, {"weight": weight}, (x,))""",
    "swiglu": """\
from course_lib.blocks import SwiGLU
mlp = SwiGLU(x.shape[-1], w_gate.shape[0])
weights = {"gate.weight": w_gate, "up.weight": w_up, "down.weight": w_down}
return torch.func.functional_call(mlp, weights, (x,))""",
    "grouped_query_attention": """\
from course_lib.attention import repeat_kv, scaled_dot_product_attention
n_rep = q.shape[1] // k.shape[1]
return scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), is_causal=True)""",
}


def _rms(normed="x / torch.sqrt(ms + eps)", ms="x.pow(2).mean(-1, keepdim=True)",
         before="x = x.float()", after="(out * weight).to(dtype)"):
    """An rms_norm body with one piece swapped for a mistake."""
    return f"""\
dtype = x.dtype
weight = weight.float()
{before}
ms = {ms}
out = {normed}
return {after}"""


def _swiglu(hidden="F.silu(x @ w_gate.T) * (x @ w_up.T)", out="hidden @ w_down.T"):
    """A swiglu body with one piece swapped for a mistake."""
    return f"""\
import torch.nn.functional as F
hidden = {hidden}
return {out}"""


def _gqa(repeat="k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)",
         scores="q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])",
         hidden="torch.ones(T, T, dtype=torch.bool).triu(1)", softmax="dim=-1",
         before="", result="(weights @ v.float()).to(q.dtype)"):
    """A grouped_query_attention body with one piece swapped for a mistake."""
    return f"""\
{before}n_rep = q.shape[1] // k.shape[1]
T = q.shape[2]
k, v = {repeat}
scores = {scores}
scores = scores.masked_fill({hidden}, float("-inf"))
weights = torch.softmax(scores, {softmax})
return {result}"""


WRONG = [
    # 08 rms_norm
    Wrong("rms_norm", "subtracts the mean (LayerNorm)",
          _rms(before="x = x.float()\nx = x - x.mean(-1, keepdim=True)"),
          "RMSNorm does not subtract the mean (that is LayerNorm)", inject=True),
    Wrong("rms_norm", "eps outside the square root", _rms(normed="x / (torch.sqrt(ms) + eps)"),
          "eps goes inside the square root"),
    Wrong("rms_norm", "no eps", _rms(normed="x / torch.sqrt(ms)"), "you left eps out"),
    Wrong("rms_norm", "mean over the first axis", _rms(ms="x.pow(2).mean(0, keepdim=True)"),
          "not over the first axis"),
    Wrong("rms_norm", "mean over the whole tensor", _rms(ms="x.pow(2).mean()"),
          "not over the whole tensor"),
    Wrong("rms_norm", "sum of squares", _rms(ms="x.pow(2).sum(-1, keepdim=True)"),
          "not their sum"),
    Wrong("rms_norm", "no square root", _rms(normed="x / (ms + eps)"),
          "not by the mean itself"),
    Wrong("rms_norm", "forgets the weight", _rms(after="out.to(dtype)"),
          "multiply the normalised x by `weight`"),
    Wrong("rms_norm", "returns float32 for half-precision input", _rms(after="out * weight"),
          "return the result in the input's dtype"),
    Wrong("rms_norm", "computes in float16", _rms(before="weight = weight.to(dtype)"),
          "compute it in float32"),
    Wrong("rms_norm", "divides x in place", """\
x /= torch.sqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)
return x * weight""",
          "changed its input x in place"),
    Wrong("rms_norm", "forgets to return", """\
out = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight""",
          "returned None"),
    Wrong("rms_norm", "goes through NumPy", """\
a = x.numpy()
return a / np.sqrt((a ** 2).mean(-1, keepdims=True) + eps) * weight.numpy()""",
          "stay in torch"),
    Wrong("rms_norm", "detaches the input", _rms(before="x = x.detach().float()"),
          "no gradient flows"),
    # 08 swiglu
    Wrong("swiglu", "gate and up swapped", _swiglu(hidden="F.silu(x @ w_up.T) * (x @ w_gate.T)"),
          "gate and up are swapped", inject=True),
    Wrong("swiglu", "sigmoid instead of SiLU",
          _swiglu(hidden="torch.sigmoid(x @ w_gate.T) * (x @ w_up.T)"),
          "not sigmoid(g) alone"),
    Wrong("swiglu", "GELU instead of SiLU", _swiglu(hidden="F.gelu(x @ w_gate.T) * (x @ w_up.T)"),
          "not GELU"),
    Wrong("swiglu", "SiLU of the product", _swiglu(hidden="F.silu((x @ w_gate.T) * (x @ w_up.T))"),
          "you applied it to the product"),
    Wrong("swiglu", "no up projection", _swiglu(hidden="F.silu(x @ w_gate.T)"),
          "your answer has no up projection"),
    Wrong("swiglu", "weights not transposed", _swiglu(hidden="F.silu(x @ w_gate) * (x @ w_up)",
                                                      out="hidden @ w_down"),
          "nn.Linear's orientation (out, in)"),
    Wrong("swiglu", "no down projection", _swiglu(out="hidden"),
          "project back to the model width"),
    Wrong("swiglu", "returns float32 for bfloat16 input",
          _swiglu(hidden="F.silu(x.float() @ w_gate.float().T) * (x.float() @ w_up.float().T)",
                  out="hidden @ w_down.float().T"),
          "return the result in the input's dtype"),
    Wrong("swiglu", "through NumPy", """\
import torch.nn.functional as F
g, u = x @ w_gate.T, x @ w_up.T
return ((F.silu(g) * u) @ w_down.T).detach().numpy()""",
          "got a NumPy array"),
    # 08 grouped_query_attention
    Wrong("grouped_query_attention", "tiles the heads (repeat, not repeat_interleave)",
          _gqa(repeat="k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)"),
          "you tiled the whole set", inject=True),
    Wrong("grouped_query_attention", "no 1/sqrt(d_head)",
          _gqa(scores="q.float() @ k.float().transpose(-1, -2)"),
          "divide the scores by sqrt(D), the square root of the head size"),
    Wrong("grouped_query_attention", "divides by d_head",
          _gqa(scores="q.float() @ k.float().transpose(-1, -2) / q.shape[-1]"),
          "not by D itself"),
    Wrong("grouped_query_attention", "no causal mask",
          _gqa(hidden="torch.zeros(T, T, dtype=torch.bool)"),
          "the attention must be causal"),
    Wrong("grouped_query_attention", "mask hides the diagonal",
          _gqa(hidden="torch.ones(T, T, dtype=torch.bool).triu(0)"),
          "must see at least its own position"),
    Wrong("grouped_query_attention", "softmax over the queries", _gqa(softmax="dim=-2"),
          "take the softmax over the keys"),
    Wrong("grouped_query_attention", "no repeat of the key/value heads", _gqa(repeat="k, v"),
          "repeating each key/value head"),
    Wrong("grouped_query_attention", "scales q in place", _gqa(
        before="q /= math.sqrt(q.shape[-1])\n",
        scores="q.float() @ k.float().transpose(-1, -2)"),
          "changed its input q in place"),
    Wrong("grouped_query_attention", "returns float32 for bfloat16 input",
          _gqa(result="weights @ v.float()"), "return the result in the input's dtype"),
    Wrong("grouped_query_attention", "returns the weights too",
          _gqa(result="(weights @ v.float()).to(q.dtype), weights"), "a single tensor"),
    Wrong("grouped_query_attention", "computes half precision in half",
          _gqa(scores="q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])", result="weights @ v"),
          "right only to the precision of a computation in half precision"),
    Wrong("grouped_query_attention", "a global 8 x 8 mask, sliced",
          _gqa(hidden="torch.ones(8, 8, dtype=torch.bool).triu(1)[:T, :T]"),
          "a causal mask built for this call's T"),
    Wrong("grouped_query_attention", "a global 128 x 128 mask, sliced",
          _gqa(hidden="torch.ones(128, 128, dtype=torch.bool).triu(1)[:T, :T]"),
          "a causal mask built for this call's T"),
    Wrong("grouped_query_attention", "a global 256 x 256 mask, sliced (issue 44)",
          _gqa(hidden="torch.ones(256, 256, dtype=torch.bool).triu(1)[:T, :T]"),
          "a causal mask built for this call's T"),
    Wrong("grouped_query_attention", "edits the saved softmax in place",
          _gqa(result="(weights.mul_(1.0) @ v.float()).to(q.dtype)"),
          "the backward pass through your function failed"),
    Wrong("grouped_query_attention", "a pair of None", "return None, None", "expected a torch tensor"),
    Wrong("rms_norm", "edits a saved tensor in place", """\
work = x.float()
r = torch.rsqrt(work.pow(2).mean(-1, keepdim=True) + eps)
out = (work * r * weight.float()).to(x.dtype)
r.mul_(1.0)
return out""", "the backward pass through your function failed"),
    Wrong("rms_norm", "a pair of None", "return None, None", "expected a torch tensor"),
    Wrong("rms_norm", "computes bfloat16 in bfloat16", """\
return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight""",
          "right only to the precision of a computation in half precision"),
    Wrong("rms_norm", "computes bfloat16 in bfloat16 with rsqrt, the weight first", """\
return weight * (x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps))""",
          "right only to the precision of a computation in half precision"),
    Wrong("rms_norm", "a Python list", _rms(after="(out * weight).to(dtype).tolist()"),
          "expected a torch tensor"),
    Wrong("swiglu", "edits the saved gate in place", """\
import torch.nn.functional as F
g = x @ w_gate.T
hidden = F.silu(g) * (x @ w_up.T)
g.mul_(1.0)
return hidden @ w_down.T""", "the backward pass through your function failed"),
    Wrong("swiglu", "a pair of None", "return None, None", "expected a torch tensor"),
    Wrong("swiglu", "a 0-d tensor (the mean of the output)",
          _swiglu(out="(hidden @ w_down.T).mean()"), "the result has the wrong shape"),
]

WRONG += [
    Wrong("rms_norm", "the norm over sqrt(C), no eps", """\
work = x.float()
rms = work.norm(dim=-1, keepdim=True) / math.sqrt(x.shape[-1])
return (work / rms * weight.float()).to(x.dtype)""", "you left eps out"),
    Wrong("rms_norm", "the mean unsqueezed on the wrong axis", """\
work = x.float()
ms = work.pow(2).mean(-1).unsqueeze(0)
return (work / torch.sqrt(ms + eps) * weight.float()).to(x.dtype)""", "keepdim=True"),
    Wrong("swiglu", "SiLU after the down projection", _swiglu(
        hidden="(x @ w_gate.T) * (x @ w_up.T)", out="F.silu(hidden @ w_down.T)"),
          "(silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T"),
    Wrong("swiglu", "the down projection not transposed", _swiglu(out="hidden @ w_down"),
          "nn.Linear's orientation (out, in)"),
    Wrong("swiglu", "the up projection used twice",
          _swiglu(hidden="F.silu(x @ w_up.T) * (x @ w_up.T)"),
          "(silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T"),
    Wrong("grouped_query_attention", "every query head reads the first key/value head",
          _gqa(repeat="k[:, :1].expand(-1, q.shape[1], -1, -1), v[:, :1].expand(-1, q.shape[1], -1, -1)"),
          "causal softmax(q k^T / sqrt(D)) v"),
]

ALTERNATIVES = [
    ("rms_norm", "rsqrt, and the weight after converting back", """\
work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
normed = work * torch.rsqrt(work.square().mean(dim=-1, keepdim=True) + eps)
return normed.to(x.dtype) * weight"""),
    ("rms_norm", "normalised in float32, rounded, then times the weight (Llama's way)", """\
normed = (x.float() / torch.sqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
return weight * normed"""),
    ("rms_norm", "torch's nn.functional.rms_norm in float32", """\
work = x.float()
out = torch.nn.functional.rms_norm(work, (x.shape[-1],), weight.float(), eps)
return out.to(x.dtype)"""),
    ("swiglu", "einsum", """\
gate = torch.einsum("...c,fc->...f", x, w_gate)
up = torch.einsum("...c,fc->...f", x, w_up)
return torch.einsum("...f,cf->...c", torch.nn.functional.silu(gate) * up, w_down)"""),
    ("swiglu", "F.linear", """\
import torch.nn.functional as F
return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)"""),
    ("grouped_query_attention", "the fused kernel on repeated heads, in float32", """\
import torch.nn.functional as F
n_rep = q.shape[1] // k.shape[1]
k, v = (t.repeat_interleave(n_rep, dim=1).float() for t in (k, v))
return F.scaled_dot_product_attention(q.float(), k, v, is_causal=True).to(q.dtype)"""),
    ("grouped_query_attention", "grouped by a reshape, no copies", """\
B, H, T, D = q.shape
Hkv = k.shape[1]
qg = q.float().reshape(B, Hkv, H // Hkv, T, D)                     # (B, Hkv, n_rep, T, D)
scores = qg @ k.float()[:, :, None].transpose(-1, -2) / math.sqrt(D)
hidden = torch.ones(T, T, dtype=torch.bool).triu(1)
weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
return (weights @ v.float()[:, :, None]).reshape(B, H, T, D).to(q.dtype)"""),
]
