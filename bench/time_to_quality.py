"""Time to quality: nanoGPT's CPU recipe against a faster one, to the same validation loss.

    OMP_NUM_THREADS=1 python bench/time_to_quality.py            # about 5 minutes on an idle CPU
    OMP_NUM_THREADS=1 python bench/time_to_quality.py --quick    # a few seconds: a smoke test
    OMP_NUM_THREADS=1 python bench/time_to_quality.py --lesson06 # lesson 06's cell, both ways
    python bench/time_to_quality.py --gpu                        # the GPU figures (see below)

CPU mode. On the first 1,115,394 bytes of data/shakespeare.txt (the size of nanoGPT's
tiny Shakespeare; 90% train, 10% validation) it trains a 4-layer, 4-head, width-128
TinyLM three ways, each from the same initial weights (seed 0):

    recipe     nanoGPT's README CPU run: block 64, batch 12, 2,000 steps, AdamW at 1e-3,
               100 warm-up steps then cosine decay to 1e-4, float32 (TrainConfig's defaults)
    fast       the training levers only: bf16 autocast on the CPU (attention through torch's
               math kernel), AdamW's foreach kernels, batch 24 at lr 3e-3 for 800 steps
    fast_rope  the same with RoPE instead of the learned position table (ModelConfig
               positions="rope", still 4 x 128), for 560 steps (500 missed the recipe's
               loss by 0.001 in the first full run)

`--repeats N` runs the three N times in turn (recipe, fast, fast_rope, recipe, ...), since the
machine may be shared. Each run's wall time is the whole `train` call (two small
evaluations included); its quality is the validation loss on the same 100 fixed windows
of 12 x 64 bytes, in float32, for all (GPU mode: windows of the model's max_len). It
prints one JSON object: the machine, each run's time and loss, the medians, and for each
fast recipe its time ratio to the recipe, whether it reached the recipe's loss, and
whether it did so in half the recipe's time or less.

torch.compile was measured and left out: on this course's 2-core CPU, compiling the
training step took 119 s (more than the whole recipe's budget) and the compiled step was
not faster than the eager one. The CPU run syncs once a step (loss.item()), which costs
nothing measurable on a CPU.

GPU mode (--gpu) runs the course's `gpu` preset (course_lib.training.PRESETS) on the same
slice, once in float32 and once with bf16 autocast, and prints time, tokens per second and
validation loss; see the README for the figures expected before it was first run.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.data import encode, train_val_split  # noqa: E402
from course_lib.model import ModelConfig, TinyLM  # noqa: E402
from course_lib.training import PRESETS, TrainConfig, evaluate, train  # noqa: E402

SLICE_BYTES = 1_115_394
MODEL = ModelConfig(max_len=64, d_model=128, n_heads=4, n_layers=4)
RECIPE = TrainConfig(steps=2000, batch_size=12, block_size=64, lr=1e-3, warmup_steps=100,
                     min_lr_ratio=0.1, weight_decay=0.1, grad_clip=1.0, eval_every=2000,
                     eval_batches=1)
EVAL = dict(batch_size=12, block_size=64, n_batches=100, seed=2024)


def machine(device):
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    info = dict(device=str(device), cpu=cpu, logical_cpus=os.cpu_count(),
                cpu_capability=torch.backends.cpu.get_cpu_capability(),
                torch=torch.__version__, threads=torch.get_num_threads())
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def run(name, model_config, cfg, train_ids, val_ids, device, eval_batches=EVAL["n_batches"]):
    torch.manual_seed(0)  # the same initial weights for every run
    model = TinyLM(model_config).to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    history = train(model, train_ids, val_ids, cfg, device=device, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    eval_cfg = dict(EVAL, block_size=model_config.max_len, n_batches=eval_batches)
    val = evaluate(model, val_ids, **eval_cfg)
    result = dict(name=name, seconds=round(seconds, 2), val_loss=round(val, 4),
                  last_train_loss=round(history.losses[-1], 4),
                  tokens_per_second=round(history.tokens_per_second))
    print(json.dumps(result), file=sys.stderr, flush=True)  # progress, while the rest runs
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few steps of each: a smoke test")
    p.add_argument("--repeats", type=int, default=1, help="rounds of the three runs, in turn (default 1)")
    p.add_argument("--fast-steps", type=int, default=800)
    p.add_argument("--rope-steps", type=int, default=560, help="fast_rope's steps")
    p.add_argument("--fast-batch", type=int, default=24)
    p.add_argument("--fast-lr", type=float, default=3e-3)
    p.add_argument("--fast-autocast", default="bf16", choices=("auto", "bf16", "off"))
    p.add_argument("--fast-adamw", default="foreach", choices=("default", "foreach", "fused"))
    p.add_argument("--gpu", action="store_true", help="the GPU figures (needs CUDA)")
    p.add_argument("--lesson06", action="store_true",
                   help="lesson 06's CPU cell (the cpu preset, 100 steps) in float32 and fast")
    p.add_argument("--data", default=str(ROOT / "data" / "shakespeare.txt"))
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be at least 1, got {args.repeats}")

    ids = encode(Path(args.data).read_bytes()[:SLICE_BYTES].decode("utf-8", errors="replace"))
    train_ids, val_ids = train_val_split(ids)
    if args.gpu:
        return gpu(args, train_ids, val_ids)
    if args.lesson06:
        return lesson06(args, train_ids, val_ids)

    device = torch.device("cpu")
    recipe = RECIPE
    fast = replace(RECIPE, steps=args.fast_steps, batch_size=args.fast_batch, lr=args.fast_lr,
                   warmup_steps=min(RECIPE.warmup_steps, args.fast_steps // 10),
                   eval_every=args.fast_steps, autocast=args.fast_autocast, adamw=args.fast_adamw)
    fast_rope = replace(fast, steps=args.rope_steps, eval_every=args.rope_steps,
                        warmup_steps=min(RECIPE.warmup_steps, args.rope_steps // 10))
    if args.quick:
        recipe = replace(recipe, steps=20, warmup_steps=2, eval_every=20)
        fast = fast_rope = replace(fast, steps=5, warmup_steps=1, eval_every=5)
    recipes = {"recipe": (MODEL, recipe), "fast": (MODEL, fast),
               "fast_rope": (replace(MODEL, positions="rope"), fast_rope)}
    runs = {name: [] for name in recipes}
    for _ in range(args.repeats):
        for name, (model_config, cfg) in recipes.items():
            runs[name].append(run(name, model_config, cfg, train_ids, val_ids, device,
                                  eval_batches=2 if args.quick else EVAL["n_batches"]))
    median = {name: dict(seconds=statistics.median(r["seconds"] for r in rs),
                         val_loss=statistics.median(r["val_loss"] for r in rs))
              for name, rs in runs.items()}
    base = median["recipe"]
    verdict = {name: dict(time_ratio=round(m["seconds"] / base["seconds"], 3),
                          same_quality=m["val_loss"] <= base["val_loss"],
                          half_the_time_or_less=m["seconds"] <= 0.5 * base["seconds"])
               for name, m in median.items() if name != "recipe"}
    print(json.dumps(dict(
        machine=machine(device), slice_bytes=SLICE_BYTES, quick=args.quick,
        model=asdict(MODEL), recipe=asdict(recipe), fast=asdict(fast),
        fast_rope=dict(asdict(fast_rope), positions="rope"), eval=EVAL,
        runs=runs, median=median, against_the_recipe=verdict), indent=2))
    return 0


def lesson06(args, train_ids, val_ids):
    """Lesson 06's CPU training cell as it is (float32) and with the fast switch, in turns."""
    model_config, cfg = PRESETS["cpu"]
    plain = replace(cfg, steps=100, eval_every=20, eval_batches=4)
    if args.quick:
        plain = replace(plain, steps=5, warmup_steps=1, eval_every=5)
    fast = replace(plain, autocast=args.fast_autocast, adamw=args.fast_adamw)
    runs = {"float32": [], "fast": []}
    for _ in range(args.repeats):
        for name, c in (("float32", plain), ("fast", fast)):
            runs[name].append(run(name, model_config, c, train_ids, val_ids, torch.device("cpu"),
                                  eval_batches=2 if args.quick else 20))
    median = {name: dict(seconds=statistics.median(r["seconds"] for r in rs),
                         val_loss=statistics.median(r["val_loss"] for r in rs))
              for name, rs in runs.items()}
    print(json.dumps(dict(machine=machine(torch.device("cpu")), slice_bytes=SLICE_BYTES,
                          model=asdict(model_config), float32=asdict(plain), fast=asdict(fast),
                          runs=runs, median=median,
                          time_ratio=round(median["fast"]["seconds"] / median["float32"]["seconds"], 3)),
                     indent=2))
    return 0


def gpu(args, train_ids, val_ids):
    if not torch.cuda.is_available():
        print("error: --gpu needs a CUDA GPU, and torch sees none", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    model_config, cfg = PRESETS["gpu"]
    if args.quick:
        cfg = replace(cfg, steps=20, warmup_steps=2, eval_every=20)
    runs = [run(f"gpu preset, autocast={mode}", model_config, replace(cfg, autocast=mode),
                train_ids, val_ids, device) for mode in ("off", "bf16")]
    print(json.dumps(dict(machine=machine(device), slice_bytes=SLICE_BYTES, quick=args.quick,
                          model=asdict(model_config), train=asdict(cfg), eval=EVAL, runs=runs),
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
