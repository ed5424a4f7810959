"""This machine's roofline, and decode speed predicted from it against decode speed measured.

    OMP_NUM_THREADS=1 python bench/roofline.py        # prints one JSON object
    python bench/roofline.py --device cuda            # the same on a GPU

Measures, in float32 on the chosen device (the CPU unless --device says otherwise):
- the matmul peak: the best of several n x n matrix products, 2 n^3 FLOPs each;
- the memory bandwidth: the best rate at which summing a 256 MiB tensor reads it;
- the median time of one cached decode step of a random-weight TinyLM of width 1,024 and
  4 layers (about 50 M parameters, 203 MB), at batch 1 and 4, against the prediction
  weight bytes / bandwidth, and the compute time 2 x (matrix weights) / peak;
- the same for lesson 07's TinyLM shape (width 128) and for a width-8 model of the same
  depth, whose step is almost all fixed overhead.
Lesson 09 makes the same measurements inside the notebook.
"""
import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib import costs  # noqa: E402
from course_lib.kv_cache import KVCache  # noqa: E402
from course_lib.model import ModelConfig, TinyLM  # noqa: E402


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_seconds(fn, device, repeats=5):
    fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return min(times)


def step_seconds(model, batch_size, device, steps=20):
    """Median time of one decode step over a KV cache, after a 4-token prefill."""
    cache = KVCache.for_model(model, batch_size)
    idx = torch.zeros(batch_size, 4, dtype=torch.long, device=device)
    times = []
    with torch.no_grad():
        model(idx, cache)
        for _ in range(steps):
            sync(device)
            start = time.perf_counter()
            model(idx[:, :1], cache)
            sync(device)
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    device = torch.device(parser.parse_args().device)
    n = 4096 if device.type == "cuda" else 1024
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    peak = 2 * n**3 / best_seconds(lambda: a @ b, device)
    big = torch.randn(2**26, device=device)
    bandwidth = big.nbytes / best_seconds(lambda: big.sum(), device)
    del a, b, big
    report = {"machine": f"{platform.machine()}, {cpu_name()}, {torch.get_num_threads()} "
                         f"thread(s), torch {torch.__version__}",
              "device": str(device), "matmul_peak_gflops": round(peak / 1e9, 1),
              "bandwidth_gbps": round(bandwidth / 1e9, 1),
              "balance_flops_per_byte": round(peak / bandwidth, 1), "decode": []}
    torch.manual_seed(0)
    for width, heads in ((1024, 16), (128, 4), (8, 4)):
        config = ModelConfig(max_len=64, d_model=width, n_heads=heads, n_layers=4)
        model = TinyLM(config).to(device).eval()
        weight_bytes = costs.count_params(config) * 4
        for batch in (1, 4):
            seconds = step_seconds(model, batch, device)
            report["decode"].append({
                "width": width, "params": costs.count_params(config), "batch": batch,
                "measured_ms": round(seconds * 1e3, 3),
                "bandwidth_prediction_ms": round(weight_bytes / bandwidth * 1e3, 3),
                "compute_ms": round(batch * 2 * costs.matmul_params(config) / peak * 1e3, 3),
                "tokens_per_s": round(batch / seconds, 1)})
        del model
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
