"""TinyLM: a complete decoder-only transformer language model."""
from dataclasses import dataclass, fields
from itertools import accumulate

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.blocks import Block, make_norm
from course_lib.positions import LearnedPositions


NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu")
POSITIONS = ("learned", "rope")
GELU_APPROX = ("none", "tanh")

# Shown in every repr, so that lessons 00-07 print the configs they always printed; the
# options after them appear only when they differ from their defaults.
_ALWAYS_SHOWN = ("vocab_size", "max_len", "d_model", "n_heads", "n_layers", "causal", "residual")


@dataclass(frozen=True, repr=False)
class ModelConfig:
    vocab_size: int = 256     # byte-level (V)
    max_len: int = 256        # positions the model can see
    d_model: int = 128        # width of the residual stream (C)
    n_heads: int = 4          # (H)
    n_layers: int = 4
    causal: bool = True       # False only to demonstrate the missing-mask pitfall
    residual: bool = True     # False only to show why deep stacks need residuals (lesson 04)
    # The modern block (lesson 08). The defaults are the GPT-2-style TinyLM of lessons 00-07.
    norm: str = "layernorm"   # or "rmsnorm"
    mlp: str = "gelu"         # or "swiglu"
    d_ff: int | None = None   # the MLP's hidden width; None: 4 C for gelu, round(8 C / 3) for swiglu
    positions: str = "learned"  # or "rope": no position table, q and k rotated inside attention
    rope_base: float = 10000.0
    n_kv_heads: int | None = None  # key/value heads; None: n_heads; fewer: grouped-query attention
    tie_embeddings: bool = True    # the head reuses the token embedding's (V, C) matrix
    # GPT-2's details (lesson 10).
    attn_bias: bool = False   # biases on the q/k/v and output projections
    gelu_approx: str = "none"  # "tanh": GPT-2's approximate GELU
    norm_eps: float = 1e-5
    # Training only: the share of the embedding's and of each sublayer's outputs zeroed at
    # random while the model trains (nanoGPT's Shakespeare run uses 0.2); none in eval mode.
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "d_model", "n_heads", "n_layers"):
            _positive_int(self, name)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                             f"choose n_heads among the divisors of d_model")
        for name, allowed in (("norm", NORMS), ("mlp", MLPS), ("positions", POSITIONS),
                              ("gelu_approx", GELU_APPROX)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"ModelConfig.{name} must be one of {allowed}, "
                                 f"got {getattr(self, name)!r}")
        if self.d_ff is not None:
            _positive_int(self, "d_ff")
        if self.n_kv_heads is not None:
            _positive_int(self, "n_kv_heads")
            if self.n_heads % self.n_kv_heads:
                raise ValueError(f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads}, "
                                 f"so that each key/value head serves the same number of query "
                                 f"heads; choose among the divisors of {self.n_heads}")
        if self.positions == "rope" and self.d_head % 2:
            raise ValueError(f"RoPE rotates pairs of channels, so the head size must be even; "
                             f"d_model / n_heads = {self.d_head}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) \
                or not 0 <= self.dropout < 1:
            raise ValueError(f"ModelConfig.dropout must be a number in [0, 1), got "
                             f"{self.dropout!r}; 0.1 to 0.2 is typical, 0 turns it off")
        for name in ("rope_base", "norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive number, got {value!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads in effect: n_kv_heads, or n_heads when it is None."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def ff_width(self) -> int:
        """The MLP's hidden width in effect: d_ff, or the default for the MLP kind."""
        if self.d_ff is not None:
            return self.d_ff
        return 4 * self.d_model if self.mlp == "gelu" else round(8 * self.d_model / 3)

    def __repr__(self):
        shown = [f.name for f in fields(self)
                 if f.name in _ALWAYS_SHOWN or getattr(self, f.name) != f.default]
        return f"ModelConfig({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"


def _positive_int(config, name):
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")


def _init_weights(module):
    """Small initial weights (std 0.02, as in GPT-2), so the untrained model's guesses are near uniform."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class TinyLM(nn.Module):
    """Token and learned position embeddings, n_layers pre-norm blocks, final norm, tied unembedding.

    That is the default (GPT-2's layout); ModelConfig's options swap in the modern parts
    (RMSNorm, SwiGLU, RoPE instead of the position table, grouped-query attention, an
    untied head: lesson 08) and GPT-2's details (attention biases, tanh GELU: lesson 10).

    Shapes: idx (B, T) int64 -> logits (B, T, V); position t scores the token at t + 1.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        if config.positions == "learned":
            self.pos_emb = LearnedPositions(config.max_len, config.d_model)
        self.blocks = nn.ModuleList(Block.from_config(config) for _ in range(config.n_layers))
        self.norm = make_norm(config.norm, config.d_model, config.norm_eps)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.tok_emb.weight  # weight tying: one (V, C) matrix in and out
        self.apply(_init_weights)

    def check_input(self, idx, start=0):
        """Raise a ValueError/TypeError that says how to fix idx, unless it is a valid (B, T) batch.

        `start` is the position of idx's first token (the length of a KV cache before it).
        """
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"TinyLM expects a torch.Tensor of token ids, got {type(idx).__name__}")
        if idx.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"token ids must be an int64 (or int32) tensor, got dtype {idx.dtype}; convert with idx.long()")
        if idx.ndim != 2:
            hint = "; add a batch dimension with idx[None]" if idx.ndim == 1 else ""
            raise ValueError(f"token ids must have shape (B, T), got {tuple(idx.shape)}{hint}")
        T, max_len = idx.shape[1], self.config.max_len
        if T == 0:
            raise ValueError("the input has no tokens (T = 0); give the model at least one")
        limit = ("the size of the position table" if self.config.positions == "learned"
                 else "the context length it was built for")
        if start + T > max_len and start == 0:
            raise ValueError(f"sequence of length {T} is longer than max_len={max_len}, "
                             f"{limit}; keep the last {max_len} tokens "
                             f"(idx[:, -{max_len}:]) or build a model with a larger max_len")
        if start + T > max_len:
            raise ValueError(f"the KV cache holds {start} positions, and {T} more would pass "
                             f"max_len={max_len}, {limit}; start again "
                             f"from the last tokens with an empty cache")
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= self.config.vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(f"token id {bad} is outside the vocabulary [0, "
                             f"{self.config.vocab_size}); check the tokenizer that made these ids")

    def embed(self, idx, start=0):
        """The start of the residual stream: token embedding plus position embedding (none with RoPE).

        Shapes: idx (B, T) -> (B, T, C), for positions start .. start + T - 1
        """
        if self.config.positions == "rope":  # positions enter inside attention instead
            return self.tok_emb(idx)  # (B, T, C)
        positions = torch.arange(start, start + idx.shape[1], device=idx.device)
        return self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, C)

    def forward(self, idx, cache=None):
        """Logits for every position of idx.

        With a KVCache (course_lib.kv_cache), idx continues the cached tokens: its keys
        and values are added to the cache, and its positions start at cache.length.
        """
        start = 0 if cache is None else cache.length
        self.check_input(idx, start)
        if cache is not None and cache.keys.shape[1] != idx.shape[0]:
            raise ValueError(f"the cache was made for {cache.keys.shape[1]} sequences, "
                             f"the input has {idx.shape[0]}")
        x = self.embed(idx, start)  # (B, T, C)
        if self.config.dropout and self.training:
            x = F.dropout(x, self.config.dropout)
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i)
        if cache is not None:
            cache.advance(idx.shape[1])
        return self.head(self.norm(x))  # (B, T, V)

    def residual_writes(self, idx):
        """Everything written into the residual stream, in order, with a label for each.

        Returns [("embed", e), ("block 0 attn", a0), ("block 0 mlp", m0), ...,
        ("block L-1 mlp", m)]: 1 + 2L tensors. The stream after any write is the sum
        of that write and all before it. Gradients flow; wrap the call in
        torch.no_grad() when you only want to look.

        Shapes: idx (B, T) -> a list of (label, (B, T, C))
        """
        self.check_input(idx)
        self._check_residual()
        x = self.embed(idx)
        writes = [("embed", x)]
        for i, block in enumerate(self.blocks):
            attn_write, mlp_write = block.writes(x)
            writes += [(f"block {i} attn", attn_write), (f"block {i} mlp", mlp_write)]
            x = x + attn_write + mlp_write
        return writes

    def residual_stream(self, idx):
        """The residual stream recorded after the embedding and after every sublayer.

        Returns [("embed", x0), ("block 0 attn", x1), ("block 0 mlp", x2), ...]: 1 + 2L
        snapshots, each labelled by the write that made it. The last one is the
        stream the final norm and head read: self.head(self.norm(last)) equals
        self(idx) bit for bit.

        Shapes: idx (B, T) -> a list of (label, (B, T, C))
        """
        labels, writes = zip(*self.residual_writes(idx))
        return list(zip(labels, accumulate(writes)))  # ((e + a0) + m0) + ..., as forward adds

    def _check_residual(self):
        if not self.config.residual:
            raise ValueError("this model was built with residual=False, so its blocks replace "
                             "the stream rather than write into it: there is no residual stream "
                             "to record; use a ModelConfig with residual=True")
