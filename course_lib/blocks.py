"""The transformer block: attention and an MLP, each pre-normed and added to the residual stream."""
import torch.nn as nn

from course_lib.attention import MultiHeadAttention


class MLP(nn.Module):
    """Position-wise feed-forward network: expand to 4C, GELU, project back.

    Shapes: (B, T, C) -> (B, T, C)
    """

    def __init__(self, d_model):
        super().__init__()
        self.up = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class Block(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x)).

    Shapes: (B, T, C) -> (B, T, C)
    """

    def __init__(self, d_model, n_heads, causal=True):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, causal=causal)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))
