"""Tests for course_lib.attention: softmax, causal_mask, attention (NumPy and torch), multi-head attention."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import (
    MultiHeadAttention,
    attention,
    causal_mask,
    merge_heads,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)


def assert_close(got, ref, rtol, atol):
    """torch.allclose with the worst difference in the message (cheaper to import than torch.testing)."""
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert torch.allclose(got, ref, rtol=rtol, atol=atol), f"max abs diff {(got - ref).abs().max().item():.3g}"


def _softmax64(x, axis):
    """Plain float64 softmax, no shift: the reference for moderate inputs."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


# --- softmax ----------------------------------------------------------------


@pytest.mark.parametrize("shape, axis", [((5,), -1), ((3, 7), -1), ((3, 7), 0), ((2, 3, 4), 1), ((2, 3, 4), -1)])
def test_softmax_matches_float64_reference(shape, axis):
    x = np.random.default_rng(0).normal(scale=3.0, size=shape)
    got = softmax(x, axis=axis)
    assert got.shape == x.shape
    np.testing.assert_allclose(got, _softmax64(x, axis), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-12)


def test_softmax_invariant_to_constant_shift():
    x = np.random.default_rng(1).normal(size=(4, 6))
    np.testing.assert_allclose(softmax(x + 17.5), softmax(x), rtol=1e-12)
    np.testing.assert_allclose(softmax(x - 300.0), softmax(x), rtol=1e-12)


def test_softmax_large_inputs_finite():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0], [5000.0, 0.0, -5000.0]])
    got = softmax(x)
    assert np.all(np.isfinite(got))
    expected = _softmax64([0.0, 1.0, 2.0], axis=-1)
    np.testing.assert_allclose(got[0], expected, rtol=1e-12)
    np.testing.assert_allclose(got[1], expected[::-1], rtol=1e-12)
    np.testing.assert_allclose(got[2], [1.0, 0.0, 0.0], atol=1e-300)


def test_softmax_float16_finite_and_close():
    x = np.random.default_rng(2).normal(scale=4.0, size=(10, 12)).astype(np.float16)
    x[0, 0] = 60000.0  # exp overflows float16 without the shift
    got = softmax(x)
    assert got.dtype == np.float16
    assert np.all(np.isfinite(got))
    ref = _softmax64(x.astype(np.float64) - x.astype(np.float64).max(-1, keepdims=True), axis=-1)
    # computed in float32 and rounded once: within float16's rounding error (2**-11) of the exact answer
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=5e-4, atol=1e-7)


def test_softmax_integer_input_returns_float():
    got = softmax(np.array([[1, 2, 3], [0, 0, 0]]))
    assert np.issubdtype(got.dtype, np.floating)
    np.testing.assert_allclose(got, _softmax64([[1, 2, 3], [0, 0, 0]], axis=-1), rtol=1e-12)


# --- causal_mask ------------------------------------------------------------


def test_causal_mask_values():
    m = causal_mask(4)
    assert m.shape == (4, 4)
    for i in range(4):
        for j in range(4):
            if j <= i:
                assert m[i, j] == 0.0
            else:
                assert m[i, j] == -np.inf


def test_causal_mask_length_one():
    m = causal_mask(1)
    assert m.shape == (1, 1)
    assert m[0, 0] == 0.0


@pytest.mark.parametrize("T", [0, -1, 2.5])
def test_causal_mask_rejects_bad_length(T):
    with pytest.raises(ValueError, match="positive integer"):
        causal_mask(T)


# --- attention (NumPy) ------------------------------------------------------


def test_attention_worked_example():
    k = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
    q = np.array([[1.0, 0.0]])
    out, w = attention(q, k, v)
    np.testing.assert_allclose(w, [[0.401, 0.198, 0.401]], atol=5e-4)
    np.testing.assert_allclose(out, [[1.604, 0.797]], atol=5e-4)


def _torch_sdpa_ref(q, k, v, is_causal=False):
    """torch's fused attention on NumPy inputs, run in float64, with leading dims added if needed."""
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    extra = max(0, 3 - tq.ndim)
    for _ in range(extra):
        tq, tk, tv = tq[None], tk[None], tv[None]
    out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal)
    for _ in range(extra):
        out = out[0]
    return out.numpy()


SHAPES = [  # (batch dims, T, S, D, Dv)
    ((), 4, 4, 8, 8),
    ((), 3, 5, 4, 6),
    ((2,), 5, 5, 8, 8),
    ((2,), 3, 6, 4, 2),
    ((2, 3), 4, 4, 8, 8),
    ((2, 3), 2, 7, 4, 5),
]


@pytest.mark.parametrize("batch, T, S, D, Dv", SHAPES)
def test_attention_matches_torch(batch, T, S, D, Dv):
    rng = np.random.default_rng(3)
    q = rng.normal(size=batch + (T, D))
    k = rng.normal(size=batch + (S, D))
    v = rng.normal(size=batch + (S, Dv))
    out, w = attention(q, k, v)
    assert out.shape == batch + (T, Dv)
    assert w.shape == batch + (T, S)
    np.testing.assert_allclose(out, _torch_sdpa_ref(q, k, v), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("batch, T, D, Dv", [((), 5, 4, 4), ((2,), 4, 8, 3), ((2, 3), 6, 4, 8)])
def test_attention_causal_matches_torch(batch, T, D, Dv):
    rng = np.random.default_rng(4)
    q = rng.normal(size=batch + (T, D))
    k = rng.normal(size=batch + (T, D))
    v = rng.normal(size=batch + (T, Dv))
    out, w = attention(q, k, v, mask=causal_mask(T))
    assert out.shape == batch + (T, Dv)
    np.testing.assert_allclose(out, _torch_sdpa_ref(q, k, v, is_causal=True), rtol=1e-10, atol=1e-12)
    assert np.all(np.triu(w, k=1) == 0.0)


def test_attention_causal_first_row_is_v0_and_future_ignored():
    rng = np.random.default_rng(5)
    T, D = 5, 4
    q, k, v = rng.normal(size=(T, D)), rng.normal(size=(T, D)), rng.normal(size=(T, 3))
    out, _ = attention(q, k, v, mask=causal_mask(T))
    np.testing.assert_array_equal(out[0], v[0])
    k2, v2 = k.copy(), v.copy()
    k2[-1] = rng.normal(size=D) * 10
    v2[-1] = rng.normal(size=3) * 10
    out2, _ = attention(q, k2, v2, mask=causal_mask(T))
    np.testing.assert_array_equal(out2[:-1], out[:-1])
    assert not np.allclose(out2[-1], out[-1])


def test_attention_error_width_mismatch():
    with pytest.raises(ValueError, match="same width"):
        attention(np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 4)))


def test_attention_error_kv_length_mismatch():
    with pytest.raises(ValueError, match="one row per key"):
        attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((5, 3)))


def test_attention_error_1d_query():
    with pytest.raises(ValueError, match=r"q\[None, :\]"):
        attention(np.ones(3), np.ones((4, 3)), np.ones((4, 3)))


def test_attention_error_mask_shape():
    with pytest.raises(ValueError, match=r"mask must broadcast to the scores. \(T, S\)"):
        attention(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2)), mask=causal_mask(3))


def test_attention_error_mask_row_all_hidden():
    mask = np.zeros((3, 3))
    mask[1, :] = -np.inf
    with pytest.raises(ValueError, match="all -inf"):
        attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), mask=mask)


# --- scaled_dot_product_attention (torch) -----------------------------------


def _random_additive_mask(T, S, gen):
    """Random finite offsets with some -inf, leaving each row at least one visible key."""
    mask = torch.randn(T, S, generator=gen)
    hidden = torch.rand(T, S, generator=gen) < 0.4
    hidden[torch.arange(T), torch.randint(0, S, (T,), generator=gen)] = False
    return mask.masked_fill(hidden, float("-inf"))


@pytest.mark.parametrize("batch, T, S, D, Dv", SHAPES)
@pytest.mark.parametrize("kind", ["none", "mask", "causal"])
def test_sdpa_matches_torch(batch, T, S, D, Dv, kind):
    gen = torch.Generator().manual_seed(6)
    q = torch.randn(batch + (T, D), generator=gen)
    k = torch.randn(batch + (S, D), generator=gen)
    v = torch.randn(batch + (S, Dv), generator=gen)
    if kind == "causal" and T != S:
        pytest.skip("F.scaled_dot_product_attention aligns is_causal top-left when T != S; see the T < S test")
    if kind == "none":
        got = scaled_dot_product_attention(q, k, v)
        ref = F.scaled_dot_product_attention(q, k, v)
    elif kind == "mask":
        mask = _random_additive_mask(T, S, gen)
        got = scaled_dot_product_attention(q, k, v, mask=mask)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        got = scaled_dot_product_attention(q, k, v, is_causal=True)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert got.shape == batch + (T, Dv)
    assert got.dtype == torch.float32
    assert_close(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("T, S", [(1, 5), (3, 7), (4, 4)])
def test_sdpa_causal_bottom_right_when_fewer_queries(T, S):
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(2, T, 4, generator=gen)
    k = torch.randn(2, S, 4, generator=gen)
    v = torch.randn(2, S, 3, generator=gen)
    mask = torch.zeros(T, S)
    for i in range(T):
        for j in range(S):
            if j > S - T + i:  # query i is key position S - T + i
                mask[i, j] = float("-inf")
    got = scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_close(got, ref, rtol=1e-5, atol=1e-6)
    if T < S:  # the top-left alignment really is different here
        top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert not torch.allclose(got, top_left, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sdpa_half_precision_large_scores(dtype):
    T, D = 4, 8
    q = torch.full((T, D), 100.0, dtype=dtype)
    k = torch.full((T, D), 100.0, dtype=dtype)
    k[1] = 99.0  # scores differ by 800 / sqrt(8): softmax is far from uniform
    v = torch.randn(T, 3, generator=torch.Generator().manual_seed(8)).to(dtype)
    for is_causal in (False, True):
        got = scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        assert got.dtype == dtype
        assert torch.isfinite(got).all()
        ref = F.scaled_dot_product_attention(q.double()[None], k.double()[None], v.double()[None],
                                             is_causal=is_causal)[0]
        assert_close(got.double(), ref, rtol=2e-2, atol=2e-2)


def test_naive_float16_attention_overflows():
    """The input of the half-precision test really is dangerous: done naively in float16 it is NaN."""
    q = torch.full((4, 8), 100.0, dtype=torch.float16)
    scores = q @ q.T / math.sqrt(8)
    naive = torch.softmax(scores, dim=-1) @ q
    assert torch.isinf(scores).all()
    assert torch.isnan(naive).any()


def test_sdpa_error_mask_and_causal():
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match="not both"):
        scaled_dot_product_attention(x, x, x, mask=torch.zeros(3, 3), is_causal=True)


def test_sdpa_error_boolean_mask():
    x = torch.randn(3, 4)
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(x, x, x, mask=torch.ones(3, 3, dtype=torch.bool))


def test_sdpa_error_more_queries_than_keys_causal():
    with pytest.raises(ValueError, match="T=5, S=3"):
        scaled_dot_product_attention(torch.randn(5, 4), torch.randn(3, 4), torch.randn(3, 4), is_causal=True)


# --- split_heads / merge_heads / MultiHeadAttention -------------------------


def test_split_merge_round_trip_and_shapes():
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(9))
    h = split_heads(x, 3)
    assert h.shape == (2, 3, 5, 4)
    back = merge_heads(h)
    assert back.shape == (2, 5, 12)
    assert torch.equal(back, x)


def test_split_heads_puts_channel_block_h_in_head_h():
    B, T, H, D = 2, 3, 4, 5
    x = torch.arange(B * T * H * D, dtype=torch.float32).reshape(B, T, H * D)
    h = split_heads(x, H)
    for head in range(H):
        assert torch.equal(h[:, head], x[:, :, head * D:(head + 1) * D])


def _mha(d_model=16, n_heads=4, causal=True, seed=10):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, n_heads, causal=causal)


def test_mha_output_shape():
    mha = _mha()
    x = torch.randn(3, 7, 16)
    assert mha(x).shape == (3, 7, 16)


def test_mha_causal_future_does_not_change_past():
    mha = _mha()
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(11))
    y = mha(x)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(2, 2, 16)
    y2 = mha(x2)
    assert torch.equal(y2[:, :4], y[:, :4])
    assert not torch.allclose(y2[:, 4:], y[:, 4:])


def test_mha_non_causal_future_changes_past():
    mha = _mha(causal=False)
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(12))
    x2 = x.clone()
    x2[:, 5:] = torch.randn(2, 1, 16)
    assert not torch.allclose(mha(x2)[:, :5], mha(x)[:, :5])


@pytest.mark.parametrize("causal", [True, False])
def test_mha_equals_manual_computation(causal):
    C, H = 12, 3
    D = C // H
    mha = _mha(C, H, causal=causal)
    x = torch.randn(2, 5, C, generator=torch.Generator().manual_seed(13))
    W = mha.qkv.weight  # (3C, C): rows 0..C-1 make q, C..2C-1 make k, 2C..3C-1 make v
    q, k, v = x @ W[:C].T, x @ W[C:2 * C].T, x @ W[2 * C:].T
    heads = []
    for h in range(H):
        sl = slice(h * D, (h + 1) * D)
        heads.append(F.scaled_dot_product_attention(q[..., sl], k[..., sl], v[..., sl], is_causal=causal))
    expected = torch.cat(heads, dim=-1) @ mha.proj.weight.T
    with torch.no_grad():
        assert_close(mha(x), expected, rtol=1e-5, atol=1e-6)


def test_mha_error_not_divisible():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=3"):
        MultiHeadAttention(10, 3)
