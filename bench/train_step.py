"""Where a training step of `--preset cpu` spends its time: the step, and variants of it.

    OMP_NUM_THREADS=1 python bench/train_step.py              # one JSON object
    OMP_NUM_THREADS=1 python bench/train_step.py --profile    # and torch.profiler's table
    OMP_NUM_THREADS=1 python bench/train_step.py --bookkeeping  # only the loop's own work
    OMP_NUM_THREADS=1 python bench/train_step.py --variants adamw_only  # the preset and one
    OMP_NUM_THREADS=1 python bench/train_step.py --newton-schulz  # Muon's iterations alone

The step is the preset's (course_lib.training.cpu_preset("float32"): a 3 x 128 RoPE TinyLM
with an MLP of width 384 and 2 key/value heads (4 x 128, MLP 512, 4 heads, before issue 45's
second round: the figures in docs/benchmarks.md dated before 2026-12-04 evening are of that),
batch 24 x 64, Muon for the hidden matrices and AdamW's fused update for the rest; docs/benchmarks.md
says which of its figures were taken when it was AdamW's foreach update alone): forward, loss, backward, clipping, update, as
course_lib.training.train runs it. Each variant changes one part:

    rope_seven_ops     RoPE as apply_rope computed it before: the even and odd halves rotated
                       separately and stacked (seven operations on x; now four, same numbers)
    learned_positions  a position table instead of RoPE: what RoPE costs at all
    adamw_fused        AdamW's fused kernel instead of foreach
    attention_math     attention through torch's plain (math) kernel instead of the fused one
    gelu_tanh          the tanh approximation of GELU (GPT-2's) instead of the exact one
    flush_denormal     torch.set_flush_denormal(True): tiny floats read as zero
    no_clipping        no gradient clipping (grad_clip=0)
    batch_32, batch_48 larger batches: compare them per token (cpu_ms_per_1k_tokens)
    fused_flush        adamw_fused and flush_denormal together
    adamw_only         AdamW for every parameter (TrainConfig.optimizer="adamw"), the preset
                       before it took Muon: what Muon's Newton-Schulz iterations cost a step
    newton_schulz_3    3 Newton-Schulz iterations an update instead of 5 (muon_ns_steps)
    no_onednn          torch's own CPU kernels instead of oneDNN's (torch.backends.mkldnn off),
                       as generate decodes
    four_by_128        the preset's model before issue 45's second round: 4 layers, an MLP of
                       width 512, 4 key/value heads (nanoGPT's recipe's shape)

`same_losses_as_the_preset` says, for each variant of the same model and batch size, whether
its steps gave the preset's losses bit for bit (flush_denormal does if no denormal occurs).

It also times apply_rope alone, forward and backward, at the shape the step gives it (q of
(24, 4, 64, 32)), now and in the seven-operation form, in turns, by CPU time.

The variants run in turns, one step each, for --rounds rounds (each round starting one
variant later, so that none is always the first after another's), and each step is timed by
the CPU time of this process (time.process_time), so other work on a shared machine slows
the figures less than it does wall time; the medians are compared. The machine and its load
are printed with them.
"""
import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib import attention  # noqa: E402
from course_lib.device import cpu_has_bf16  # noqa: E402
from course_lib.generation import _without_onednn  # noqa: E402
from course_lib.model import TinyLM  # noqa: E402
from course_lib.positions import pair_frequencies  # noqa: E402
from course_lib.training import configure_optimizer, cpu_preset, update  # noqa: E402


def rope_seven_ops(x, positions, base=10000.0):
    """apply_rope as it was: the halves rotated separately, then stacked (the same numbers)."""
    D = x.shape[-1]
    freqs = pair_frequencies(D, base, device=x.device, dtype=torch.float32)  # (D / 2,)
    angles = positions.to(torch.float32)[:, None] * freqs                  # (T, D / 2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]                                 # (..., T, D / 2)
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _math_attention(q, k, v, causal):
    with sdpa_kernel(SDPBackend.MATH):
        return _fused(q, k, v, causal)


_fused = attention._fused_attention


def make_step(model_config, cfg, seed=0):
    """A closure that runs one training step of a fresh model; the same batch every time."""
    torch.manual_seed(seed)
    model = TinyLM(model_config)
    opt = configure_optimizer(model, cfg)
    g = torch.Generator().manual_seed(seed)
    batch = torch.randint(0, 256, (cfg.batch_size, cfg.block_size + 1), generator=g)  # (B, T + 1)

    def step():  # train's own update, in cfg's precision
        return update(model, opt, batch, cfg, torch.device("cpu")).item()
    return step


def variants():
    """name -> (ModelConfig, TrainConfig, context manager factory)."""
    _, mc, cfg, _ = cpu_preset("float32")
    none = contextlib.nullcontext
    return {
        "preset": (mc, cfg, none),
        "rope_seven_ops": (mc, cfg, lambda: mock.patch.object(attention, "apply_rope", rope_seven_ops)),
        "learned_positions": (replace(mc, positions="learned"), cfg, none),
        "adamw_fused": (mc, replace(cfg, adamw="fused"), none),
        "attention_math": (mc, cfg, lambda: mock.patch.object(attention, "_fused_attention",
                                                     _math_attention)),
        "gelu_tanh": (replace(mc, gelu_approx="tanh"), cfg, none),
        "flush_denormal": (mc, cfg, flush_denormal),
        "no_clipping": (mc, replace(cfg, grad_clip=0.0), none),
        "batch_32": (mc, replace(cfg, batch_size=32), none),
        "batch_48": (mc, replace(cfg, batch_size=48), none),
        "fused_flush": (mc, replace(cfg, adamw="fused"), flush_denormal),
        "adamw_only": (mc, replace(cfg, optimizer="adamw"), none),
        "newton_schulz_3": (mc, replace(cfg, muon_ns_steps=3), none),
        "no_onednn": (mc, cfg, _without_onednn),
        "four_by_128": (replace(mc, n_layers=4, d_ff=None, n_kv_heads=None), cfg, none),
    }


@contextlib.contextmanager
def flush_denormal():
    """Denormal floats flushed to zero while the block runs (torch's global switch)."""
    if not torch.set_flush_denormal(True):
        raise RuntimeError("this CPU cannot flush denormals (torch.set_flush_denormal)")
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def loop_bookkeeping(calls=2000):
    """The mean CPU ms of what train() does a step outside forward, backward and update.

    The learning rate set on every parameter group, a batch drawn and split into inputs and
    targets, the gradients cleared: the per-step Python work of course_lib.training.train.
    """
    from course_lib.data import get_batch, split_inputs_targets
    from course_lib.training import lr_at
    _, mc, cfg, _ = cpu_preset("float32")
    ids = torch.randint(0, 256, (900_000,), generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(0)
    opt = configure_optimizer(TinyLM(mc), cfg)
    start = time.process_time()
    for i in range(calls):
        lr = lr_at(i % cfg.steps, cfg)
        for group in opt.param_groups:
            group["lr"] = lr * group.get("lr_ratio", 1.0)
        split_inputs_targets(get_batch(ids, cfg.batch_size, cfg.block_size, gen))
        opt.zero_grad(set_to_none=True)
    return round(1e3 * (time.process_time() - start) / calls, 3)


def newton_schulz_calls(rounds=7):
    """Median CPU ms of one step's Newton-Schulz iterations (the preset's hidden matrices, 4 a layer):
    course_lib.muon.orthogonalize in float32, and torch.optim.Muon's, which casts to bfloat16.
    """
    from course_lib.muon import NS_COEFFICIENTS, hidden_matrices, orthogonalize
    _, mc, _, _ = cpu_preset("float32")
    torch.manual_seed(0)
    grads = [torch.randn(p.shape) for p in hidden_matrices(TinyLM(mc))]
    calls = {"course_lib_float32": orthogonalize}
    try:  # a private function of torch's Muon; absent from other versions of torch
        from torch.optim._muon import _zeropower_via_newtonschulz as torch_ns
        calls["torch_optim_muon_bfloat16"] = lambda g: torch_ns(g, NS_COEFFICIENTS, 5, 1e-7)
    except ImportError:
        pass
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, f in calls.items():
            start = time.process_time()
            for g in grads:
                f(g)
            times[name].append(time.process_time() - start)
    return dict(matrices=len(grads), shapes=sorted({tuple(g.shape) for g in grads}),
                cpu_ms_per_step={n: round(1e3 * statistics.median(t), 1) for n, t in times.items()})


def rope_calls(rounds=200):
    """Median CPU ms of apply_rope forward and backward on q's shape: now, and the old form."""
    from course_lib.positions import apply_rope
    x = torch.randn(24, 4, 64, 32, requires_grad=True)
    grad, positions = torch.randn(24, 4, 64, 32), torch.arange(64)
    times = {"now": [], "seven_ops": []}
    for _ in range(rounds):
        for name, f in (("now", apply_rope), ("seven_ops", rope_seven_ops)):
            start = time.process_time()
            f(x, positions).backward(grad)
            times[name].append(time.process_time() - start)
    assert torch.equal(apply_rope(x, positions), rope_seven_ops(x, positions))
    return {name: round(1e3 * statistics.median(t), 3) for name, t in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15, help="timed steps of each (default 15)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps of each first")
    p.add_argument("--profile", action="store_true", help="print the preset step's profile")
    p.add_argument("--variants", nargs="+", metavar="NAME",
                   help="time only these variants (and the preset); default: all")
    p.add_argument("--bookkeeping", action="store_true",
                   help="only the CPU ms a step of train()'s own work outside the model")
    p.add_argument("--newton-schulz", action="store_true",
                   help="only Muon's Newton-Schulz iterations a step: float32 and torch's bf16")
    args = p.parse_args(argv)
    if args.newton_schulz:
        print(json.dumps(dict(newton_schulz=newton_schulz_calls(), cpu_bf16=cpu_has_bf16(),
                              load_average=[round(x, 2) for x in os.getloadavg()])))
        return 0
    if args.bookkeeping:
        print(json.dumps(dict(loop_bookkeeping_cpu_ms=loop_bookkeeping(),
                              load_average=[round(x, 2) for x in os.getloadavg()])))
        return 0
    load_before = os.getloadavg()
    found = variants()
    if args.variants:
        unknown = set(args.variants) - set(found)
        if unknown:
            p.error(f"unknown variants {sorted(unknown)}; choose among {sorted(found)}")
        found = {n: v for n, v in found.items() if n == "preset" or n in args.variants}
    steps = {}
    for name, (mc, cfg, context) in found.items():
        steps[name] = make_step(mc, cfg)
        with context():
            for _ in range(args.warmup):
                steps[name]()
    times = {name: [] for name in found}
    losses = {name: [] for name in found}
    names = list(found)
    for r in range(args.rounds):  # each round starts one variant later: no variant always first
        for name in names[r % len(names):] + names[:r % len(names)]:
            context = found[name][2]
            with context():
                start = time.process_time()
                loss = steps[name]()
                times[name].append(time.process_time() - start)
                losses[name].append(loss)
    base = statistics.median(times["preset"])
    _, _, cfg, _ = cpu_preset("float32")
    result = dict(
        machine=dict(cpu=platform.processor() or platform.machine(), logical_cpus=os.cpu_count(),
                     torch=torch.__version__, threads=torch.get_num_threads(),
                     load_average_before=[round(x, 2) for x in load_before],
                     load_average_after=[round(x, 2) for x in os.getloadavg()]),
        tokens_per_step=cfg.batch_size * cfg.block_size, rounds=args.rounds,
        cpu_ms_per_step={name: round(1e3 * statistics.median(t), 1) for name, t in times.items()},
        against_the_preset={name: round(statistics.median(t) / base, 3)
                            for name, t in times.items()},
        cpu_ms_per_1k_tokens={name: round(1e6 * statistics.median(t) / (
            found[name][1].batch_size * found[name][1].block_size), 2)
            for name, t in times.items()},
        same_losses_as_the_preset={name: losses[name] == losses["preset"] for name in found
                                   if found[name][1].batch_size == cfg.batch_size},
        apply_rope_cpu_ms_forward_and_backward=rope_calls())
    print(json.dumps(result, indent=2))
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(5):
                steps["preset"]()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    return 0


if __name__ == "__main__":
    sys.exit(main())
