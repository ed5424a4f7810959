"""A nanoGPT-shaped model, written here in this course's own code, for decode.py to time.

It has the layout of nanoGPT's model.py as its CPU recipe runs it (train.py's defaults:
no biases, dropout 0.0): token and position embeddings, dropout, blocks of LayerNorm, a
fused c_attn projection split into q, k, v, scaled_dot_product_attention with
is_causal=True, c_proj, dropout, LayerNorm, an MLP (c_fc, GELU, c_proj, dropout), then
the final LayerNorm and the tied head on the last position. No KV cache: generating a
token reruns the model on the context, so its one-token forward is the cheapest step
such a model takes, the yardstick decode.py holds a cached decode step against.

Shapes: idx (B, T) int64 -> logits (B, 1, V)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (nanoGPT's: torch's has no bias=False of its own)."""

    def __init__(self, width, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, n_heads, bias, dropout):
        super().__init__()
        self.c_attn = nn.Linear(width, 3 * width, bias=bias)
        self.c_proj = nn.Linear(width, width, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_heads, self.width, self.dropout = n_heads, width, dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.width, dim=2)
        k = k.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)  # (B, H, T, D)
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, width, bias, dropout):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * width, width, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, width, n_heads, bias, dropout):
        super().__init__()
        self.ln_1 = LayerNorm(width, bias)
        self.attn = CausalSelfAttention(width, n_heads, bias, dropout)
        self.ln_2 = LayerNorm(width, bias)
        self.mlp = MLP(width, bias, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPTShaped(nn.Module):
    def __init__(self, vocab_size=256, block_size=528, width=128, n_heads=4, n_layers=4,
                 bias=False, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, width)
        self.wpe = nn.Embedding(block_size, width)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(Block(width, n_heads, bias, dropout) for _ in range(n_layers))
        self.ln_f = LayerNorm(width, bias)
        self.lm_head = nn.Linear(width, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # tied, as nanoGPT ties them

    def forward(self, idx):
        b, t = idx.size()
        assert t <= self.block_size, f"sequence of length {t} is longer than {self.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return self.lm_head(x[:, [-1], :])  # inference: only the last position's logits
