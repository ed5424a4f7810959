"""Generating text from a trained model, one token at a time."""
import torch


@torch.no_grad()
def generate(model, idx, n_new, temperature=1.0, top_k=None, generator=None):
    """Append `n_new` sampled tokens to `idx`, rerunning the model on the whole prefix each step.

    temperature=0 picks the most likely token (greedy). A prefix longer than the
    model's max_len is cut to its last max_len tokens before each step.

    Shapes: idx (B, T) -> (B, T + n_new)
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be a positive integer or None, got {top_k}")
    was_training = model.training
    model.eval()
    try:
        return _sample(model, idx, n_new, temperature, top_k, generator)
    finally:
        model.train(was_training)


def _sample(model, idx, n_new, temperature, top_k, generator):
    max_len = model.config.max_len
    for _ in range(n_new):
        logits = model(idx[:, -max_len:])[:, -1, :].float()  # (B, V): the last position's scores
        if temperature == 0:
            nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            if generator is not None:  # sample where the generator lives, so seeds agree across devices
                probs = probs.to(generator.device)
            nxt = torch.multinomial(probs, 1, generator=generator).to(idx.device)  # (B, 1)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
