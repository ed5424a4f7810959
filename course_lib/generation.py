"""Generating text from a trained model, one token at a time, with or without a KV cache."""
import torch

from course_lib.kv_cache import KVCache


@torch.no_grad()
def generate(model, idx, n_new, temperature=1.0, top_k=None, use_cache=True, generator=None):
    """Append `n_new` sampled tokens to `idx`.

    temperature=0 picks the most likely token (greedy); top_k keeps only the k most
    likely. use_cache=False reruns the model on the whole prefix every step;
    use_cache=True runs the prompt once (prefill), then one token per step (decode)
    over a KVCache. Both give the same tokens. A prefix longer than max_len is cut to
    its last max_len tokens, in both: once the cache is full, each step reruns that
    window, as the uncached path does. A model built with causal=False cannot keep a
    cache (earlier positions would change with every new token), so it always reruns.

    Shapes: idx (B, T) -> (B, T + n_new)
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be a positive integer or None, got {top_k}")
    if n_new < 0:
        raise ValueError(f"n_new must be >= 0, got {n_new}")
    model.check_input(idx[:, -model.config.max_len:])
    was_training = model.training
    model.eval()
    try:
        run = _cached if use_cache and model.config.causal else _uncached
        return run(model, idx, n_new, lambda logits: pick(logits, temperature, top_k, generator))
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
