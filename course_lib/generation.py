"""Generating text from a trained model, one token at a time, with or without a KV cache.

`generate(..., fast=False)` is the readable loop (lesson 07). By default `generate` decodes
with the fast loop instead: FastDecoder's steps, the same tokens, less work per step.
"""
import contextlib

import torch
import torch.nn.functional as F

from course_lib.attention import repeat_kv
from course_lib.blocks import Block, SwiGLU
from course_lib.kv_cache import KVCache
from course_lib.model import TinyLM
from course_lib.positions import pair_frequencies


@torch.no_grad()
def generate(model, idx, n_new, temperature=1.0, top_k=None, use_cache=True, generator=None,
             fast=None):
    """Append `n_new` sampled tokens to `idx`.

    temperature=0 picks the most likely token (greedy); top_k keeps only the k most
    likely. use_cache=False reruns the model on the whole prefix every step;
    use_cache=True runs the prompt once (prefill), then one token per step (decode)
    over a KVCache. Both give the same tokens. A prefix longer than max_len is cut to
    its last max_len tokens, in both: once the cache is full, each step reruns that
    window, as the uncached path does. A model built with causal=False cannot keep a
    cache (earlier positions would change with every new token), so it always reruns.

    fast picks the decode loop. fast=False is the readable one. fast=True decodes with
    FastDecoder under torch.inference_mode, without oneDNN (see _cached_fast): the same
    tokens as fast=False in less time per token (lesson 07 and bench/decode.py measure
    both); it needs use_cache=True and a causal model with residual connections, and
    says so otherwise. fast=None, the default, is fast=True wherever the fast loop can
    run and the readable loop elsewhere.

    Shapes: idx (B, T) -> (B, T + n_new)
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be a positive integer or None, got {top_k}")
    if n_new < 0:
        raise ValueError(f"n_new must be >= 0, got {n_new}")
    if fast not in (True, False, None):
        raise TypeError(f"fast must be True, False or None (the fast loop where it can run), "
                        f"got {fast!r}")
    if fast is None:
        fast = use_cache and _fast_supported(model) is None
    if fast:
        why = "use_cache=False reruns the prefix instead" if not use_cache else _fast_supported(model)
        if why:
            raise ValueError(f"fast=True decodes over a KV cache, but {why}; "
                             f"use fast=False (the readable loop) for this model")
    model.check_input(idx[:, -model.config.max_len:])
    was_training = model.training
    model.eval()
    choose = lambda logits: pick(logits, temperature, top_k, generator)  # noqa: E731
    try:
        if fast:
            return _cached_fast(model, idx, n_new, choose)
        run = _cached if use_cache and model.config.causal else _uncached
        return run(model, idx, n_new, choose)
    finally:
        model.train(was_training)


def pick(logits, temperature=1.0, top_k=None, generator=None):
    """The next token for each row of logits: greedy at temperature 0, else sampled.

    Shapes: logits (B, V) -> (B, 1)
    """
    logits = logits.float()
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if generator is not None:  # sample where the generator lives, so seeds agree across devices
        probs = probs.to(generator.device)
    return torch.multinomial(probs, 1, generator=generator).to(logits.device)


def _uncached(model, idx, n_new, choose):
    max_len = model.config.max_len
    for _ in range(n_new):
        logits = model(idx[:, -max_len:])[:, -1]  # (B, V): the last position's scores
        idx = torch.cat([idx, choose(logits)], dim=1)
    return idx


def _cached(model, idx, n_new, choose):
    max_len = model.config.max_len
    if n_new == 0:
        return idx
    cache = KVCache.for_model(model, idx.shape[0])
    logits = model(idx[:, -max_len:], cache)[:, -1]  # prefill: the whole prompt at once
    for step in range(n_new):
        nxt = choose(logits)  # (B, 1)
        idx = torch.cat([idx, nxt], dim=1)
        if step == n_new - 1:
            break
        if cache.length < max_len:
            logits = model(nxt, cache)[:, -1]  # decode: one new position over the cache
        else:  # the window slides, every position moves: rerun it, as the uncached path does
            logits = model(idx[:, -max_len:])[:, -1]
    return idx


# ---------------------------------------------------------------------------
# The fast decode loop: the same arithmetic as model(nxt, cache), with the per-step
# overhead taken out. Read _cached above first; this is the same loop, unrolled.
# ---------------------------------------------------------------------------

def _fast_supported(model):
    """Why the fast loop cannot run this model, or None when it can."""
    c = model.config
    if not c.causal:
        return "a model with causal=False keeps no cache"
    if not c.residual:
        return "a model with residual=False is only for lesson 04's experiment"
    if type(model).forward is not TinyLM.forward or any(
            type(b).forward is not Block.forward for b in model.blocks):
        return "the model's forward was replaced, so the fast loop would not run the same code"
    return None


class FastDecoder:
    """One decode step of a TinyLM, written out op by op; the same numbers as model(nxt, cache).

    What model(nxt, cache) does per step that this does not:
      - check the input (int(idx.min()) waits for the device) and the cache's batch size;
      - build each layer's (B, 1, C) -> heads views, and three per-layer cache slices;
      - go through nn.Module.__call__ for each of the ~15 modules of a layer (an RMSNorm is
        still called as a module: its forward is already a few plain tensor ops).
    What stays: the same torch ops on the same shapes (layer_norm, linear, gelu or SwiGLU,
    RoPE, scaled_dot_product_attention), so every logit is bit for bit the one the readable
    path computes, and so is every token.

    Shapes: step(tokens (B,)) -> logits (B, V); the cache's length grows by one.
    """

    def __init__(self, model, cache):
        self.model, self.cache = model, cache
        c = model.config
        self.C, self.H, self.Hkv, self.D = c.d_model, c.n_heads, c.kv_heads, c.d_head
        self.n_rep = c.n_heads // c.kv_heads
        self.rope = c.positions == "rope"
        self.freqs = (pair_frequencies(self.D, c.rope_base, device=cache.keys.device)
                      if self.rope else None)
        self.pos_table = None if self.rope else model.pos_emb.weight
        # Each layer's weights, looked up once: nn.Module attribute lookups cost time per step.
        self.layers = [(self._norm(block.norm1), block.attn.qkv.weight, block.attn.qkv.bias,
                        block.attn.proj.weight, block.attn.proj.bias, self._norm(block.norm2),
                        self._mlp(block.mlp)) for block in model.blocks]
        self.final_norm, self.emb, self.head = self._norm(model.norm), model.tok_emb.weight, \
            model.head.weight

    def _norm(self, norm):
        """The norm as a function: LayerNorm straight through F.layer_norm; RMSNorm as itself."""
        if isinstance(norm, torch.nn.LayerNorm):
            w, b, shape, eps = norm.weight, norm.bias, norm.normalized_shape, norm.eps
            return lambda x: F.layer_norm(x, shape, w, b, eps)
        return norm

    @staticmethod
    def _mlp(mlp):
        """The MLP as a function of (B, C), with the same ops as its forward."""
        if isinstance(mlp, SwiGLU):
            gate, up, down = mlp.gate.weight, mlp.up.weight, mlp.down.weight
            return lambda h: F.linear(F.silu(F.linear(h, gate)) * F.linear(h, up), down)
        up_w, up_b, down_w, down_b = mlp.up.weight, mlp.up.bias, mlp.down.weight, mlp.down.bias
        approximate = mlp.act.approximate
        return lambda h: F.linear(F.gelu(F.linear(h, up_w, up_b), approximate=approximate),
                                  down_w, down_b)

    def _rope(self, qk, pos):
        """apply_rope on the queries and keys of one position, as MultiHeadAttention.project does.

        Shapes: qk (B, H + Hkv, 1, D) -> the same
        """
        angles = torch.tensor([float(pos)], device=qk.device)[:, None] * self.freqs  # (1, D / 2)
        cos, sin = torch.cos(angles), torch.sin(angles)
        even, odd = qk[..., 0::2], qk[..., 1::2]
        rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
        return rotated.flatten(-2)

    def step(self, tokens):
        cache = self.cache
        B, pos, H, Hkv, D = tokens.shape[0], cache.length, self.H, self.Hkv, self.D
        x = F.embedding(tokens, self.emb)  # (B, C)
        if self.pos_table is not None:
            x = x + self.pos_table[pos]
        end = pos + 1
        keys = cache.keys[:, :, :, :end].unbind(0)  # L views (B, Hkv, end, D): one slice for all
        values = cache.values[:, :, :, :end].unbind(0)
        for k_all, v_all, (norm1, w_qkv, b_qkv, w_proj, b_proj, norm2, mlp) in zip(
                keys, values, self.layers):
            heads = F.linear(norm1(x), w_qkv, b_qkv).view(B, H + 2 * Hkv, 1, D)  # q, k, v heads
            if self.rope:
                qk = self._rope(heads[:, :H + Hkv], pos)
                q, k = qk[:, :H], qk[:, H:]
            else:
                q, k = heads[:, :H], heads[:, H:H + Hkv]
            k_all[:, :, pos:end] = k  # written into the cache, in place
            v_all[:, :, pos:end] = heads[:, H + Hkv:]
            if self.n_rep > 1:
                k_all, v_all = repeat_kv(k_all, self.n_rep), repeat_kv(v_all, self.n_rep)
            a = F.scaled_dot_product_attention(q, k_all, v_all)  # (B, H, 1, D)
            x = x + F.linear(a.reshape(B, self.C), w_proj, b_proj)
            x = x + mlp(norm2(x))
        cache.advance(1)
        return F.linear(self.final_norm(x), self.head)  # (B, V)


@contextlib.contextmanager
def _without_onednn():
    """Run the block with torch's own CPU kernels instead of oneDNN's (a process-wide switch,
    like every torch.backends flag, restored on the way out).

    On a CPU, torch hands an exact GELU of a float32 tensor to oneDNN, whose call costs more
    than torch's own kernel at a decode step's size: for the 512 numbers of the 4 x 128
    model's step, 9.8 us against 1.4 us on a 2-core AMD EPYC with AVX-512 (lesson 07 times
    both on the learner's CPU; bench/decode.py --profile gives a step's table); oneDNN's
    cost grows with the size, and at 65,536 numbers it can be the cheaper one. The two
    round differently: by up to about 1e-6, which for GELU's smallest outputs is thousands
    of units in the last place, so generate's logits are within float32 rounding of the
    readable loop's, not bit for bit. The matrix products, norms and attention of a step
    run the same kernels either way (tests/test_fast_paths.py checks the logits).
    """
    before = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = before


def _cached_fast(model, idx, n_new, choose):
    """_cached, with FastDecoder's steps, under inference_mode and without oneDNN, writing
    into one output tensor."""
    max_len = model.config.max_len
    B, T = idx.shape
    if n_new == 0:
        return idx
    out = torch.empty(B, T + n_new, dtype=torch.long, device=idx.device)  # as torch.cat makes it
    out[:, :T] = idx  # made outside inference_mode, so the tokens can feed a training step
    with torch.inference_mode():
        cache = KVCache.for_model(model, B)
        decoder = FastDecoder(model, cache)
        logits = model(idx[:, -max_len:], cache)[:, -1]  # prefill: the readable path, once
        with _without_onednn():
            for step in range(n_new):
                t = T + step
                nxt = choose(logits)  # (B, 1)
                out[:, t:t + 1] = nxt
                if step == n_new - 1:
                    break
                if cache.length < max_len:
                    logits = decoder.step(nxt[:, 0])
                else:  # the window slides: rerun it, as _cached does
                    logits = model(out[:, t + 1 - max_len:t + 1])[:, -1]
    return out
