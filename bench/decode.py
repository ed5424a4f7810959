"""Decoding speed with and without the KV cache, and prefill speed; prints JSON.

    python bench/decode.py [--lengths 64 256 512] [--batches 1 8] [--repeats 3] [--device cpu]

The model is an untrained TinyLM with room for the longest run (weights do not change
the speed). `decode`: generated tokens per second over a whole greedy generation
(prefill included), three ways: cached with the readable loop (`generate`), cached
with the fast one (`generate(..., fast=True)`) and uncached; each the median of
--repeats runs timed in turns (a busy spell of a shared machine slows all three), with
the speed-ups and a check that all three wrote the same tokens. `prefill`: tokens per
second of one pass over a max_len prompt, filling the cache (median of --repeats).

On CUDA the fast loop runs eagerly, as on the CPU: neither CUDA graphs nor torch.compile
is used, since neither has been measured on a GPU yet.
"""
import argparse
import json
import os
import platform
import statistics
import time

import torch

from course_lib.device import pick_device
from course_lib.generation import generate
from course_lib.kv_cache import KVCache
from course_lib.model import ModelConfig, TinyLM


def seconds(fn, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 512])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--prompt", type=int, default=16, help="prompt length in tokens")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--n-layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each, in turns")
    parser.add_argument("--device", help="cpu, cuda or mps (default: the best available)")
    args = parser.parse_args(argv)

    device = torch.device(args.device) if args.device else pick_device(verbose=False)
    torch.manual_seed(0)
    config = ModelConfig(max_len=args.prompt + max(args.lengths), d_model=args.d_model,
                         n_heads=4, n_layers=args.n_layers)
    model = TinyLM(config).to(device).eval()
    runs, prefills = [], []
    ways = dict(cached=dict(use_cache=True), fast=dict(use_cache=True, fast=True),
                uncached=dict(use_cache=False))
    for batch in args.batches:
        prompt = torch.randint(0, 256, (batch, args.prompt), device=device)
        for kwargs in ways.values():
            generate(model, prompt, 8, **kwargs)  # warm up
        for n in args.lengths:
            times, tokens = {name: [] for name in ways}, {}
            for _ in range(args.repeats):
                for name, kwargs in ways.items():
                    def run():
                        tokens[name] = generate(model, prompt, n, temperature=0, **kwargs)
                    times[name].append(seconds(run, device))
            median = {name: statistics.median(t) for name, t in times.items()}
            rate = {f"{name}_tokens_per_second": round(batch * n / median[name], 1) for name in ways}
            runs.append(dict(batch=batch, new_tokens=n, **rate,
                             speedup_cached=round(median["uncached"] / median["cached"], 2),
                             speedup_fast=round(median["uncached"] / median["fast"], 2),
                             fast_over_cached=round(median["cached"] / median["fast"], 2),
                             same_tokens=all(torch.equal(tokens["uncached"], t)
                                             for t in tokens.values())))
        long_prompt = torch.randint(0, 256, (batch, config.max_len), device=device)
        with torch.inference_mode():
            prefill = statistics.median(
                seconds(lambda: model(long_prompt, KVCache.for_model(model, batch)), device)
                for _ in range(args.repeats))
        prefills.append(dict(batch=batch, prompt_tokens=config.max_len,
                             tokens_per_second=round(long_prompt.numel() / prefill, 1)))
    print(json.dumps(dict(
        machine=dict(device=str(device), processor=platform.processor() or platform.machine(),
                     logical_cpus=os.cpu_count(),
                     torch=torch.__version__, threads=torch.get_num_threads(),
                     repeats=args.repeats),
        model=dict(d_model=config.d_model, n_layers=config.n_layers, n_heads=config.n_heads,
                   max_len=config.max_len, prompt=args.prompt,
                   parameters=sum(p.numel() for p in model.parameters())),
        decode=runs, prefill=prefills), indent=2))


if __name__ == "__main__":
    main()
