"""Training TinyLM: next-token cross-entropy over every position at once.

The small pieces (next_token_loss, train_step, evaluate, fit) are what lessons 02-04 use.
`train` is the full loop: learning-rate schedule, gradient clipping, evaluation,
checkpoints that resume bit for bit, mixed precision on CUDA and DistributedDataParallel.
"""
import contextlib
import math
import numbers
import time
from dataclasses import asdict, dataclass, field, fields, replace

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm.auto import tqdm

from course_lib import checkpoint as ckpt
from course_lib.data import get_batch, split_inputs_targets
from course_lib.device import cannot_compile
from course_lib.model import ModelConfig
from course_lib.muon import Muon, MuonWithAdamW, hidden_matrices


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
def evaluate(model, ids, *, batch_size, block_size, n_batches=4, seed=0, autocast="auto"):
    """Mean next-token loss on `n_batches` fixed random windows of `ids` (the same for a given seed).

    Runs on the model's device, in eval mode, in the precision TrainConfig.autocast names
    (`autocast`), and leaves the model in the mode it was in.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(n_batches):
        batch = get_batch(ids, batch_size, block_size, gen).to(device)
        inputs, targets = split_inputs_targets(batch)
        with _autocast(device, autocast):
            logits = model(inputs)
        total += next_token_loss(logits.float(), targets).item()
    model.train(was_training)
    return total / n_batches


def fit(model, ids, *, steps, batch_size, block_size, lr=3e-4, seed=0, progress=True):
    """Train with AdamW on random windows of `ids`; returns the loss of every step.

    A constant learning rate and AdamW's default decay strength (0.01), applied, as in
    `train`, to the weight matrices only.
    """
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(decay_groups(model, 0.01), lr=lr)
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


# ---------------------------------------------------------------------------
# A full training run: schedule, clipping, evaluation, checkpoints, DDP
# ---------------------------------------------------------------------------



AUTOCAST = ("auto", "bf16", "off")
ADAMW = ("default", "foreach", "fused")
OPTIMIZERS = ("adamw", "muon")
_SPEED_OPTIONS = ("autocast", "adamw", "tf32", "sync_every", "compile")
_SHOWN_WHEN_SET = ("beta2", "optimizer", "muon_lr", "muon_bf16", "muon_ns_steps", *_SPEED_OPTIONS)  # in repr only when set


@dataclass(frozen=True, repr=False)
class TrainConfig:
    """Everything about a training run except the model's shape.

    Steps count optimiser updates: "step s" is the state after s updates.
    """
    steps: int = 300
    batch_size: int = 32
    block_size: int = 256
    lr: float = 3e-4          # AdamW peak learning rate
    warmup_steps: int = 30    # linear warm-up, then cosine decay to lr * min_lr_ratio
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0    # max global gradient norm; 0 turns clipping off
    beta2: float = 0.95       # AdamW's second-moment decay (beta1 is 0.9)
    # "muon": Muon (course_lib.muon) for the hidden weight matrices, at peak muon_lr on the
    # same schedule; AdamW at lr for the embeddings, the head, norms and biases.
    optimizer: str = "adamw"
    muon_lr: float = 0.02
    muon_bf16: bool = False   # Muon's Newton-Schulz iterations in bfloat16 (see cpu_preset)
    muon_ns_steps: int = 5    # Muon's Newton-Schulz iterations an update (course_lib.muon)
    eval_every: int = 50      # validation loss on fixed batches every eval_every steps and at the end
    eval_batches: int = 8
    seed: int = 0
    # Speed (bench/time_to_quality.py measures them). The defaults are the lessons' float32 run.
    autocast: str = "auto"    # "auto": bf16 on CUDA when supported; "bf16": also on CPU; "off"
    adamw: str = "default"    # "foreach" or "fused": AdamW's multi-tensor or fused kernels
    tf32: bool = False        # CUDA only: float32 matrix products on TensorFloat-32 units
    # Read the training loss back from the device every sync_every steps (and at every
    # evaluation). Each read waits for a GPU to finish the work queued so far; on a CPU it
    # costs nothing, and 1 shows every step's loss as it comes.
    sync_every: int = 1
    compile: bool = False     # torch.compile the model for the training steps (see train)

    def __post_init__(self):
        for name in ("steps", "batch_size", "block_size", "eval_every", "eval_batches",
                     "sync_every", "muon_ns_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive integer, got {value!r}")
        for name in ("warmup_steps", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
                raise ValueError(f"TrainConfig.{name} must be an integer >= 0, got {value!r}")
        if not self.warmup_steps < self.steps:
            raise ValueError(f"TrainConfig.warmup_steps={self.warmup_steps} must be smaller than "
                             f"steps={self.steps}, or the learning rate never reaches its peak; "
                             f"use fewer warm-up steps (about 10% of steps is typical)")
        for name in ("lr", "min_lr_ratio", "weight_decay", "grad_clip", "beta2", "muon_lr"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValueError(f"TrainConfig.{name} must be a finite number, got {value!r}")
        if not self.lr > 0:
            raise ValueError(f"TrainConfig.lr must be > 0, got {self.lr}; 3e-4 to 1e-3 is typical")
        if not self.muon_lr > 0:
            raise ValueError(f"TrainConfig.muon_lr must be > 0, got {self.muon_lr}; 0.02 to 0.05 "
                             f"is typical")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"TrainConfig.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.weight_decay < 0:
            raise ValueError(f"TrainConfig.weight_decay must be >= 0, got {self.weight_decay}")
        if not 0 <= self.beta2 < 1:
            raise ValueError(f"TrainConfig.beta2 must be in [0, 1), got {self.beta2}; 0.95 or 0.99 "
                             f"is typical")
        if self.grad_clip < 0:
            raise ValueError(f"TrainConfig.grad_clip must be >= 0 (0 = no clipping), got {self.grad_clip}")
        for name in ("tf32", "compile", "muon_bf16"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"TrainConfig.{name} must be True or False, "
                                 f"got {getattr(self, name)!r}")
        for name, allowed in (("autocast", AUTOCAST), ("adamw", ADAMW),
                              ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"TrainConfig.{name} must be one of {allowed}, "
                                 f"got {getattr(self, name)!r}")

    def __repr__(self):  # beta2 and the speed options appear only when not their defaults
        shown = [f.name for f in fields(self)
                 if f.name not in _SHOWN_WHEN_SET or getattr(self, f.name) != f.default]
        return f"TrainConfig({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"

    @property
    def tokens_per_step(self) -> int:
        """Target tokens in one batch (per process under DDP)."""
        return self.batch_size * self.block_size


PRESETS = {
    # The full run, for one GPU: nanoGPT's Shakespeare model (6 layers of width 384, 6 heads,
    # dropout 0.2; 10.7M parameters) and batch (64 windows of 256 bytes: 16,384 tokens a
    # step), with RoPE, 2,000 steps of AdamW at 1e-3 (beta2 0.99) decaying to 1e-4 by the
    # last. Eager, not compiled: nanoGPT's compile took 30 s of its 50 s to 1.47 on an H200
    # (issue 46). At this size a step is bound by launching kernels, so the settings launch
    # fewer: float32 on TF32 units rather than bf16 autocast (whose casts are launches too;
    # it ran slower than float32 on the H200), fused AdamW, and the loss read back from the
    # GPU only at evaluations. bench/gpu_check.py measures it against nanoGPT's recipe.
    "gpu": (ModelConfig(vocab_size=256, max_len=256, d_model=384, n_heads=6, n_layers=6,
                        positions="rope", dropout=0.2),
            TrainConfig(steps=2000, batch_size=64, block_size=256, lr=1e-3, warmup_steps=100,
                        beta2=0.99, eval_every=250, eval_batches=16, autocast="off",
                        adamw="fused", tf32=True, sync_every=250)),
    # Lesson 06's CPU model (data/tinylm.pt was trained with it): about 0.8M parameters, 2048
    # tokens a step. The command's `--preset cpu` runs CPU_PRESETS instead (see cpu_preset);
    # this one is `--preset lesson06` there.
    "cpu": (ModelConfig(vocab_size=256, max_len=128, d_model=128, n_heads=4, n_layers=4),
            TrainConfig(steps=300, batch_size=16, block_size=128, lr=2e-3, warmup_steps=20,
                        eval_every=50, eval_batches=8)),
    # Tests and smoke runs only: trains in well under a second; learns little.
    "tiny": (ModelConfig(vocab_size=256, max_len=16, d_model=32, n_heads=4, n_layers=2),
             TrainConfig(steps=20, batch_size=4, block_size=16, lr=3e-3, warmup_steps=2,
                         eval_every=5, eval_batches=2)),
}


PRESETS["lesson06"] = PRESETS["cpu"]

# What `python -m course_lib.train --preset cpu` runs: the validation loss of nanoGPT's CPU
# recipe (4 x 128, block 64, batch 12, 2,000 steps at lr 1e-3) in less of its time, measured by
# bench/time_to_quality.py (docs/benchmarks.md); the settings were chosen on its tuning split
# (--dev), never on the validation text. Both take RoPE, which learns far faster per token than
# a position table, and Muon (course_lib.muon) for the hidden matrices at a peak of 0.03, with
# AdamW's fused update at 4e-3 for the embedding and the norms and biases: in float32, Muon
# reached the recipe's loss in 300 steps of 24 windows where AdamW alone needed 540.
# A step is bound by its matrix products (two thirds of it in float32, bench/profile_steps.py),
# so the model is smaller than the recipe's (issue 45): 3 layers of width 128, an MLP of width
# 384 (3 C, not 4 C) and 2 key/value heads for the 4 query heads (grouped-query attention,
# lesson 08), 0.65 of a 4 x 128 step's CPU time; 300 such steps reached 1.425 and 1.424 on the
# tuning split in float32 (seeds 0 and 1; the recipe's loss + 0.02 is 1.448 and 1.460), where
# 270 steps of the 4 x 128 model had reached 1.428 and 1.433 in 1.5 times the CPU time.
# "bf16" adds bf16 autocast, for CPUs where it pays (1.6x the tokens/s of float32 on an EPYC
# with AVX512-BF16; without those instructions torch emulates bf16, slower than float32; with
# AMX an Intel Xeon gained almost nothing), so cpu_preset("auto") times a few updates of both
# on the learner's CPU (course_lib.precision) rather than going by its instructions. It runs
# Muon's Newton-Schulz
# iterations in bfloat16 too (18.6 against 27.6 ms of CPU a step on an EPYC with AVX512-BF16:
# bench/train_step.py --newton-schulz): 300 such steps reached 1.428 and 1.425 on the tuning
# split. docs/benchmarks.md has the runs.
_QUALITY_MODEL = ModelConfig(vocab_size=256, max_len=64, d_model=128, n_heads=4, n_layers=3,
                             d_ff=384, n_kv_heads=2, positions="rope")
_QUALITY_RUN = TrainConfig(steps=300, batch_size=24, block_size=64, lr=4e-3, warmup_steps=30,
                           eval_every=300, eval_batches=8, optimizer="muon", muon_lr=0.03,
                           adamw="fused", autocast="off")
CPU_PRESETS = {
    "float32": (_QUALITY_MODEL, _QUALITY_RUN),
    "bf16": (_QUALITY_MODEL, replace(_QUALITY_RUN, autocast="bf16", muon_bf16=True)),
}


def cpu_preset(settings="auto"):
    """The command's "cpu" preset for this CPU: (name, ModelConfig, TrainConfig, why).

    settings="auto" times a few updates of the preset in each precision on this CPU and picks
    "bf16" where its update takes at most 0.9 of float32's time, "float32" elsewhere
    (course_lib.precision.choose_cpu_precision; COURSE_CPU_BF16=1 or 0 forces it); `why` gives
    the figures. "bf16" or "float32" forces one by hand.
    """
    if settings not in ("auto", *CPU_PRESETS):
        raise ValueError(f"settings must be 'auto' or one of {tuple(CPU_PRESETS)}, got {settings!r}")
    if settings == "auto":
        from course_lib.precision import choose_cpu_precision  # it imports this module
        choice = choose_cpu_precision(_QUALITY_MODEL, CPU_PRESETS["float32"][1],
                                      CPU_PRESETS["bf16"][1])
        settings, why = choice.settings, choice.why
    else:
        why = "chosen by hand"
    return (settings, *CPU_PRESETS[settings], why)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """The learning rate of the update that takes the model from step `step` to `step + 1`.

    Linear warm-up from lr / warmup_steps to lr over the first warmup_steps updates, then
    a half cosine from lr down to lr * min_lr_ratio, reached at the last update
    (step = cfg.steps - 1). Steps past the end keep the final value.
    """
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise ValueError(f"step must be an integer >= 0, got {step!r}")
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(1, cfg.steps - 1 - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)  # 0 at the peak, 1 at the last update
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass
class History:
    """What a run recorded. Step s is the state after s updates (s = 1 .. steps).

    losses[i] is the training loss of the batch of update steps[i] (under DDP: the mean over
    processes). val_losses[j] is the validation loss at eval_steps[j]; step 0 is the model
    before training.
    """
    steps: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    eval_steps: list = field(default_factory=list)
    val_losses: list = field(default_factory=list)
    tokens_per_second: float = 0.0   # all processes together, excluding evaluation and saving
    device: str = "cpu"
    # Wall seconds from the start of the run to the end of each evaluation (compiling,
    # evaluating and saving included), one per eval_steps entry.
    eval_seconds: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d) -> "History":
        return cls(steps=[int(s) for s in d["steps"]], losses=[float(x) for x in d["losses"]],
                   eval_steps=[int(s) for s in d["eval_steps"]],
                   val_losses=[float(x) for x in d["val_losses"]],
                   tokens_per_second=float(d.get("tokens_per_second", 0.0)),
                   device=str(d.get("device", "cpu")),
                   eval_seconds=[float(x) for x in d.get("eval_seconds", [])])


def decay_groups(model, weight_decay):
    """AdamW parameter groups: weight decay on the 2-D weight matrices (and embeddings) only.

    Biases and norm gains/shifts are 1-D; decaying them towards 0 only hurts.
    """
    params = list(model.parameters())  # tied weights appear once
    decay = [p for p in params if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in params if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def configure_optimizer(model, cfg: TrainConfig):
    """The optimizer of a training run, by cfg.optimizer.

    "adamw": AdamW on every parameter, decay on the weight matrices only, betas (0.9, cfg.beta2).
    "muon": Muon (no weight decay) on the hidden weight matrices (course_lib.muon.hidden_matrices)
    at cfg.muon_lr, AdamW as above on the rest at cfg.lr; each group's "lr_ratio" is its
    peak over cfg.lr, which `train` multiplies the schedule by.
    cfg.adamw="foreach" or "fused" picks torch's multi-tensor or fused implementation of
    AdamW: the same update, computed in fewer, larger kernels.
    """
    kernels = {} if cfg.adamw == "default" else {cfg.adamw: True}
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(decay_groups(model, cfg.weight_decay), lr=lr_at(0, cfg),
                                 betas=(0.9, cfg.beta2), **kernels)
    matrices = hidden_matrices(_unwrap(model))
    ratio = cfg.muon_lr / cfg.lr
    muon = Muon([{"params": matrices, "lr_ratio": ratio}], lr=lr_at(0, cfg) * ratio,
                ns_steps=cfg.muon_ns_steps, ns_dtype=torch.bfloat16 if cfg.muon_bf16 else None)
    in_muon = {id(p) for p in matrices}
    groups = [dict(g, params=[p for p in g["params"] if id(p) not in in_muon], lr_ratio=1.0)
              for g in decay_groups(model, cfg.weight_decay)]
    adamw = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr_at(0, cfg),
                              betas=(0.9, cfg.beta2), **kernels)
    return MuonWithAdamW(muon, adamw)


def _dist_info():
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _unwrap(model):
    return model.module if hasattr(model, "module") else model


def _autocast(device, mode="auto"):
    """The precision context of a forward pass: bf16 autocast or float32 (see TrainConfig.autocast).

    bf16 on a CPU keeps attention itself in float32 (course_lib.attention._fused_attention):
    torch's fused CPU attention runs its backward pass fast in float32, slowly in bf16.
    """
    if mode == "off":
        return contextlib.nullcontext()
    if device.type == "cuda" and (mode == "bf16" or torch.cuda.is_bf16_supported()):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if mode == "bf16" and device.type == "cpu":  # attention stays float32 (attention.py)
        return torch.autocast("cpu", dtype=torch.bfloat16)
    if mode == "bf16":
        raise ValueError(f"TrainConfig.autocast='bf16' runs on a CPU or a CUDA GPU, not on "
                         f"{device.type}; use autocast='auto'")
    return contextlib.nullcontext()


def _check_ids_for(ids, name, cfg, model):
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1:
        raise ValueError(f"{name} must be a 1-D tensor of token ids, got "
                         f"{type(ids).__name__} {tuple(getattr(ids, 'shape', ()))}")
    if ids.numel() < cfg.block_size + 1:
        raise ValueError(f"{name} has {ids.numel()} ids but a window needs block_size + 1 = "
                         f"{cfg.block_size + 1}; use a longer text or a smaller block_size")
    max_len = _unwrap(model).config.max_len
    if cfg.block_size > max_len:
        raise ValueError(f"block_size={cfg.block_size} is longer than the model's max_len={max_len}; "
                         f"use block_size <= {max_len} or a model with a larger max_len")


def _batch_to(batch, device):
    """A batch of ids on `device`. To a GPU through pinned memory and without waiting: a plain
    copy from pageable memory waits for the GPU to finish its queue, a sync every step."""
    if device.type == "cuda":
        return batch.pin_memory().to(device, non_blocking=True)
    return batch.to(device)


@contextlib.contextmanager
def _matmul_precision(device, tf32):
    """TensorFloat-32 for float32 matrix products on a CUDA device while the run lasts
    (TrainConfig.tf32), restored on the way out; nothing elsewhere."""
    if not (tf32 and device.type == "cuda"):
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _compiled(model, device):
    """torch.compile(model), or a ValueError that says why this machine cannot compile."""
    why = cannot_compile(device)
    if why:
        raise ValueError(f"TrainConfig.compile=True, but {why}; use compile=False")
    return torch.compile(model)


def update(model, opt, batch, cfg: TrainConfig, device, forward=None):
    """One update of `train` on a (B, T + 1) batch on `device`: the forward pass in cfg's
    precision (through `forward`, the model compiled or not), the loss, the backward pass,
    clipping and the optimizer's step. Returns the loss, detached and not read back."""
    inputs, targets = split_inputs_targets(batch)
    with _autocast(device, cfg.autocast):
        logits = (model if forward is None else forward)(inputs)
    loss = next_token_loss(logits.float(), targets)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    return loss.detach()


def train(model, train_ids, val_ids, cfg: TrainConfig, *, device=None, checkpoint_path=None,
          resume=False, progress=True, on_eval=None) -> History:
    """Train `model` on random windows of train_ids; return the History.

    AdamW (decay on 2-D weights), warm-up + cosine learning rate (lr_at), gradient clipping,
    batches drawn by a torch.Generator seeded with cfg.seed (+ rank under DDP), bf16 autocast
    on CUDA when supported (cfg.autocast="bf16" also on a CPU, "off" never; cfg.adamw picks
    AdamW's kernels, cfg.tf32 TensorFloat-32 on CUDA, cfg.compile torch.compile;
    bench/time_to_quality.py and bench/gpu_check.py measure them). The validation loss on
    fixed windows of val_ids is measured at step 0, every cfg.eval_every steps and at the end;
    on_eval(step, val_loss, seconds), if given, is called after each (on rank 0). The training
    losses are read back every cfg.sync_every steps, and a loss that is not finite stops the
    run then, naming its step. With checkpoint_path the run is saved atomically at every
    evaluation after step 0 and at the end; resume=True continues from that file (same
    batches, same numbers as a run that was never stopped).

    Under torch.distributed pass the DDP-wrapped model: every process draws its own batches,
    only rank 0 writes the checkpoint and shows progress.
    """
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"cfg must be a TrainConfig, got {type(cfg).__name__}")
    _check_ids_for(train_ids, "train_ids", cfg, model)
    _check_ids_for(val_ids, "val_ids", cfg, model)
    if resume and checkpoint_path is None:
        raise ValueError("resume=True needs checkpoint_path, the file to continue from")
    started = time.perf_counter()
    rank, world = _dist_info()
    inner = _unwrap(model)
    device = torch.device(device) if device is not None else next(inner.parameters()).device
    if next(inner.parameters()).device != device:
        inner.to(device)
    forward = _compiled(model, device) if cfg.compile else model

    opt = configure_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(cfg.seed + rank)
    history = History(device=str(device))
    start = 0
    if resume:
        state = ckpt.load_checkpoint(checkpoint_path, inner, opt, map_location="cpu")
        start = int(state["step"])
        rank_states = state.get("rank_generator_states") or [state["generator_state"]]
        if len(rank_states) != world:
            raise ValueError(f"the checkpoint was written by a run of {len(rank_states)} processes; "
                             f"resume it with the same number (now {world})")
        gen.set_state(rank_states[rank])
        if state.get("torch_rng_state") is not None:
            torch.set_rng_state(state["torch_rng_state"])
        if state.get("history"):
            history = History.from_dict(state["history"])
            history.device = str(device)
    earlier = history.eval_seconds[-1] if history.eval_seconds else 0.0  # a resumed run's

    def save(step):
        states = [gen.get_state()]
        if world > 1:
            states = [None] * world
            dist.all_gather_object(states, gen.get_state())
        if rank == 0:
            ckpt.save_checkpoint(checkpoint_path, inner, opt, step=step, train_config=cfg,
                            generator=gen, history=history, rank_generator_states=states)

    def record_eval(step):
        val = evaluate(inner, val_ids, batch_size=cfg.batch_size, block_size=cfg.block_size,
                       n_batches=cfg.eval_batches, seed=cfg.seed + 12345, autocast=cfg.autocast)
        history.eval_steps.append(step)
        history.val_losses.append(val)
        history.eval_seconds.append(earlier + time.perf_counter() - started)
        if on_eval is not None and rank == 0:
            on_eval(step, val, history.eval_seconds[-1])

    model.train()
    bar = tqdm(total=cfg.steps, initial=start, disable=(not progress) or rank != 0,
               desc="training", dynamic_ncols=True)
    tokens_per_update = cfg.tokens_per_step * world
    train_time, n_timed = 0.0, 0
    pending = []  # (step, lr, loss on the device) not read back yet
    try:
        with _matmul_precision(device, cfg.tf32):
            if start == 0 and not history.eval_steps:
                record_eval(0)
            segment = time.perf_counter()
            for step in range(start, cfg.steps):
                lr = lr_at(step, cfg)
                for group in opt.param_groups:
                    group["lr"] = lr * group.get("lr_ratio", 1.0)
                batch = _batch_to(get_batch(train_ids, cfg.batch_size, cfg.block_size, gen), device)
                loss = update(model, opt, batch, cfg, device, forward)
                if world > 1:
                    dist.all_reduce(loss)
                    loss = loss / world
                done = step + 1
                pending.append((done, lr, loss))
                bar.update(1)
                evaluating = done % cfg.eval_every == 0 or done == cfg.steps
                if not (evaluating or done % cfg.sync_every == 0):
                    continue
                values = torch.stack([x for _, _, x in pending]).tolist()  # waits for the GPU
                train_time += time.perf_counter() - segment
                n_timed += len(pending)
                for (at, rate, _), value in zip(pending, values):
                    if not math.isfinite(value):
                        raise FloatingPointError(
                            f"the training loss became {value} at step {at} (learning rate "
                            f"{rate:.3g}); lower TrainConfig.lr (now {cfg.lr}) or check the data")
                    history.steps.append(at)
                    history.losses.append(value)
                pending = []
                history.tokens_per_second = n_timed * tokens_per_update / train_time
                bar.set_postfix(loss=f"{values[-1]:.3f}", tok_s=f"{history.tokens_per_second:,.0f}")
                if evaluating:
                    record_eval(done)
                    if checkpoint_path is not None:
                        save(done)
                segment = time.perf_counter()
    finally:
        bar.close()
    if checkpoint_path is not None and start == cfg.steps:
        save(start)
    return history
