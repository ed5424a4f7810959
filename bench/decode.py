"""Decoding speed with and without the KV cache, against nanoGPT's one-token forward; prints JSON.

    OMP_NUM_THREADS=1 python bench/decode.py [--lengths 64 256 512] [--batches 1 8] [--repeats 3]
    OMP_NUM_THREADS=1 python bench/decode.py --profile   # where a fast decode step's time goes
    OMP_NUM_THREADS=1 python bench/decode.py --tied-layers   # the same steps, one block's weights
    OMP_NUM_THREADS=1 python bench/decode.py --compiled      # a compiled step against the eager one

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

`--compiled` measures the lever issue 23 left untried, a decode step compiled by
torch.compile (inductor) so that one graph serves every position, against generate's eager
step (FastDecoder.step without oneDNN), at batch 1 on the 4 x 128 model after a 16-token
prompt, in turns, the median of --repeats rounds of 200 steps each: "static" passes the
position as a tensor and attends over the whole preallocated cache with a mask (fixed
shapes), "dynamic" passes it as an int that the graph keeps symbolic and attends over the
filled part only, as the eager step does. It prints each one's compile time, its time per
step, the eager step's and nanoGPT's forward's, and the largest logit difference and whether
the greedy tokens agree over the steps timed. generate does not use it: it measured slower
than the eager step on a CPU (docs/benchmarks.md).
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
                        help="only time a torch.compile'd decode step against the eager one")
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
        return compiled(model, args.prompt, device, args.repeats, load_before)
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


def _step_weights(model):
    """The weights a decode step reads, as one flat list: the arguments of the compiled step."""
    flat = [model.tok_emb.weight, model.pos_emb.weight, model.norm.weight, model.norm.bias]
    for b in model.blocks:
        flat += [b.norm1.weight, b.norm1.bias, b.attn.qkv.weight, b.attn.proj.weight,
                 b.norm2.weight, b.norm2.bias, b.mlp.up.weight, b.mlp.up.bias,
                 b.mlp.down.weight, b.mlp.down.bias]
    return flat


def _static_step(tokens, pos, keys, values, emb, pos_table, norm_w, norm_b, *layers):
    """FastDecoder.step for the default TinyLM with fixed shapes: pos a 0-d tensor, each
    layer's whole (B, H, max_len, D) cache attended with a mask of the filled positions."""
    B, (_, H, M, D) = tokens.shape[0], keys[0].shape
    C = H * D
    x = F.embedding(tokens, emb) + F.embedding(pos.view(1), pos_table)  # (B, C)
    filled = (torch.arange(M, device=tokens.device) <= pos).view(1, 1, 1, M)
    for k_all, v_all, w in zip(keys, values, [layers[i:i + 10] for i in range(0, len(layers), 10)]):
        n1w, n1b, wqkv, wproj, n2w, n2b, upw, upb, dw, db = w
        heads = F.linear(F.layer_norm(x, (C,), n1w, n1b), wqkv).view(B, 3 * H, 1, D)
        k_all.index_copy_(2, pos.view(1), heads[:, H:2 * H])
        v_all.index_copy_(2, pos.view(1), heads[:, 2 * H:])
        a = F.scaled_dot_product_attention(heads[:, :H], k_all, v_all, attn_mask=filled)
        x = x + F.linear(a.reshape(B, C), wproj)
        x = x + F.linear(F.gelu(F.linear(F.layer_norm(x, (C,), n2w, n2b), upw, upb)), dw, db)
    return F.linear(F.layer_norm(x, (C,), norm_w, norm_b), emb)


def _dynamic_step(tokens, pos, keys, values, emb, pos_table, norm_w, norm_b, *layers):
    """The same with pos an int, attending over the filled positions only, as FastDecoder."""
    B, (_, H, M, D) = tokens.shape[0], keys[0].shape
    C = H * D
    x = F.embedding(tokens, emb) + pos_table[pos]  # (B, C)
    for k_all, v_all, w in zip(keys, values, [layers[i:i + 10] for i in range(0, len(layers), 10)]):
        n1w, n1b, wqkv, wproj, n2w, n2b, upw, upb, dw, db = w
        heads = F.linear(F.layer_norm(x, (C,), n1w, n1b), wqkv).view(B, 3 * H, 1, D)
        k_all[:, :, pos:pos + 1] = heads[:, H:2 * H]
        v_all[:, :, pos:pos + 1] = heads[:, 2 * H:]
        a = F.scaled_dot_product_attention(heads[:, :H], k_all[:, :, :pos + 1],
                                           v_all[:, :, :pos + 1])
        x = x + F.linear(a.reshape(B, C), wproj)
        x = x + F.linear(F.gelu(F.linear(F.layer_norm(x, (C,), n2w, n2b), upw, upb)), dw, db)
    return F.linear(F.layer_norm(x, (C,), norm_w, norm_b), emb)


def compiled(model, prompt_len, device, repeats, load_before, steps=200):
    """Compiled decode steps (static and dynamic) against generate's eager one, in turns."""
    from course_lib.device import cannot_compile
    why = cannot_compile(device)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    c = model.config
    if c.positions != "learned" or c.norm != "layernorm" or c.mlp != "gelu" or c.attn_bias:
        print("error: --compiled times the default TinyLM (GELU, LayerNorm, a position table)",
              file=sys.stderr)
        return 2
    steps = min(steps, c.max_len - prompt_len - 3)  # room for the compiling steps and these
    prompt = torch.randint(0, 256, (1, prompt_len), generator=torch.Generator().manual_seed(0))
    prompt, weights = prompt.to(device), _step_weights(model)
    reference = NanoGPTShaped(block_size=c.max_len, width=c.d_model, n_heads=c.n_heads,
                              n_layers=c.n_layers).to(device).eval()
    with torch.inference_mode():
        cache = KVCache.for_model(model, 1)
        model(prompt, cache)
        start_keys, start_values = cache.keys.clone(), cache.values.clone()
    ways, compile_seconds = {}, {}
    for name, fn, dynamic in (("static", _static_step, False), ("dynamic", _dynamic_step, True)):
        step = torch.compile(fn, fullgraph=True, dynamic=dynamic)
        keys, values = (list(t.clone().unbind(0)) for t in (start_keys, start_values))
        as_pos = (lambda p: torch.tensor(p, device=device)) if name == "static" else int
        start = time.perf_counter()
        with torch.inference_mode(), _without_onednn():
            for p in (prompt_len, prompt_len + 1, prompt_len + 2):  # past any recompiling
                step(prompt[:, -1], as_pos(p), keys, values, *weights)
        compile_seconds[name] = round(time.perf_counter() - start, 2)
        ways[name] = (step, keys, values, as_pos)
    decoder = FastDecoder(model, cache)

    def run(name):
        """`steps` greedy steps from the prompt; (seconds, the logits of each step)."""
        token, out = prompt[:, -1], []
        with torch.inference_mode(), _without_onednn():
            if name == "eager":
                cache.keys.copy_(start_keys), cache.values.copy_(start_values)
                cache.length = prompt_len
            start = time.perf_counter()
            for i in range(steps):
                if name == "eager":
                    logits = decoder.step(token)
                else:
                    step, keys, values, as_pos = ways[name]
                    logits = step(token, as_pos(prompt_len + i), keys, values, *weights)
                out.append(logits)
                token = logits.argmax(-1)
            return time.perf_counter() - start, torch.cat(out)

    times = {name: [] for name in ("eager", *ways)}
    logits, forwards, one = {}, [], prompt[:, :1]
    for _ in range(repeats):  # in turns, nanoGPT's forward among them
        for name in times:
            took, logits[name] = run(name)
            times[name].append(took / steps)
        with torch.no_grad():
            forwards.append(seconds(lambda: [reference(one) for _ in range(steps)], device) / steps)
    forward = statistics.median(forwards)
    eager = statistics.median(times["eager"])
    print(json.dumps(dict(
        machine=dict(machine(device), repeats=repeats,
                     load_average_before=[round(x, 2) for x in load_before],
                     load_average_after=[round(x, 2) for x in os.getloadavg()]),
        steps=steps, compile_seconds=compile_seconds,
        ms_per_step={name: round(1e3 * statistics.median(t), 4) for name, t in times.items()},
        nanogpt_forward_ms=round(1e3 * forward, 4),
        over_nanogpt_forward={name: round(statistics.median(t) / forward, 3)
                              for name, t in times.items()},
        over_eager={name: round(statistics.median(t) / eager, 3) for name, t in times.items()},
        largest_logit_difference_to_eager={
            name: float((logits[name] - logits["eager"]).abs().max()) for name in ways},
        same_greedy_tokens={name: bool(torch.equal(logits[name].argmax(-1),
                                                   logits["eager"].argmax(-1)))
                            for name in ways}), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
