"""Decoding speed with and without the KV cache, against nanoGPT's one-token forward; prints JSON.

    OMP_NUM_THREADS=1 python bench/decode.py [--lengths 64 256 512] [--batches 1 8] [--repeats 3]
    OMP_NUM_THREADS=1 python bench/decode.py --profile   # where a fast decode step's time goes
    OMP_NUM_THREADS=1 python bench/decode.py --tied-layers   # the same steps, one block's weights
    OMP_NUM_THREADS=1 python bench/decode.py --compiled      # compiled steps against the eager one

The model is an untrained TinyLM with room for the longest run (weights do not change
the speed). `decode`: generated tokens per second over a whole greedy generation
(prefill included), three ways: cached with the readable loop (`generate(..., fast=False)`),
cached with the fast one (`generate`'s default) and uncached; and, as the yardstick, the
time of one bare one-token forward of a nanoGPT-shaped model of the same shape
(bench/nanogpt_reference.py: no cache, nn.Modules as nanoGPT's model.py has them) at the
same batch. Each is the median of --repeats runs timed in turns (a busy spell of a shared
machine slows all of them), with a check that the three generations wrote the same
tokens. The `goals` entry gives the two ratios issue 23 asks for, at batch 1 and the
longest length: the fast loop's time per token over nanoGPT's forward (goal: at most 0.5)
and the uncached loop's time over the fast loop's (goal: at least 15). `prefill`: tokens
per second of one pass over a max_len prompt, filling the cache (median of --repeats).
The load average is printed before and after: other work on the machine slows the
absolute figures, and the ratios, measured in turns, less.

On CUDA the fast loop runs eagerly, as on the CPU: neither CUDA graphs nor torch.compile
is used, since neither has been measured on a GPU yet.

`--compiled` measures the lever issue 23 left untried and issue 45 asks for, a compiled
decode step, six ways (torch.compile with and without a C++ wrapper and freezing, with
symbolic or fixed shapes, torch.jit.trace + freeze, and AOTInductor), each against
generate's eager step and nanoGPT's forward, by CPU time and wall time, with each way's
build time and how far its logits are from the eager step's: bench/compiled_decode.py
describes them. generate does not use them (docs/benchmarks.md says why).
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nanogpt_reference import NanoGPTShaped  # noqa: E402
from time_to_quality import machine  # noqa: E402

from course_lib.device import pick_device  # noqa: E402
from course_lib.generation import FastDecoder, _without_onednn, generate  # noqa: E402
from course_lib.kv_cache import KVCache  # noqa: E402
from course_lib.model import ModelConfig, TinyLM  # noqa: E402


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
    parser.add_argument("--tied-layers", action="store_true",
                        help="every block of the TinyLM computes with block 0's weights: the same "
                             "operations on fewer bytes, to see what reading the weights costs")
    parser.add_argument("--profile", action="store_true",
                        help="only profile 100 fast decode steps at batch 1 (torch.profiler)")
    parser.add_argument("--compiled", action="store_true",
                        help="only time compiled decode steps against the eager one "
                             "(bench/compiled_decode.py)")
    parser.add_argument("--ways", nargs="+", default=None, metavar="WAY",
                        help="with --compiled: which ways to build (default: all)")
    parser.add_argument("--steps", type=int, default=500,
                        help="with --compiled: greedy steps timed per round (default 500)")
    parser.add_argument("--warm-cache", action="store_true",
                        help="with --compiled: use inductor's own cache, not a new empty one")
    args = parser.parse_args(argv)

    device = torch.device(args.device) if args.device else pick_device(verbose=False)
    load_before = os.getloadavg()
    torch.manual_seed(0)
    config = ModelConfig(max_len=args.prompt + max(args.lengths), d_model=args.d_model,
                         n_heads=4, n_layers=args.n_layers)
    model = TinyLM(config).to(device).eval()
    if args.tied_layers:
        tie_layers(model)
    if args.profile:
        return profile(model, args.prompt, device)
    if args.compiled:
        if args.ways is None:
            import compiled_decode
            args.ways = list(compiled_decode.WAYS)
        return compiled(model, args.prompt, device, args, load_before)
    reference = NanoGPTShaped(block_size=config.max_len, width=args.d_model, n_heads=4,
                              n_layers=args.n_layers).to(device).eval()
    runs, prefills = [], []
    ways = dict(cached=dict(use_cache=True, fast=False), fast=dict(use_cache=True),
                uncached=dict(use_cache=False))
    for batch in args.batches:
        prompt = torch.randint(0, 256, (batch, args.prompt), device=device)
        one = prompt[:, :1]
        for kwargs in ways.values():
            generate(model, prompt, 8, **kwargs)  # warm up

        def forward_seconds(steps=50):  # one nanoGPT-shaped one-token forward, as it generates
            with torch.no_grad():
                return seconds(lambda: [reference(one) for _ in range(steps)], device) / steps
        forward_seconds(5)
        for n in args.lengths:
            times, tokens = {name: [] for name in ways}, {}
            forward = []
            for _ in range(args.repeats):
                for name, kwargs in ways.items():
                    def run():
                        tokens[name] = generate(model, prompt, n, temperature=0, **kwargs)
                    times[name].append(seconds(run, device))
                forward.append(forward_seconds())
            median = {name: statistics.median(t) for name, t in times.items()}
            rate = {f"{name}_tokens_per_second": round(batch * n / median[name], 1) for name in ways}
            per_token = median["fast"] / n
            runs.append(dict(batch=batch, new_tokens=n, **rate,
                             fast_ms_per_step=round(1e3 * per_token, 3),
                             nanogpt_forward_ms=round(1e3 * statistics.median(forward), 3),
                             fast_over_nanogpt_forward=round(
                                 per_token / statistics.median(forward), 3),
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
    goal = [r for r in runs if r["batch"] == 1 and r["new_tokens"] == max(args.lengths)]
    goals = {}
    if goal:
        goals = dict(batch=1, new_tokens=goal[0]["new_tokens"],
                     fast_over_nanogpt_forward=goal[0]["fast_over_nanogpt_forward"],
                     at_most_half=goal[0]["fast_over_nanogpt_forward"] <= 0.5,
                     uncached_over_fast=goal[0]["speedup_fast"],
                     at_least_15=goal[0]["speedup_fast"] >= 15)
    print(json.dumps(dict(
        machine=dict(machine(device), repeats=args.repeats,
                     load_average_before=[round(x, 2) for x in load_before],
                     load_average_after=[round(x, 2) for x in os.getloadavg()]),
        model=dict(d_model=config.d_model, n_layers=config.n_layers, n_heads=config.n_heads,
                   max_len=config.max_len, prompt=args.prompt, tied_layers=args.tied_layers,
                   parameters=sum(p.numel() for p in model.parameters())),
        goals=goals, decode=runs, prefill=prefills), indent=2))
    return 0


def tie_layers(model):
    """Make every block use block 0's parameters (the same tensors), so a step runs the same
    operations on the same shapes while reading one block's weights instead of all of them."""
    first = dict(model.blocks[0].named_parameters())
    for block in model.blocks[1:]:
        for name in list(dict(block.named_parameters())):
            owner, _, attr = name.rpartition(".")
            setattr(block.get_submodule(owner) if owner else block, attr, first[name])


def profile(model, prompt_len, device, steps=100):
    """Where a fast decode step's time goes: torch.profiler's table of 100 steps at batch 1,
    as generate runs them (without oneDNN), and the exact GELU's cost with and without it."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    prompt = torch.randint(0, 256, (1, prompt_len), device=device)
    token = prompt[:, 0]
    with torch.inference_mode():
        cache = KVCache.for_model(model, 1)
        model(prompt, cache)
        decoder = FastDecoder(model, cache)
        with _without_onednn():
            for _ in range(10):
                decoder.step(token)
            with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(steps):
                    decoder.step(token)
        hidden = torch.randn(1, 4 * model.config.d_model, device=device)
        gelu = {}
        for name, context in (("oneDNN", contextlib.nullcontext), ("torch", _without_onednn)):
            with context():
                gelu[name] = seconds(lambda: [F.gelu(hidden) for _ in range(2000)], device) / 2000
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    print(json.dumps(dict(machine=machine(device),
                          load_average=[round(x, 2) for x in os.getloadavg()],
                          gelu_us={k: round(1e6 * v, 2) for k, v in gelu.items()}), indent=2))
    return 0


def compiled(model, prompt_len, device, args, load_before):
    """Compiled decode steps against generate's eager one (bench/compiled_decode.py)."""
    import compiled_decode
    why = compiled_decode.why_not(device)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    unknown = set(args.ways) - set(compiled_decode.WAYS)
    if unknown:
        print(f"error: unknown ways {sorted(unknown)}; choose among {compiled_decode.WAYS}",
              file=sys.stderr)
        return 2
    c = model.config
    prompt = torch.randint(0, 256, (1, prompt_len), generator=torch.Generator().manual_seed(0))
    reference = NanoGPTShaped(block_size=c.max_len, width=c.d_model, n_heads=c.n_heads,
                              n_layers=c.n_layers).to(device).eval()
    try:
        figures = compiled_decode.measure(model, reference, prompt, args.ways, args.steps,
                                          args.repeats, args.warm_cache)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(dict(
        machine=dict(machine(device), repeats=args.repeats,
                     load_average_before=[round(x, 2) for x in load_before],
                     load_average_after=[round(x, 2) for x in os.getloadavg()]),
        model=dict(d_model=c.d_model, n_layers=c.n_layers, max_len=c.max_len, prompt=prompt_len),
        **figures), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
