"""Tests for multi-head attention in course_lib.attention: split and merge, the functional form,
MultiHeadAttention.attention_weights, and parity with PyTorch's fused kernel and nn.MultiheadAttention."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention, merge_heads, multi_head_attention, split_heads

ATOL = 1e-5  # float32 outputs of order 1, summed in different orders


def _inputs(B=2, T=5, C=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, C, generator=g)


def _mha(C=12, H=3, causal=True, seed=1):
    torch.manual_seed(seed)
    return MultiHeadAttention(C, H, causal=causal)


def _causal(T):
    return torch.full((T, T), float("-inf")).triu(1)


# --- split_heads / merge_heads ------------------------------------------------


def test_split_heads_is_not_a_plain_reshape():
    x = torch.arange(2 * 5 * 12, dtype=torch.float32).reshape(2, 5, 12)  # B, T, H, D all differ
    h = split_heads(x, 3)
    assert h.shape == (2, 3, 5, 4)
    assert not torch.equal(h, x.reshape(2, 3, 5, 4))
    assert torch.equal(h[1, 2, 4], x[1, 4, 8:12])  # batch 1, head 2, position 4


@pytest.mark.parametrize("B, T, H, D", [(1, 1, 1, 1), (3, 2, 4, 5), (2, 7, 6, 1)])
def test_merge_inverts_split(B, T, H, D):
    x = _inputs(B, T, H * D)
    assert torch.equal(merge_heads(split_heads(x, H)), x)
    y = torch.randn(B, H, T, D)
    assert torch.equal(split_heads(merge_heads(y), H), y)


def test_split_heads_error_not_divisible():
    with pytest.raises(ValueError, match=r"C=12 must split evenly into n_heads=5"):
        split_heads(_inputs(), 5)


def test_split_heads_error_wrong_rank():
    with pytest.raises(ValueError, match=r"\(B, T, C\), got shape \(5, 12\).*x\[None\]"):
        split_heads(torch.zeros(5, 12), 3)


def test_merge_heads_error_wrong_rank():
    with pytest.raises(ValueError, match=r"\(B, H, T, D\), got shape \(2, 5, 12\)"):
        merge_heads(torch.zeros(2, 5, 12))


# --- multi_head_attention (functional) ----------------------------------------


@pytest.mark.parametrize("causal", [True, False])
def test_functional_equals_module(causal):
    mha = _mha(causal=causal)
    x = _inputs()
    with torch.no_grad():
        got = multi_head_attention(x, mha.qkv.weight, mha.proj.weight, 3, causal=causal)
        assert got.shape == (2, 5, 12)
        assert torch.allclose(got, mha(x), atol=ATOL)


@pytest.mark.parametrize("B, T, C, H", [(2, 5, 12, 3), (1, 9, 16, 4), (3, 4, 6, 1)])
def test_functional_matches_nn_multihead_attention(B, T, C, H):
    torch.manual_seed(2)
    theirs = nn.MultiheadAttention(C, H, bias=False, batch_first=True)
    x = _inputs(B, T, C, seed=3)
    with torch.no_grad():
        want, _ = theirs(x, x, x, attn_mask=_causal(T), need_weights=False)
        got = multi_head_attention(x, theirs.in_proj_weight, theirs.out_proj.weight, H)
    assert torch.allclose(got, want, atol=ATOL)


def test_functional_matches_fused_kernel_head_by_head():
    C, H, T = 24, 4, 6
    D = C // H
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, T, C, generator=g)
    w_qkv, w_proj = torch.randn(3 * C, C, generator=g) / C**0.5, torch.randn(C, C, generator=g) / C**0.5
    q, k, v = (x @ w_qkv.T).chunk(3, dim=-1)
    heads = [F.scaled_dot_product_attention(*(t[..., h * D:(h + 1) * D] for t in (q, k, v)), is_causal=True)
             for h in range(H)]
    want = torch.cat(heads, dim=-1) @ w_proj.T
    assert torch.allclose(multi_head_attention(x, w_qkv, w_proj, H), want, atol=ATOL)


def test_functional_future_does_not_change_past():
    mha = _mha()
    x = _inputs()
    x2 = x.clone()
    x2[:, 3:] = 7.0
    with torch.no_grad():
        a = multi_head_attention(x, mha.qkv.weight, mha.proj.weight, 3)
        b = multi_head_attention(x2, mha.qkv.weight, mha.proj.weight, 3)
    assert torch.equal(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_functional_error_weight_shapes():
    x = _inputs()
    with pytest.raises(ValueError, match=r"w_qkv must be .* \(36, 12\) for width C=12, got \(12, 36\)"):
        multi_head_attention(x, torch.zeros(12, 36), torch.zeros(12, 12), 3)
    with pytest.raises(ValueError, match=r"w_proj must have shape \(C, C\) = \(12, 12\), got \(12, 6\)"):
        multi_head_attention(x, torch.zeros(36, 12), torch.zeros(12, 6), 3)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, C\)"):
        multi_head_attention(x[0], torch.zeros(36, 12), torch.zeros(12, 12), 3)


def test_functional_error_heads_do_not_divide():
    with pytest.raises(ValueError, match=r"n_heads=5"):
        multi_head_attention(_inputs(), torch.zeros(36, 12), torch.zeros(12, 12), 5)


# --- MultiHeadAttention.attention_weights -------------------------------------


def test_attention_weights_shape_rows_and_mask():
    w = _mha().attention_weights(_inputs(B=2, T=5)).detach()
    assert w.shape == (2, 3, 5, 5)
    assert torch.allclose(w.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(w.triu(1) == 0)
    assert torch.all(w[..., torch.ones(5, 5, dtype=torch.bool).tril()] > 0)  # every visible key gets some weight


def test_attention_weights_without_mask_see_the_future():
    w = _mha(causal=False).attention_weights(_inputs()).detach()
    assert torch.all(w > 0)
    assert torch.allclose(w.sum(-1), torch.ones(2, 3, 5))


@pytest.mark.parametrize("causal", [True, False])
def test_attention_weights_reproduce_forward(causal):
    mha = _mha(causal=causal)
    x = _inputs()
    with torch.no_grad():
        w = mha.attention_weights(x)                              # (B, H, T, T)
        v = split_heads(mha.qkv(x).chunk(3, dim=-1)[2], 3)         # (B, H, T, D)
        assert torch.allclose(mha.proj(merge_heads(w @ v)), mha(x), atol=ATOL)


def test_attention_weights_match_nn_multihead_attention():
    mha = _mha(C=16, H=4)
    theirs = nn.MultiheadAttention(16, 4, bias=False, batch_first=True)
    x = _inputs(B=3, T=6, C=16)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(mha.qkv.weight)
        theirs.out_proj.weight.copy_(mha.proj.weight)
        _, want = theirs(x, x, x, attn_mask=_causal(6), average_attn_weights=False)
        assert torch.allclose(mha.attention_weights(x), want, atol=ATOL)


def test_attention_weights_keep_dtype_in_bfloat16():
    mha = _mha().to(torch.bfloat16)
    w = mha.attention_weights(_inputs().to(torch.bfloat16) * 100).detach()
    assert w.dtype == torch.bfloat16
    assert torch.isfinite(w).all()


# --- many small heads against one big one --------------------------------------


def test_same_parameters_different_computation():
    C = 64
    eight, one = _mha(C, 8), _mha(C, 1)
    assert sum(p.numel() for p in eight.parameters()) == sum(p.numel() for p in one.parameters()) == 4 * C * C
    one.load_state_dict(eight.state_dict())
    x = _inputs(C=C)
    with torch.no_grad():
        assert not torch.allclose(eight(x), one(x), atol=1e-3)
        q8, k8 = (split_heads(t, 8) for t in eight.qkv(x).chunk(3, dim=-1)[:2])
        q1, k1 = (split_heads(t, 1) for t in one.qkv(x).chunk(3, dim=-1)[:2])
        s8 = q8 @ k8.transpose(-2, -1) / math.sqrt(C // 8)   # (B, 8, T, T)
        s1 = q1 @ k1.transpose(-2, -1) / math.sqrt(C)        # (B, 1, T, T)
    assert torch.allclose(s1, s8.sum(dim=1, keepdim=True) / math.sqrt(8), atol=ATOL)
