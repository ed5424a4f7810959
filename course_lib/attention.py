"""Scaled dot-product attention: a NumPy version to read, a torch version to run.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

M is the additive mask: 0 where a query may look, -inf where it may not.
Multi-head attention splits the width C into H heads of D = C // H channels,
attends in each head separately, and concatenates and projects the results.

Shapes: B batch, H heads, T query positions, S key positions, D head size (d_k),
Dv value size, C model width.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.positions import apply_rope


def softmax(x, axis=-1):
    """Softmax along `axis`, stable for large inputs.

    Subtracting each slice's maximum first leaves the result unchanged
    (softmax ignores a constant shift) but keeps every exponent <= 0, so
    nothing overflows. Half-precision input is computed in float32 and
    returned in its own dtype.
    """
    x = np.asarray(x)
    out_dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    work = x.astype(np.promote_types(out_dtype, np.float32))
    shifted = work - work.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return (e / e.sum(axis=axis, keepdims=True)).astype(out_dtype)


def causal_mask(T):
    """The additive causal mask: 0 where key j <= query i, -inf where j > i.

    Shapes: returns (T, T); row i is query i, column j is key j.
    """
    if not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"causal_mask needs a positive integer length, got T={T!r}")
    return np.triu(np.full((T, T), -np.inf), k=1)


def _check_qkv(q, k, v):
    """Raise ValueError unless q (..., T, D), k (..., S, D), v (..., S, Dv) fit together."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim < 2:
            raise ValueError(
                f"{name} must have shape (..., positions, width), got shape {tuple(x.shape)}; "
                f"for a single vector use {name}[None, :]")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same width d_k to be dotted: "
                         f"q has {q.shape[-1]}, k has {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v need one row per key position: "
                         f"k has {k.shape[-2]} rows, v has {v.shape[-2]}")


def _check_mask(mask, T, S):
    """Raise ValueError unless the additive mask fits (..., T, S) and leaves every query a key."""
    rows, cols = ((1, 1) + tuple(mask.shape))[-2:]  # a 1-D mask broadcasts as one row
    if rows not in (1, T) or cols not in (1, S):
        raise ValueError(f"mask must broadcast to the scores' (T, S) = ({T}, {S}), "
                         f"got shape {tuple(mask.shape)}")
    if bool((mask == -np.inf).all(-1).any()):
        raise ValueError("the mask hides every key from some query (a row of all -inf), "
                         "so its softmax is 0/0; every query must see at least one key")


def attention(q, k, v, mask=None):
    """Scaled dot-product attention in NumPy.

    Shapes:
        q: (..., T, D)   k: (..., S, D)   v: (..., S, Dv)
        mask: additive, broadcastable to (..., T, S)
        returns output (..., T, Dv) and weights (..., T, S)
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    _check_qkv(q, k, v)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is not None:
        mask = np.asarray(mask)
        _check_mask(mask, q.shape[-2], k.shape[-2])
        scores = scores + mask
    weights = softmax(scores, axis=-1)  # (..., T, S), each row sums to 1
    return weights @ v, weights  # (..., T, Dv)


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False):
    """Scaled dot-product attention in torch, with scores and softmax in float32.

    With `is_causal`, the T queries are taken to be the last T of the S key
    positions (as when earlier keys come from a cache), so query i sees keys
    j <= S - T + i. With T == S that is the ordinary causal mask.

    Shapes:
        q: (..., T, D)   k: (..., S, D)   v: (..., S, Dv)
        mask: additive float, broadcastable to (..., T, S)
        returns (..., T, Dv) in q's dtype
    """
    _check_qkv(q, k, v)
    T, S = q.shape[-2], k.shape[-2]
    if mask is not None and is_causal:
        raise ValueError("pass either mask or is_causal=True, not both; "
                         "add the causal mask into your own mask instead")
    if is_causal:
        if T > S:
            raise ValueError(f"is_causal needs at most as many queries as keys, got T={T}, S={S}")
        allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=S - T)
        mask = torch.zeros(T, S, device=q.device).masked_fill(~allowed, float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            raise TypeError("mask must be additive floats (0 = may attend, -inf = hidden), "
                            "got a boolean tensor; convert it with "
                            "torch.zeros(m.shape).masked_fill(~m, float('-inf'))")
        _check_mask(mask, T, S)
    # Half-precision scores overflow (float16 tops out at 65504), so work in float32.
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is not None:
        scores = scores + mask.float()
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v.float()).to(q.dtype)  # (..., T, Dv)


def split_heads(x, n_heads):
    """Split the model width into heads: head h gets channels h*D .. (h+1)*D - 1.

    Shapes: (B, T, C) -> (B, H, T, C // H)
    """
    if x.ndim != 3:
        raise ValueError(f"split_heads expects x of shape (B, T, C), got shape {tuple(x.shape)}; "
                         f"for a single sequence use x[None]")
    B, T, C = x.shape
    if not isinstance(n_heads, (int, np.integer)) or n_heads < 1 or C % n_heads:
        raise ValueError(f"the width C={C} must split evenly into n_heads={n_heads!r}; "
                         f"choose n_heads among the divisors of C")
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)  # (B, H, T, D)


def merge_heads(x):
    """Concatenate the heads back into the model width: the inverse of split_heads.

    Shapes: (B, H, T, D) -> (B, T, H * D)
    """
    if x.ndim != 4:
        raise ValueError(f"merge_heads expects x of shape (B, H, T, D), got shape {tuple(x.shape)}")
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H, D) -> (B, T, C)


def _check_mha_weights(x, w_qkv, w_proj, n_heads):
    """Raise ValueError unless x (B, T, C), w_qkv (3C, C) and w_proj (C, C) fit together."""
    if x.ndim != 3:
        raise ValueError(f"x must have shape (B, T, C), got shape {tuple(x.shape)}; "
                         f"for a single sequence use x[None]")
    C = x.shape[-1]
    if tuple(w_qkv.shape) != (3 * C, C):
        raise ValueError(f"w_qkv must be the stacked q, k, v weights of shape (3C, C) = "
                         f"({3 * C}, {C}) for width C={C}, got {tuple(w_qkv.shape)}")
    if tuple(w_proj.shape) != (C, C):
        raise ValueError(f"w_proj must have shape (C, C) = ({C}, {C}), got {tuple(w_proj.shape)}")


def multi_head_attention(x, w_qkv, w_proj, n_heads, causal=True):
    """Multi-head self-attention from its two weight matrices (nn.Linear convention, y = x @ W.T).

    Rows 0..C-1 of w_qkv make the queries, C..2C-1 the keys, 2C..3C-1 the values.
    Each head h attends with its own D = C // H channels of q, k and v, scaled
    by sqrt(D); the heads' outputs are concatenated and projected by w_proj.

    Shapes: x (B, T, C), w_qkv (3C, C), w_proj (C, C) -> (B, T, C)
    """
    _check_mha_weights(x, w_qkv, w_proj, n_heads)
    q, k, v = (x @ w_qkv.T).chunk(3, dim=-1)  # each (B, T, C)
    q, k, v = (split_heads(t, n_heads) for t in (q, k, v))  # each (B, H, T, D)
    a = scaled_dot_product_attention(q, k, v, is_causal=causal)  # (B, H, T, D)
    return merge_heads(a) @ w_proj.T  # (B, T, C)


def _fused_attention(q, k, v, causal):
    """torch's fused attention, with the T queries taken as the last T of the S keys when causal.

    Shapes: q (B, H, T, D), k and v (B, H, S, D) -> (B, H, T, D)
    """
    if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        # bf16 autocast on a CPU: attention itself in float32, where torch's fused CPU
        # kernel is fast (its bf16 backward is not; bench/train_throughput.py --cpu-bf16)
        with torch.autocast("cpu", enabled=False):
            return _fused_attention(q.float(), k.float(), v.float(), causal).to(q.dtype)
    T, S = q.shape[-2], k.shape[-2]
    if not causal:
        return F.scaled_dot_product_attention(q, k, v)
    if T == S:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if T == 1:  # the newest position may see every key
        return F.scaled_dot_product_attention(q, k, v)
    # torch's is_causal aligns the mask top-left when T != S; ours is bottom-right.
    allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=S - T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


def repeat_kv(x, n_rep):
    """Grouped-query attention's sharing: repeat each key/value head for n_rep query heads in turn.

    Query head h reads key/value head h // n_rep: the copies of one head sit next to
    each other (kv0, kv0, kv1, kv1, ... for n_rep = 2), as in Llama and Hugging Face.

    Shapes: (B, Hkv, S, D) -> (B, Hkv * n_rep, S, D)
    """
    if n_rep == 1:
        return x
    B, H_kv, S, D = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, S, D).reshape(B, H_kv * n_rep, S, D)


class MultiHeadAttention(torch.nn.Module):
    """Multi-head self-attention with one fused q/k/v projection and an output projection.

    `causal=False` drops the mask; it exists only to show what goes wrong without it.
    `n_kv_heads` < n_heads gives grouped-query attention: fewer key/value heads, each
    shared by n_heads // n_kv_heads query heads (1 is multi-query attention).
    `rope_base` rotates queries and keys by their positions (RoPE, lesson 05's
    apply_rope) instead of relying on a position table. `bias` adds biases to both
    projections, as GPT-2 has.

    Shapes: (B, T, C) -> (B, T, C); the fused projection's weight is ((H + 2 Hkv) D, C)
    """

    def __init__(self, d_model, n_heads, causal=True, *, n_kv_heads=None, rope_base=None,
                 bias=False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.causal = causal
        self.rope_base = rope_base
        d_head = d_model // n_heads
        self.qkv = torch.nn.Linear(d_model, (n_heads + 2 * n_kv_heads) * d_head, bias=bias)
        self.proj = torch.nn.Linear(d_model, d_model, bias=bias)

    def project(self, x, start=0):
        """Queries, keys and values of x, split into heads, rotated when the model uses RoPE.

        `start` is the position of x's first row (the cache length while decoding).

        Shapes: x (B, T, C) -> q (B, H, T, D), k and v (B, Hkv, T, D)
        """
        C = x.shape[-1]
        kv_width = self.n_kv_heads * (C // self.n_heads)
        q, k, v = self.qkv(x).split([C, kv_width, kv_width], dim=-1)  # (B, T, C), (B, T, Hkv D) x2
        q = split_heads(q, self.n_heads)  # (B, H, T, D)
        k, v = split_heads(k, self.n_kv_heads), split_heads(v, self.n_kv_heads)  # (B, Hkv, T, D)
        if self.rope_base is not None:
            positions = torch.arange(start, start + x.shape[1], device=x.device)
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
        return q, k, v

    def forward(self, x, cache=None, layer=0):
        """Attend over x, and with a KVCache also over the positions cached before it.

        With a cache, x's T positions come after the cache's `length`: their keys and
        values are stored in layer `layer` and each query sees every earlier position.
        """
        if cache is not None and not self.causal:
            raise ValueError("a KV cache needs causal attention: without the mask, earlier "
                             "positions would have to see tokens that do not exist yet")
        q, k, v = self.project(x, start=0 if cache is None else cache.length)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # each (B, Hkv, S, D), S = cached + T
        n_rep = self.n_heads // self.n_kv_heads
        a = _fused_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), self.causal)  # (B, H, T, D)
        return self.proj(merge_heads(a))  # (B, T, C)

    def attention_weights(self, x):
        """Every head's attention weights for input x, from the same projections and mask as forward.

        Row i of head h is query i's distribution over the keys; it sums to 1, and with
        causal=True it is 0 for every key j > i.

        Shapes: (B, T, C) -> (B, H, T, T)
        """
        q, k, _ = self.project(x)
        k = repeat_kv(k, self.n_heads // self.n_kv_heads)  # (B, H, T, D)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, T, T)
        if self.causal:
            T = x.shape[1]
            hidden = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
            scores = scores.masked_fill(hidden, float("-inf"))
        return torch.softmax(scores.float(), dim=-1).to(x.dtype)
