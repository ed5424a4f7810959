"""Where the time goes, by operator: one step of `--preset cpu` and one default decode step.

    OMP_NUM_THREADS=1 python bench/profile_steps.py                     # this CPU's own branch
    COURSE_CPU_BF16=0 OMP_NUM_THREADS=1 python bench/profile_steps.py   # the float32 branch
    COURSE_CPU_BF16=1 OMP_NUM_THREADS=1 python bench/profile_steps.py   # the bf16 branch

The training step is the one `python -m course_lib.train --preset cpu` runs on this CPU
(course_lib.training.cpu_preset, which COURSE_CPU_BF16 forces either way): a fresh TinyLM of
the preset's shape (3 x 128 since issue 45's second round; 4 x 128 before), batch 24 x 64, forward under the preset's autocast, loss, backward, clipping,
Muon and fused AdamW, as course_lib.training.train runs them, on one fixed batch. The decode
step is `generate`'s default: FastDecoder.step at batch 1 without oneDNN, on an untrained
TinyLM of width 128 and 4 layers with room for 528 positions (bench/decode.py's model),
after a 16-token prompt.

torch.profiler records --steps of each after --warmup untimed ones. Each operator's self
time is put in one class: matrix products (aten::mm, addmm, bmm, ... and oneDNN's), fused
attention (scaled_dot_product_attention's kernels, forward and backward), and the rest
(norms, GELU, RoPE, elementwise arithmetic, copies, the optimizer's elementwise updates,
and the dispatch between them). It prints one JSON object: the machine and its load, the
branch, for each of the two steps the milliseconds per step by class and the share outside
the matrix products, and the 12 operators that took the most self time. Profiling adds its
own cost to every operator call, so the shares, not the absolute times, are the figures.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from time_to_quality import machine  # noqa: E402

from course_lib.generation import FastDecoder, _without_onednn  # noqa: E402
from course_lib.kv_cache import KVCache  # noqa: E402
from course_lib.model import ModelConfig, TinyLM  # noqa: E402
from course_lib.training import (_autocast, configure_optimizer, cpu_preset,  # noqa: E402
                                 next_token_loss)

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::mv",
          "aten::addmv", "aten::dot", "aten::_weight_int8pack_mm")
PHASES = ("forward", "backward", "clip", "update")


def kind(name):
    """The class of an operator's self time: "matmul", "attention" or "other"."""
    if name in MATMUL or name.startswith(("mkldnn::", "aten::mkldnn_", "onednn::")):
        return "matmul"
    if "scaled_dot_product" in name or "flash_attention" in name or "efficient_attention" in name:
        return "attention"
    return "other"


def training_step(settings):
    """One preset step as train() runs it, on a fixed batch; and the name of the branch."""
    name, model_config, cfg, why = cpu_preset(settings)
    torch.manual_seed(0)
    model = TinyLM(model_config)
    opt = configure_optimizer(model, cfg)
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randint(0, 256, (cfg.batch_size, cfg.block_size), generator=g) for _ in "xy")
    device = torch.device("cpu")

    def step():
        with record_function("forward"):
            with _autocast(device, cfg.autocast):
                logits = model(x)
            loss = next_token_loss(logits.float(), y)
        opt.zero_grad(set_to_none=True)
        with record_function("backward"):
            loss.backward()
        with record_function("clip"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        with record_function("update"):
            opt.step()
        return loss.item()
    return step, dict(settings=name, why=why, autocast=cfg.autocast,
                      batch=[cfg.batch_size, cfg.block_size])


def decode_step():
    """generate's default step at batch 1, as it runs it: FastDecoder without oneDNN."""
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(max_len=528, d_model=128, n_heads=4, n_layers=4)).eval()
    prompt = torch.randint(0, 256, (1, 16), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        cache = KVCache.for_model(model, 1)
        model(prompt, cache)
    decoder = FastDecoder(model, cache)
    token = prompt[:, -1]

    def step():
        with torch.inference_mode(), _without_onednn():
            decoder.step(token)
            cache.length -= 1  # the same position every time
    return step


def measure(step, steps, warmup):
    """Self milliseconds per step by class, by phase where the step marks them, and the top
    operators, from torch.profiler over `steps` calls."""
    for _ in range(warmup):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    by_kind = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
    ops = {}
    for event in prof.key_averages():
        if event.key in PHASES:
            continue
        us = event.self_cpu_time_total
        by_kind[kind(event.key)] += us
        ops[event.key] = ops.get(event.key, 0.0) + us
    phases = {}
    for event in prof.events():  # each phase's whole time, its children included
        if event.name in PHASES:
            phases[event.name] = phases.get(event.name, 0.0) + event.cpu_time_total
    total = sum(by_kind.values())
    top = sorted(ops.items(), key=lambda kv: -kv[1])[:12]
    return dict(
        ms_per_step=round(total / steps / 1e3, 3),
        ms_by_class={k: round(v / steps / 1e3, 3) for k, v in by_kind.items()},
        share_outside_matrix_products=round(1 - by_kind["matmul"] / total, 3),
        share_outside_matrix_products_and_attention=round(by_kind["other"] / total, 3),
        ms_by_phase={k: round(v / steps / 1e3, 3) for k, v in phases.items()} or None,
        top_operators=[dict(name=k, kind=kind(k), ms_per_step=round(v / steps / 1e3, 4),
                            share=round(v / total, 3)) for k, v in top])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="training steps profiled (default 20)")
    p.add_argument("--decode-steps", type=int, default=200, help="decode steps (default 200)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--cpu-settings", default="auto", choices=("auto", "bf16", "float32"),
                   help="the preset's branch (auto: course_lib.training.cpu_preset's pick)")
    args = p.parse_args(argv)
    for name in ("steps", "decode_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    load_before = os.getloadavg()
    step, branch = training_step(args.cpu_settings)
    train = measure(step, args.steps, args.warmup)
    decode = measure(decode_step(), args.decode_steps, 10 * args.warmup)
    print(json.dumps(dict(
        machine=dict(machine(torch.device("cpu")),
                     cpu_bf16_forced=os.environ.get("COURSE_CPU_BF16") or None,
                     load_average_before=[round(x, 2) for x in load_before],
                     load_average_after=[round(x, 2) for x in os.getloadavg()]),
        preset_branch=branch, training_step=train, decode_step=decode), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
