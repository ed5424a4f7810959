"""Time to quality: nanoGPT's CPU recipe against faster training settings, to the same loss.

    OMP_NUM_THREADS=1 python bench/time_to_quality.py --data kjv.txt   # about 3 minutes, idle
    OMP_NUM_THREADS=1 python bench/time_to_quality.py --dev      # the same on the tuning split
    OMP_NUM_THREADS=1 python bench/time_to_quality.py --quick    # a few seconds: a smoke test
    OMP_NUM_THREADS=1 python bench/time_to_quality.py --lesson06 # lesson 06's cell, old and new
    python bench/time_to_quality.py --gpu                        # the GPU figures (see below)

CPU mode. On the first 1,115,394 bytes of --data (the size of nanoGPT's tiny Shakespeare;
90% train, 10% validation) it trains two ways, each from its seed's initial weights:

    recipe  nanoGPT's README CPU run: a 4-layer, 4-head, width-128 model with a position
            table, block 64, batch 12, 2,000 steps, AdamW at 1e-3, 100 warm-up steps then
            cosine decay to 1e-4, float32 (TrainConfig's defaults)
    fast    what `python -m course_lib.train --preset cpu` runs on this CPU
            (course_lib.training.cpu_preset): a smaller model (3 layers of width 128, an
            MLP of width 384, 2 key/value heads) with RoPE instead of the table, Muon
            (course_lib.muon, peak lr 0.03) for the hidden matrices and AdamW's fused
            kernel at lr 4e-3 for the rest, batch 24 for 300 steps (30 of them warm-up),
            in float32; where a few timed updates of each show bf16 paying on this CPU
            (course_lib.precision), with bf16 autocast and Muon's iterations in bfloat16
            (--cpu-settings float32 or bf16 runs either branch on any CPU). The JSON says
            which it ran and why, with the timed figures.

The text should be one the course does not train on. Debian's bible-kjv package ships the
King James Bible (public domain); `apt-get install bible-kjv` and then
`bible "gen1:1-rev22:21" </dev/null > kjv.txt` writes it (4,298,239 bytes), and
`--data kjv.txt` trains on its first 1,115,394 (Genesis to 1 Samuel 14). The JSON gives
the slice's sha256.

How the settings were chosen, without looking at the validation text: `--dev` trains
on the first 8/9 of the training part and measures on its last 1/9 (the tuning split),
and the --fast-* options change one setting at a time. On the KJV slice's tuning split
(seed 0) the recipe reached 1.428. In float32 with batch 24, foreach and lr 4e-3
(`--dev --cpu-settings float32 --fast-steps N`, and `--fast-positions learned`), a position
table at 400 steps reached 1.731; RoPE at 400 steps 1.545 and at 500 steps 1.472 (1.583 at lr 8e-3),
both short of the recipe's loss + 0.02 (1.448), and 600 steps 1.420, which the preset
took at first (docs/benchmarks.md has its run on the validation part). Later
(`--fast-warmup`, `--fast-weight-decay`, `--fast-beta2`, `--fast-grad-clip`, `--fast-adamw`,
`--fast-min-lr-ratio`), every setting tried at 480 to 520 steps landed between 1.45 and 1.56
(a warm-up of 35% of the steps came closest: 1.452 at 520 steps); 540 steps with it and fused
AdamW reached 1.444, and on the validation part took 0.51 of the recipe's time at its loss
(0.54 by CPU time): not half, but less than 600 steps' 0.62 at the same quality. Then
Muon (`--fast-optimizer muon --fast-muon-lr LR`) for the hidden matrices: at lr 0.03, 280
steps reached 1.422 and 300 steps 1.411 (260: 1.445), and on the validation part 300 steps
took 0.37 of the recipe's CPU time at its loss, so the preset takes them. For the bf16
branch, Newton-Schulz in bfloat16 (`--fast-muon-bf16 true`, 300 steps) reached 1.409, and with
270 steps 1.435 and 1.433 (seeds 0 and 1), in 0.77 of the CPU time of the 300 steps it ran
before (on an EPYC with AVX512-BF16 at load 7 to 9), so that branch takes them; in float32,
270 steps reached 1.428 and 1.433 (seeds 0 and 1), so both branches ran 270. Then, for
issue 45's quarter of the recipe's time (a step is bound by its matrix products), smaller
models, one setting at a time (`--fast-layers`, `--fast-d-ff`, `--fast-kv-heads`,
`--fast-ns-steps`, `--fast-d-model`, `--fast-untied`): 3 layers, an MLP of width 384 and 2
key/value heads at 300 steps reached 1.425 and 1.424 in float32 (seeds 0 and 1) and 1.428 and
1.425 in bf16, in about 0.65 and 0.75 of the CPU time of the 270 steps of 4 x 128 before, so
both branches take them. `--fast-norm` and `--fast-mlp` swap in the modern block's parts (not
tuned yet). docs/benchmarks.md lists every run. On Shakespeare,
the earlier bf16 settings (a position table, 800 steps) had reached the recipe's loss in
0.47 of its time on a CPU with AVX512-BF16, and in 0.80 of it in float32 on one without.

`--repeats N` runs the two N times in turn (recipe, fast, recipe, ...), since the machine
may be shared. Each run also reports the CPU time of this process during the `train` call
(`cpu_seconds`, one thread), and the verdict its ratio (`cpu_time_ratio`): on a machine other
work keeps busy, CPU time counts what each run computed, where wall time counts the others'
work too; on an idle one the two ratios agree. Each run's wall time is the whole `train` call (two small evaluations
included); its quality is the loss on the same 100 fixed windows of 12 x 64 bytes of the
held-out text, in float32, for both (GPU mode: windows of the model's max_len). It prints
one JSON object: the machine, each run's time and loss, the medians, and the fast run's
time ratio to the recipe, whether it reached the recipe's loss + 0.02, and whether it did so in
half the recipe's time or less.

torch.compile was measured and left out: on this course's 2-core CPU, compiling the
training step took 119 s (more than the whole recipe's budget) and the compiled step was
not faster than the eager one. The CPU run syncs once a step (loss.item()), which costs
nothing measurable on a CPU.

`--lesson06` runs lesson 06's CPU training cell as it was (`before`: float32, 100 steps of 16
windows) and as it is (`after`: bf16 autocast where a few timed updates show it paying on
this CPU, as the lesson chooses, and AdamW's foreach update, 160 steps of 16, for about the
same time), and a third way that was also
tried (`smaller_batches`: the same kernels, 300 steps of 8 windows, 30 warm-up steps). All on
the whole corpus; it scores each run's validation loss and its samples: how many of their
words occur in the corpus, and their loss per byte under data/tinylm.pt, the course's trained
model (lower reads more like the corpus to it). `time_ratio` is after's median time over
before's. With `--dev` it trains on the first 8/9 of the corpus's training part and measures
on the rest.

GPU mode (--gpu) runs the course's `gpu` preset (course_lib.training.PRESETS) on the same
slice, once in float32 and once with bf16 autocast, and prints time, tokens per second and
validation loss; see the README for the figures expected before it was first run.
"""
import argparse
import hashlib
import json
import os
import platform
import re
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.checkpoint import load_model  # noqa: E402
from course_lib.data import decode, encode, train_val_split  # noqa: E402
from course_lib.generation import generate  # noqa: E402
from course_lib.model import ModelConfig, TinyLM  # noqa: E402
from course_lib.precision import choose_cpu_precision  # noqa: E402
from course_lib.training import PRESETS, TrainConfig, cpu_preset, evaluate, train  # noqa: E402

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
                cpu_capability=torch.backends.cpu.get_cpu_capability(), cpu_flags=cpu_flags(),
                torch=torch.__version__, threads=torch.get_num_threads())
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def cpu_flags():
    """The CPU's vector and matrix extensions that torch's kernels use, from /proc/cpuinfo
    (None where it cannot be read)."""
    try:
        flags = next((line.split(":", 1)[1].split() for line in open("/proc/cpuinfo")
                      if line.startswith("flags")), [])
    except OSError:
        return None
    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")
    return [f for f in wanted if f in flags]


def run(name, model_config, cfg, train_ids, val_ids, device, eval_batches=EVAL["n_batches"],
        keep_model=False):
    torch.manual_seed(cfg.seed)  # the same initial weights for every run of a seed
    model = TinyLM(model_config).to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    history = train(model, train_ids, val_ids, cfg, device=device, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    eval_cfg = dict(EVAL, block_size=model_config.max_len, n_batches=eval_batches)
    val = evaluate(model, val_ids, **eval_cfg)
    result = dict(name=name, seconds=round(seconds, 2), cpu_seconds=round(cpu_seconds, 2),
                  val_loss=round(val, 4),
                  last_train_loss=round(history.losses[-1], 4),
                  tokens_per_second=round(history.tokens_per_second))
    print(json.dumps(result), file=sys.stderr, flush=True)  # progress, while the rest runs
    if keep_model:
        result["model"] = model
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few steps of each: a smoke test")
    p.add_argument("--repeats", type=int, default=1, help="rounds of the runs, in turn (default 1)")
    p.add_argument("--dev", action="store_true",
                   help="train on 8/9 of the training part, measure on its last 1/9 (tuning)")
    p.add_argument("--seed", type=int, default=0, help="initial weights and batches (default 0)")
    p.add_argument("--cpu-settings", default="auto", choices=("auto", "bf16", "float32"),
                   help="the cpu preset's settings: auto times a few updates of each on this "
                        "CPU and picks the one that pays (course_lib.precision); bf16 or float32 "
                        "forces one")
    # Tuning only (with --dev): change one setting of the preset's run.
    p.add_argument("--fast-steps", type=int)
    p.add_argument("--fast-batch", type=int)
    p.add_argument("--fast-lr", type=float)
    p.add_argument("--fast-autocast", choices=("auto", "bf16", "off"))
    p.add_argument("--fast-adamw", choices=("default", "foreach", "fused"))
    p.add_argument("--fast-positions", choices=("learned", "rope"))
    p.add_argument("--fast-min-lr-ratio", type=float)
    p.add_argument("--fast-warmup", type=int, help="warm-up steps (default: a tenth of the steps)")
    p.add_argument("--fast-weight-decay", type=float)
    p.add_argument("--fast-beta2", type=float)
    p.add_argument("--fast-grad-clip", type=float)
    p.add_argument("--fast-optimizer", choices=("adamw", "muon"))
    p.add_argument("--fast-muon-lr", type=float)
    p.add_argument("--fast-muon-bf16", choices=("true", "false"),
                   help="Muon's Newton-Schulz iterations in bfloat16 (or float32)")
    p.add_argument("--fast-ns-steps", type=int, help="Muon's Newton-Schulz iterations an update")
    p.add_argument("--fast-layers", type=int, help="the preset model's number of layers")
    p.add_argument("--fast-d-ff", type=int, help="the preset model's MLP width")
    p.add_argument("--fast-d-model", type=int, help="the preset model's width")
    p.add_argument("--fast-kv-heads", type=int, help="the preset model's key/value heads")
    p.add_argument("--fast-untied", action="store_true",
                   help="the preset model's head as its own matrix, not the embedding's")
    p.add_argument("--fast-norm", choices=("layernorm", "rmsnorm"))
    p.add_argument("--fast-mlp", choices=("gelu", "swiglu"))
    p.add_argument("--only-fast", action="store_true",
                   help="tuning: skip the recipe's run (its loss on a split does not change)")
    p.add_argument("--gpu", action="store_true", help="the GPU figures (needs CUDA)")
    p.add_argument("--lesson06", action="store_true",
                   help="lesson 06's CPU cell as it was (float32, 100 steps) and as it is")
    p.add_argument("--data", default=str(ROOT / "data" / "shakespeare.txt"))
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be at least 1, got {args.repeats}")

    if args.lesson06:
        return lesson06(args)
    ids = encode(Path(args.data).read_bytes()[:SLICE_BYTES].decode("utf-8", errors="replace"))
    train_ids, val_ids = train_val_split(ids)
    if args.dev:  # the tuning split: the validation part is never read
        cut = len(train_ids) * 8 // 9
        train_ids, val_ids = train_ids[:cut], train_ids[cut:]
    if args.gpu:
        return gpu(args, train_ids, val_ids)

    device = torch.device("cpu")
    recipe = replace(RECIPE, seed=args.seed)
    settings, model_config, fast, why = cpu_preset(args.cpu_settings)
    fast = replace(fast, seed=args.seed)
    tuned = {k: v for k, v in (("steps", args.fast_steps), ("batch_size", args.fast_batch),
                               ("lr", args.fast_lr), ("autocast", args.fast_autocast),
                               ("adamw", args.fast_adamw),
                               ("min_lr_ratio", args.fast_min_lr_ratio)) if v is not None}
    if "steps" in tuned:
        tuned.update(warmup_steps=args.fast_steps // 10, eval_every=args.fast_steps)
    tuned.update({k: v for k, v in (("warmup_steps", args.fast_warmup),
                                    ("weight_decay", args.fast_weight_decay),
                                    ("beta2", args.fast_beta2),
                                    ("grad_clip", args.fast_grad_clip),
                                    ("optimizer", args.fast_optimizer),
                                    ("muon_lr", args.fast_muon_lr),
                                    ("muon_ns_steps", args.fast_ns_steps)) if v is not None})
    if args.fast_muon_bf16 is not None:
        tuned["muon_bf16"] = args.fast_muon_bf16 == "true"
    fast = replace(fast, **tuned)
    if args.fast_positions:
        model_config = replace(model_config, positions=args.fast_positions)
    model_tuned = {k: v for k, v in (("norm", args.fast_norm), ("mlp", args.fast_mlp),
                                     ("n_layers", args.fast_layers), ("d_ff", args.fast_d_ff),
                                     ("d_model", args.fast_d_model),
                                     ("n_kv_heads", args.fast_kv_heads))
                   if v is not None}
    if args.fast_untied:
        model_tuned["tie_embeddings"] = False
    model_config = replace(model_config, **model_tuned)
    tuned.update(model_tuned)
    if args.quick:
        recipe = replace(recipe, steps=5, warmup_steps=1, eval_every=5, eval_batches=1)
        fast = replace(fast, steps=5, warmup_steps=1, eval_every=5, eval_batches=1)
    recipes = {"recipe": (MODEL, recipe), "fast": (model_config, fast)}
    if args.only_fast:
        recipes.pop("recipe")
    runs = {name: [] for name in recipes}
    load_before = os.getloadavg()
    for _ in range(args.repeats):
        for name, (mc, cfg) in recipes.items():
            runs[name].append(run(name, mc, cfg, train_ids, val_ids, device,
                                  eval_batches=2 if args.quick else EVAL["n_batches"]))
    median = medians(runs)
    if args.only_fast:
        print(json.dumps(dict(runs=runs, tuned=tuned, positions=model_config.positions,
                              load_average_before=load_before, load_average_after=os.getloadavg(),
                              measured_on="the tuning split (--dev)" if args.dev else
                              "the validation part")))
        return 0
    base, m = median["recipe"], median["fast"]
    verdict = dict(time_ratio=round(m["seconds"] / base["seconds"], 3),
                   cpu_time_ratio=round(m["cpu_seconds"] / base["cpu_seconds"], 3),
                   loss_difference=round(m["val_loss"] - base["val_loss"], 4),
                   same_quality=m["val_loss"] <= base["val_loss"] + 0.02,
                   half_the_time_or_less=m["seconds"] <= 0.5 * base["seconds"])
    print(json.dumps(dict(
        machine=dict(machine(device), load_average_before=[round(x, 2) for x in load_before],
                     load_average_after=[round(x, 2) for x in os.getloadavg()]),
        data=describe(args.data), slice_bytes=SLICE_BYTES, quick=args.quick,
        measured_on="the tuning split (--dev)" if args.dev else "the validation part",
        cpu_preset=dict(settings=settings, why=why, tuned=tuned or None,
                        positions=model_config.positions),
        recipe_model=asdict(MODEL), fast_model=asdict(model_config), recipe=asdict(recipe),
        fast=asdict(fast), eval=EVAL, runs=runs, median=median,
        fast_against_the_recipe=verdict), indent=2))
    return 0


def describe(path):
    """The text's name, size and the sha256 of the slice trained on, so a figure can be redone."""
    data = Path(path).read_bytes()
    return dict(path=Path(path).name, bytes=len(data),
                slice_sha256=hashlib.sha256(data[:SLICE_BYTES]).hexdigest())


def medians(runs):
    return {name: dict(seconds=statistics.median(r["seconds"] for r in rs),
                       cpu_seconds=statistics.median(r["cpu_seconds"] for r in rs),
                       val_loss=statistics.median(r["val_loss"] for r in rs))
            for name, rs in runs.items()}


def lesson06(args):
    """Lesson 06's CPU training cell as it was (float32, 100 steps) and as it is, in turns.

    Both on the whole corpus, as the lesson trains; each run's samples are scored by the
    share of their words (3 letters or more) that occur in the corpus.
    """
    text = Path(args.data).read_text(encoding="utf-8")
    train_ids, val_ids = train_val_split(encode(text))
    if args.dev:
        cut = len(train_ids) * 8 // 9
        train_ids, val_ids = train_ids[:cut], train_ids[cut:]
    corpus_words = set(re.findall(r"[A-Za-z]+", text))
    judge = load_model(ROOT / "data" / "tinylm.pt").eval()  # the course's trained model
    model_config, cfg = PRESETS["cpu"]
    before = replace(cfg, steps=100, eval_every=20, eval_batches=4)
    # as lesson 06's cell sets it: the new precision (timed on this CPU) and update, the same
    # windows
    after = replace(before, steps=160, eval_every=40, adamw="foreach")
    precision = choose_cpu_precision(model_config, after)
    after = replace(after, autocast=precision.autocast)
    smaller_batches = replace(after, steps=300, batch_size=8, warmup_steps=30, eval_every=50,
                              eval_batches=8)
    configs = {"before": before, "after": after, "smaller_batches": smaller_batches}
    if args.quick:
        configs = {k: replace(c, steps=5, warmup_steps=1, eval_every=5, eval_batches=1)
                   for k, c in configs.items()}
    runs = {name: [] for name in configs}
    for _ in range(args.repeats):
        for name, c in configs.items():
            result = run(name, model_config, c, train_ids, val_ids, torch.device("cpu"),
                         eval_batches=2 if args.quick else 20, keep_model=True)
            result.update(sample_scores(result.pop("model"), corpus_words, judge,
                                        n=2 if args.quick else 10, length=60 if args.quick else 300))
            runs[name].append(result)
    median = medians(runs)
    measured_on = "the tuning split (--dev)" if args.dev else "the validation part"
    print(json.dumps(dict(machine=machine(torch.device("cpu")), model=asdict(model_config),
                          measured_on=measured_on,
                          precision=dict(settings=precision.settings, why=precision.why),
                          **{k: asdict(c) for k, c in configs.items()}, runs=runs,
                          median=median, time_ratio=round(median["after"]["seconds"]
                                                          / median["before"]["seconds"], 3)),
                     indent=2))
    return 0


def sample_scores(model, corpus_words, judge, n=10, length=300):
    """Two scores of n samples of `length` bytes: the share of their words (3 letters or more) that occur
    in the corpus, and their mean loss per byte under `judge`, a well-trained model.

    The samples are lesson 06's: from "ROMEO:\n", at temperature 0.8, generator seeds 0 .. n - 1.
    """
    prompt = encode("ROMEO:\n")[None]
    real = total = 0
    nll = []
    for seed in range(n):
        out = generate(model, prompt, length, temperature=0.8,
                       generator=torch.Generator().manual_seed(seed))
        words = [w for w in re.findall(r"[A-Za-z]+", decode(out[0, prompt.shape[1]:]))
                 if len(w) >= 3]
        real += sum(w in corpus_words for w in words)
        total += len(words)
        nll.append(judged_loss(judge, out[0], prompt.shape[1]))
    return dict(sample_words_in_corpus=round(real / max(total, 1), 3),
                sample_loss_under_judge=round(statistics.mean(nll), 3))


@torch.no_grad()
def judged_loss(judge, seq, start):
    """Mean -ln p of seq[start:] under judge; every byte is seen after at least half of
    judge's max_len bytes before it (or all of them, near the start).

    Shapes: seq (L,) int64 -> a float
    """
    T = judge.config.max_len
    losses = []
    for s in range(start, len(seq), T // 2):  # score positions s .. e - 1
        e = min(s + T // 2, len(seq))
        lo = max(0, e - T)
        window = seq[lo:e]                                         # (W,), W <= T
        logp = torch.log_softmax(judge(window[None, :-1])[0], -1)  # (W - 1, V): row j -> j + 1
        rows = torch.arange(s - lo - 1, e - lo - 1)
        losses.append(-logp[rows, window[rows + 1]])
    return torch.cat(losses).mean().item()


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
