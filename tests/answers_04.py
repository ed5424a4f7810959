"""Answers to lesson 04's exercises (the residual stream), for testing its graders."""
from answers import Wrong

REFERENCE = {
    "block_forward": """\
x = x + block.attn(block.norm1(x))
return x + block.mlp(block.norm2(x))""",
    "count_params": """\
V, P, C, L = config.vocab_size, config.max_len, config.d_model, config.n_layers
return V * C + P * C + L * (12 * C * C + 9 * C) + 2 * C""",
}

_COUNT = "V, P, C, L = config.vocab_size, config.max_len, config.d_model, config.n_layers\n"

WRONG = [
    # block_forward
    Wrong("block_forward", "post-norm", """\
x = block.norm1(x + block.attn(x))
return block.norm2(x + block.mlp(x))""",
          "this is post-norm", inject=True),
    Wrong("block_forward", "no attention residual", """\
x = block.attn(block.norm1(x))
return x + block.mlp(block.norm2(x))""",
          "the first residual is missing"),
    Wrong("block_forward", "no MLP residual", """\
x = x + block.attn(block.norm1(x))
return block.mlp(block.norm2(x))""",
          "the second residual is missing"),
    Wrong("block_forward", "no residuals", """\
return block.mlp(block.norm2(block.attn(block.norm1(x))))""",
          "both residuals are missing"),
    Wrong("block_forward", "norm1 twice", """\
x = x + block.attn(block.norm1(x))
return x + block.mlp(block.norm1(x))""",
          "you used block.norm1 twice"),
    Wrong("block_forward", "MLP along the positions", """\
x = x + block.attn(block.norm1(x))
return x + block.mlp(block.norm2(x).transpose(1, 2)).transpose(1, 2)""",
          "the MLP transforms each position on its own"),
    Wrong("block_forward", "MLP reads the block's input", """\
h = x + block.attn(block.norm1(x))
return h + block.mlp(block.norm2(x))""",
          "the MLP must read the stream after the attention"),
    Wrong("block_forward", "adds to the normed stream", """\
x = block.norm1(x)
x = x + block.attn(x)
x = block.norm2(x)
return x + block.mlp(x)""",
          "not to its normalised copy"),
    Wrong("block_forward", "no norms", """\
x = x + block.attn(x)
return x + block.mlp(x)""",
          "normalise what each sublayer reads"),
    Wrong("block_forward", "only the writes", """\
a = block.attn(block.norm1(x))
return a + block.mlp(block.norm2(x + a))""",
          "not only what the sublayers wrote"),
    Wrong("block_forward", "in-place add", """\
x += block.attn(block.norm1(x))
return x + block.mlp(block.norm2(x))""",
          "changed its input x in place"),
    # count_params
    Wrong("count_params", "tied head counted twice", _COUNT + """\
return 2 * V * C + P * C + L * (12 * C * C + 5 * C + 4 * C) + 2 * C""",
          "it is tied", inject=True),
    Wrong("count_params", "forgets the MLP biases", _COUNT + """\
return V * C + P * C + L * (12 * C * C + 4 * C) + 2 * C""",
          "you left out the MLP's biases"),
    Wrong("count_params", "forgets every bias", _COUNT + """\
return V * C + P * C + L * (12 * C * C + 2 * C) + C""",
          "you left out the biases"),
    Wrong("count_params", "forgets the LayerNorms", _COUNT + """\
return V * C + P * C + L * (12 * C * C + 5 * C)""",
          "you left out the LayerNorms"),
    Wrong("count_params", "forgets the final LayerNorm", _COUNT + """\
return V * C + P * C + L * (12 * C * C + 5 * C + 4 * C)""",
          "the final LayerNorm"),
    Wrong("count_params", "forgets the position table", _COUNT + """\
return V * C + L * (12 * C * C + 5 * C + 4 * C) + 2 * C""",
          "the learned position table"),
    Wrong("count_params", "GPT-2's attention biases", _COUNT + """\
return V * C + P * C + L * (12 * C * C + 5 * C + 4 * C + 4 * C) + 2 * C""",
          "our attention has no biases"),
    Wrong("count_params", "the rule of thumb", _COUNT + """\
return 12 * L * C * C + V * C""",
          "that is the rule of thumb"),
    Wrong("count_params", "a 2C MLP", _COUNT + """\
return V * C + P * C + L * (8 * C * C + 3 * C + 4 * C) + 2 * C""",
          "named_parameters()"),
]

WRONG += [
    Wrong("block_forward", "under torch.no_grad", """\
with torch.no_grad():
    x = x + block.attn(block.norm1(x))
    return x + block.mlp(block.norm2(x))""",
          "the result carries no gradient"),
    Wrong("block_forward", "detaches the attention's write", """\
x = x + block.attn(block.norm1(x)).detach()
return x + block.mlp(block.norm2(x))""",
          "no gradient reaches"),
    Wrong("block_forward", "adds in place", """\
x += block.attn(block.norm1(x))
x += block.mlp(block.norm2(x))
return x""",
          "changed its input x in place"),
    Wrong("block_forward", "forgets to return", """\
x = x + block.attn(block.norm1(x))
x = x + block.mlp(block.norm2(x))""",
          "end with `return x`"),
    Wrong("count_params", "true division makes a float", _COUNT + """\
per_block = 12 * C * C + 13 * C
return V * C + P * C + L * per_block + 2 * C + 0 / 1""",
          "the count is not an integer"),
    Wrong("count_params", "counts the head and forgets the position table", _COUNT + """\
per_block = 12 * C * C + 13 * C
return V * C + V * C + L * per_block + 2 * C""",
          "list TinyLM's parameters"),
]

REFERENCE["layer_norm"] = """\
work = torch.promote_types(x.dtype, torch.float32)
return torch.nn.functional.layer_norm(x.to(work), x.shape[-1:], weight.to(work), bias.to(work),
                                      eps).to(x.dtype)"""


def _ln(var="(x - m).pow(2).mean(-1, keepdim=True)", normed="(x - m) / torch.sqrt(var + eps)",
        m="x.mean(-1, keepdim=True)", result="normed * weight + bias",
        before="x = x.to(torch.promote_types(dtype, torch.float32))"):
    """A layer_norm body with one piece swapped for a mistake."""
    return f"""\
dtype = x.dtype
{before}
m = {m}
var = {var}
normed = {normed}
return ({result}).to(dtype)"""


WRONG += [
    Wrong("layer_norm", "torch.var's unbiased default", _ln(var="x.var(-1, keepdim=True)"),
          "divide by C - 1 by default", inject=True),
    Wrong("layer_norm", "unbiased std with eps outside",
          _ln(normed="(x - m) / (x.std(-1, keepdim=True) + eps)"),
          "x.std() divides by C - 1"),
    Wrong("layer_norm", "eps outside the square root",
          _ln(normed="(x - m) / (torch.sqrt(var) + eps)"),
          "eps goes inside the square root"),
    Wrong("layer_norm", "eps hard-coded", _ln(normed="(x - m) / torch.sqrt(var + 1e-5)"),
          "use the eps argument"),
    Wrong("layer_norm", "divides by the variance", _ln(normed="(x - m) / (var + eps)"),
          "divide by the standard deviation"),
    Wrong("layer_norm", "forgets weight and bias", _ln(result="normed"),
          "apply the learned weight and bias"),
    Wrong("layer_norm", "forgets the bias", _ln(result="normed * weight"),
          "add `bias`"),
    Wrong("layer_norm", "bias before weight", _ln(result="(normed + bias) * weight"),
          "multiply by weight first"),
    Wrong("layer_norm", "no centring (RMSNorm)",
          _ln(m="0", var="x.pow(2).mean(-1, keepdim=True)"),
          "subtract each position's mean first"),
    Wrong("layer_norm", "over the first axis",
          _ln(m="x.mean(0, keepdim=True)", var="(x - m).pow(2).mean(0, keepdim=True)"),
          "not over the first axis"),
    Wrong("layer_norm", "over the whole tensor", _ln(m="x.mean()", var="(x - m).pow(2).mean()"),
          "not over the whole tensor"),
    Wrong("layer_norm", "no keepdim", _ln(m="x.mean(-1)", var="(x - m[..., None]).pow(2).mean(-1)",
                                          normed="(x - m) / torch.sqrt(var + eps)"),
          "keepdim=True"),
    Wrong("layer_norm", "normalises in place", """\
x -= x.mean(-1, keepdim=True)
x /= torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
return x * weight + bias""",
          "changed its input"),
    Wrong("layer_norm", "stays in float16",
          _ln(before="x = x.float() if dtype == torch.bfloat16 else x"),
          "in half precision (x - mean) ** 2 overflows"),
    Wrong("layer_norm", "returns float32 for half input", _ln().replace(".to(dtype)", ""),
          "the input's dtype"),
    Wrong("layer_norm", "a NumPy round trip", """\
import numpy as np
a = x.detach().double().numpy()
a = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + eps)
return (torch.from_numpy(a) * weight.double() + bias.double()).to(x.dtype)""",
          "gradient"),
    Wrong("layer_norm", "forgets to return", _ln().replace("return (", "out = ("),
          "end with `return`"),
]

ALTERNATIVES = [
    ("block_forward", "a loop over the sublayers", """\
for norm, sublayer in ((block.norm1, block.attn), (block.norm2, block.mlp)):
    x = x + sublayer(norm(x))
return x"""),
    ("count_params", "from the model's shapes", """\
V, P, C, L = config.vocab_size, config.max_len, config.d_model, config.n_layers
return V * C + P * C + L * (12 * C * C + 9 * C) + 2 * C"""),
    ("layer_norm", "var with unbiased=False", """\
xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
mean = xf.mean(dim=-1, keepdim=True)
var = xf.var(dim=-1, unbiased=False, keepdim=True)
return ((xf - mean) * torch.rsqrt(var + eps) * weight.to(xf.dtype) + bias.to(xf.dtype)).to(x.dtype)"""),
    ("layer_norm", "torch.var_mean with correction=0", """\
work = torch.float64 if x.dtype == torch.float64 else torch.float32
var, mean = torch.var_mean(x.to(work), dim=-1, keepdim=True, correction=0)
y = (x.to(work) - mean) / (var + eps).sqrt()
return torch.addcmul(bias.to(work), y, weight.to(work)).type(x.dtype)"""),
]

# Kinds a class found (issue 21), each with more than one instance.
WRONG += [
    # the course's own block is the answer key, however it is reached
    Wrong("block_forward", "returns block(x)", "return block(x)", "calls the block itself"),
    Wrong("block_forward", "Block.forward on the block", """\
from course_lib.blocks import Block
return Block.forward(block, x)""", "calls the block itself"),
    Wrong("block_forward", "x plus block.writes(x)", """\
attn_write, mlp_write = block.writes(x)
return x + attn_write + mlp_write""", "calls the block itself"),
    # the return type: a tensor, not an array or a list
    Wrong("block_forward", "returns a NumPy array", """\
x = x + block.attn(block.norm1(x))
return (x + block.mlp(block.norm2(x))).detach().numpy()""", "should be a torch tensor, got a NumPy array"),
    Wrong("block_forward", "returns a list of rows", """\
x = x + block.attn(block.norm1(x))
return list(x + block.mlp(block.norm2(x)))""", "should be a torch tensor"),
    # count_params: the course's own count, parts left out, the wrong kind of number
    Wrong("count_params", "costs.count_params", """\
from course_lib import costs
return costs.count_params(config)""", "calls course_lib's own count"),
    Wrong("count_params", "the sum of param_breakdown", """\
from course_lib.costs import param_breakdown
return sum(param_breakdown(config).values())""", "calls course_lib's own count"),
    Wrong("count_params", "one block too few", _COUNT + """\
return V * C + P * C + (L - 1) * (12 * C * C + 9 * C) + 2 * C""", "one block too few"),
    Wrong("count_params", "range(1, L) over the blocks", _COUNT + """\
return V * C + P * C + sum(12 * C * C + 9 * C for _ in range(1, L)) + 2 * C""", "one block too few"),
    Wrong("count_params", "forgets the fused qkv", _COUNT + """\
return V * C + P * C + L * (9 * C * C + 9 * C) + 2 * C""", "fused q, k, v matrix"),
    Wrong("count_params", "attention as qkv only", _COUNT + """\
attention = 3 * C * C
return V * C + P * C + L * (attention + 8 * C * C + 9 * C) + 2 * C""", "output projection, attn.proj"),
    Wrong("count_params", "a NumPy integer", _COUNT + """\
return np.int64(V * C + P * C + L * (12 * C * C + 9 * C) + 2 * C)""", "should be a Python int"),
    Wrong("count_params", "np.prod of the shapes", _COUNT + """\
shapes = [(V, C), (P, C)] + [(12 * C * C + 9 * C, 1)] * L + [(2, C)]
return sum(np.prod(s) for s in shapes)""", "should be a Python int"),
    Wrong("count_params", "a tensor", _COUNT + """\
return torch.tensor(V * C + P * C + L * (12 * C * C + 9 * C) + 2 * C)""", "should be a Python int"),
    # layer_norm: E[x^2] - E[x]^2, float64 rounded through float32, half computed in half
    Wrong("layer_norm", "E[x^2] - E[x]^2", _ln(var="(x * x).mean(-1, keepdim=True) - m * m"),
          "E[x^2] - E[x]^2"),
    Wrong("layer_norm", "E[x^2] - E[x]^2 with torch.square", _ln(
        var="torch.square(x).mean(-1, keepdim=True) - torch.square(m)"), "E[x^2] - E[x]^2"),
    Wrong("layer_norm", "always in float32", _ln(before="x = x.float()"),
          "right only to float32 precision"),
    Wrong("layer_norm", "float32 weights", """\
xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
m = xf.mean(-1, keepdim=True)
var = (xf - m).pow(2).mean(-1, keepdim=True)
return ((xf - m) / torch.sqrt(var + eps) * weight.float() + bias.float()).to(x.dtype)""",
          "right only to float32 precision"),
    Wrong("layer_norm", "weights rounded to 3 decimals", """\
xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
m = xf.mean(-1, keepdim=True)
var = (xf - m).pow(2).mean(-1, keepdim=True)
out = (xf - m) / torch.sqrt(var + eps) * weight.round(decimals=3) + bias.round(decimals=3)
return out.to(x.dtype)""", "the result is not right"),
    Wrong("layer_norm", "bfloat16 computed in bfloat16", """\
m = x.mean(-1, keepdim=True)
var = (x - m).pow(2).mean(-1, keepdim=True)
return (x - m) / torch.sqrt(var + eps) * weight + bias""", "each step rounded to half precision"),
    # computes bfloat16 in bfloat16 after an exact centring: within the tolerance, off in ulps
    Wrong("layer_norm", "bfloat16 computed in bfloat16 once centred", """\
work = torch.promote_types(x.dtype, torch.float32)
centred = (x.to(work) - x.to(work).mean(-1, keepdim=True))
if x.dtype == torch.bfloat16:
    centred = centred.to(x.dtype)
else:
    weight, bias = weight.to(work), bias.to(work)
out = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight + bias
return out.to(x.dtype)""", "each step rounded to half precision"),
    Wrong("layer_norm", "in-place exp of a tensor autograd needs", """\
xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
m = xf.mean(-1, keepdim=True)
centred = xf - m
sq = centred.pow(2)
var = sq.mean(-1, keepdim=True)
out = centred / torch.sqrt(var + eps)
out = (out * weight + bias).to(x.dtype)
centred.mul_(1.0)
return out""", "in-place edit"),
]

ALTERNATIVES += [
    ("block_forward", "two residual helpers", """\
def residual(stream, norm, sublayer):
    return stream + sublayer(norm(stream))
return residual(residual(x, block.norm1, block.attn), block.norm2, block.mlp)"""),
    ("count_params", "summed term by term", """\
C = config.d_model
per_block = 3 * C * C + C * C + (4 * C * C + 4 * C) + (4 * C * C + C) + 4 * C
total = config.vocab_size * C + config.max_len * C + config.n_layers * per_block + 2 * C
return int(total)"""),
    ("layer_norm", "rsqrt with the dtype promoted", """\
work = torch.promote_types(x.dtype, torch.float32)
xw, w, b = x.to(work), weight.to(work), bias.to(work)
centred = xw - xw.mean(dim=-1, keepdim=True)
inv = torch.rsqrt(torch.mean(centred * centred, dim=-1, keepdim=True) + eps)
return (centred * inv * w + b).to(x.dtype)"""),
]
