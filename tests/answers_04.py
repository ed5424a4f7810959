"""Answers to lesson 04's exercises (the residual stream), for testing its graders."""
from answers import Wrong

REFERENCE = {
    "block_forward": """\
attn_write, mlp_write = block.writes(x)
return x + attn_write + mlp_write""",
    "count_params": """\
from course_lib.costs import count_params as reference
return reference(config)""",
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
return torch.nn.functional.layer_norm(x.float(), x.shape[-1:], weight.float(), bias.float(),
                                      eps).to(x.dtype)"""


def _ln(var="(x - m).pow(2).mean(-1, keepdim=True)", normed="(x - m) / torch.sqrt(var + eps)",
        m="x.mean(-1, keepdim=True)", result="normed * weight + bias", before="x = x.float()"):
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
    Wrong("layer_norm", "stays in float16", _ln(before="pass"),
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
xf = x.float()
mean = xf.mean(dim=-1, keepdim=True)
var = xf.var(dim=-1, unbiased=False, keepdim=True)
return ((xf - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()).to(x.dtype)"""),
    ("layer_norm", "torch.var_mean with correction=0", """\
var, mean = torch.var_mean(x.to(torch.float32), dim=-1, keepdim=True, correction=0)
y = (x.to(torch.float32) - mean) / (var + eps).sqrt()
return torch.addcmul(bias.float(), y, weight.float()).type(x.dtype)"""),
]
