"""The transformer block: attention and an MLP, each pre-normed and added to the residual stream.

Picture one residual stream x of shape (B, T, C) running from the embedding to the
unembedding. Each sublayer reads a normalised copy of it and writes an update back:

    x = x + attn(norm1(x))      attention: mixes information across positions
    x = x + mlp(norm2(x))       MLP: transforms each position on its own
"""
import torch.nn as nn

from course_lib.attention import MultiHeadAttention


class MLP(nn.Module):
    """Position-wise feed-forward network: expand to 4C, GELU, project back.

    Every position goes through the same two linear maps on its own: nothing here
    mixes positions, so changing the input at one position changes only that
    position's output.

    Shapes: (B, T, C) -> (B, T, C)
    """

    def __init__(self, d_model):
        super().__init__()
        self.up = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.down(self.act(self.up(x)))  # (B, T, 4C) inside, (B, T, C) out


class Block(nn.Module):
    """Pre-norm block: x + attn(norm1(x)), then x + mlp(norm2(x)).

    `residual=False` drops both additions, so each sublayer's output replaces the
    stream (x = attn(norm1(x)), then x = mlp(norm2(x))). It exists only to show,
    in lesson 04, why deep stacks need the residual connections.

    Shapes: (B, T, C) -> (B, T, C)
    """

    def __init__(self, d_model, n_heads, causal=True, residual=True):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, causal=causal)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)
        self.residual = residual

    def forward(self, x, cache=None, layer=0):
        """With a KVCache, attention also reads the cached positions (see MultiHeadAttention)."""
        if not self.residual:
            return self.mlp(self.norm2(self.attn(self.norm1(x), cache, layer)))
        x = x + self.attn(self.norm1(x), cache, layer)
        return x + self.mlp(self.norm2(x))

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
