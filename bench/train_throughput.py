"""Training throughput and model FLOP utilisation (MFU) of TinyLM on this machine.

    OMP_NUM_THREADS=1 python bench/train_throughput.py          # prints one JSON object

For two configurations (the "cpu" preset, and a nanoGPT-sized one: 4 layers, 4 heads,
width 128, block 64, batch 12) it times full training steps (forward, backward, gradient
clipping, AdamW) after a few warm-up steps and reports tokens per second.

FLOPs per token, forward plus backward (the PaLM paper's accounting):

    6 N + 12 L T C

N counts the parameters that take part in a matmul per token: everything except the
position table (the token embedding counts, since it is also the output layer). Each
weight costs 2 FLOPs per token forward (a multiply and an add) and 4 backward. The
attention term: per layer and token, Q K^T and the weighted sum of V are each 2 T C FLOPs
forward, times 3 with the backward pass. (Causal masking skips half of it in principle;
the formula counts it all, as is customary.)

Achieved FLOP/s = tokens/s x FLOPs per token. The peak is measured in the same run: the
best of several timed float32 n x n matmuls (2 n^3 FLOPs each); on CUDA a bfloat16 peak
is measured too and MFU uses the precision training ran in. MFU = achieved / peak.
"""
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib.data import encode, get_batch, load_corpus, split_inputs_targets  # noqa: E402
from course_lib.device import pick_device  # noqa: E402
from course_lib.model import ModelConfig, TinyLM  # noqa: E402
from course_lib.training import (PRESETS, TrainConfig, _autocast, configure_optimizer,  # noqa: E402
                                 next_token_loss)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_matmul_flops(device, dtype, n, reps=5):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    sync(device)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def flops_per_token(model_cfg, block_size):
    model = TinyLM(model_cfg)
    n = sum(p.numel() for p in model.parameters()) - model.pos_emb.weight.numel()  # tied head counted once
    L, T, C = model_cfg.n_layers, block_size, model_cfg.d_model
    return 6 * n + 12 * L * T * C, n


def tokens_per_second(model_cfg, cfg, ids, device, warmup=3, steps=10):
    torch.manual_seed(0)
    model = TinyLM(model_cfg).to(device)
    opt = configure_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(0)

    def step():
        inputs, targets = split_inputs_targets(get_batch(ids, cfg.batch_size, cfg.block_size, gen).to(device))
        with _autocast(device):
            logits = model(inputs)
        loss = next_token_loss(logits.float(), targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss.item()
    sync(device)
    return steps * cfg.batch_size * cfg.block_size / (time.perf_counter() - t0)


def main():
    device = pick_device(verbose=False)
    ids = encode(load_corpus()[:1_000_000])
    on_cuda = device.type == "cuda"
    peak32 = peak_matmul_flops(device, torch.float32, 8192 if on_cuda else 2048)
    peaks = {"float32": peak32}
    if on_cuda and torch.cuda.is_bf16_supported():
        peaks["bfloat16"] = peak_matmul_flops(device, torch.bfloat16, 8192)
    train_dtype = "bfloat16" if "bfloat16" in peaks else "float32"
    configs = {
        "cpu preset": PRESETS["cpu"],
        "nanoGPT-sized": (ModelConfig(vocab_size=256, max_len=64, d_model=128, n_heads=4, n_layers=4),
                          TrainConfig(batch_size=12, block_size=64)),
    }
    if on_cuda:
        configs["gpu preset"] = PRESETS["gpu"]
    results = {}
    steps = 50 if on_cuda else 10
    for name, (model_cfg, cfg) in configs.items():
        tps = tokens_per_second(model_cfg, cfg, ids, device, steps=steps)
        fpt, n = flops_per_token(model_cfg, cfg.block_size)
        achieved = tps * fpt
        results[name] = {
            "layers": model_cfg.n_layers, "heads": model_cfg.n_heads, "width": model_cfg.d_model,
            "batch": cfg.batch_size, "block": cfg.block_size, "matmul_params": n,
            "tokens_per_second": round(tps, 1), "flops_per_token": fpt,
            "achieved_flops": round(achieved), "mfu": round(achieved / peaks[train_dtype], 4),
            "timed_steps": steps,
        }
    print(json.dumps({
        "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs",
        "device": str(device) + (f" ({torch.cuda.get_device_name(device)})" if on_cuda else ""),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "training_precision": train_dtype,
        "peak_matmul_flops": {k: round(v) for k, v in peaks.items()},
        "configs": results,
    }, indent=2))


if __name__ == "__main__":
    main()
