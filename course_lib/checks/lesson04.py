"""Checkers for lesson 04, the residual stream.

Also the helpers that lessons 03 to 07 share: `own_messages` (a checker fails only with
its own feedback, never with an error from torch), `observed_call` (a call of the learner's
function that also reports what the checker must know of it, called directly or from the
grader alike) and `python_int`.
"""
import numbers

import numpy as np
import torch

from course_lib.blocks import Block
from course_lib.checks.core import (HALF, Checker, backward, checker, gradients_flow, matches,
                                    name_the_mistake, seed, tensor_result, tensors_close)
from course_lib.checks.domain import each
from course_lib.costs import approx_params, count_params, param_breakdown
from course_lib.model import ModelConfig


def own_messages(exercise):
    """Decorate a checker so that an error raised while checking the learner's result becomes
    feedback in the checker's own form: core.checker, the one mechanism every lesson uses."""
    def decorate(check):
        wrapped = checker(check)
        if not check.__name__.endswith(exercise):
            raise ValueError(f"own_messages({exercise!r}) decorates {check.__name__}")
        return wrapped
    return decorate


def observed_call(c, *args, case, watch=(), observe=None, catch=False, none_hint=None,
                  crash_hint=None, mutable=(), **kwargs):
    """c.call(*args, **kwargs), also reporting what the checker must know of the call. Returns
    (result, seen):

    - seen["called"]: the names of the functions in `watch` that ran during the call;
    - seen["observed"]: observe(result, *args), a `learner_side` function run where the call
      ran, after it (or after its crash);
    - seen["raised"]: with catch=True, (type name, message) of what the learner's function
      raised, for the caller to diagnose after what `observe` saw (the result is then None);
      without catch, a crash is c.call's own feedback. None otherwise.

    A None result fails as c.call fails it, with `none_hint`.
    """
    __tracebackhide__ = True
    result = c.call(*args, case=case, watch=watch, observe=observe, catch=catch, none_hint=none_hint,
                    crash_hint=crash_hint, mutable=mutable, **kwargs)
    return result, {"called": c.seen.get("watched", []), "observed": c.seen.get("observed"),
                    "raised": c.seen.get("raised")}


def python_int(c, got, case, what, hint):
    """Fail unless `got` is a Python int (a NumPy or torch number, a float or a bool is not)."""
    __tracebackhide__ = True
    if isinstance(got, bool) or not isinstance(got, (numbers.Real, np.generic, torch.Tensor)):
        c.fail(f"expected {what} as an int", case=case, got=type(got).__name__, hint=hint)
    if isinstance(got, torch.Tensor) or isinstance(got, np.generic):
        c.fail(f"{what} should be a Python int, got a {type(got).__module__.split('.')[0]} "
               f"{type(got).__name__}", case=case, got=got,
               hint="convert it with int(...): a NumPy or torch number is not an int, and "
                    "np.prod or a tensor's sum returns one")
    if not isinstance(got, int):
        c.fail(f"{what} is not an integer", case=case, got=f"{got!r} ({type(got).__name__})",
               hint=hint)
    c.ok()
    return got


def tensor_as_array(c, value, what, case, hint):
    """A torch tensor result as a float64 NumPy array, or feedback that it is not a tensor."""
    __tracebackhide__ = True
    if isinstance(value, np.ndarray):
        c.fail(f"{what} should be a torch tensor, got a NumPy array", case=case,
               hint="stay in torch: " + hint)
    if not isinstance(value, torch.Tensor):
        c.fail(f"{what} should be a torch tensor", case=case, got=type(value).__name__,
               hint=hint)
    return value.detach().cpu().double().numpy()


def _test_block(d_model, n_heads, rng_seed):
    """A float64 block whose every parameter is non-trivial: LayerNorm weights far from 1,
    non-zero biases, weights scaled so each sublayer writes about as much as it reads.
    Drawn from `rng_seed` alone: every parameter is overwritten from its own generator."""
    block = Block(d_model, n_heads).double().eval()
    gen = torch.Generator().manual_seed(rng_seed)
    with torch.no_grad():
        for name, p in block.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            if p.ndim == 2:
                p.copy_(noise / p.shape[1] ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.5 * noise)
            else:
                p.copy_(0.5 * noise)
            p.requires_grad_(False)
    return block


def _block_variants(x, block):
    """What the right answer and each usual mistake return, by name."""
    n1, n2, attn, mlp = block.norm1, block.norm2, block.attn, block.mlp
    h = x + attn(n1(x))
    post = n1(x + attn(x))
    normed1 = n1(x) + attn(n1(x))
    return {
        "right": h + mlp(n2(h)),
        "no attention residual": attn(n1(x)) + mlp(n2(attn(n1(x)))),
        "no MLP residual": mlp(n2(h)),
        "no residuals": mlp(n2(attn(n1(x)))),
        "post-norm": n2(post + mlp(post)),
        "norm1 twice": h + mlp(n1(h)),
        "norms swapped": x + attn(n2(x)) + mlp(n1(x + attn(n2(x)))),
        "MLP reads the input": h + mlp(n2(x)),
        "adds to the normed stream": n2(normed1) + mlp(n2(normed1)),
        "no norms": x + attn(x) + mlp(x + attn(x)),
        "only the writes": attn(n1(x)) + mlp(n2(h)),
    }


_BLOCK_HINTS = {
    "no attention residual": "the first residual is missing: the attention's output must be "
                             "added to the stream it read, not replace it",
    "no MLP residual": "the second residual is missing: return the stream plus what the MLP "
                       "wrote, not the MLP's output alone",
    "no residuals": "both residuals are missing: each sublayer's output must be added to the "
                    "stream (x = x + ...), not replace it",
    "post-norm": "this is post-norm, norm(x + sublayer(x)); the block is pre-norm: each "
                 "sublayer reads a normalised copy of the stream and adds its output to the "
                 "stream itself, which is never normalised",
    "norm1 twice": "you used block.norm1 twice: the MLP has its own LayerNorm, block.norm2, "
                   "with its own weights",
    "norms swapped": "the norms are swapped: block.norm1 goes before the attention, "
                     "block.norm2 before the MLP",
    "MLP reads the input": "the MLP must read the stream after the attention has written to "
                           "it (x = x + attn(...) first), not the block's input",
    "adds to the normed stream": "add each sublayer's output to the stream x itself, not to "
                                 "its normalised copy",
    "no norms": "normalise what each sublayer reads: the attention reads the stream through "
                "block.norm1, the MLP through block.norm2",
    "only the writes": "return the stream, x plus both writes, not only what the sublayers "
                       "wrote",
}

_AXIS_HINT = ("block.attn and block.mlp take the stream as (B, T, C) and work on its last axis "
              "C; the MLP transforms each position on its own, so give it the normalised stream "
              "as it is, without transposing or reshaping")


_THE_BLOCK = (Block.forward, Block.writes)   # course_lib's own block: the answer key
_CALLED_BLOCK = ("build the block from its parts, block.norm1, block.attn, block.norm2 and "
                 "block.mlp: block(x), block.forward and block.writes are course_lib's own "
                 "block, the answer key, and earn no credit")


@own_messages("block_forward")
def check_block_forward(fn):
    """Check block_forward(x, block): the pre-norm block with both residuals, from its parts."""
    __tracebackhide__ = True
    c = Checker("block_forward", fn)
    for B, T, C, H, n in ((2, 5, 8, 2, 0), (3, 4, 12, 3, 1)):
        _block_one(c, _block_input(B, T, C, H, seed(n), seed(100 + n)), _block_case(B, T, C, H))
    # any batch, length, width and number of heads, inputs of any spread and mean
    each(c, _draw_block, _block_one, n=8, stream=40)
    c.done()


def _block_input(B, T, C, H, block_seed, x_seed, scale=2.0, offset=0.5):
    block = _test_block(C, H, block_seed)
    gen = torch.Generator().manual_seed(x_seed)
    return block, torch.randn(B, T, C, generator=gen, dtype=torch.float64) * scale + offset


def _block_case(B, T, C, H, scale=2.0, offset=0.5):
    return (f"x of shape (B, T, C) = ({B}, {T}, {C}), spread {scale:g} about {offset:g}, a "
            f"Block({C}, n_heads={H}) with random weights, biases and LayerNorm weights")


def _draw_block(d):
    B, T, H, D = d.integer(1, 3), d.length(small=12, tables=(128,), p_long=0.15), d.integer(
        1, 4), d.integer(1, 8)
    scale, offset = d.choice((2.0, 0.1, 30.0)), d.choice((0.5, 0.0, -20.0))
    return (_block_input(B, T, H * D, H, d.seed(), d.seed(), scale, offset),
            _block_case(B, T, H * D, H, scale, offset))


def _block_one(c, args, case):
    """Check block_forward on one (block, x), gradients included."""
    __tracebackhide__ = True
    block, x = args
    fn = c.fn
    with torch.no_grad():
        variants = {k: v.numpy() for k, v in _block_variants(x, block).items()}
        got, seen = observed_call(c, x, block, case=case, crash_hint=_AXIS_HINT,
                                  watch=_THE_BLOCK,
                                  none_hint="end with `return x`, the stream after both "
                                            "sublayers")
    if seen["called"]:
        c.fail(f"your function calls the block itself ({', '.join(seen['called'])})",
               case=case, hint=_CALLED_BLOCK)
    c.ok()
    got = tensor_as_array(c, got, "the result", case,
                          hint="return the stream x, a tensor of shape (B, T, C)")
    want = variants["right"]
    c.shape(got, want.shape, "the result", case, hint=_AXIS_HINT)
    c.finite(got, "the result", case, hint="use the block's own parts on x; nothing here "
                                           "should overflow")
    if not matches(got, want):
        hint = next((h for name, h in _BLOCK_HINTS.items() if matches(got, variants[name])),
                    "two residual steps: the attention reads the stream through norm1 and "
                    "adds its output to it, then the MLP reads the updated stream through "
                    "norm2 and adds its output")
        c.fail("the block's output is not right", case=case, expected=want[0, 0],
               got=got[0, 0], hint=hint + " (shown: batch 0, position 0)")
    c.ok()
    _check_gradients(c, fn, x, block, case)


def _check_gradients(c, fn, x, block, case):
    """Fail unless a loss on the learner's output sends gradients to x and every parameter."""
    __tracebackhide__ = True
    for p in block.parameters():
        p.requires_grad_(True)
        p.grad = None
    x = x.clone().requires_grad_(True)
    case = case + ", with gradients on"
    out = c.call(x, block, case=case, crash_hint=_AXIS_HINT)
    grads = c.follow(backward, inputs=[0, 1], weight=2 * out.detach().double()) \
        if isinstance(out, torch.Tensor) else {}
    for p in block.parameters():
        p.requires_grad_(False)
    if "raised" in grads:
        c.fail(f"the backward pass through your function failed: {grads['raised']}", case=case,
               hint="build the result from the block's parts with ordinary tensor operations, "
                    "without editing in place a tensor autograd still needs")
    if not grads.get("graph"):
        c.fail("the result carries no gradient", case=case,
               hint="build the result from the block's parts with ordinary tensor operations: "
                    "no torch.no_grad(), .detach(), .numpy() or .item() inside the function, "
                    "or training could not learn through it")
    cut = _cut(grads["grads"], block)
    if cut:
        c.fail("no gradient reaches " + ", ".join(cut[:3]) + ("..." if len(cut) > 3 else ""),
               case=case,
               hint="something in your function cuts the graph (.detach(), torch.no_grad(), "
                    ".data, a NumPy round trip) or leaves a sublayer out: every weight of the "
                    "block must get a gradient")
    c.ok()


def _cut(grads, block):
    """What got no gradient from a backward pass through sum(out ** 2) (weight 2 out): the input x,
    then the block's parameters by name (`grads`: backward's, for x and the block)."""
    x_grad, params = grads
    cut = [name for name, _ in block.named_parameters()
           if params.get(name) is None or not params[name].any()]
    if x_grad is None or not x_grad.any():
        cut.insert(0, "the input x")
    return cut


_THE_COUNT = (count_params, param_breakdown)   # course_lib's own count: the answer key


def _count_mistakes(config):
    """The right count, and (count, hint) for each usual slip; two slips may give one count."""
    V, P, C, L = config.vocab_size, config.max_len, config.d_model, config.n_layers
    exact = count_params(config)
    return exact, [
        (exact - L * 5 * C, "you left out the MLP's biases: up has 4C and down has C, in every layer"),
        (exact - L * 5 * C - L * 2 * C - C, "you left out the biases: the MLP's (4C + C per "
                                            "layer) and the LayerNorms' (a bias of C in each)"),
        (exact - L * 4 * C - 2 * C, "you left out the LayerNorms: each has a weight and a bias of "
                                    "C; there are two per block and a final one before the head"),
        (exact - L * 4 * C, "you left out the blocks' LayerNorms: two per block, each with a "
                            "weight and a bias of C"),
        (exact - 2 * C, "you left out the final LayerNorm before the head (a weight and a bias of C)"),
        (exact + V * C, "you counted the head's V x C matrix, but it is tied: the head reuses "
                        "the token embedding's matrix, so it adds no parameters"),
        (exact - P * C, "you left out the learned position table: max_len rows of C"),
        (exact - L * 3 * C * C, "you left out the attention's fused q, k, v matrix, attn.qkv, "
                                "of shape (3C, C) in every layer"),
        (exact - L * C * C, "you left out the attention's output projection, attn.proj, of "
                            "shape (C, C) in every layer"),
        (exact - (12 * C * C + 9 * C), "you counted one block too few: there are n_layers "
                                       "blocks, each with 12 C^2 + 9 C parameters"),
        (exact + (12 * C * C + 9 * C), "you counted one block too many: there are n_layers "
                                       "blocks, each with 12 C^2 + 9 C parameters"),
        (exact + L * 4 * C, "our attention has no biases (bias=False on qkv and proj); GPT-2's "
                            "has, ours does not"),
        (approx_params(n_layers=L, d_model=C, vocab_size=V),
         "that is the rule of thumb 12 L C^2 + V C; the exact count also has the biases, the "
         "LayerNorms and the position table"),
    ]


@own_messages("count_params")
def check_count_params(fn):
    """Check count_params(config): the exact number of parameters of TinyLM(config)."""
    __tracebackhide__ = True
    c = Checker("count_params", fn)
    small = ModelConfig(vocab_size=50, max_len=7, d_model=24, n_heads=3, n_layers=3)
    _, seen = observed_call(c, small, case="a small ModelConfig", watch=_THE_COUNT,
                            none_hint="end with `return total`, the count as an int")
    if seen["called"]:
        c.fail(f"your function calls course_lib's own count ({', '.join(seen['called'])})",
               case="a small ModelConfig",
               hint="count from the config's fields yourself: costs.count_params and "
                    "costs.param_breakdown are the answer key and earn no credit")
    c.ok()
    configs = (ModelConfig(vocab_size=50, max_len=7, d_model=24, n_heads=3, n_layers=3),
               ModelConfig(vocab_size=256, max_len=16, d_model=32, n_heads=4, n_layers=5),
               ModelConfig(vocab_size=50257, max_len=1024, d_model=768, n_heads=12, n_layers=12))
    found = []
    for config in configs:
        case = (f"ModelConfig(vocab_size={config.vocab_size}, max_len={config.max_len}, "
                f"d_model={config.d_model}, n_heads={config.n_heads}, n_layers={config.n_layers})")
        got = c.call(config, case=case, none_hint="end with `return total`, the count as an int")
        python_int(c, got, case, "the count",
                   hint="a count of parameters is a whole number: use // rather than /, and "
                        "return int(total)")
        found.append((case, got, *_count_mistakes(config)))
    for case, got, exact, _ in found:
        if got != exact:
            c.fail("the count is not right", case=case, expected=exact, got=got,
                   hint=_count_hint(found))
        c.ok()
    # any vocabulary, table of positions, width, heads and depth
    each(c, _draw_config, _count_one, n=30, stream=41)
    c.done()


def _config_case(config):
    return (f"ModelConfig(vocab_size={config.vocab_size}, max_len={config.max_len}, "
            f"d_model={config.d_model}, n_heads={config.n_heads}, n_layers={config.n_layers})")


def _draw_config(d):
    H = d.integer(1, 16)
    config = ModelConfig(vocab_size=d.size(1, 200_000, small=300), max_len=d.size(1, 131_072, small=64),
                         d_model=H * d.size(1, 256, small=16), n_heads=H,
                         n_layers=d.size(1, 96, small=6))
    return config, _config_case(config)


def _count_one(c, config, case):
    """Check count_params on one config."""
    __tracebackhide__ = True
    got = c.call(config, case=case, none_hint="end with `return total`, the count as an int")
    python_int(c, got, case, "the count",
               hint="a count of parameters is a whole number: use // rather than /, and "
                    "return int(total)")
    exact, mistakes = _count_mistakes(config)
    if got != exact:
        c.fail("the count is not right", case=case, expected=exact, got=got,
               hint=_count_hint([(case, got, exact, mistakes)]))
    c.ok()


def _count_hint(found):
    """The one slip that explains the learner's count on every config, or a way to look."""
    named = set.intersection(*({hint for value, hint in mistakes if value == got}
                               for _, got, exact, mistakes in found if got != exact))
    if len(named) == 1:
        return named.pop()
    return ("list TinyLM's parameters to see what you missed: "
            "[(n, p.shape) for n, p in TinyLM(config).named_parameters()] on a small config")


# ---------------------------------------------------------------------------
# layer_norm
# ---------------------------------------------------------------------------

def _layer_norm(x, w, b, eps):
    """The reference: each position's C features to mean 0, variance 1 (dividing by C), then w, b."""
    centred = x - x.mean(-1, keepdim=True)
    return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * w + b


def _layer_norm_mistakes(x, w, b, eps):
    """What the usual mistakes return, in float64, with the hint for each; the first match wins."""
    m = x.mean(-1, keepdim=True)
    var = (x - m).pow(2).mean(-1, keepdim=True)
    unbiased = x.var(-1, keepdim=True)                    # torch's default: divides by C - 1
    return [
        ((x - m) / torch.sqrt(unbiased + eps) * w + b,
         "torch.var and x.var() divide by C - 1 by default (the unbiased estimate); LayerNorm "
         "divides by C: ask for the biased estimate (unbiased=False, or correction=0), or "
         "average the squared deviations from the mean yourself"),
        ((x - m) / (x.std(-1, keepdim=True) + eps) * w + b,
         "x.std() divides by C - 1 (unbiased), and eps belongs inside the square root: "
         "(x - mean) / sqrt(var + eps), with var the mean of (x - mean) ** 2 over the last axis"),
        ((x - m) / (torch.sqrt(var) + eps) * w + b,
         "eps goes inside the square root: (x - mean) / sqrt(var + eps); you added it after "
         "taking the root"),
        ((x - m) / torch.sqrt(var + 1e-5) * w + b,
         "use the eps argument, not a fixed 1e-5"),
        ((x - m) / torch.sqrt(var) * w + b,
         "you left eps out: add it to the variance, inside the square root"),
        ((x - m) / (var + eps) * w + b,
         "divide by the standard deviation, sqrt(var + eps), not by the variance"),
        (_layer_norm(x, 1.0, 0.0, eps),
         "apply the learned weight and bias after normalising: ... * weight + bias"),
        (_layer_norm(x, 1.0, b, eps),
         "multiply the normalised x by `weight` (one gain per feature) before adding the bias"),
        (_layer_norm(x, w, 0.0, eps),
         "add `bias` (one per feature) after multiplying by the weight"),
        ((_layer_norm(x, 1.0, 0.0, eps) + b) * w,
         "multiply by weight first, then add bias: normed * weight + bias"),
        (x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w + b,
         "subtract each position's mean first: LayerNorm centres x, (x - mean) / sqrt(var + eps)"),
    ] + [
        ((x - x.mean(dim, keepdim=True))
         / torch.sqrt((x - x.mean(dim, keepdim=True)).pow(2).mean(dim, keepdim=True) + eps) * w + b,
         "normalise over the last axis only (the C features of each position), one mean and "
         "one variance per position, not " + what)
        for dim, what in ((0, "over the first axis"), (tuple(range(x.ndim)), "over the whole tensor"),
                          (tuple(range(x.ndim - 1)), "over the batch and positions"))
    ]


_LN_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-5, torch.float16: 1e-2,
                 torch.bfloat16: 3e-2}

_FLOAT64_HINT = ("x is float64 and is checked to float64 precision (1e-9): compute in x's own "
                 "dtype; only float16 and bfloat16 go up to float32 (x.float()), since rounding "
                 "float64 through float32 (or float32 weights) loses half its digits")

_CANCEL_HINT = ("with a mean of 100 or more, var = E[x^2] - E[x]^2 subtracts two large, nearly "
                "equal numbers and loses most of its digits: subtract the mean first, then "
                "average the squares of those deviations")


def _ulps_apart(got, ref, magnitude):
    """The largest distance of got from ref in bfloat16 units in the last place of `magnitude`;
    a difference within float32's reach of 0 (1e-5) counts as none."""
    scale = torch.exp2(torch.floor(torch.log2(magnitude.abs().clamp_min(1e-30))) - 7)
    return float((((got - ref).abs() - 1e-5).clamp_min(0) / scale).max())


def _ln_in_bfloat16(got, want, x, w, b, eps):
    """Whether a bfloat16 layer_norm was computed in bfloat16 rather than in float32.

    Computed in float32 and rounded once, a result is within one unit in the last place of the
    exact value rounded; so is the normalised x rounded to bfloat16, then times the weight and
    plus the bias in bfloat16 (units taken of the larger of the result and normalised x times
    weight, since the bias can cancel it). Computed in bfloat16 from the centring on, some of
    8,192 values drift two units or more from both: 300 seeds measured, every one.
    """
    normed = _layer_norm(x.double(), 1.0, 0.0, eps)
    magnitude = torch.maximum(want.abs(), (normed * w.double()).abs())
    once = want.to(torch.bfloat16).double()
    rounded_first = (normed.to(torch.bfloat16) * w + b).double()
    return min(_ulps_apart(got, once, magnitude), _ulps_apart(got, rounded_first, magnitude)) > 1.5


def _ln_close(got, want, dtype, atol=None):
    """Equal to the reference to the tolerance of dtype (float64: 1e-9), atol at least `atol`."""
    tol = _LN_TOLERANCE[dtype]
    return got.shape == want.shape and bool(torch.allclose(got, want, atol=max(tol, atol or 0),
                                                           rtol=tol))


@own_messages("layer_norm")
def check_layer_norm(fn):
    """Check layer_norm(x, weight, bias, eps=1e-5): LayerNorm over the last axis, by hand."""
    __tracebackhide__ = True
    c = Checker("layer_norm", fn)
    gen = torch.Generator().manual_seed(seed(4))
    cases = [  # shape, dtype, scale, offset, eps, atol (None: the dtype's own)
        ((2, 3, 6), torch.float32, 0.3, -0.2, 0.5, None),   # a large eps against a small spread
        ((2, 3, 8), torch.float32, 3.0, 1.5, None, None),
        ((5, 4), torch.float64, 2.0, 100.0, None, None),    # C = 4: C - 1 is far from C
        ((4, 1, 6), torch.float64, 0.01, 1.0, 1e-3, None),
        ((3, 16), torch.float32, 1.0, 100.0, None, 2e-4),   # E[x^2] - E[x]^2 cancels
        ((4, 6), torch.float64, 1.0, 1e5, None, None),      # and in float64 too
        ((64, 128), torch.bfloat16, 1.0, 0.5, None, None),  # bfloat16 measured in ulps
        ((3, 8), torch.bfloat16, 1.0, 30.0, None, None),    # the mean rounds away in bf16
        ((2, 8), torch.float16, 300.0, 0.0, None, None),    # the squares overflow float16
    ]
    for shape, dtype, scale, offset, eps, atol in cases:
        _ln_one(c, _ln_input(gen, shape, dtype, scale, offset, eps, atol))
    # any leading axes and width, every dtype, spreads from 0.01 to 300 (the float16 squares
    # overflow), means up to 1e5 times the spread in float64, and eps from 1e-5 to 0.5
    each(c, _draw_ln, lambda c, args, case: _ln_one(c, args), n=25, stream=42)
    x = torch.randn(3, 8, generator=gen) + 0.5
    w = 1 + 0.5 * torch.randn(8, generator=gen)
    b = 0.5 * torch.randn(8, generator=gen)
    gradients_flow(c, fn, (x, w, b), ("x", "weight", "bias"),
                lambda x, w, b: _layer_norm(x, w, b, 1e-5),
                "layer_norm(x, weight, bias) with x, weight and bias requiring gradients")
    c.done()


_LN_FORMULA = "(x - mean) / sqrt(var + eps) * weight + bias, mean and var over the last axis"


def _ln_input(gen, shape, dtype, scale, offset, eps, atol):
    """(x, weight, bias, eps, atol, offset, case) for layer_norm, drawn from `gen`."""
    x = ((torch.randn(*shape, generator=gen, dtype=torch.float64) * scale + offset)).to(dtype)
    w = (1 + 0.5 * torch.randn(shape[-1], generator=gen, dtype=torch.float64)).to(dtype)
    b = (0.5 * torch.randn(shape[-1], generator=gen, dtype=torch.float64)).to(dtype)
    case = (f"layer_norm(x, weight, bias{'' if eps is None else f', eps={eps}'}), x of shape "
            f"{tuple(shape)} in {str(dtype).replace('torch.', '')}, mean about {offset:g}, spread "
            f"about {scale}")
    return x, w, b, eps, atol, offset, case


def _draw_ln(d):
    shape = tuple(d.integer(1, 4) for _ in range(d.integer(0, 2))) + (d.size(2, 256, small=16),)
    dtype = d.choice((torch.float32, torch.float64, torch.bfloat16, torch.float16))
    scale = d.choice({torch.float16: (1.0, 0.3, 300.0)}.get(dtype, (1.0, 0.01, 3.0, 300.0)))
    offset = d.choice((0.0, scale, -3 * scale) + ((100 * scale, 1e5 * scale)
                                                  if dtype == torch.float64 else ()))
    eps = d.choice((None, 1e-3, 0.5))
    gen = torch.Generator().manual_seed(d.seed())
    args = _ln_input(gen, shape, dtype, scale, offset, eps, None)
    return args, args[-1]


def _ln_one(c, args):
    """Check layer_norm on one input."""
    __tracebackhide__ = True
    x, w, b, eps, atol, offset, case = args
    shape, dtype, formula = tuple(x.shape), x.dtype, _LN_FORMULA
    kwargs = {} if eps is None else {"eps": eps}
    out = c.call(x, w, b, case=case, **kwargs,
                 crash_hint="take the mean and variance over the last axis with "
                            "keepdim=True, so the (..., 1) results broadcast against x "
                            "(..., C); weight and bias are (C,)",
                 none_hint="end with `return` and the normalised tensor")
    got = tensor_result(c, out, x, shape, case, "the normalised tensor",
                  "in float16, (x - mean) ** 2 overflows past 65504: compute in float32 "
                  "(x.float()), then convert the result back with .to(x.dtype)")
    e = 1e-5 if eps is None else eps
    want = _layer_norm(x.double(), w.double(), b.double(), e)
    if dtype == torch.bfloat16 and _ln_close(got, want, dtype, atol) and _ln_in_bfloat16(
            got, want, x, w, b, e):
        c.fail("the result is right only to the precision of a computation in half "
               "precision", case=case, expected=want, got=got,
               hint="for float16 or bfloat16 input, compute in float32 and convert the "
                    "result back to x's dtype once, at the end: each step rounded to half "
                    "precision adds its own error")
    if not _ln_close(got, want, dtype, atol):
        mistakes = _layer_norm_mistakes(x.double(), w.double(), b.double(), e)
        if dtype in HALF:
            with torch.no_grad():
                in_half = _layer_norm(x, w, b, e).double()
            mistakes.insert(0, (in_half, "in half precision (x - mean) ** 2 overflows or "
                                         "rounds away: compute it in float32 (x.float()) "
                                         "and convert the result back with .to(x.dtype)"))
        for wrong, hint in mistakes:   # a mistake that is right here to 1e-5 names nothing
            if tensors_close(got, wrong, dtype) and not tensors_close(wrong, want, dtype):
                c.fail("the result is not right", case=case, expected=want, got=got,
                       hint=hint)
        if dtype == torch.float64 and bool(torch.allclose(got, want, atol=1e-4, rtol=1e-4)):
            c.fail("the result is right only to float32 precision", case=case,
                   expected=want, got=got, hint=_FLOAT64_HINT)
        if abs(offset) >= 100 and bool(torch.allclose(got, want, atol=0.05, rtol=0.05)):
            c.fail("the result is nearly right, but not for x far from 0", case=case,
                   expected=want, got=got, hint=_CANCEL_HINT)
        name_the_mistake(c, got, want, [], dtype, formula, case)
    c.ok()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "layer_norm": (
        "Normalise each position's C features on its own: subtract their mean, divide by the "
        "square root of their variance plus eps, then scale by weight and shift by bias.",
        "The variance divides by C, not C - 1 (`var()` is unbiased unless told otherwise); reduce "
        "over the last axis only, keeping it for broadcasting. Computing the variance as "
        "mean(x^2) - mean(x)^2 loses every digit when the features sit far from 0.",
        "For float16 or bfloat16 input, compute in float32 and convert the result back to x's "
        "dtype; return a new tensor rather than editing x in place.",
    ),
    "block_forward": (
        "A pre-norm block is two residual updates: attention reads a normalised copy of x and adds "
        "its result to x, then the MLP reads a normalised copy of that new x and adds its result.",
        "Common slips: the MLP reading the x from before attention, normalising the running sum "
        "itself (post-norm), using norm1 for both sublayers, or forgetting to add x back.",
        "Use the block's parts (norm1, attn, norm2, mlp), not the block itself: calling the "
        "block is the course's answer, not yours.",
    ),
    "count_params": (
        "Count every tensor of TinyLM(config): per block the attention's and the MLP's matrices "
        "and biases and two LayerNorms; outside the blocks the token embedding, the position "
        "table and the final LayerNorm.",
        "Usual misses: the MLP's biases (4C and C), the LayerNorms' biases as well as their "
        "weights, the final LayerNorm, and counting the head twice (it shares the token "
        "embedding's matrix). The attention projections have no biases in TinyLM.",
        "Print `[(n, p.shape) for n, p in TinyLM(small_config).named_parameters()]` for a small "
        "config, write a term for each line, and return an int.",
    ),
}


# Questions on this lesson's ideas: `answer("04-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "04-block": Number(
        prompt="Section 5 counted a `Block` of width 64 module by module. How many parameters "
               "does a `Block` of width C = 128 hold (attention without biases, the MLP with "
               "its biases, two LayerNorms)?",
        after="## 5. Counting the parameters",
        value=197_760, tolerance=0,
        why="4C² in attention, 8C² + 5C in the MLP and 4C in the two LayerNorms: "
            "12 × 128² + 9 × 128 = 196,608 + 1,152 = 197,760.",
        wrong=((196_608, 196_608, "12C² counts the weight matrices only; the MLP's biases "
                                  "(5C) and the LayerNorms' weights and biases (4C) add "
                                  "to it."),
               (197_248, 197_248, "that leaves out the two LayerNorms, a weight and a bias "
                                  "of C each."),
               (197_120, 197_120, "that leaves out the MLP's biases: 4C in the up "
                                  "projection and C in the down one."),
               (131_072, 131_712, "that is the MLP alone; attention holds 4C² more."),
               (65_536, 65_536, "that is attention alone; the MLP holds twice as much.")),
        otherwise="add 4C² for attention, 8C² + 5C for the MLP and 4C for the LayerNorms."),
    "04-rule": Number(
        prompt="Apply the rule of thumb 12·L·C² + V·C to GPT-2 medium: L = 24, C = 1,024, "
               "V = 50,257. How many million parameters does it give?",
        after="85M in the blocks and 39M in the embedding",
        value=353.453, tolerance=0.5, unit="millions",
        why="12 × 24 × 1,024² = 301,989,888 in the blocks and 50,257 × 1,024 = 51,463,168 in "
            "the embedding: 353,453,056.",
        wrong=((301.5, 302.5, "that is the blocks alone; the token embedding V·C adds to "
                              "them."),
               (354.5, 355.2, "that is the exact count (lesson 09 prints it); the rule of "
                              "thumb leaves out the biases, LayerNorms and position table."),
               (404.4, 405.4, "that counts V·C twice; the head is tied to the embedding and "
                              "costs nothing extra.")),
        otherwise="compute 12·L·C² and V·C separately, then add them."),
    "04-layernorm": Choice(
        prompt="A position's C = 4 features are `[1, 2, 3, 4]`. What does LayerNorm give, with "
               "weight 1, bias 0 and ε = 0?",
        after="### Exercise 1: LayerNorm by hand",
        choices={
            "a": ("[−1.162, −0.387, 0.387, 1.162]",
                  "that divides by the standard deviation with C − 1 in the variance "
                  "(torch.var's default); LayerNorm's variance divides by C."),
            "b": ("[−1.5, −0.5, 0.5, 1.5]",
                  "that subtracts the mean but does not divide by the standard deviation."),
            "c": ("[0.183, 0.365, 0.548, 0.730]",
                  "that divides by the vector's length without subtracting the mean first."),
            "d": ("[−1.342, −0.447, 0.447, 1.342]",
                  "the mean is 2.5 and the variance (dividing by C = 4) is 1.25, so each "
                  "feature becomes (x − 2.5) / √1.25: mean 0, variance 1."),
        },
        right="d"),
    "04-reach": Choice(
        prompt="In a whole causal `Block` (attention, then the MLP, each with its residual), "
               "change the input at position 2 of 5 only. Which positions of the block's "
               "output can change?",
        after="Nothing in that computation mixes positions",
        choices={
            "a": ("position 2 only",
                  "that is the MLP alone; the block's attention first carries the change to "
                  "the positions that may read position 2."),
            "b": ("positions 2, 3 and 4",
                  "attention lets the later positions read position 2, and the MLP then works "
                  "on each of those positions' changed vectors; positions 0 and 1 cannot read "
                  "ahead."),
            "c": ("all five",
                  "that is attention without the mask; with it, positions 0 and 1 cannot "
                  "read position 2."),
            "d": ("positions 0, 1 and 2",
                  "the causal mask lets a position read earlier positions, not later ones: "
                  "the change travels forwards."),
        },
        right="b"),
}
