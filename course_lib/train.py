"""Train TinyLM from the command line, on one device or several with torchrun.

    python -m course_lib.train --data data/shakespeare.txt --preset cpu
    python -m course_lib.train --data data/shakespeare.txt --preset gpu --steps 5000 --out runs/
    python -m course_lib.train --data data/shakespeare.txt --preset cpu --out runs/ --resume
    torchrun --nproc_per_node=2 --standalone -m course_lib.train --data data/shakespeare.txt --preset gpu

Presets: "gpu" (the full run, course_lib.training.PRESETS), "cpu" (nanoGPT's CPU recipe
quality in less of its time: course_lib.training.cpu_preset picks bf16 or float32 settings by
timing a few updates of each on this CPU, and --cpu-settings forces one;
bench/time_to_quality.py measures the whole run),
"lesson06" (lesson 06's model, which trained data/tinylm.pt) and "tiny" (for tests and
smoke runs only). The checkpoint goes to OUT/tinylm.pt; --slim drops the optimizer state at
the end (a file about three times smaller that can be loaded but not resumed). `--set NAME=VALUE`
changes any field of the preset's TrainConfig or ModelConfig (`--set dropout=0.1 --set
autocast=bf16`). A line per evaluation gives the validation loss and the seconds since the
run started (bench/gpu_check.py reads them).
"""
import argparse
import os
import sys
from dataclasses import fields, replace
from pathlib import Path

import torch
import torch.distributed as dist

from course_lib.checkpoint import CheckpointError, load_checkpoint, parameter_checksum, save_checkpoint
from course_lib.data import encode, load_corpus, train_val_split
from tqdm.auto import tqdm

from course_lib.device import pick_device, use_cpu_threads
from course_lib.model import ModelConfig, TinyLM
from course_lib.training import ADAMW, AUTOCAST, CPU_PRESETS, PRESETS, TrainConfig, cpu_preset, train

CHECKPOINT_NAME = "tinylm.pt"

# How the first line a run prints names its optimizer.
_OPTIMIZER_WORDS = {"adamw": "AdamW", "muon": "Muon for the hidden matrices and AdamW for the rest"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m course_lib.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="a UTF-8 text file to train on")
    p.add_argument("--preset", required=True, choices=sorted(PRESETS),
                   help="model size and run settings (cpu: course_lib.training.cpu_preset; "
                        "the others: course_lib.training.PRESETS)")
    p.add_argument("--cpu-settings", default="auto", choices=("auto", *CPU_PRESETS),
                   help="for --preset cpu: auto times a few updates in each precision on "
                        "this CPU and picks bf16 where it pays, float32 elsewhere (default auto)")
    p.add_argument("--steps", type=int, help="number of optimiser steps (default: the preset's)")
    p.add_argument("--out", default=".", help=f"folder for {CHECKPOINT_NAME} (default: here)")
    p.add_argument("--resume", action="store_true", help=f"continue from OUT/{CHECKPOINT_NAME}")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--slim", action="store_true",
                   help="at the end, keep only the weights in the checkpoint (cannot be resumed)")
    p.add_argument("--seed", type=int, help="seed for the initial weights and the batches")
    p.add_argument("--autocast", choices=AUTOCAST,
                   help="bf16: bfloat16 autocast, also on a CPU; off: float32 (default: the "
                        "preset's, auto: bf16 on CUDA only)")
    p.add_argument("--adamw", choices=ADAMW, help="AdamW's kernels (default: the preset's)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="change one field of the preset's TrainConfig or ModelConfig, e.g. "
                        "--set steps=1500 --set dropout=0.1 (repeat for more)")
    return p.parse_args(argv)


def apply_settings(model_cfg, cfg, settings):
    """The two configs with each "NAME=VALUE" of `settings` applied to the one that has NAME,
    all at once (so steps=5 and warmup_steps=1 may come in either order).

    VALUE is read as the field's type: a number, true/false, or a word such as bf16.
    """
    changes = {id(cfg): {}, id(model_cfg): {}}
    for setting in settings:
        name, sep, text = setting.partition("=")
        name = name.strip()
        owner = next((c for c in (cfg, model_cfg) if name in {f.name for f in fields(c)}), None)
        if not sep or owner is None:
            known = sorted({f.name for f in fields(TrainConfig)} | {f.name for f in fields(ModelConfig)})
            raise ValueError(f"--set {setting!r}: expected NAME=VALUE with NAME a field of "
                             f"TrainConfig or ModelConfig ({', '.join(known)})")
        changes[id(owner)][name] = _read_value(text.strip(), getattr(owner, name), setting)
    return replace(model_cfg, **changes[id(model_cfg)]), replace(cfg, **changes[id(cfg)])


def _read_value(text, current, setting):
    """text as a value of current's type (bool, int, float, str; None-able ints)."""
    if isinstance(current, bool):
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"--set {setting!r}: expected true or false")
        return text.lower() in ("true", "1")
    if text.lower() == "none" and current is None:
        return None
    for kind in (int, float):
        if isinstance(current, kind) or current is None:
            try:
                return kind(text)
            except ValueError:
                if kind is float or current is not None:
                    raise ValueError(f"--set {setting!r}: expected a number") from None
    return text


def _setup_distributed():
    """Under torchrun: join the process group and pick this process's device."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return pick_device(verbose=False), False
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", 0))
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device, True


def main(argv=None):
    args = parse_args(argv)
    use_cpu_threads()  # one CPU thread unless told otherwise, under torchrun too: on a GPU run,
    # torch's default of one a core took 40 s and 290 CPU-seconds where one took 25 s (issue 46)
    model_cfg, cfg = PRESETS[args.preset]
    chosen = ""
    if args.preset == "cpu":
        settings, model_cfg, cfg, why = cpu_preset(args.cpu_settings)
        chosen = f" ({settings} settings: {why})"
    try:
        if args.steps is not None:
            cfg = replace(cfg, steps=args.steps, warmup_steps=min(cfg.warmup_steps, args.steps - 1),
                          eval_every=min(cfg.eval_every, args.steps))
        if args.seed is not None:
            cfg = replace(cfg, seed=args.seed)
        for name in ("autocast", "adamw"):
            if getattr(args, name) is not None:
                cfg = replace(cfg, **{name: getattr(args, name)})
        model_cfg, cfg = apply_settings(model_cfg, cfg, args.set)
        text = load_corpus(args.data)
        train_ids, val_ids = train_val_split(encode(text))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out) / CHECKPOINT_NAME
    if args.resume and not out.is_file():
        print(f"error: --resume needs {out}, which does not exist; run once without --resume "
              f"(or point --out at the folder holding {CHECKPOINT_NAME})", file=sys.stderr)
        return 2

    device, distributed = _setup_distributed()
    try:
        rank = dist.get_rank() if distributed else 0
        torch.manual_seed(cfg.seed)  # same initial weights on every process
        model = TinyLM(model_cfg).to(device)
        if rank == 0:
            n = sum(p.numel() for p in model.parameters())
            world = dist.get_world_size() if distributed else 1
            optimizer = _OPTIMIZER_WORDS.get(cfg.optimizer, cfg.optimizer)
            print(f"preset {args.preset}{chosen}: {n:,} parameters, {cfg.steps} steps of "
                  f"{cfg.batch_size} x {cfg.block_size} tokens, {optimizer}, on {world} x {device.type}")
        wrapped = model
        if distributed:
            wrapped = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None)
        try:
            history = train(wrapped, train_ids, val_ids, cfg, device=device, checkpoint_path=out,
                            resume=args.resume, progress=not args.no_progress, on_eval=_say_eval)
        except (CheckpointError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"rank {rank} parameter checksum {parameter_checksum(model)}")
        if rank == 0:
            if args.slim:
                state = load_checkpoint(out)
                save_checkpoint(out, model, None, step=state["step"], train_config=state["train_config"],
                                history=state["history"])
            print(f"final validation loss {history.val_losses[-1]:.4f} at step {history.eval_steps[-1]}")
            print(f"{history.tokens_per_second:,.0f} tokens/s on {history.device}")
            print(f"checkpoint written to {out}")
    finally:
        if distributed:
            dist.destroy_process_group()
    return 0


def _say_eval(step, val_loss, seconds):
    tqdm.write(f"step {step}: validation loss {val_loss:.4f} ({seconds:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
