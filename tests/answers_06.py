"""Answers to lesson 06's exercise (training), for testing the grader."""
from answers import Wrong

REFERENCE = {
    "train_step": """\
import torch.nn.functional as F
inputs, targets = batch[:, :-1], batch[:, 1:]
logits = model(inputs)
loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
opt.zero_grad()
loss.backward()
opt.step()
return loss.item()""",
}


def _step(inputs="batch[:, :-1]", targets="batch[:, 1:]", loss="F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))",
          order="opt.zero_grad()\nloss.backward()\nopt.step()", result="loss.item()"):
    """A train_step body with one piece swapped for a mistake."""
    return f"""\
import torch.nn.functional as F
inputs, targets = {inputs}, {targets}
logits = model(inputs)
V = logits.shape[-1]
loss = {loss}
{order}
return {result}"""


WRONG = [
    Wrong("train_step", "unshifted targets", _step(targets="batch[:, :-1]"),
          "the targets are not shifted", inject=True),
    Wrong("train_step", "whole batch as inputs and targets", _step(inputs="batch", targets="batch"),
          "the targets are not shifted"),
    Wrong("train_step", "shifted the wrong way", _step(inputs="batch[:, 1:]", targets="batch[:, :-1]"),
          "shifted the wrong way"),
    Wrong("train_step", "targets flattened transposed",
          _step(loss="F.cross_entropy(logits.view(-1, V), targets.T.reshape(-1))"),
          "flattened in different orders"),
    Wrong("train_step", "logits flattened transposed",
          _step(loss="F.cross_entropy(logits.transpose(0, 1).reshape(-1, V), targets.reshape(-1))"),
          "flattened in different orders"),
    Wrong("train_step", "summed loss",
          _step(loss="F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction='sum')"),
          "take the mean"),
    Wrong("train_step", "no zero_grad", _step(order="loss.backward()\nopt.step()"),
          "backward() adds to .grad rather than replacing it"),
    Wrong("train_step", "zero_grad after backward", _step(order="loss.backward()\nopt.zero_grad()\nopt.step()"),
          "call opt.zero_grad() BEFORE loss.backward()"),
    Wrong("train_step", "no optimizer step", _step(order="opt.zero_grad()\nloss.backward()"),
          "call opt.step() after loss.backward()"),
    Wrong("train_step", "returns the tensor", _step(result="loss"),
          "returned a tensor, not a float"),
    Wrong("train_step", "view on the sliced targets",
          _step(loss="F.cross_entropy(logits.view(-1, V), targets.view(-1))"),
          "use reshape, not view"),
    Wrong("train_step", "3-D logits straight into cross_entropy",
          _step(loss="F.cross_entropy(logits, targets)"),
          "cross_entropy wants them flat"),
    Wrong("train_step", "own optimizer", _step(order="""\
own = torch.optim.AdamW(model.parameters(), lr=1e-3)
own.zero_grad()
loss.backward()
own.step()"""),
          "with the optimizer you are given"),
]

WRONG += [
    Wrong("train_step", "zero_grad after the step", _step(order="loss.backward()\nopt.step()\nopt.zero_grad()"),
          "the model arrived with gradients in .grad"),
    Wrong("train_step", "leaves the model in eval mode",
          "model.eval()\n" + _step(),
          "left the model in eval mode"),
    Wrong("train_step", "forgets to return", _step().replace("return loss.item()", "loss = loss.item()"),
          "end with a `return` of the loss of this batch"),
    Wrong("train_step", "returns the loss tensor", _step(result="loss"),
          "returned a tensor, not a float"),
]

REFERENCE.update({
    "sample_batch": """\
starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator)
window = ids[starts[:, None] + torch.arange(block_size + 1)]
return window[:, :-1], window[:, 1:]""",
    "cross_entropy": """\
m = logits.amax(dim=-1, keepdim=True)
lse = m[..., 0] + torch.log(torch.exp(logits - m).sum(dim=-1))
picked = logits.gather(-1, targets[..., None])[..., 0]
return (lse - picked).mean()""",
    "lr_schedule": """\
if step < warmup_steps:
    return max_lr * (step + 1) / warmup_steps
floor = max_lr * min_lr_ratio
progress = min(1.0, (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps))
return floor + (max_lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))""",
})


def _windows(high="len(ids) - block_size", window="ids[starts[:, None] + torch.arange(block_size + 1)]",
             split="window[:, :-1], window[:, 1:]", generator="generator=generator"):
    """A sample_batch body with one piece swapped for a mistake."""
    return f"""\
starts = torch.randint(0, {high}, (batch_size,), {generator})
window = {window}
return {split}"""


def _loss(body):
    """A cross_entropy body: `body` computes `loss` from z = logits (B, T, V) and targets."""
    return "z = logits\n" + body + "\nreturn loss"


STABLE = """\
m = z.amax(dim=-1, keepdim=True)
log_probs = z - m - torch.log(torch.exp(z - m).sum(dim=-1, keepdim=True))"""
PICKED = "picked = log_probs.gather(-1, targets[..., None])[..., 0]"


def _schedule(rise="step + 1", span="total_steps - 1 - warmup_steps", floor="max_lr * min_lr_ratio",
              cap="min(1.0, p)", decay="0.5 * (1 + math.cos(math.pi * p))"):
    """An lr_schedule body with one piece swapped for a mistake."""
    return f"""\
if step < warmup_steps:
    return max_lr * ({rise}) / warmup_steps
floor = {floor}
p = (step - warmup_steps) / max(1, {span})
p = {cap}
return floor + (max_lr - floor) * {decay}"""


WRONG += [
    # 06 sample_batch
    Wrong("sample_batch", "last window never drawn", _windows(high="len(ids) - block_size - 1"),
          "never appears", inject=True),
    Wrong("sample_batch", "start past the end", """\
starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator) + 1
window = torch.stack([ids[s:s + block_size + 1] for s in starts.tolist()])
return window[:, :-1], window[:, 1:]""",
          "s + block_size + 1 <= len(ids)"),
    Wrong("sample_batch", "unshifted targets", _windows(split="window[:, :-1], window[:, :-1]"),
          "targets equal the inputs"),
    Wrong("sample_batch", "targets before the inputs", _windows(split="window[:, 1:], window[:, :-1]"),
          "the targets are the previous ids"),
    Wrong("sample_batch", "float windows", """\
starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator)
window = torch.zeros(batch_size, block_size + 1)
for b, s in enumerate(starts.tolist()):
    window[b] = ids[s:s + block_size + 1]
return window[:, :-1], window[:, 1:]""",
          "keep the ids' integer dtype"),
    Wrong("sample_batch", "ignores the generator", _windows(generator="generator=None"),
          "the generator you are given"),
    Wrong("sample_batch", "(T, B) instead of (B, T)", _windows(split="window[:, :-1].T, window[:, 1:].T"),
          "do not transpose"),
    Wrong("sample_batch", "whole windows as inputs", _windows(split="window, window[:, 1:]"),
          "holds whole windows"),
    Wrong("sample_batch", "one start per id", """\
starts = torch.randint(0, len(ids) - 1, (batch_size, block_size), generator=generator)
return ids[starts], ids[starts + 1]""",
          "one random start per row"),
    # 06 cross_entropy
    Wrong("cross_entropy", "no max subtraction",
          _loss("log_probs = z - torch.log(torch.exp(z).sum(dim=-1, keepdim=True))\n" + PICKED
                + "\nloss = -picked.mean()"),
          "subtract each position's maximum logit", inject=True),
    Wrong("cross_entropy", "log of the softmax", _loss("""\
e = torch.exp(z - z.amax(dim=-1, keepdim=True))
probs = e / e.sum(dim=-1, keepdim=True)
loss = -torch.log(probs.gather(-1, targets[..., None])).mean()"""),
          "never take the log of a softmax"),
    Wrong("cross_entropy", "one-hot times log-probabilities", _loss(STABLE + """
one_hot = torch.nn.functional.one_hot(targets, z.shape[-1])
loss = -(one_hot * log_probs).sum(dim=-1).mean()"""),
          "0 * -inf is NaN"),
    Wrong("cross_entropy", "summed, not averaged", _loss(STABLE + "\n" + PICKED + "\nloss = -picked.sum()"),
          "not the sum"),
    Wrong("cross_entropy", "no minus sign", _loss(STABLE + "\n" + PICKED + "\nloss = picked.mean()"),
          "you forgot the minus sign"),
    Wrong("cross_entropy", "returns .item()", _loss(STABLE + "\n" + PICKED + "\nloss = -picked.mean().item()"),
          "not loss.item()"),
    Wrong("cross_entropy", "one loss per position", _loss(STABLE + "\n" + PICKED + "\nloss = -picked"),
          "one loss per position"),
    Wrong("cross_entropy", "softmax over the positions", _loss("""\
log_probs = z - torch.logsumexp(z, dim=1, keepdim=True)
""" + PICKED + "\nloss = -picked.mean()"),
          "yours ran over another axis"),
    Wrong("cross_entropy", "the maximum not added back", _loss("""\
m = z.amax(dim=-1, keepdim=True)
log_probs = z - torch.log(torch.exp(z - m).sum(dim=-1, keepdim=True))
""" + PICKED + "\nloss = -picked.mean()"),
          "add it back"),
    Wrong("cross_entropy", "mean over the vocabulary too", _loss(STABLE + """
one_hot = torch.nn.functional.one_hot(targets, z.shape[-1])
loss = -torch.where(one_hot.bool(), log_probs, torch.zeros_like(log_probs)).mean()"""),
          "not over the V vocabulary entries as well"),
    Wrong("cross_entropy", "targets flattened transposed", _loss(STABLE + """
flat = log_probs.reshape(-1, z.shape[-1])
loss = -flat[torch.arange(flat.shape[0]), targets.T.reshape(-1)].mean()"""),
          "pair logits[b, t] with targets[b, t]"),
    Wrong("cross_entropy", "detached from the graph", _loss("z = z.detach()\n" + STABLE + "\n" + PICKED
                                                          + "\nloss = -picked.mean()"),
          "no gradient flows through your loss"),
    # 06 lr_schedule
    Wrong("lr_schedule", "step 0 gets 0", _schedule(rise="step"),
          "the first update does nothing", inject=True),
    Wrong("lr_schedule", "floor reached one step late", _schedule(span="total_steps - warmup_steps"),
          "one step too late"),
    Wrong("lr_schedule", "decays to 0", _schedule(floor="0.0"), "not to 0"),
    Wrong("lr_schedule", "min_lr_ratio as the floor", _schedule(floor="min_lr_ratio"),
          "not a learning rate"),
    Wrong("lr_schedule", "no cap past the end", _schedule(cap="p"), "climbs back up"),
    Wrong("lr_schedule", "cosine from step 0", """\
if step < warmup_steps:
    return max_lr * (step + 1) / warmup_steps
floor = max_lr * min_lr_ratio
p = min(1.0, step / (total_steps - 1))
return floor + (max_lr - floor) * 0.5 * (1 + math.cos(math.pi * p))""",
          "the cosine starts at the end of the warm-up"),
    Wrong("lr_schedule", "linear decay", _schedule(decay="(1 - p)"), "not a straight line"),
    Wrong("lr_schedule", "returns a tensor", _schedule(decay="0.5 * (1 + torch.cos(torch.tensor(math.pi * p)))"),
          "got a tensor"),
    Wrong("lr_schedule", "divides by warmup_steps always", """\
rise = min(1.0, (step + 1) / warmup_steps)
floor = max_lr * min_lr_ratio
p = min(1.0, max(0, step - warmup_steps) / (total_steps - 1 - warmup_steps))
return rise * (floor + (max_lr - floor) * 0.5 * (1 + math.cos(math.pi * p)))""",
          "never divide by warmup_steps outside"),
]

# Right answers written differently from the reference: each must pass its checker.
ALTERNATIVES = [
    ("sample_batch", "a loop over the rows", """\
starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
windows = torch.stack([ids[s:s + block_size + 1] for s in starts])
return windows[:, :-1], windows[:, 1:]"""),
    ("sample_batch", "unfold", """\
all_windows = ids.unfold(0, block_size + 1, 1)
rows = all_windows[torch.randint(0, all_windows.shape[0], (batch_size,), generator=generator)]
return rows[:, :block_size], rows[:, 1:]"""),
    ("cross_entropy", "logsumexp and gather", """\
lse = torch.logsumexp(logits, dim=-1)
return (lse - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)).mean()"""),
    ("cross_entropy", "flattened, indexed with arange", """\
V = logits.shape[-1]
z = logits.reshape(-1, V)
y = targets.reshape(-1)
m = z.max(dim=1).values.detach()
lse = m + torch.log(torch.exp(z - m[:, None]).sum(dim=1))
return torch.mean(lse - z[torch.arange(len(y)), y])"""),
    ("lr_schedule", "the end handled first", """\
floor = max_lr * min_lr_ratio
if step >= total_steps - 1:
    return floor
if step < warmup_steps:
    return max_lr * (step + 1) / warmup_steps
progress = (step - warmup_steps) / (total_steps - 1 - warmup_steps)
return floor + 0.5 * (max_lr - floor) * (1 + math.cos(math.pi * progress))"""),
]

# Kinds a class found (issue 21), each with more than one instance.
WRONG += [
    # the course's own functions are the answer key
    Wrong("train_step", "course_lib's train_step", """\
from course_lib.training import train_step as step
return step(model, opt, batch)""", "calls course_lib's own train_step"),
    Wrong("train_step", "course_lib's train_step, via the module", """\
from course_lib import training
return float(training.train_step(model, opt, batch))""", "calls course_lib's own train_step"),
    Wrong("sample_batch", "course_lib's get_batch", """\
from course_lib.data import get_batch
window = get_batch(ids, batch_size, block_size, generator)
return window[:, :-1], window[:, 1:]""", "calls course_lib's own get_batch"),
    Wrong("sample_batch", "course_lib's get_batch and split", """\
from course_lib import data
return data.split_inputs_targets(data.get_batch(ids, batch_size, block_size, generator))""",
          "calls course_lib's own get_batch"),
    Wrong("lr_schedule", "course_lib's lr_at", """\
from course_lib.training import TrainConfig, lr_at
return lr_at(step, TrainConfig(steps=total_steps, lr=max_lr, warmup_steps=warmup_steps,
                               min_lr_ratio=min_lr_ratio))""", "calls course_lib's own lr_at"),
    Wrong("lr_schedule", "course_lib's lr_at, via the module", """\
from course_lib import training
config = training.TrainConfig(steps=total_steps, lr=max_lr, warmup_steps=warmup_steps,
                              min_lr_ratio=min_lr_ratio)
return training.lr_at(step, config)""", "calls course_lib's own lr_at"),
    # cross_entropy: the functions the statement forbids
    Wrong("cross_entropy", "F.cross_entropy on flattened tensors", """\
import torch.nn.functional as F
return F.cross_entropy(logits.flatten(0, 1), targets.flatten())""",
          "calls F.cross_entropy, which the exercise asks you not to use"),
    Wrong("cross_entropy", "nn.CrossEntropyLoss", """\
loss_fn = torch.nn.CrossEntropyLoss()
return loss_fn(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))""",
          "calls F.cross_entropy"),
    Wrong("cross_entropy", "log_softmax and gather", """\
log_probs = torch.log_softmax(logits, dim=-1)
return -log_probs.gather(-1, targets[..., None]).mean()""", "calls log_softmax"),
    Wrong("cross_entropy", "the log_softmax method", """\
return -logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).mean()""", "calls log_softmax"),
    Wrong("cross_entropy", "torch.special.log_softmax", """\
return -torch.special.log_softmax(logits, -1).gather(-1, targets[..., None]).mean()""",
          "torch.special.log_softmax"),
    Wrong("cross_entropy", "course_lib's next_token_loss", """\
from course_lib.training import next_token_loss
return next_token_loss(logits, targets)""", "calls course_lib's own next_token_loss"),
    # cross_entropy: the return type and dtype
    Wrong("cross_entropy", "float64 loss for float32 logits", """\
z = logits.double()
lse = torch.logsumexp(z, dim=-1)
return (lse - z.gather(-1, targets[..., None])[..., 0]).mean()""", "the loss has the wrong dtype"),
    Wrong("cross_entropy", "a NumPy number", """\
lse = torch.logsumexp(logits, dim=-1)
return (lse - logits.gather(-1, targets[..., None])[..., 0]).mean().detach().numpy()""",
          "expected a tensor"),
    Wrong("cross_entropy", "in-place exp that breaks backward", """\
m = logits.amax(dim=-1, keepdim=True)
e = torch.exp(logits - m)
lse = m[..., 0] + torch.log(e.sum(dim=-1))
loss = (lse - logits.gather(-1, targets[..., None])[..., 0]).mean()
e.mul_(2)
return loss""", "edits in place"),
    # sample_batch: rows that are not independent draws
    Wrong("sample_batch", "one start for the whole batch", """\
s = int(torch.randint(0, len(ids) - block_size, (1,), generator=generator))
window = torch.stack([ids[s:s + block_size + 1]] * batch_size)
return window[:, :-1], window[:, 1:]""", "start at the same place"),
    Wrong("sample_batch", "consecutive starts", """\
first = torch.randint(0, len(ids) - block_size, (1,), generator=generator)
starts = (first + torch.arange(batch_size)) % (len(ids) - block_size)
window = ids[starts[:, None] + torch.arange(block_size + 1)]
return window[:, :-1], window[:, 1:]""", "not independent draws"),
    Wrong("sample_batch", "starts sorted", """\
starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator).sort().values
window = ids[starts[:, None] + torch.arange(block_size + 1)]
return window[:, :-1], window[:, 1:]""", "not independent draws"),
    Wrong("sample_batch", "a random permutation, cycled", """\
order = torch.randperm(len(ids) - block_size, generator=generator)
starts = order.repeat(batch_size // len(order) + 1)[:batch_size]
window = ids[starts[:, None] + torch.arange(block_size + 1)]
return window[:, :-1], window[:, 1:]""", "not independent draws"),
    # lr_schedule: the return type the statement names, a Python float
    Wrong("lr_schedule", "NumPy's cosine", _schedule(decay="0.5 * (1 + np.cos(np.pi * p))"),
          "got a NumPy number"),
    Wrong("lr_schedule", "np.float32 at the end", _schedule().replace(
        "return floor + (max_lr - floor) * 0.5 * (1 + math.cos(math.pi * p))",
        "return np.float32(floor + (max_lr - floor) * 0.5 * (1 + math.cos(math.pi * p)))"),
          "got a NumPy number"),
    Wrong("lr_schedule", "an int 0 past the end", """\
if step >= total_steps:
    return 0
if step < warmup_steps:
    return max_lr * (step + 1) / warmup_steps
floor = max_lr * min_lr_ratio
p = min(1.0, (step - warmup_steps) / max(1, total_steps - 1 - warmup_steps))
return floor + (max_lr - floor) * 0.5 * (1 + math.cos(math.pi * p))""",
          "expected the learning rate as a Python float"),
    # train_step: more ways a class writes it
    Wrong("train_step", "the loss after the step", _step(order="opt.zero_grad()\nloss.backward()\nopt.step()\n"
          "loss = F.cross_entropy(model(inputs).reshape(-1, V), targets.reshape(-1))"),
          "computed BEFORE the optimizer's step"),
    Wrong("train_step", "two optimizer steps", _step(order="opt.zero_grad()\nloss.backward()\nopt.step()\nopt.step()"),
          "once each"),
    Wrong("train_step", "gradient clipping added", _step(
        order="opt.zero_grad()\nloss.backward()\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)\nopt.step()"),
          "once each"),
    Wrong("train_step", "label smoothing", _step(
        loss="F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), label_smoothing=0.1)"),
          "the loss is not right"),
    Wrong("train_step", "returns a NumPy array", _step(result="loss.detach().numpy()"),
          "expected the loss as a float"),
]

ALTERNATIVES += [
    ("sample_batch", "gather rows with index arithmetic", """\
high = ids.numel() - block_size
starts = torch.randint(high, size=(batch_size,), generator=generator)
rows = torch.stack([ids.narrow(0, int(s), block_size + 1) for s in starts])
return rows[:, :block_size].clone(), rows[:, 1:].clone()"""),
    ("cross_entropy", "softmax-free, with max().values and a flattened gather", """\
B, T, V = logits.shape
z = logits.reshape(B * T, V)
m = z.max(dim=-1, keepdim=True).values
log_z = (z - m).exp().sum(-1).log() + m.squeeze(-1)
return (log_z - z[torch.arange(B * T), targets.reshape(-1)]).sum() / (B * T)"""),
    ("train_step", "the learner's own loss, zero_grad on the model", """\
inputs, targets = batch[:, :-1], batch[:, 1:]
logits = model(inputs)
m = logits.amax(dim=-1, keepdim=True)
lse = m[..., 0] + torch.log(torch.exp(logits - m).sum(dim=-1))
loss = (lse - logits.gather(-1, targets[..., None])[..., 0]).mean()
model.zero_grad()
loss.backward()
opt.step()
return float(loss)"""),
    ("lr_schedule", "a cosine of the remaining steps", """\
if warmup_steps and step < warmup_steps:
    return (step + 1) * max_lr / warmup_steps
low = min_lr_ratio * max_lr
done = min(step - warmup_steps, total_steps - 1 - warmup_steps)
span = max(total_steps - 1 - warmup_steps, 1)
return low + (max_lr - low) * (math.cos(math.pi * done / span) + 1) / 2"""),
]

# A class's view (review of 2026-12-04): wrong answers that passed before the checks looked further.
WRONG += [
    Wrong("sample_batch", "targets as the inputs plus one (right only for a text 40, 41, 42, ...)", """\
starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator)
inputs = ids[starts[:, None] + torch.arange(block_size)]
return inputs, inputs + 1""", "targets"),
    Wrong("sample_batch", "a fixed window for a batch of one", """\
if batch_size == 1:
    return ids[None, :block_size], ids[None, 1:block_size + 1]
starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator)
window = ids[starts[:, None] + torch.arange(block_size + 1)]
return window[:, :-1], window[:, 1:]""", "the generator you are given did not move on"),
    Wrong("sample_batch", "the last start drawn twice as often", """\
starts = torch.randint(0, len(ids) - block_size + 1, (batch_size,), generator=generator)
starts = starts.clamp(max=len(ids) - block_size - 1)
window = ids[starts[:, None] + torch.arange(block_size + 1)]
return window[:, :-1], window[:, 1:]""", "not independent draws"),
    Wrong("sample_batch", "draws from a copy of the generator", """\
g = torch.Generator().set_state(generator.get_state())
starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=g)
window = ids[starts[:, None] + torch.arange(block_size + 1)]
return window[:, :-1], window[:, 1:]""", "the generator you are given did not move on"),
    Wrong("cross_entropy", "torch's private log_softmax", """\
return -torch._log_softmax(logits, -1, False).gather(-1, targets[..., None]).mean()""",
          "which the exercise asks you not to use"),
    Wrong("cross_entropy", "aten's log_softmax op", """\
return -torch.ops.aten._log_softmax(logits, -1, False).gather(-1, targets[..., None]).mean()""",
          "which the exercise asks you not to use"),
    Wrong("cross_entropy", "torch._C._nn.cross_entropy_loss", """\
V = logits.shape[-1]
return torch._C._nn.cross_entropy_loss(logits.reshape(-1, V), targets.reshape(-1), None, 1, -100, 0.0)""",
          "calls F.cross_entropy"),
    Wrong("train_step", "steps before backward", """\
inputs, targets = batch[:, :-1], batch[:, 1:]
logits = model(inputs)
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
opt.step()
opt.zero_grad()
loss.backward()
return loss.item()""", "keep a step's order"),
    Wrong("train_step", "forward pass without gradients", """\
inputs, targets = batch[:, :-1], batch[:, 1:]
opt.zero_grad()
with torch.no_grad():
    logits = model(inputs)
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
loss.backward()
opt.step()
return loss.item()""", "the loss has no gradient"),
]
