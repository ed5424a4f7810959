"""Position information: attention alone cannot tell one order of tokens from another.

Three ways to supply it:

    sinusoidal_positions   fixed sines and cosines added to the embeddings (Vaswani et al., 2017)
    LearnedPositions       a learned table of one vector per position (GPT-2); it ends at max_len
    apply_rope             rotate queries and keys by an angle proportional to position
                           (RoPE, Su et al., RoFormer); q . k then depends on distance only

The sinusoidal table and RoPE share their frequencies: pair i (dimensions 2i and 2i + 1)
turns by base^(-2i/D) radians per position, from 1 radian (i = 0) down to nearly 1/base.
"""
import torch
import torch.nn as nn


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def pair_frequencies(D, base=10000.0, device=None, dtype=torch.float32):
    """The angle per position of each pair of dimensions: base^(-2i/D) for i = 0 .. D/2 - 1.

    Computed in float64 and returned in `dtype`.

    Shapes: returns (D // 2,)
    """
    _positive_int(D, "D")
    if D % 2:
        raise ValueError(f"the width must be even to split into pairs (2i, 2i + 1), got {D}; "
                         f"use an even width")
    exponents = torch.arange(0, D, 2, dtype=torch.float64, device=device) / D  # 2i / D
    return (float(base) ** -exponents).to(dtype)


def sinusoidal_positions(T, d_model):
    """The fixed position table of "Attention Is All You Need".

        PE[pos, 2i] = sin(pos / 10000^(2i / d_model)),  PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model))

    Shapes: returns (T, d_model) float32
    """
    _positive_int(T, "T (the number of positions)")
    _positive_int(d_model, "d_model")
    if d_model % 2:
        raise ValueError(f"d_model must be even: each sine column 2i is paired with a cosine "
                         f"column 2i + 1; got d_model={d_model}")
    pos = torch.arange(T, dtype=torch.float64)[:, None]                        # (T, 1)
    angles = pos * pair_frequencies(d_model, dtype=torch.float64)[None, :]   # (T, d_model / 2)
    pe = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1)           # (T, d_model / 2, 2)
    return pe.reshape(T, d_model).float()                                      # (T, d_model): sin, cos, sin, ...


def apply_rope(x, positions, base=10000.0):
    """Rotary position embedding: turn each pair (2i, 2i + 1) of x by positions * base^(-2i/D).

    The pairs are interleaved, as in the RoFormer paper (not the halves (i, i + D/2) that
    some libraries rotate). For a query at position m and a key at position n, the
    rotated dot product depends on n - m only. Computed in float32 (float64 stays float64)
    and returned in x's dtype.

    Shapes: x (..., T, D), positions (T,) int -> (..., T, D)
    """
    if not isinstance(x, torch.Tensor) or not isinstance(positions, torch.Tensor):
        raise TypeError(f"apply_rope takes torch tensors, got x: {type(x).__name__}, "
                        f"positions: {type(positions).__name__}")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., T, D), got shape {tuple(x.shape)}; "
                         f"for a single vector use x[None, :]")
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"the last dimension of x must be even to rotate pairs (2i, 2i + 1), "
                         f"got D={D}")
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integers, got dtype {positions.dtype}; "
                        f"use torch.arange(T) or positions.long()")
    if tuple(positions.shape) != (T,):
        raise ValueError(f"positions must have shape (T,) = ({T},), one per row of x, got shape "
                         f"{tuple(positions.shape)}")
    work = torch.promote_types(x.dtype, torch.float32)
    freqs = pair_frequencies(D, base, device=x.device, dtype=work)             # (D / 2,)
    angles = positions.to(device=x.device, dtype=work)[:, None] * freqs        # (T, D / 2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    # Pair (even, odd) becomes (even cos - odd sin, odd cos + even sin): the pair times cos,
    # plus the pair swapped, (odd, even), times (-sin, sin). Four operations on x where
    # rotating the halves separately takes seven (bench/train_step.py times both), and the
    # same roundings: a - b is a + (-b) exactly, and the sums are the same two terms.
    cos2 = torch.stack([cos, cos], dim=-1)                                     # (T, D / 2, 2)
    sin2 = torch.stack([-sin, sin], dim=-1)                                    # (T, D / 2, 2)
    pairs = x.to(work).unflatten(-1, (D // 2, 2))                              # (..., T, D / 2, 2)
    rotated = pairs * cos2 + pairs.flip(-1) * sin2                             # (..., T, D / 2, 2)
    return rotated.flatten(-2).to(x.dtype)                                     # (..., T, D)


class LearnedPositions(nn.Embedding):
    """A learned table of one vector per position, as in GPT-2; it ends at max_len.

    Shapes: positions (T,) int64 -> (T, C)
    """

    def __init__(self, max_len, d_model):
        super().__init__(max_len, d_model)
        self.max_len = max_len

    def forward(self, positions):
        if positions.numel() and int(positions.max()) >= self.max_len:
            raise ValueError(f"position {int(positions.max())} is past the end of the learned "
                             f"table, which has max_len={self.max_len} rows (positions 0 to "
                             f"{self.max_len - 1}); use shorter sequences or a larger max_len")
        return super().forward(positions)
