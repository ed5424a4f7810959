"""Checkers for lesson 03, multi-head attention.

The inputs have B, T, H and D all different, so that a reshape which mixes two of
these axes gives a different shape or different numbers, and each checker names
the mistake that explains a wrong result.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from course_lib import attention as ref
from course_lib.checks.core import Checker, backward, checker, gradients_flow, matches, seed
from course_lib.checks.domain import each
from course_lib.checks.lesson04 import observed_call

# The course's own versions, and torch's, of what the exercises ask for.
_SPLIT = {"course_lib's split_heads (ref.split_heads)": ref.split_heads}
_MERGE = {"course_lib's merge_heads (ref.merge_heads)": ref.merge_heads}
_MHA = {"course_lib's multi_head_attention": ref.multi_head_attention,
        "course_lib's MultiHeadAttention": ref.MultiHeadAttention.forward,
        "course_lib's scaled_dot_product_attention": ref.scaled_dot_product_attention,
        "F.scaled_dot_product_attention": F.scaled_dot_product_attention,
        "torch.nn.MultiheadAttention": F.multi_head_attention_forward}


_DTYPE_HINT = ("keep the input's dtype, float32: a tensor made from NumPy (torch.from_numpy) is "
               "float64 and promotes what it is added to, and a matrix product of float64 with "
               "float32 fails; build new tensors with torch (e.g. torch.full(...)) or convert "
               "them with .float()")


def _call(c, *args, case, crash_hint):
    """c.call (a forbidden function named, an input changed in place or a None caught), with
    the float64/float32 clash named when that is what crashed."""
    __tracebackhide__ = True
    result, seen = observed_call(c, *args, case=case, catch=True)
    if seen["raised"] is not None:  # the learner's bug, reported as feedback rather than a traceback
        kind, message = seen["raised"]
        clash = any(word in message for word in ("Double", "double", "float64"))
        c.fail(f"your function raised {kind}: {message}", case=case,
               hint=_DTYPE_HINT if clash else crash_hint)
    return result


def _tensor(c, value, what, case, dtype=torch.float32):
    """The value as a NumPy float64 array, after checking it is a CPU torch tensor of `dtype`."""
    __tracebackhide__ = True
    if not isinstance(value, torch.Tensor):
        c.fail(f"{what} should be a torch tensor, got {type(value).__name__}", case=case,
               hint="use torch operations (view, transpose, reshape, @) on the input so the "
                    "result stays a tensor")
    if value.dtype != dtype:
        c.fail(f"{what} has dtype {value.dtype}, expected {dtype}", case=case, hint=_DTYPE_HINT)
    c.ok()
    return value.detach().cpu().double().numpy()


def _arange(*shape):
    """A float32 tensor whose entries are 0, 1, 2, ... in memory order: every entry tells where it came from."""
    return torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)


# --- split_heads --------------------------------------------------------------


def _split_variants(x, H):
    """{mistake: what that mistake makes of x (B, T, C)}, each of the right shape (B, H, T, D)."""
    B, T, C = x.shape
    D = C // H
    return {
        "reshape": x.reshape(B, H, T, D),
        "view_dh": x.reshape(B, T, D, H).permute(0, 3, 1, 2),
    }


_SPLIT_HINTS = {
    "reshape": "heads mix positions: reshape(B, H, T, D) keeps the memory order, so one 'head' "
               "gets the channels of several positions. Split the last axis first, "
               "x.view(B, T, H, D), then move the head axis forward with .transpose(1, 2)",
    "view_dh": "view(B, T, H, D), not view(B, T, D, H): head h must get the contiguous block of "
               "channels h*D .. (h+1)*D - 1, not every H-th channel",
}


def split_hint(x, H, got):
    """The hint for the split mistake that explains `got`, if one does."""
    for name, wrong in _split_variants(x, H).items():
        if matches(got, wrong.double().numpy()):
            return _SPLIT_HINTS[name]
    return None


_GRAD_HINT = ("keep the result connected to x: .detach(), .numpy(), torch.tensor(...) or "
              "torch.no_grad() cut the graph, and the model's weights before this step could "
              "not be trained; view, transpose and reshape keep it")


def _gradient(c, fn, x, *args, case, want_grad):
    """The learner's fn(x, *args) must pass a gradient back to x equal to `want_grad`."""
    __tracebackhide__ = True
    x = x.detach().clone().requires_grad_(True)
    out = c.call(x, *args, case=case)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        c.fail("no gradient flows back through your function", case=case, hint=_GRAD_HINT)
    weight = torch.arange(out.numel(), dtype=torch.float64).reshape(out.shape)
    seen = c.follow(backward, inputs=[0], weight=weight)
    if "raised" in seen:
        c.fail(f"the backward pass through your function failed: {seen['raised']}", case=case,
               hint=_GRAD_HINT)
    grad = seen["grads"][0]
    if not (isinstance(grad, torch.Tensor) and grad.shape == want_grad.shape
            and torch.equal(grad.to(want_grad.dtype), want_grad)):
        c.fail("the gradient that reaches x is not right", case=case, hint=_GRAD_HINT)
    c.ok()


@checker
def check_split_heads(fn):
    """Check split_heads(x, n_heads): (B, T, C) -> (B, H, T, D), head h holding channels h*D..(h+1)*D-1.

    The result stays connected to x for gradients (not detached); ref.split_heads is off limits.
    """
    __tracebackhide__ = True
    c = Checker("split_heads", fn, forbidden=_SPLIT)
    for B, T, H, D in ((2, 5, 3, 4), (3, 2, 5, 6), (1, 4, 1, 7)):
        C = H * D
        _split_one(c, (_arange(B, T, C), H), f"x = torch.arange({B * T * C}.).reshape({B}, "
                                             f"{T}, {C}) (B={B}, T={T}, C={C}), n_heads={H}")
    # any batch, length (past 128 and 256), number of heads and head size
    each(c, _draw_split, _split_one, n=20, stream=30)
    x = _arange(2, 5, 12)
    case = "x = torch.arange(120.).reshape(2, 5, 12) requiring grad, n_heads=3: the gradient"
    weight = torch.arange(120.0).reshape(2, 3, 5, 4)
    _gradient(c, fn, x, 3, case=case, want_grad=ref.merge_heads(weight))
    c.done()


def _draw_sizes(d):
    """B, T, H, D: a batch of 1 to 3, any length, 1 to 8 heads of 1 to 8 channels."""
    T = d.length(tables=(128, 256))
    return (d.integer(1, 3) if T <= 16 else 1), T, d.integer(1, 8), d.integer(1, 8)


def _draw_split(d):
    B, T, H, D = _draw_sizes(d)
    g = torch.Generator().manual_seed(d.seed())
    return (torch.randn(B, T, H * D, generator=g), H), (f"a random x of shape ({B}, {T}, "
                                                        f"{H * D}), n_heads={H}")


def _split_one(c, args, case):
    """Check split_heads on one (x, n_heads)."""
    __tracebackhide__ = True
    x, H = args
    B, T, C = x.shape
    D = C // H
    got = c.call(x, H, case=case,
                 crash_hint="split the last axis with x.view(B, T, n_heads, C // n_heads), "
                            "then swap the position and head axes with .transpose(1, 2)")
    got = _tensor(c, got, "the result", case)
    want = ref.split_heads(x, H).double().numpy()
    shape_hint = (f"expected (B, H, T, D) = ({B}, {H}, {T}, {D}): {H} heads, each with "
                  f"T={T} positions of D = C // n_heads = {D} channels")
    if got.shape == (B, T, H, D) and H != T:
        shape_hint = ("you split the width but left the head axis after the positions: "
                      "move it forward with .transpose(1, 2)")
    elif got.shape == (B, H, D, T) and D != T:
        shape_hint = ("positions come before the head size: view(B, T, H, D), where D is the "
                      "number of channels per head, then .transpose(1, 2)")
    c.shape(got, (B, H, T, D), "the result", case, hint=shape_hint)
    c.close(got, want, "the result", case,
            hint=split_hint(x, H, got) or
            f"head h, position t must hold x[b, t, h*D:(h+1)*D] (here D = {D})")


# --- merge_heads --------------------------------------------------------------


_MERGE_HINTS = {
    "reshape": "transpose back before merging: x.transpose(1, 2) gives (B, T, H, D), so each "
               "position's heads sit next to each other; reshape(B, T, H * D) straight from "
               "(B, H, T, D) mixes positions",
    "interleave": "the channels are interleaved: head h's D channels must stay together as "
                  "channels h*D .. (h+1)*D - 1; use x.transpose(1, 2), not a permute that moves D "
                  "before H",
}


def _merge_variants(y):
    B, H, T, D = y.shape
    return {"reshape": y.reshape(B, T, H * D),
            "interleave": y.permute(0, 2, 3, 1).reshape(B, T, H * D)}


def merge_hint(y, got):
    """The hint for the merge mistake that explains `got`, if one does."""
    for name, wrong in _merge_variants(y).items():
        if matches(got, wrong.double().numpy()):
            return _MERGE_HINTS[name]
    return None


@checker
def check_merge_heads(fn):
    """Check merge_heads(x): (B, H, T, D) -> (B, T, H * D), the inverse of split_heads.

    The result stays connected to x for gradients; ref.merge_heads is off limits.
    """
    __tracebackhide__ = True
    c = Checker("merge_heads", fn, forbidden=_MERGE)
    for B, H, T, D in ((2, 3, 5, 4), (3, 5, 2, 6)):
        y = _arange(B, H, T, D)
        _merge_one(c, y, f"x = torch.arange({y.numel()}.).reshape({B}, {H}, {T}, {D}) (B={B}, "
                         f"H={H}, T={T}, D={D})")

    x = torch.randn(2, 3, 20, generator=torch.Generator().manual_seed(seed(3)))
    case = "merge_heads(split_heads(x, 4)) for a random x of shape (2, 3, 20)"
    got = _tensor(c, c.call(ref.split_heads(x, 4), case=case, crash_hint=_MERGE_CRASH),
                  "the result", case)
    c.close(got, x.double().numpy(), "the round trip", case,
            hint="merge_heads must undo split_heads exactly: transpose(1, 2), then reshape")
    y = _arange(2, 3, 5, 4)
    case = "x = torch.arange(120.).reshape(2, 3, 5, 4) requiring grad: the gradient"
    weight = torch.arange(120.0).reshape(2, 5, 12)
    _gradient(c, fn, y, case=case, want_grad=ref.split_heads(weight, 3))
    # any batch, length (past 128 and 256), number of heads and head size
    each(c, _draw_merge, _merge_one, n=20, stream=31)
    c.done()


_MERGE_CRASH = ("after .transpose the tensor is no longer contiguous in memory, so .view cannot "
                "regroup it: use .reshape (or .contiguous().view)")


def _draw_merge(d):
    B, T, H, D = _draw_sizes(d)
    g = torch.Generator().manual_seed(d.seed())
    return torch.randn(B, H, T, D, generator=g), f"a random x of shape ({B}, {H}, {T}, {D})"


def _merge_one(c, y, case):
    """Check merge_heads on one x (B, H, T, D)."""
    __tracebackhide__ = True
    B, H, T, D = y.shape
    crash = _MERGE_CRASH
    got = _tensor(c, c.call(y, case=case, crash_hint=crash), "the result", case)
    shape_hint = f"expected (B, T, H * D) = ({B}, {T}, {H * D})"
    if got.shape == (B, T, H, D):
        shape_hint = "the heads are in order but not merged: reshape to (B, T, H * D)"
    c.shape(got, (B, T, H * D), "the result", case, hint=shape_hint)
    c.close(got, ref.merge_heads(y).double().numpy(), "the result", case,
            hint=merge_hint(y, got) or "transpose(1, 2) to (B, T, H, D), then reshape to (B, T, H * D)")


# --- multi_head_attention -----------------------------------------------------


def _mha_variant(x, w_qkv, w_proj, H, split="right", merge="right", scale="D", causal=True,
                 proj="right", softmax_dim=-1):
    """Multi-head attention in float64 with one known mistake switched on."""
    x, w_qkv, w_proj = (t.double() for t in (x, w_qkv, w_proj))
    B, T, C = x.shape
    D = C // H

    def split_(t):
        return ref.split_heads(t, H) if split == "right" else _split_variants(t, H)[split]

    q, k, v = (split_(t) for t in (x @ w_qkv.T).chunk(3, dim=-1))  # each (B, H, T, D)
    scores = q @ k.transpose(-1, -2)  # (B, H, T, T)
    scores = scores / {"D": math.sqrt(D), "C": math.sqrt(C), "none": 1.0}[scale]
    if causal:
        scores = scores + torch.full((T, T), float("-inf"), dtype=scores.dtype).triu(1)
    a = torch.softmax(scores, dim=softmax_dim) @ v  # (B, H, T, D)
    merged = ref.merge_heads(a) if merge == "right" else _merge_variants(a)[merge]
    out = {"right": merged @ w_proj.T, "none": merged, "untransposed": merged @ w_proj}[proj]
    return out.numpy()


def _mha_hints(H, C):
    D = C // H
    return [
        (dict(causal=False), "add the causal mask to the scores before the softmax "
                             "(-inf where key j > query i), or every position sees the future"),
        (dict(scale="C"), f"scale by sqrt(D) = sqrt(C // n_heads) = sqrt({D}), the width of one "
                          f"head's dot product, not by sqrt(C) = sqrt({C})"),
        (dict(scale="none"), f"divide each head's scores by sqrt(D) = sqrt({D}) before the softmax"),
        (dict(proj="none"), "finish with the output projection: merged_heads @ w_proj.T"),
        (dict(proj="untransposed"), "use nn.Linear's convention, y = x @ W.T: "
                                    "merged_heads @ w_proj.T, not @ w_proj"),
        (dict(softmax_dim=-2), "take the softmax over the keys, the last axis (dim=-1), so each "
                               "query's weights sum to 1"),
        (dict(split="reshape"), _SPLIT_HINTS["reshape"]),
        (dict(split="reshape", merge="reshape"), _SPLIT_HINTS["reshape"]
                                                 + "; and transpose back before merging"),
        (dict(split="view_dh"), _SPLIT_HINTS["view_dh"]),
        (dict(merge="reshape"), _MERGE_HINTS["reshape"]),
        (dict(merge="interleave"), _MERGE_HINTS["interleave"]),
    ]


def mha_hint(x, w_qkv, w_proj, H, got):
    """The hint for the multi-head mistake that explains `got`, if one does."""
    C = x.shape[-1]
    for mistake, hint in _mha_hints(H, C):
        if matches(got, _mha_variant(x, w_qkv, w_proj, H, **mistake)):
            return hint
    if H > 1 and matches(got, _mha_variant(x, w_qkv, w_proj, 1)):
        return (f"this is one head of width C = {C}: split q, k and v into n_heads = {H} heads "
                f"of D = {C // H} channels and attend in each head separately")
    return None


def _weights(n, B, T, H, D, seeded=False):
    """Float32 x (B, T, C), w_qkv (3C, C), w_proj (C, C) drawn from seed(n) (from n itself when
    `seeded`), scaled so the softmax is neither flat nor one-hot."""
    C = H * D
    g = torch.Generator().manual_seed(n if seeded else seed(n))
    x = torch.randn(B, T, C, generator=g)
    w_qkv = torch.randn(3 * C, C, generator=g) * 1.5 / math.sqrt(C)
    w_proj = torch.randn(C, C, generator=g) / math.sqrt(C)
    return x, w_qkv, w_proj


_HALF_HINT = ("compute in float32 (x and both weights converted with .float()) and return the "
              "input's dtype (.to(x.dtype)): in float16 a score past 65504 is inf and the "
              "softmax NaN, lesson 01's pitfall; float32 keeps the scores and their sums exact")


def _half_precision(c, fn):
    """float16 inputs whose scores overflow float16, and bfloat16: computed in float32, returned in half."""
    __tracebackhide__ = True
    for dtype, scale in ((torch.float16, 200.0), (torch.bfloat16, 1.0)):
        x, w_qkv, w_proj = _weights(10, 2, 6, 2, 4)
        x, w_qkv, w_proj = (x * scale).to(dtype), w_qkv.to(dtype), w_proj.to(dtype)
        name = str(dtype).replace("torch.", "")
        case = (f"random x (2, 6, 8), w_qkv (24, 8), w_proj (8, 8), n_heads=2, all in {name}"
                + (f", x scaled by {scale:g} so that q @ k^T passes float16's 65504" if scale > 1 else ""))
        got = _call(c, x, w_qkv, w_proj, 2, case=case, crash_hint=_HALF_HINT)
        if not isinstance(got, torch.Tensor):
            c.fail(f"the output should be a torch tensor, got {type(got).__name__}", case=case,
                   hint="return the output tensor")
        if got.dtype != dtype:
            c.fail("the output has the wrong dtype", case=case, expected=name,
                   got=str(got.dtype).replace("torch.", ""), hint=_HALF_HINT)
        got = got.detach().double().numpy()
        c.shape(got, (2, 6, 8), "the output", case, hint="the output has the input's shape (B, T, C)")
        c.finite(got, "the output", case, hint=_HALF_HINT)
        want = _mha_variant(x, w_qkv, w_proj, 2)
        tol = _HALF_TOLERANCE[dtype]
        if not np.allclose(got, want, rtol=tol, atol=tol * np.abs(want).max()):
            c.fail("the output is not right", case=case, expected=want, got=got,
                   hint=mha_hint(x, w_qkv, w_proj, 2, got) or _HALF_HINT)
        c.ok()


_HALF_TOLERANCE = {torch.float16: 4e-3, torch.bfloat16: 3e-2}


@checker
def check_multi_head_attention(fn):
    """Check multi_head_attention(x, w_qkv, w_proj, n_heads) -> (B, T, C): causal multi-head self-attention.

    Any T (longer than the examples too); float16 and bfloat16 computed in float32 and returned
    in their own dtype; gradients reach x and both weights, equal to the reference's; the
    course's attention modules and torch's are off limits.
    """
    __tracebackhide__ = True
    c = Checker("multi_head_attention", fn, forbidden=_MHA)
    for n, (B, T, H, D) in enumerate(((2, 5, 3, 4), (1, 7, 2, 3), (3, 4, 1, 6), (2, 11, 2, 4))):
        _mha_one(c, (*_weights(n, B, T, H, D), H), _mha_case(B, T, H, D))
    # any batch, length (past tables of 128 and 256), heads and head size
    each(c, _draw_mha, _mha_one, n=15, stream=32)
    _half_precision(c, fn)
    x, w_qkv, w_proj = _weights(9, 2, 5, 3, 4)
    case = ("random x (2, 5, 12), w_qkv (36, 12), w_proj (12, 12) requiring grad, n_heads=3: "
            "the gradients")
    gradients_flow(c, fn, (x, w_qkv, w_proj), ("x", "w_qkv", "w_proj"),
                   lambda x, w_qkv, w_proj, H: ref.multi_head_attention(x, w_qkv, w_proj, H),
                   case, extra=(3,))
    c.done()


_MHA_CRASH = ("w_qkv is (3C, C) in nn.Linear's convention: x @ w_qkv.T gives (B, T, 3C); cut it "
              "into q, k, v with .chunk(3, dim=-1), split each into heads (B, H, T, D), and "
              "print the shapes as you go")


def _mha_case(B, T, H, D):
    C = H * D
    return f"random x ({B}, {T}, {C}), w_qkv ({3 * C}, {C}), w_proj ({C}, {C}), n_heads={H} (so D={D})"


def _draw_mha(d):
    B, T, H, D = _draw_sizes(d)
    H = min(H, 4)
    return (*_weights(d.seed(), B, T, H, D, seeded=True), H), _mha_case(B, T, H, D)


def _mha_one(c, args, case):
    """Check multi_head_attention on one (x, w_qkv, w_proj, n_heads)."""
    __tracebackhide__ = True
    x, w_qkv, w_proj, H = args
    B, T, C = x.shape
    crash = _MHA_CRASH
    hint = crash if T <= 8 else ("build the causal mask for this T, torch.full((T, T), "
                                 "float('-inf')).triu(1): a mask of fixed size sliced with "
                                 "[:T, :T] is too small for a longer sequence")
    got = _tensor(c, _call(c, x, w_qkv, w_proj, H, case=case, crash_hint=hint), "the output", case)
    c.shape(got, (B, T, C), "the output", case,
            hint="the output has the input's shape (B, T, C): merge the heads back to width C "
                 "and project with w_proj")
    c.finite(got, "the output", case,
             hint="a NaN row usually means a query whose keys are all masked: hide only "
                  "j > i (torch.triu(..., diagonal=1)), never the diagonal")
    want = _mha_variant(x, w_qkv, w_proj, H)
    # float32 sums over T keys and C channels round by more than matches' 1e-6 once T and C
    # grow: 1e-6 per sqrt(T * C) / 4, beside the output's size
    atol = 1e-6 * max(1.0, math.sqrt(T * C) / 4) * max(1.0, float(np.abs(want).max()))
    if not (got.shape == want.shape and np.allclose(got, want, atol=atol, rtol=1e-4)):
        hint = mha_hint(x, w_qkv, w_proj, H, got)
        if hint is None:
            x2 = x.clone()
            x2[:, -1] = 10.0
            got2 = _call(c, x2, w_qkv, w_proj, H, case=case, crash_hint=crash)
            if isinstance(got2, torch.Tensor) and got2.shape == got.shape and not matches(
                    got2.detach().double().numpy()[:, :-1], got[:, :-1]):
                hint = ("changing the last position changed earlier outputs: add the causal "
                        "mask to the scores before the softmax, and keep each head's "
                        "positions apart")
        c.fail("the output is not right", case=case, expected=want, got=got,
               hint=hint or "q, k, v = (x @ w_qkv.T).chunk(3, -1); split each into heads; "
                            "softmax(q @ k^T / sqrt(D) + causal mask) @ v per head; merge; "
                            "@ w_proj.T")
    c.ok()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "split_heads": (
        "Head h at position t is a slice of that position's C channels: the h-th group of D. "
        "So first cut the channel axis into (H, D), then move the head axis in front of T.",
        "Reshaping straight to (B, H, T, D) does not split the channels: it mixes positions into "
        "heads, and a causal mask then hides the wrong things. Cut the last axis first, then "
        "transpose.",
        "Two steps: one that cuts the last axis in two, one that reorders the axes. Keep the "
        "result connected to x (no `.detach()`, no NumPy), so gradients flow through it.",
    ),
    "merge_heads": (
        "The inverse of split_heads: put T back in front of H, then join the (H, D) axes into one "
        "of H * D channels.",
        "Skipping the transpose and reshaping (B, H, T, D) straight to (B, T, H * D) scrambles "
        "heads and positions. And after a transpose, `view` refuses; `reshape` copies where "
        "it must.",
        "Undo split_heads's two steps in the reverse order; in the result, head h's channels "
        "sit at h*D to (h+1)*D - 1 of each position.",
    ),
    "multi_head_attention": (
        "Project x to q, k and v with the stacked weight, split each into heads, attend in every "
        "head at once with the causal mask, merge the heads and project.",
        "Scale by the head size D = C / H, not by C; build the mask with torch in x's dtype "
        "(a NumPy mask makes the result float64); and keep q, k, v in the order they are stacked "
        "in w_qkv.",
        "Shapes to check along the way: x @ w_qkv.T is (B, T, 3C); each of q, k, v (B, H, T, D); "
        "scores (B, H, T, T); the merged heads (B, T, C), then @ w_proj.T.",
    ),
}


# Questions on this lesson's ideas: `answer("03-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "03-headscale": Number(
        prompt="In GPT-2 small's attention (C = 768, 12 heads), each head divides its scores "
               "by √d_k before the softmax. What number does it divide them by?",
        after="### Exercise 3: multi-head self-attention",
        value=8, tolerance=0.001,
        why="inside a head the dot product runs over D = 768 / 12 = 64 channels, so its d_k is "
            "64 and the scale √64 = 8.",
        wrong=((27.6, 27.8, "√768 is the scale of one head of 768; each of the 12 heads has "
                            "its own, smaller d_k."),
               (63.9, 64.1, "64 is the head size itself; the scores are divided by its square "
                            "root."),
               (3.4, 3.5, "√12 relates the single head's score to the 12 heads' summed "
                          "scores; a head's own scale comes from its own width.")),
        otherwise="work out the width of one head's queries and keys first."),
    "03-params": Number(
        prompt="How many parameters does `MultiHeadAttention(512, 8)` hold (C = 512, 8 heads, "
               "no biases, as in this lesson)?",
        after="one = MultiHeadAttention(C, 1)",
        value=1_048_576, tolerance=0,
        why="a (3C, C) matrix for q, k and v and a (C, C) projection: 4C² = 4 × 512² = "
            "1,048,576, whatever the number of heads.",
        wrong=((8_388_608, 8_388_608, "that gives every head its own full-width matrices; the "
                                      "heads share the same two matrices and only group their "
                                      "channels."),
               (786_432, 786_432, "that counts only the (3C, C) q, k, v matrix; the output "
                                  "projection (C, C) has weights too."),
               (131_072, 131_072, "that uses the head size D = 64 in place of C; the "
                                  "matrices act on the full width."),
               (262_144, 262_144, "that is one C × C matrix; attention has four of them "
                                  "(q, k, v and the projection).")),
        otherwise="count the entries of the two weight matrices section 1 describes."),
    "03-reshape": Choice(
        prompt="Someone splits heads with `x.reshape(B, H, T, D)` instead of "
               "`x.view(B, T, H, D).transpose(1, 2)`. What happens?",
        after="Now the tempting shortcut",
        choices={
            "a": ("a RuntimeError: the shapes do not match",
                  "the two shapes hold the same number of elements, so reshape succeeds; "
                  "that is what makes the mistake dangerous."),
            "b": ("nothing: reshape copies the data when it has to, so the result is the same",
                  "reshape keeps the numbers in memory order and regroups them; the section "
                  "printed 'same content: False'."),
            "c": ("the shape is right but heads mix positions, silently; the mask then hides "
                  "the wrong things",
                  "reshape regroups the numbers in memory order, so 'head 0' took the first "
                  "numbers of the sequence, channels of position 0 only; no error is raised."),
            "d": ("view refuses, so it has to be reshape",
                  "view refuses after a transpose (merging the heads), not here: splitting "
                  "with view first and then transposing works."),
        },
        right="c"),
    "03-onehead": Choice(
        prompt="One head of 768 is given exactly the weights of 12 heads of 64. Which is true?",
        after="Same shapes, so we can give the single head",
        choices={
            "a": ("same outputs: the same weights compute the same thing",
                  "the weights are the same but the computation is not: one softmax over "
                  "pooled scores against twelve softmaxes, one per head."),
            "b": ("the outputs differ only by float32 rounding",
                  "they differed by more than 10% of their size, far beyond rounding."),
            "c": ("the single head has 12 times the parameters",
                  "both hold a (3C, C) and a (C, C) matrix: 4C² = 2,359,296 either way."),
            "d": ("same parameters, different outputs: each query gets one distribution "
                  "instead of twelve",
                  "the single head's score is the sum of the 12 heads' scores over √12, fed "
                  "to one softmax, so it mixes all 768 value channels with one set of "
                  "weights."),
        },
        right="d"),
}
