"""Training TinyLM: next-token cross-entropy over every position at once."""
import math

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from course_lib.data import get_batch, split_inputs_targets


def next_token_loss(logits, targets):
    """Mean cross-entropy of the logits against the targets, over every position.

    Shapes: logits (B, T, V), targets (B, T) -> scalar
    """
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def train_step(model, opt, batch):
    """One optimisation step on a (B, T + 1) batch of ids; returns the loss as a float."""
    inputs, targets = split_inputs_targets(batch)  # each (B, T), targets shifted by one
    loss = next_token_loss(model(inputs), targets)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


@torch.no_grad()
def evaluate(model, ids, *, batch_size, block_size, n_batches=4, seed=0):
    """Mean next-token loss on `n_batches` fixed random windows of `ids`."""
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(n_batches):
        inputs, targets = split_inputs_targets(get_batch(ids, batch_size, block_size, gen))
        losses.append(next_token_loss(model(inputs), targets).item())
    model.train()
    return sum(losses) / len(losses)


def fit(model, ids, *, steps, batch_size, block_size, lr=3e-4, seed=0, progress=True):
    """Train with AdamW on random windows of `ids`; returns the loss of every step."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    device = next(model.parameters()).device
    model.train()
    losses = []
    bar = tqdm(range(steps), disable=not progress, desc="training")
    for step in bar:
        batch = get_batch(ids, batch_size, block_size, gen).to(device)
        loss = train_step(model, opt, batch)
        if not math.isfinite(loss):
            raise FloatingPointError(f"the loss became {loss} at step {step}; "
                                     f"lower the learning rate (now {lr})")
        losses.append(loss)
        bar.set_postfix(loss=f"{loss:.3f}")
    return losses
