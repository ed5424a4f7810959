"""The transformer block: attention and an MLP, each pre-normed and added to the residual stream.

Picture one residual stream x of shape (B, T, C) running from the embedding to the
unembedding. Each sublayer reads a normalised copy of it and writes an update back:

    x = x + attn(norm1(x))      attention: mixes information across positions
    x = x + mlp(norm2(x))       MLP: transforms each position on its own

The 2017/GPT-2 block uses LayerNorm and a GELU MLP; the modern (Llama) block swaps in
RMSNorm and a SwiGLU MLP (lesson 08). Both are here, chosen by keyword.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: x / sqrt(mean(x^2) + eps), times a learned gain.

    LayerNorm without the mean subtraction and without the bias: each position is
    only rescaled, never shifted. Computed in float32, returned in x's dtype.

    Shapes: (..., C) -> (..., C)
    """

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        work = x.float()
        normed = work * torch.rsqrt(work.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


class MLP(nn.Module):
    """Position-wise feed-forward network: expand to 4C (or d_ff), GELU, project back.

    Every position goes through the same two linear maps on its own: nothing here
    mixes positions, so changing the input at one position changes only that
    position's output. `approximate="tanh"` is GPT-2's approximate GELU.

    Shapes: (B, T, C) -> (B, T, C)
    """

    def __init__(self, d_model, d_ff=None, approximate="none"):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.up = nn.Linear(d_model, d_ff)
        self.act = nn.GELU(approximate=approximate)
        self.down = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.down(self.act(self.up(x)))  # (B, T, d_ff) inside, (B, T, C) out


class SwiGLU(nn.Module):
    """The gated MLP of PaLM and Llama: down(silu(gate(x)) * up(x)), no biases.

    Three matrices instead of two, so the default hidden width is 8C/3 rather than
    4C: 3 x C x 8C/3 = 8 C^2 weights, as many as the GELU MLP's.

    Shapes: (B, T, C) -> (B, T, C)
    """

    def __init__(self, d_model, d_ff=None):
        super().__init__()
        d_ff = round(8 * d_model / 3) if d_ff is None else d_ff
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))  # (B, T, d_ff) inside, (B, T, C) out


def make_norm(kind, d_model, eps=1e-5):
    """A LayerNorm or an RMSNorm of width d_model."""
    if kind == "layernorm":
        return nn.LayerNorm(d_model, eps=eps)
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {kind!r}")


class Block(nn.Module):
    """Pre-norm block: x + attn(norm1(x)), then x + mlp(norm2(x)).

    `residual=False` drops both additions, so each sublayer's output replaces the
    stream (x = attn(norm1(x)), then x = mlp(norm2(x))). It exists only to show,
    in lesson 04, why deep stacks need the residual connections. The keyword-only
    options choose the parts (see ModelConfig); their defaults give lesson 04's block.

    Shapes: (B, T, C) -> (B, T, C)
    """

    def __init__(self, d_model, n_heads, causal=True, residual=True, *, norm="layernorm",
                 mlp="gelu", d_ff=None, n_kv_heads=None, rope_base=None, attn_bias=False,
                 gelu_approx="none", norm_eps=1e-5, dropout=0.0):
        super().__init__()
        if mlp not in ("gelu", "swiglu"):
            raise ValueError(f"mlp must be 'gelu' or 'swiglu', got {mlp!r}")
        self.norm1 = make_norm(norm, d_model, norm_eps)
        self.attn = MultiHeadAttention(d_model, n_heads, causal=causal, n_kv_heads=n_kv_heads,
                                       rope_base=rope_base, bias=attn_bias)
        self.norm2 = make_norm(norm, d_model, norm_eps)
        self.mlp = (MLP(d_model, d_ff, approximate=gelu_approx) if mlp == "gelu"
                    else SwiGLU(d_model, d_ff))
        self.residual = residual
        self.dropout = dropout  # of each sublayer's output, while training (ModelConfig.dropout)

    @classmethod
    def from_config(cls, config):
        """The block a TinyLM of this ModelConfig is made of."""
        return cls(config.d_model, config.n_heads, causal=config.causal, residual=config.residual,
                   norm=config.norm, mlp=config.mlp, d_ff=config.ff_width,
                   n_kv_heads=config.kv_heads,
                   rope_base=config.rope_base if config.positions == "rope" else None,
                   attn_bias=config.attn_bias, gelu_approx=config.gelu_approx,
                   norm_eps=config.norm_eps, dropout=config.dropout)

    def forward(self, x, cache=None, layer=0):
        """With a KVCache, attention also reads the cached positions (see MultiHeadAttention)."""
        if not self.residual:
            return self.mlp(self.norm2(self.attn(self.norm1(x), cache, layer)))
        x = x + self._drop(self.attn(self.norm1(x), cache, layer))
        return x + self._drop(self.mlp(self.norm2(x)))

    def _drop(self, write):
        """A sublayer's write with a random share `dropout` of it zeroed (and the rest scaled
        by 1 / (1 - dropout)) while training; unchanged otherwise."""
        return F.dropout(write, self.dropout) if self.dropout and self.training else write

    def writes(self, x):
        """What the two sublayers add to the stream: (attention's write, MLP's write).

        forward(x) equals (x + attn_write) + mlp_write, bit for bit.

        Shapes: x (B, T, C) -> two tensors (B, T, C)
        """
        if not self.residual:
            raise ValueError("this block was built with residual=False: its sublayers replace "
                             "the stream instead of adding to it, so there are no writes to "
                             "return; build it with residual=True")
        attn_write = self.attn(self.norm1(x))
        mlp_write = self.mlp(self.norm2(x + attn_write))  # the MLP reads the stream after attention
        return attn_write, mlp_write
