"""Tests for course_lib.positions: the sinusoidal table, RoPE and the learned table."""
import math

import pytest
import torch

from course_lib.attention import MultiHeadAttention
from course_lib.positions import LearnedPositions, apply_rope, pair_frequencies, sinusoidal_positions


def sinusoidal64(T, d):
    """The paper's formula, one entry at a time, in float64."""
    pe = torch.zeros(T, d, dtype=torch.float64)
    for pos in range(T):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


def rope64(x, positions, base=10000.0):
    """RoPE one pair at a time in float64: (a, b) -> (a cos t - b sin t, a sin t + b cos t)."""
    x = x.double()
    out = torch.empty_like(x)
    D = x.shape[-1]
    for row, pos in enumerate(positions.tolist()):
        for i in range(D // 2):
            t = pos * base ** (-2 * i / D)
            a, b = x[..., row, 2 * i], x[..., row, 2 * i + 1]
            out[..., row, 2 * i] = a * math.cos(t) - b * math.sin(t)
            out[..., row, 2 * i + 1] = a * math.sin(t) + b * math.cos(t)
    return out


def rope_complex(x, positions, base=10000.0):
    """RoPE as complex multiplication: pair (2i, 2i + 1) is the number x_2i + j x_2i+1, times e^(j t)."""
    D = x.shape[-1]
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
    freqs = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    turn = torch.polar(torch.ones(len(positions), D // 2, dtype=torch.float64),
                       positions.double()[:, None] * freqs)
    return torch.view_as_real(z * turn).flatten(-2)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# sinusoidal_positions

@pytest.mark.parametrize("T, d", [(1, 2), (7, 4), (50, 16), (3, 64)])
def test_sinusoidal_shape_dtype_and_values(T, d):
    pe = sinusoidal_positions(T, d)
    assert pe.shape == (T, d) and pe.dtype == torch.float32
    assert torch.allclose(pe.double(), sinusoidal64(T, d), atol=1e-6)


def test_sinusoidal_position_zero_is_sin0_cos0():
    assert torch.equal(sinusoidal_positions(5, 8)[0], torch.tensor([0.0, 1.0] * 4))


def test_sinusoidal_offset_is_a_fixed_rotation_of_each_pair():
    """PE[pos + k] = M_k PE[pos] with M_k the same for every pos: block-diagonal 2x2 rotations."""
    T, d, k = 40, 12, 7
    pe = sinusoidal_positions(T + k, d).double()
    M = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(pair_frequencies(d).double().tolist()):
        c, s = math.cos(k * w), math.sin(k * w)
        M[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    assert torch.allclose(pe[:T] @ M.T, pe[k:], atol=1e-5)


@pytest.mark.parametrize("T, d, match", [(4, 5, "d_model must be even.*d_model=5"),
                                         (0, 4, "T .* must be a positive integer, got 0"),
                                         (4, 0, "d_model must be a positive integer, got 0"),
                                         (2.5, 4, "got 2.5")])
def test_sinusoidal_errors(T, d, match):
    with pytest.raises(ValueError, match=match):
        sinusoidal_positions(T, d)


# apply_rope

@pytest.mark.parametrize("shape", [(5, 6), (2, 5, 6), (2, 3, 4, 8)])
def test_rope_shape_and_values(shape):
    x = randn(*shape)
    positions = torch.tensor([0, 1, 4, 9, 2, 30, 100, 7][: shape[-2]])
    got = apply_rope(x, positions)
    assert got.shape == x.shape and got.dtype == x.dtype
    assert torch.allclose(got.double(), rope64(x, positions), atol=1e-5)
    assert torch.allclose(got.double(), rope_complex(x, positions), atol=1e-5)


def test_rope_other_base():
    x, positions = randn(3, 4, 10), torch.tensor([0, 3, 5, 11])
    got = apply_rope(x, positions, base=500.0)
    assert torch.allclose(got.double(), rope64(x, positions, base=500.0), atol=1e-5)
    assert not torch.allclose(got, apply_rope(x, positions), atol=1e-3)


def test_rope_position_zero_is_the_identity_and_norms_are_kept():
    x = randn(2, 6, 8)
    got = apply_rope(x, torch.tensor([0, 1, 2, 50, 0, 999]))
    assert torch.equal(got[:, 0], x[:, 0]) and torch.equal(got[:, 4], x[:, 4])
    pair_norms = lambda t: t.reshape(*t.shape[:-1], -1, 2).norm(dim=-1)  # each pair keeps its length
    assert torch.allclose(pair_norms(got), pair_norms(x), atol=1e-5)


def test_rope_score_depends_only_on_distance():
    """q at m and k at n give the same score as q at m + s and k at n + s."""
    D = 16
    q, k = randn(1, D, seed=1), randn(1, D, seed=2)
    at = lambda v, p: apply_rope(v, torch.tensor([p]))[0]  # v rotated to position p, (D,)
    for m, n, s in [(0, 0, 5), (3, 10, 1), (10, 3, 40), (7, 7, 123), (0, 31, 64), (50, 2, 9)]:
        assert torch.allclose(at(q, m) @ at(k, n), at(q, m + s) @ at(k, n + s), atol=1e-4), (m, n, s)
    # and it does depend on the distance
    assert not torch.allclose(at(q, 0) @ at(k, 1), at(q, 0) @ at(k, 2), atol=1e-2)


def test_rope_shifted_attention_weights_are_the_same():
    """Shifting every position by the same amount leaves RoPE attention unchanged."""
    q, k = randn(2, 6, 8, seed=3), randn(2, 6, 8, seed=4)
    def weights(offset):
        pos = torch.arange(6) + offset
        return torch.softmax(apply_rope(q, pos) @ apply_rope(k, pos).transpose(-1, -2), dim=-1)
    assert torch.allclose(weights(0), weights(37), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_rope_keeps_the_dtype(dtype):
    x, positions = randn(3, 8), torch.arange(3)
    got = apply_rope(x.to(dtype), positions)
    assert got.dtype == dtype
    assert torch.allclose(got.double(), rope64(x.to(dtype), positions), atol=2e-2)


def test_rope_accepts_int32_positions():
    x = randn(4, 6)
    assert torch.equal(apply_rope(x, torch.arange(4, dtype=torch.int32)), apply_rope(x, torch.arange(4)))


def test_rope_errors():
    with pytest.raises(ValueError, match=r"must be even.*got D=5"):
        apply_rope(randn(3, 5), torch.arange(3))
    with pytest.raises(ValueError, match=r"positions must have shape \(T,\) = \(3,\).*got shape \(4,\)"):
        apply_rope(randn(3, 4), torch.arange(4))
    with pytest.raises(ValueError, match=r"got shape \(1, 3\)"):
        apply_rope(randn(3, 4), torch.arange(3)[None])
    with pytest.raises(ValueError, match=r"\(\.\.\., T, D\).*x\[None, :\]"):
        apply_rope(randn(4), torch.arange(1))
    with pytest.raises(TypeError, match=r"positions must be integers.*float32"):
        apply_rope(randn(3, 4), torch.arange(3.0))
    with pytest.raises(TypeError, match=r"torch tensors.*ndarray"):
        apply_rope(randn(3, 4).numpy(), torch.arange(3))


def test_pair_frequencies():
    w = pair_frequencies(8)
    assert w.shape == (4,) and w[0] == 1.0
    assert torch.allclose(w.double(), torch.tensor([10000 ** (-2 * i / 8) for i in range(4)], dtype=torch.float64))
    with pytest.raises(ValueError, match="even"):
        pair_frequencies(7)


# order blindness, and LearnedPositions

def test_attention_without_positions_is_permutation_equivariant():
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 4, causal=False)
    x, perm = randn(1, 7, 16), torch.randperm(7, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(attn(x[:, perm]), attn(x)[:, perm], atol=1e-5)
        pe = sinusoidal_positions(7, 16)
        assert not torch.allclose(attn(x[:, perm] + pe), (attn(x + pe))[:, perm], atol=1e-2)


def test_learned_positions_is_a_table_that_ends_at_max_len():
    table = LearnedPositions(8, 4)
    assert torch.equal(table(torch.arange(8)), table.weight)
    with pytest.raises(ValueError, match=r"position 8 is past the end.*max_len=8.*0 to 7"):
        table(torch.arange(9))
