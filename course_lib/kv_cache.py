"""The KV cache: the keys and values of every past token, per layer, kept for decoding.

Shapes: L layers, B sequences, H heads, D head size, max_len positions.
"""
import torch


class KVCache:
    """Preallocated keys and values for every layer; the first `length` positions hold data.

    Nothing grows while decoding: `update` writes into the tensors made here.

    Shapes: keys and values (L, B, H, max_len, D)
    """

    def __init__(self, n_layers, batch_size, n_heads, max_len, d_head, *, dtype=torch.float32,
                 device=None):
        shape = (n_layers, batch_size, n_heads, max_len, d_head)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    @classmethod
    def for_model(cls, model, batch_size):
        """An empty cache shaped for a TinyLM, on its device and in its dtype."""
        c = model.config
        weight = model.tok_emb.weight
        return cls(c.n_layers, batch_size, c.kv_heads, c.max_len, c.d_head,
                   dtype=weight.dtype, device=weight.device)

    @property
    def max_len(self):
        return self.keys.shape[3]

    def update(self, layer, k, v):
        """Store new keys and values after the cached ones; return all of that layer's so far.

        Call it once per layer, then `advance` once for the whole model.

        Shapes: k, v (B, H, T, D) -> keys, values (B, H, length + T, D)
        """
        start, end = self.length, self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"the cache holds {start} positions and {k.shape[2]} more would "
                             f"pass its max_len={self.max_len}")
        self.keys[layer, :, :, start:end] = k
        self.values[layer, :, :, start:end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    def advance(self, n):
        """Count n more positions as filled, after every layer has stored them."""
        self.length += n

    def reset(self):
        self.length = 0

    @property
    def bytes_per_token(self):
        """Bytes one position of one sequence takes: 2 (K and V) x layers x heads x head size x bytes per value."""
        n_layers, _, n_heads, _, d_head = self.keys.shape
        return 2 * n_layers * n_heads * d_head * self.keys.element_size()

    @property
    def nbytes(self):
        """Bytes the cache holds in all, filled or not."""
        return self.keys.nbytes + self.values.nbytes
