"""Decoding speed with and without the KV cache, and prefill speed; prints JSON.

    python bench/decode.py [--lengths 64 256 512] [--batches 1 8] [--device cpu]

The model is an untrained TinyLM with room for the longest run (weights do not change
the speed). `decode`: generated tokens per second over a whole greedy generation
(prefill included), cached and uncached, and their ratio. `prefill`: tokens per
second of one pass over a max_len prompt, filling the cache.
"""
import argparse
import json
import os
import platform
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
    parser.add_argument("--device", help="cpu, cuda or mps (default: the best available)")
    args = parser.parse_args(argv)

    device = torch.device(args.device) if args.device else pick_device(verbose=False)
    torch.manual_seed(0)
    config = ModelConfig(max_len=args.prompt + max(args.lengths), d_model=args.d_model,
                         n_heads=4, n_layers=args.n_layers)
    model = TinyLM(config).to(device).eval()
    runs, prefills = [], []
    for batch in args.batches:
        prompt = torch.randint(0, 256, (batch, args.prompt), device=device)
        generate(model, prompt, 8)  # warm up
        for n in args.lengths:
            cached = seconds(lambda: generate(model, prompt, n, temperature=0, use_cache=True), device)
            uncached = seconds(lambda: generate(model, prompt, n, temperature=0, use_cache=False), device)
            runs.append(dict(batch=batch, new_tokens=n,
                             cached_tokens_per_second=round(batch * n / cached, 1),
                             uncached_tokens_per_second=round(batch * n / uncached, 1),
                             speedup=round(uncached / cached, 2)))
        long_prompt = torch.randint(0, 256, (batch, config.max_len), device=device)
        with torch.no_grad():
            prefill = seconds(lambda: model(long_prompt, KVCache.for_model(model, batch)), device)
        prefills.append(dict(batch=batch, prompt_tokens=config.max_len,
                             tokens_per_second=round(long_prompt.numel() / prefill, 1)))
    print(json.dumps(dict(
        machine=dict(device=str(device), processor=platform.processor() or platform.machine(),
                     logical_cpus=os.cpu_count(),
                     torch=torch.__version__, threads=torch.get_num_threads()),
        model=dict(d_model=config.d_model, n_layers=config.n_layers, n_heads=config.n_heads,
                   max_len=config.max_len, prompt=args.prompt,
                   parameters=sum(p.numel() for p in model.parameters())),
        decode=runs, prefill=prefills), indent=2))


if __name__ == "__main__":
    main()
