"""Compiled decode steps against generate's eager one and nanoGPT's forward; prints JSON.

    OMP_NUM_THREADS=1 python bench/decode.py --compiled              # every way below
    OMP_NUM_THREADS=1 python bench/decode.py --compiled --ways aot_inductor compile
    OMP_NUM_THREADS=1 python bench/decode.py --compiled --warm-cache  # inductor's own cache

Issue 45 asks for the default cached decode step at <= 0.5x, then <= 0.35x, nanoGPT's
one-token forward, compiled where the machine can compile. This times the ways of compiling
one step of the default TinyLM (GELU, LayerNorm, a position table) at batch 1 after a
16-token prompt, each against `eager`, generate's step (FastDecoder.step without oneDNN):

    compile                       torch.compile (inductor), one graph for every length: the
                                  step takes each layer's keys and values as views that end
                                  at the new position, whose length the graph keeps symbolic
    compile_cpp_wrapper           the same, inductor's wrapper compiled to C++
                                  (torch._inductor.config.cpp_wrapper), so the graph's calls
                                  are made from C++ rather than Python
    compile_cpp_wrapper_freezing  and freezing=True: the weights folded in as constants
    compile_static                torch.compile with fixed shapes (cpp_wrapper): the position
                                  a 0-d tensor, each layer's whole buffer attended under a mask
    jit_trace_freeze              the fixed-shape step by torch.jit.trace, then torch.jit.freeze
                                  (TorchScript, deprecated in torch 2.13)
    aot_inductor                  torch.export of the symbolic-length step, compiled ahead of
                                  time by AOTInductor (weights as constants) and run from C++
                                  with no guards and no Python between its kernels

Every way keeps its own keys and values, one buffer per layer (not views of one tensor:
torch.compile copies a whole aliased input when a view of it is written), one position
longer than the model's max_len (a view that ends at max_len is then never the whole
buffer, which torch.export would treat as a special case). Each way runs --steps greedy
steps from the same prefilled cache, in turns with the others and with nanoGPT's one-token
forward (bench/nanogpt_reference.py), --repeats rounds, medians. The time per step is
measured twice: by this thread's CPU time (time.thread_time: what the step computed, which
other work on a shared machine disturbs less) and by the wall clock; the ratios to nanoGPT's
forward are given for both. `build_seconds` is the wall time from the first call (or
export) to a step that runs without compiling again: by default in a new, empty inductor
cache, as on a clean machine (CI, a learner's first run); --warm-cache uses inductor's
usual cache, which a previous run may have filled. Each way's logits are compared with the
eager step's at every step (largest difference) and its greedy tokens with eager's.

generate does not use any of these: docs/benchmarks.md gives the figures and the reason.
"""
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.device import cannot_compile
from course_lib.generation import FastDecoder, _without_onednn
from course_lib.kv_cache import KVCache

WAYS = ("compile", "compile_cpp_wrapper", "compile_cpp_wrapper_freezing", "compile_static",
        "jit_trace_freeze", "aot_inductor")


class LengthStep(nn.Module):
    """One decode step of a default TinyLM over views of its own cache; the same ops as
    FastDecoder.step.

    Shapes: tokens (B,), each of kv: L keys then L values, (B, H, T, D), the new position
    the last of the T -> logits (B, V); the new keys and values are written into kv[..., -1, :]
    """

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens, *kv):
        m = self.model
        L = len(m.blocks)
        B, (_, H, T, D) = tokens.shape[0], kv[0].shape
        C = H * D
        x = F.embedding(tokens, m.tok_emb.weight) + m.pos_emb.weight[T - 1]  # (B, C)
        for block, k_all, v_all in zip(m.blocks, kv[:L], kv[L:]):
            heads = F.linear(block.norm1(x), block.attn.qkv.weight).view(B, 3 * H, 1, D)
            k_all[:, :, T - 1:] = heads[:, H:2 * H]
            v_all[:, :, T - 1:] = heads[:, 2 * H:]
            a = F.scaled_dot_product_attention(heads[:, :H], k_all, v_all)  # (B, H, 1, D)
            x = x + F.linear(a.reshape(B, C), block.attn.proj.weight)
            mlp = block.mlp
            x = x + F.linear(F.gelu(F.linear(block.norm2(x), mlp.up.weight, mlp.up.bias)),
                             mlp.down.weight, mlp.down.bias)
        return F.linear(m.norm(x), m.tok_emb.weight)  # (B, V)


class StaticStep(LengthStep):
    """The same step with fixed shapes: pos a 0-d int64 tensor, each layer's whole buffer
    attended under a mask of the filled positions.

    Shapes: tokens (B,), pos (), each of kv (B, H, M, D) -> logits (B, V)
    """

    def forward(self, tokens, pos, *kv):
        m = self.model
        L = len(m.blocks)
        B, (_, H, M, D) = tokens.shape[0], kv[0].shape
        C = H * D
        x = F.embedding(tokens, m.tok_emb.weight) + F.embedding(pos.view(1), m.pos_emb.weight)
        filled = (torch.arange(M, device=tokens.device) <= pos).view(1, 1, 1, M)
        for block, k_all, v_all in zip(m.blocks, kv[:L], kv[L:]):
            heads = F.linear(block.norm1(x), block.attn.qkv.weight).view(B, 3 * H, 1, D)
            k_all.index_copy_(2, pos.view(1), heads[:, H:2 * H])
            v_all.index_copy_(2, pos.view(1), heads[:, 2 * H:])
            a = F.scaled_dot_product_attention(heads[:, :H], k_all, v_all, attn_mask=filled)
            x = x + F.linear(a.reshape(B, C), block.attn.proj.weight)
            mlp = block.mlp
            x = x + F.linear(F.gelu(F.linear(block.norm2(x), mlp.up.weight, mlp.up.bias)),
                             mlp.down.weight, mlp.down.bias)
        return F.linear(m.norm(x), m.tok_emb.weight)


class Buffers:
    """A way's own keys and values: per layer, (B, H, max_len + 1, D), filled from a cache."""

    def __init__(self, cache):
        self.start = cache
        n_layers, B, H, M, D = cache.keys.shape
        self.kv = [torch.zeros(B, H, M + 1, D) for _ in range(2 * n_layers)]

    def reset(self):
        """Back to the prefilled cache's contents."""
        for buf, src in zip(self.kv, [*self.start.keys, *self.start.values]):
            buf[:, :, :src.shape[2]].copy_(src)

    def views(self, end):
        return [buf[:, :, :end] for buf in self.kv]


def _compiled(model, buffers, options, static):
    """torch.compile'd step: run(tokens, pos) -> logits."""
    step = torch.compile((StaticStep if static else LengthStep)(model).eval(), fullgraph=True,
                         dynamic=not static, options=options)
    if static:
        return lambda tokens, pos: step(tokens, torch.tensor(pos), *buffers.kv)
    return lambda tokens, pos: step(tokens, *buffers.views(pos + 1))


def _jit(model, buffers, prompt_len):
    """torch.jit.trace of the fixed-shape step, frozen (both deprecated in torch 2.13, which
    warns; measured all the same, since the issue names them)."""
    tokens = torch.zeros(1, dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(StaticStep(model).eval(), (tokens, torch.tensor(prompt_len),
                                                            *buffers.kv), check_trace=False)
        frozen = torch.jit.freeze(traced)
    return lambda tokens, pos: frozen(tokens, torch.tensor(pos), *buffers.kv)


def aot_compile(model, buffers, prompt_len, folder):
    """torch.export of the symbolic-length step, compiled by AOTInductor into `folder`;
    the loaded package's callable (tokens, *kv views) -> logits."""
    import torch._inductor
    from torch.export import Dim, export
    max_len = buffers.kv[0].shape[2] - 1
    length = Dim("length", min=2, max=max_len)
    example = (torch.zeros(1, dtype=torch.long), *buffers.views(prompt_len + 1))
    with torch.no_grad():
        program = export(LengthStep(model).eval(), example,
                         dynamic_shapes=(None, ({2: length},) * len(buffers.kv)))
    path = torch._inductor.aoti_compile_and_package(
        program, package_path=os.path.join(folder, "decode_step.pt2"))
    return torch._inductor.aoti_load_package(path)


def _aot(model, buffers, prompt_len, folder):
    run = aot_compile(model, buffers, prompt_len, folder)
    return lambda tokens, pos: run(tokens, *buffers.views(pos + 1))


def build(name, model, buffers, prompt_len, folder):
    """The way's step, run(tokens (B,), pos int) -> logits (B, V), writing position pos."""
    if name == "jit_trace_freeze":
        return _jit(model, buffers, prompt_len)
    if name == "aot_inductor":
        return _aot(model, buffers, prompt_len, folder)
    options = {"compile": {}, "compile_cpp_wrapper": {"cpp_wrapper": True},
               "compile_cpp_wrapper_freezing": {"cpp_wrapper": True, "freezing": True},
               "compile_static": {"cpp_wrapper": True}}[name]
    return _compiled(model, buffers, options, static=name == "compile_static")


def measure(model, reference, prompt, ways, steps, repeats, warm_cache):
    """Build each way, then time all of them, eager and nanoGPT's forward in turns; the
    figures as a dict. The packages built, and inductor's cache unless warm_cache, go to a
    temporary folder, removed at the end."""
    folder = tempfile.mkdtemp(prefix="course_decode_")
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not warm_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "inductor")
    try:
        figures = _measure(model, reference, prompt, ways, steps, repeats, folder)
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
        shutil.rmtree(folder, ignore_errors=True)
    cache = "warm (inductor's own)" if warm_cache else "new and empty"
    return dict(steps=figures.pop("steps"), inductor_cache=cache, **figures)


def _measure(model, reference, prompt, ways, steps, repeats, folder):
    c = model.config
    if c.positions != "learned" or c.norm != "layernorm" or c.mlp != "gelu" or c.attn_bias \
            or c.kv_heads != c.n_heads:
        raise ValueError("--compiled times the default TinyLM (GELU, LayerNorm, a position table)")
    prompt_len = prompt.shape[1]
    steps = min(steps, c.max_len - prompt_len)
    with torch.inference_mode():
        start = KVCache.for_model(model, 1)
        model(prompt, start)
    runs, build_seconds = {}, {}
    for name in ways:
        buffers = Buffers(start)
        began = time.perf_counter()
        with torch.inference_mode(), _without_onednn():
            buffers.reset()
            run = build(name, model, buffers, prompt_len, folder)
            for pos in range(prompt_len, prompt_len + 3):  # past any recompiling
                run(prompt[:, -1], pos)
        build_seconds[name] = round(time.perf_counter() - began, 2)
        runs[name] = (run, buffers)
    cache = KVCache.for_model(model, 1)
    decoder = FastDecoder(model, cache)

    def eager(tokens, pos):
        return decoder.step(tokens)

    def reset_eager():
        cache.keys.copy_(start.keys), cache.values.copy_(start.values)
        cache.length = prompt_len

    timed = {"eager": (eager, reset_eager),
             **{name: (run, buffers.reset) for name, (run, buffers) in runs.items()}}

    def greedy(name):
        """`steps` greedy steps from the prompt: (CPU s, wall s, logits (steps, V))."""
        run, reset = timed[name]
        token, out = prompt[:, -1], []
        with torch.inference_mode(), _without_onednn():
            reset()
            cpu, wall = time.thread_time(), time.perf_counter()
            for i in range(steps):
                logits = run(token, prompt_len + i)
                out.append(logits)
                token = logits.argmax(-1)
            return time.thread_time() - cpu, time.perf_counter() - wall, torch.cat(out)

    cpu = {name: [] for name in (*timed, "nanogpt_forward")}
    wall = {name: [] for name in cpu}
    logits, one = {}, prompt[:, :1]
    for _ in range(repeats):
        for name in timed:
            took_cpu, took_wall, logits[name] = greedy(name)
            cpu[name].append(took_cpu / steps)
            wall[name].append(took_wall / steps)
        with torch.no_grad():
            c0, w0 = time.thread_time(), time.perf_counter()
            for _ in range(steps):
                reference(one)
            cpu["nanogpt_forward"].append((time.thread_time() - c0) / steps)
            wall["nanogpt_forward"].append((time.perf_counter() - w0) / steps)
    cpu_ms = {n: 1e3 * statistics.median(t) for n, t in cpu.items()}
    wall_ms = {n: 1e3 * statistics.median(t) for n, t in wall.items()}
    return dict(
        steps=steps, build_seconds=build_seconds,
        cpu_ms_per_step={n: round(v, 4) for n, v in cpu_ms.items()},
        wall_ms_per_step={n: round(v, 4) for n, v in wall_ms.items()},
        over_nanogpt_forward_cpu={n: round(v / cpu_ms["nanogpt_forward"], 3)
                                  for n, v in cpu_ms.items() if n != "nanogpt_forward"},
        over_nanogpt_forward_wall={n: round(v / wall_ms["nanogpt_forward"], 3)
                                   for n, v in wall_ms.items() if n != "nanogpt_forward"},
        over_eager_cpu={n: round(cpu_ms[n] / cpu_ms["eager"], 3) for n in runs},
        largest_logit_difference_to_eager={
            n: float((logits[n] - logits["eager"]).abs().max()) for n in runs},
        same_greedy_tokens={n: bool(torch.equal(logits[n].argmax(-1),
                                                logits["eager"].argmax(-1))) for n in runs})


def why_not(device):
    """None, or why this machine cannot run the bench (printed as its error)."""
    if device.type != "cpu":
        return "--compiled measures CPU steps only"
    return cannot_compile(device)


if __name__ == "__main__":
    sys.exit("run it as bench/decode.py --compiled")
