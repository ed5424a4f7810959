"""Training throughput and model FLOP utilisation (MFU) of TinyLM on this machine.

    OMP_NUM_THREADS=1 python bench/train_throughput.py            # prints one JSON object
    OMP_NUM_THREADS=1 python bench/train_throughput.py --cpu-bf16 # attention under CPU bf16

For two configurations (lesson 06's preset, PRESETS["cpu"], and a nanoGPT-sized one: 4 layers, 4 heads,
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

--cpu-bf16 times instead where attention runs under bf16 autocast on a CPU, for the fast
settings of bench/time_to_quality.py (the nanoGPT-sized model, batch 24, foreach AdamW):
float32; bf16 with attention itself in float32 through torch's fused kernel (what
course_lib does); and bf16 with attention in bf16, through torch's plain (math) kernel
and through the fused one. Each is the median of 20 timed steps after 5 warm-up steps.
"""
import contextlib
import json
import os
import statistics
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib import attention  # noqa: E402
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


def tokens_per_second(model_cfg, cfg, ids, device, warmup=3, steps=10, median=False):
    torch.manual_seed(0)
    model = TinyLM(model_cfg).to(device)
    opt = configure_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(0)

    def step():
        inputs, targets = split_inputs_targets(get_batch(ids, cfg.batch_size, cfg.block_size, gen).to(device))
        with _autocast(device, cfg.autocast):
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
    if median:  # the median step, each one synced: steadier on a shared machine
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step().item()
            sync(device)
            times.append(time.perf_counter() - t0)
        return cfg.batch_size * cfg.block_size / statistics.median(times)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss.item()
    sync(device)
    return steps * cfg.batch_size * cfg.block_size / (time.perf_counter() - t0)


def _bf16_attention(backend):
    """course_lib's attention with q, k, v left in bf16, through torch's `backend` kernel."""
    def fused(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return fused


def cpu_bf16_attention(ids):
    """Tokens per second of the fast CPU settings with attention in float32 or in bf16."""
    model_cfg = ModelConfig(vocab_size=256, max_len=64, d_model=128, n_heads=4, n_layers=4)
    cfg = TrainConfig(batch_size=24, block_size=64, adamw="foreach")
    cpu = torch.device("cpu")
    variants = {
        "float32": (cfg, None),
        "bf16, attention in float32 (fused kernel)": (replace(cfg, autocast="bf16"), None),
        "bf16, attention in bf16 (math kernel)": (replace(cfg, autocast="bf16"),
                                                  _bf16_attention(SDPBackend.MATH)),
        "bf16, attention in bf16 (fused kernel)": (replace(cfg, autocast="bf16"),
                                                   _bf16_attention(SDPBackend.FLASH_ATTENTION)),
    }
    results = {}
    for name, (c, kernel) in variants.items():
        with _patched(attention, "_fused_attention", kernel):
            results[name] = round(tokens_per_second(model_cfg, c, ids, cpu, warmup=5, steps=20,
                                                    median=True))
    return results


@contextlib.contextmanager
def _patched(module, name, value):
    if value is None:
        yield
        return
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--cpu-bf16"]):
        print(f"usage: train_throughput.py [--cpu-bf16]; got {' '.join(argv)}", file=sys.stderr)
        return 2
    device = pick_device(verbose=False)
    ids = encode(load_corpus()[:1_000_000])
    if argv == ["--cpu-bf16"]:
        print(json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs",
                          "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "tokens_per_second": cpu_bf16_attention(ids)}, indent=2))
        return 0
    on_cuda = device.type == "cuda"
    peak32 = peak_matmul_flops(device, torch.float32, 8192 if on_cuda else 2048)
    peaks = {"float32": peak32}
    if on_cuda and torch.cuda.is_bf16_supported():
        peaks["bfloat16"] = peak_matmul_flops(device, torch.bfloat16, 8192)
    train_dtype = "bfloat16" if "bfloat16" in peaks else "float32"
    configs = {
        "lesson06 preset": PRESETS["lesson06"],
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
