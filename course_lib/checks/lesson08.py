"""Checkers for lesson 08, the modern block: RMSNorm, SwiGLU and grouped-query attention.

Each checker compares the learner's function with a float64 reference on small seeded
inputs, and names the usual mistake when the answer matches one of them.
"""
import math

import torch
import torch.nn.functional as F

from course_lib.checks import core
from course_lib.checks.core import (HALF, Checker, checker, name_the_mistake, seed, tensor_result,
                                    tensors_close)
from course_lib.checks.domain import each


def gradients_flow(c, fn, inputs, names, reference, case):
    """core.gradients_flow, with a backward pass that fails (an in-place edit of a tensor
    autograd saved) turned into feedback rather than torch's error."""
    __tracebackhide__ = True
    try:
        core.gradients_flow(c, fn, inputs, names, reference, case)
    except RuntimeError as err:
        c.fail(f"the backward pass through your function failed: {str(err).splitlines()[0]}",
               case=case, hint="an in-place operation (x /= ..., t.mul_(...), out[...] = ...) "
                               "changed a tensor that autograd saved for the backward pass: "
                               "build new tensors instead (x = x / ..., t * ...)")


_MANTISSA = {torch.float16: 10, torch.bfloat16: 7}


def _within_ulps(got, exact, dtype, ulps=2.0):
    """Whether a half-precision result is within `ulps` units in the last place of the exact
    (float64) value: a result computed in float32 and rounded once is within half of one; one
    computed in half precision throughout drifts much further."""
    scale = torch.exp2(torch.floor(torch.log2(exact.abs().clamp_min(1e-30))) - _MANTISSA[dtype])
    return bool(((got - exact).abs() <= ulps * scale + 1e-5).all())

# ---------------------------------------------------------------------------
# rms_norm
# ---------------------------------------------------------------------------

def _rms(x, w, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rms_norm_mistakes(x, w, eps):
    """What the usual mistakes return, in float64, with the hint for each."""
    centred = x - x.mean(-1, keepdim=True)
    ms = x.pow(2).mean(-1, keepdim=True)
    return [
        (centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * w,
         "RMSNorm does not subtract the mean (that is LayerNorm): divide x itself by "
         "sqrt(mean(x^2) + eps)"),
        (_rms(x, 1.0, eps),
         "multiply the normalised x by `weight`, the learned gain (one number per feature)"),
        (x / (torch.sqrt(ms) + eps) * w,
         "eps goes inside the square root: x / sqrt(mean(x^2) + eps); you added it after "
         "taking the root"),
        (x / torch.sqrt(ms) * w,
         "you left eps out: add it to the mean of the squares, inside the square root, "
         "sqrt(mean(x^2) + eps)"),
        (x / (ms + eps) * w,
         "divide by the square root of the mean of the squares, sqrt(mean(x^2) + eps), "
         "not by the mean itself"),
        (x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w,
         "take the mean of the squares over the last axis, not their sum: divide the sum "
         "by C, or take the mean"),
        (x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + eps) * w,
         "average the squares over the last axis (the C features of each position), "
         "not over the first axis"),
        (x / torch.sqrt(x.pow(2).mean() + eps) * w,
         "average the squares over the last axis only (the C features of each position), "
         "not over the whole tensor"),
    ]


def _ulps_apart(got, ref, exact, dtype):
    """The largest distance of got from ref, in units in the last place of the exact values."""
    scale = torch.exp2(torch.floor(torch.log2(exact.abs().clamp_min(1e-30))) - _MANTISSA[dtype])
    return float(((got - ref).abs() / scale).max())


def _in_bfloat16(got, want, x, w, eps):
    """Whether a bfloat16 rms_norm was computed in bfloat16 rather than in float32.

    Computed in float32 and rounded once, a result is within one unit in the last place of the
    exact value rounded; so is Llama's way, the normalised x rounded, then times the weight in
    bfloat16. Computed in bfloat16 throughout (each step rounded), some of 8,192 values drift
    two or more from both: 1,000 seeds measured, every one.
    """
    once = want.to(torch.bfloat16).double()
    normed = _rms(x.double(), 1.0, eps).to(torch.bfloat16)
    llama = (normed * w).double()
    return min(_ulps_apart(got, once, want, torch.bfloat16),
               _ulps_apart(got, llama, want, torch.bfloat16)) > 1.5


@checker
def check_rms_norm(fn):
    """Check rms_norm(x, weight, eps=1e-5) -> x / sqrt(mean(x^2, last axis) + eps) * weight."""
    __tracebackhide__ = True
    c = Checker("rms_norm", fn)
    gen = torch.Generator().manual_seed(seed(8))
    cases = [  # shape, dtype, scale, offset, eps
        ((2, 3, 8), torch.float32, 1.0, 0.5, None),
        ((5, 6), torch.float32, 0.3, -0.2, 0.5),         # a large eps against small x
        ((4, 1, 6), torch.float64, 2.0, 1.0, 1e-3),
        ((3, 8), torch.bfloat16, 1.0, 0.5, None),
        ((64, 128), torch.bfloat16, 1.0, 0.5, None),      # bfloat16 measured in ulps
        ((2, 8), torch.float16, 300.0, 0.0, None),        # x * x overflows in float16
    ]
    for shape, dtype, scale, offset, eps in cases:
        _rms_one(c, _rms_input(gen, shape, dtype, scale, offset, eps))
    # any leading axes and width, every dtype, spreads up to 300 (x * x overflows float16)
    each(c, _draw_rms, lambda c, args, case: _rms_one(c, args), n=25, stream=80)
    x = torch.randn(3, 8, generator=gen) + 0.5
    w = 1 + 0.5 * torch.randn(8, generator=gen)
    gradients_flow(c, fn, (x, w), ("x", "weight"), lambda x, w: _rms(x, w, 1e-5),
                "rms_norm(x, weight) with x and weight requiring gradients")
    c.done()


def _rms_input(gen, shape, dtype, scale, offset, eps):
    x = ((torch.randn(*shape, generator=gen, dtype=torch.float64) + offset) * scale).to(dtype)
    w = (1 + 0.5 * torch.randn(shape[-1], generator=gen, dtype=torch.float64)).to(dtype)
    case = (f"rms_norm(x, weight{'' if eps is None else f', eps={eps}'}), x of shape "
            f"{tuple(shape)} in {str(dtype).replace('torch.', '')}, spread {scale:g}, its mean "
            f"{'not ' if offset else ''}0")
    return x, w, eps, case


def _draw_rms(d):
    shape = tuple(d.integer(1, 4) for _ in range(d.integer(0, 2))) + (d.size(1, 256, small=16),)
    dtype = d.choice((torch.float32, torch.float64, torch.bfloat16, torch.float16))
    scale, offset = d.choice((1.0, 0.01, 300.0)), d.choice((0.0, 0.5, -3.0))
    args = _rms_input(torch.Generator().manual_seed(d.seed()), shape, dtype, scale, offset,
                      d.choice((None, 1e-3, 0.5)))
    return args, args[-1]


def _rms_one(c, args):
    """Check rms_norm on one input."""
    __tracebackhide__ = True
    x, w, eps, case = args
    shape, dtype = tuple(x.shape), x.dtype
    formula = "x / sqrt(mean(x^2 over the last axis) + eps) * weight"
    kwargs = {} if eps is None else {"eps": eps}
    out = c.call(x, w, case=case, **kwargs,
                 crash_hint="average over the last axis with keepdim=True, so the (..., 1) "
                            "root broadcasts against x (..., C); weight is (C,)")
    got = tensor_result(c, out, x, shape, case, "the normalised tensor",
                  "in float16, x * x overflows past 65504: compute in float32 (x.float()), "
                  "then convert the result back with .to(x.dtype)")
    e = 1e-5 if eps is None else eps
    want = _rms(x.double(), w.double(), e)
    if dtype == torch.bfloat16 and tensors_close(got, want, dtype) and _in_bfloat16(
            got, want, x, w, e):
        c.fail("the result is right only to the precision of a computation in half "
               "precision", case=case, expected=want, got=got,
               hint="for float16 or bfloat16 input, compute it in float32 (x.float(), "
                    "weight.float()) and convert the result back once with .to(x.dtype): "
                    "each step rounded to half precision adds its own error")
    if not tensors_close(got, want, dtype):
        mistakes = _rms_norm_mistakes(x.double(), w.double(), e)
        if dtype in HALF:
            mistakes.insert(0, (_rms(x, w, e).double(),
                                "in half precision x * x overflows or rounds away: compute "
                                "it in float32 (x.float()) and convert the result back "
                                "with .to(x.dtype)"))
        name_the_mistake(c, got, want, mistakes, dtype, formula, case)
    c.ok()


# ---------------------------------------------------------------------------
# swiglu
# ---------------------------------------------------------------------------

def _swiglu(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def _swiglu_mistakes(x, w_gate, w_up, w_down):
    g, u = x @ w_gate.T, x @ w_up.T
    down = w_down.T
    return [
        ((F.silu(u) * g) @ down,
         "gate and up are swapped: the SiLU goes on the gate projection, silu(x @ w_gate.T), "
         "which then multiplies the up projection x @ w_up.T"),
        ((torch.sigmoid(g) * u) @ down,
         "SiLU is g * sigmoid(g), not sigmoid(g) alone (that is the original GLU): use "
         "torch.nn.functional.silu"),
        ((F.gelu(g) * u) @ down,
         "SwiGLU gates with SiLU (swish), g * sigmoid(g), not GELU (that would be GEGLU)"),
        ((torch.relu(g) * u) @ down,
         "SwiGLU gates with SiLU (swish), g * sigmoid(g), not ReLU (that would be ReGLU)"),
        (F.silu(g * u) @ down,
         "apply SiLU to the gate projection alone, then multiply: silu(x @ w_gate.T) * "
         "(x @ w_up.T); you applied it to the product"),
        (F.silu(g) @ down,
         "multiply the gated projection by the up projection: silu(x @ w_gate.T) * "
         "(x @ w_up.T); your answer has no up projection"),
        (F.silu(u) @ down,
         "the gate is missing: silu(x @ w_gate.T) * (x @ w_up.T), then the down projection"),
        ((g * u) @ down,
         "the SiLU is missing: silu(x @ w_gate.T) * (x @ w_up.T)"),
        ((F.silu(g) + u) @ down,
         "the gate multiplies the up projection element by element; you added them"),
    ]


@checker
def check_swiglu(fn):
    """Check swiglu(x, w_gate, w_up, w_down) -> (silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T."""
    __tracebackhide__ = True
    c = Checker("swiglu", fn)
    gen = torch.Generator().manual_seed(seed(80))
    cases = [  # x shape, hidden width F, dtype
        ((2, 3, 4), 6, torch.float32),
        ((5, 6), 16, torch.float32),
        ((1, 4, 8), 12, torch.float64),
        ((3, 8), 12, torch.bfloat16),
    ]
    for shape, F_, dtype in cases:
        _swiglu_one(c, _swiglu_input(gen, shape, F_, dtype))
    # any leading axes, widths C and F, and dtype
    each(c, _draw_swiglu, lambda c, args, case: _swiglu_one(c, args), n=20, stream=81)
    x = torch.randn(3, 4, generator=gen)
    ws = [torch.randn(*s, generator=gen) / 2 for s in ((6, 4), (6, 4), (4, 6))]
    gradients_flow(c, fn, (x, *ws), ("x", "w_gate", "w_up", "w_down"), _swiglu,
                "swiglu(x, w_gate, w_up, w_down) with every input requiring gradients")
    c.done()


_SWIGLU = "(silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T"
_ORIENTATION = ("the weights are in nn.Linear's orientation (out, in): w_gate and w_up are "
                "(F, C), w_down is (C, F), so each is applied as x @ w.T")


def _swiglu_input(gen, shape, F_, dtype):
    C = shape[-1]
    x = torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)
    ws = [(torch.randn(*s, generator=gen, dtype=torch.float64) / s[1] ** 0.5).to(dtype)
          for s in ((F_, C), (F_, C), (C, F_))]
    case = (f"x of shape {tuple(shape)} (C={C}) in {str(dtype).replace('torch.', '')}; "
            f"w_gate and w_up ({F_}, {C}), w_down ({C}, {F_})")
    return x, ws, case


def _draw_swiglu(d):
    shape = tuple(d.integer(1, 4) for _ in range(d.integer(0, 2))) + (d.size(1, 48, small=8),)
    dtype = d.choice((torch.float32, torch.float64, torch.bfloat16, torch.float16))
    args = _swiglu_input(torch.Generator().manual_seed(d.seed()), shape,
                         d.size(1, 96, small=16), dtype)
    return args, args[-1]


def _swiglu_one(c, args):
    """Check swiglu on one input."""
    __tracebackhide__ = True
    x, ws, case = args
    shape, dtype, C, F_ = tuple(x.shape), x.dtype, x.shape[-1], ws[0].shape[0]
    formula, orientation = _SWIGLU, _ORIENTATION
    out = c.call(x, *ws, case=case, crash_hint=orientation)
    if isinstance(out, torch.Tensor) and out.dim() > 0 and out.shape[-1] == F_ and F_ != C:
        c.fail("the result has the hidden width F, not the model width C", case=case,
               expected=tuple(shape), got=tuple(out.shape),
               hint="project back to the model width with the down projection: ... @ w_down.T")
    got = tensor_result(c, out, x, shape, case, "the MLP's output", formula)
    args = [t.double() for t in (x, *ws)]
    want = _swiglu(*args)
    if not tensors_close(got, want, dtype):
        for wrong, hint in _swiglu_mistakes(*args):
            if tensors_close(got, wrong, dtype):
                c.fail("the result is not right", case=case, expected=want, got=got, hint=hint)
        c.fail("the result is not right", case=case, expected=want, got=got,
               hint=f"{formula}; {orientation}")
    c.ok()


# ---------------------------------------------------------------------------
# grouped_query_attention
# ---------------------------------------------------------------------------

def _gqa(q, k, v, *, order="block", scale=None, causal=True, diagonal=True, softmax_dim=-1):
    """Causal grouped-query attention in float64, with one of the usual mistakes switched on."""
    H, Hkv, T = q.shape[1], k.shape[1], q.shape[2]
    n_rep = H // Hkv
    if order == "block":
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    else:
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    scale = math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-1, -2) / scale                         # (B, H, T, T)
    if causal:
        hidden = torch.ones(T, T, dtype=torch.bool).triu(1 if diagonal else 0)
        if not diagonal:
            hidden[0, 0] = False                                       # row 0 would be all -inf
        scores = scores.masked_fill(hidden, float("-inf"))
    return torch.softmax(scores, dim=softmax_dim) @ v


def _gqa_mistakes(q, k, v):
    D, H = q.shape[-1], q.shape[1]
    return [
        (_gqa(q, k, v, order="tile"),
         "query head h reads key/value head h // n_rep (n_rep = H // Hkv): the copies of one "
         "head sit next to each other, kv0, kv0, kv1, kv1, ... (repeat_interleave on the head "
         "axis); you tiled the whole set, kv0, kv1, kv0, kv1 (repeat)"),
        (_gqa(q, k, v, scale=1.0),
         "divide the scores by sqrt(D), the square root of the head size d_head"),
        (_gqa(q, k, v, scale=float(D)),
         "divide the scores by sqrt(D), the square root of the head size, not by D itself"),
        (_gqa(q, k, v, scale=math.sqrt(D * H)),
         "divide the scores by sqrt(D), the square root of the head size q.shape[-1], not of "
         "the model width"),
        (_gqa(q, k, v, causal=False),
         "the attention must be causal: query i sees keys j <= i only; add -inf above the "
         "diagonal before the softmax"),
        (_gqa(q, k, v, diagonal=False),
         "each query may see its own position: hide only the keys j > i (triu with "
         "diagonal=1)"),
        (_gqa(q, k, v, softmax_dim=-2),
         "take the softmax over the keys, the last axis of the scores (dim=-1)"),
    ]


_GQA_FORMULA = ("repeat each key/value head n_rep = H // Hkv times next to itself (the copies of "
                "one head side by side), then causal softmax(q k^T / sqrt(D)) v")


def _gqa_one(c, fn, q, k, v, case):
    """Check grouped_query_attention on one q, k, v."""
    __tracebackhide__ = True
    (B, H, T, D), Hkv, dtype = q.shape, k.shape[1], q.dtype
    out = c.call(q, k, v, case=case,
                 crash_hint="make k and v (B, H, T, D) first by repeating each key/value "
                            "head H // Hkv times on axis 1, then attend as in lesson 03, "
                            "with a causal mask built for this call's T (q.shape[2])")
    if isinstance(out, torch.Tensor) and out.shape == (B, Hkv, T, D) and Hkv != H:
        c.fail("the result has one head per key/value head, not per query head", case=case,
               expected=(B, H, T, D), got=tuple(out.shape),
               hint="every query head gives an output: repeat k and v up to H heads")
    got = tensor_result(c, out, q, (B, H, T, D), case, "the attention output (B, H, T, D)",
                        "a row of scores that is all -inf gives 0/0 = NaN: each query must see "
                        "at least its own position, so hide only the keys j > i")
    args = [t.double() for t in (q, k, v)]
    want = _gqa(*args)
    if dtype in HALF and tensors_close(got, want, dtype) and not _within_ulps(got, want, dtype):
        c.fail("the result is right only to the precision of a computation in half "
               "precision", case=case, expected=want[0, :, -1], got=got[0, :, -1],
               hint="for float16 or bfloat16 input, compute the scores, the softmax and the "
                    "weighted sum in float32 (q.float(), k.float(), v.float()) and convert "
                    "the result back once with .to(q.dtype)")
    if not tensors_close(got, want, dtype):
        for wrong, hint in _gqa_mistakes(*args):
            if tensors_close(got, wrong, dtype):
                c.fail("the result is not right", case=case, expected=want[0, :, -1],
                       got=got[0, :, -1], hint=hint)
        c.fail("the result is not right (shown: the last position of every head)", case=case,
               expected=want[0, :, -1], got=got[0, :, -1], hint=_GQA_FORMULA)
    c.ok()


def _gqa_inputs(seed_, B, H, Hkv, T, D, dtype):
    gen = torch.Generator().manual_seed(seed_)
    return tuple(torch.randn(B, h, T, D, generator=gen, dtype=torch.float64).to(dtype)
                 for h in (H, Hkv, Hkv))


def _gqa_case(B, H, Hkv, T, D, dtype):
    return (f"q ({B}, {H}, {T}, {D}), k and v ({B}, {Hkv}, {T}, {D}): {H} query heads "
            f"sharing {Hkv} key/value heads, in {str(dtype).replace('torch.', '')}")


_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _draw_gqa(d):
    """Any T (past every mask table: 128, 256, 512, 1,024), 1 to 3 key/value heads each shared
    by 1 to 3 query heads, any dtype; one batch and few heads for long T."""
    T = d.length()
    Hkv, n_rep = d.integer(1, 3), d.integer(1, 3)
    B = 1 if T > 16 else d.integer(1, 2)
    if T > 16:
        Hkv, n_rep = min(Hkv, 2), min(n_rep, 2)
    D, dtype = d.choice((4, 2, 8)), d.choice(_DTYPES)
    shape = (B, Hkv * n_rep, Hkv, T, D, dtype)
    return (_gqa_inputs(d.seed(), *shape)), _gqa_case(*shape)


@checker
def check_grouped_query_attention(fn):
    """Check grouped_query_attention(q, k, v): causal attention, query head h reading KV head
    h // (H // Hkv)."""
    __tracebackhide__ = True
    c = Checker("grouped_query_attention", fn)
    cases = [  # B, H, Hkv, T, D, dtype
        (2, 4, 2, 5, 6, torch.float32),
        (1, 6, 2, 4, 4, torch.float32),
        (2, 6, 3, 3, 8, torch.float64),
        (1, 4, 1, 5, 4, torch.float32),      # multi-query attention: one KV head for all
        (1, 3, 3, 4, 4, torch.float32),      # as many KV heads as query heads: plain attention
        (2, 4, 2, 6, 8, torch.bfloat16),
        (1, 4, 2, 13, 4, torch.float32),     # longer than any mask of the example's size
        (1, 2, 1, 1, 4, torch.float32),      # one position
        (1, 4, 2, 9, 8, torch.float16),
        (1, 2, 1, 1_030, 4, torch.float32),  # past GPT-2's 1,024 positions
    ]
    for n, shape in enumerate(cases):
        _gqa_one(c, fn, *_gqa_inputs(seed(88 + n), *shape), _gqa_case(*shape))
    # lengths past every table a learner might slice, every dtype, every sharing
    each(c, _draw_gqa, lambda c, qkv, case: _gqa_one(c, fn, *qkv, case), n=20, stream=801)
    gen = torch.Generator().manual_seed(seed(88))
    q, k, v = (torch.randn(1, h, 4, 4, generator=gen) for h in (4, 2, 2))
    gradients_flow(c, fn, (q, k, v), ("q", "k", "v"), _gqa, "q, k and v requiring gradients")
    c.done()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "rms_norm": (
        "Divide each position's vector by the root of the mean of its squares (plus eps), then "
        "scale by the weight. There is no mean to subtract and no bias.",
        "The mean runs over the last axis only, kept for broadcasting; float16 input must be "
        "computed in float32 (x squared overflows past 256) and converted back to x's dtype.",
        "Torch operations only, no in-place edits of x, so gradients reach x and weight.",
    ),
    "swiglu": (
        "Two projections of x, a gate and an up projection; the gate goes through SiLU and "
        "multiplies the up projection element by element; one down projection brings the "
        "result back to C.",
        "The weights are in nn.Linear's (out, in) layout, so a projection is x @ w.T; SiLU is "
        "z * sigmoid(z), not sigmoid(z) alone; and there are no biases.",
        "Shapes: gate and up (..., F), their product (..., F), then @ w_down.T gives (..., C) "
        "in x's dtype.",
    ),
    "grouped_query_attention": (
        "Give every query head its key/value head: repeat each of the Hkv heads H / Hkv times "
        "along the head axis, then it is ordinary causal attention.",
        "The copies of one key/value head sit next to each other (head h reads h // (H / Hkv)): "
        "repeat each head in place, not the whole set of heads (that would give h % Hkv).",
        "Scores (B, H, T, T) scaled by 1/sqrt(D), the causal mask, softmax over the keys, then "
        "@ v; return (B, H, T, D) in q's dtype without changing the inputs.",
    ),
}


# Questions on this lesson's ideas: `answer("08-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "08-rms": Number(
        prompt="RMSNorm with weight 1 and ε = 0 of one position's features `[1, 2, 3, 4]`: "
               "what is its first entry?",
        after="## 2. RMSNorm: LayerNorm without the mean",
        value=0.3651, tolerance=0.0005,
        why="the root mean square is √((1 + 4 + 9 + 16) / 4) = √7.5 ≈ 2.739, and 1 / 2.739 ≈ "
            "0.365; RMSNorm does not subtract the mean.",
        wrong=((-1.35, -1.33, "that is LayerNorm, which centres first; RMSNorm = LayerNorm "
                              "without the mean."),
               (0.18, 0.185, "that divides by the vector's length √30; the root mean square "
                             "divides the sum of squares by C before the square root."),
               (0.099, 0.101, "that divides by the sum of the features; RMSNorm divides by "
                              "their root mean square."),
               (0.4, 0.401, "that divides by the mean, 2.5; RMSNorm divides by the root of "
                            "the mean of the squares.")),
        otherwise="square the features, take their mean and its square root, then divide."),
    "08-swiglu": Number(
        prompt="SwiGLU has three matrices of C × d_ff. Which hidden width d_ff gives it exactly "
               "the 8C² weights of a GELU MLP of width 4C, for C = 96?",
        after="## 3. SwiGLU: an MLP with a gate",
        value=256, tolerance=0,
        why="3 · C · d_ff = 8C² gives d_ff = 8C / 3 = 256, and 3 × 96 × 256 = 73,728 = 8 × 96².",
        wrong=((384, 384, "4C is the GELU MLP's width; with three matrices it would hold 12C² "
                          "weights."),
               (192, 192, "2C gives 6C² weights with three matrices."),
               (336, 336, "3.5C is Llama 3 8B's choice, wider than the width that keeps 8C².")),
        otherwise="set 3 · C · d_ff equal to 8C² and solve for d_ff."),
    "08-kv70b": Number(
        prompt="Llama 3 70B: 80 layers, 64 query heads sharing 8 key/value heads, head size "
               "128, the cache in bfloat16. How many KiB per token does its KV cache take?",
        after="## 5. Grouped-query attention and the KV cache",
        value=320, tolerance=0, unit="KiB",
        why="2 × 80 layers × 8 KV heads × 128 × 2 bytes = 327,680 bytes = 320 KiB a token: "
            "with grouped-query attention only the 8 key/value heads are cached.",
        wrong=((2_560, 2_560, "that caches all 64 heads; with grouped-query attention only the "
                              "8 key/value heads keep keys and values."),
               (160, 160, "that leaves out the factor 2: keys and values are both cached."),
               (640, 640, "that is 4 bytes a value, float32; bfloat16 takes 2."),
               (327_680, 327_680, "that is in bytes; the question asks KiB (1,024 bytes).")),
        otherwise="multiply 2 × layers × KV heads × head size × bytes, then divide by 1,024."),
    "08-swiglu-lag": Choice(
        prompt="In the runs saved with the lesson, the SwiGLU row of the short ablation ended "
               "above the baseline for every seed. The lesson tested one explanation, that "
               "SwiGLU's MLP starts about 8 times quieter than the GELU MLP. What did its test "
               "show in those runs?",
        after="## 6. The ablation: one swap at a time",
        choices={
            "a": ("scaled to start as loud as the GELU MLP, SwiGLU closed most of the gap",
                  "the scaled runs saved with the lesson do not show that: compare their final "
                  "losses with the unscaled SwiGLU row's and with the baseline's."),
            "b": ("scaled to start as loud, SwiGLU ended where it did: the quiet start is not "
                  "the reason, and why it lags here is open",
                  "in the saved runs the scaled ones closed none of the gap; what those runs do "
                  "show is SwiGLU staying longer on a plateau near 3.1 nats, and the lesson "
                  "leaves the cause open (your own run, on another machine or a GPU, may "
                  "differ: its printed lines say what it showed)."),
            "c": ("it has many more parameters, so it learns more slowly",
                  "with d_ff = 171 it has slightly fewer parameters than the GELU MLP "
                  "(119,552 against 120,064 in the model)."),
            "d": ("it is noise: another seed would reverse it",
                  "in that run it ended higher for every seed, with a spread across seeds far "
                  "smaller than its gap to the baseline."),
        },
        right="b"),
}
