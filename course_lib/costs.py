"""What a model costs: parameters, FLOPs, KV-cache bytes and training memory, from its config.

For TinyLM (pre-norm blocks, 4x GELU MLP, learned positions, tied unembedding), with
L layers, width C, vocabulary V and a position table of max_len rows:

    per block:   attention   4 C^2           (fused qkv 3 C^2 + output C^2, no biases)
                 MLP         8 C^2 + 5 C     (up C x 4C + 4C bias, down 4C x C + C bias)
                 LayerNorms  4 C             (two, a weight and a bias of C each)
    the rest:    token embedding V C, position table max_len C, final LayerNorm 2 C,
                 head 0 (it is the token embedding's matrix, tied)

Dropping everything but the C^2 and V C terms gives the rule of thumb 12 L C^2 + V C.
Lesson 08's options (RMSNorm, SwiGLU, RoPE, grouped-query heads, an untied head) and
GPT-2's attention biases change the parts they touch; `param_breakdown` names them.

Real models' configs (`data/configs/*.json`, Hugging Face's config.json format) are read
by `load_config`, which leaves the field mapping to `course_lib.convert.config_from_dict`.
From a ModelConfig: `count_params`, `flops_per_token`, `kv_cache_bytes`,
`training_memory_bytes` and `cost_table`; `peak_memory_bytes(fn)` measures a call (lesson 09).
"""
import contextlib
import json
import numbers
import os
from pathlib import Path

import numpy as np
from torch.profiler import ProfilerActivity, profile

from course_lib.convert import config_from_dict
from course_lib.model import ModelConfig
from course_lib.paths import DATA_DIR, course_file

CONFIG_DIR = DATA_DIR / "configs"

# Bytes per parameter while training with AdamW, activations not included. "fp32": weights,
# gradients and both moments in float32, as this course trains. "mixed": bf16 weights and
# gradients for the passes, a float32 master copy for the update, float32 moments (the
# usual recipe for large models; Rajbhandari et al. 2020, "ZeRO", section 3.1).
TRAINING_BYTES = {
    "fp32": {"weights": 4, "gradients": 4, "AdamW moments (m, v)": 8},
    "mixed": {"weights (bf16)": 2, "gradients (bf16)": 2, "master weights (fp32)": 4,
              "AdamW moments (m, v)": 8},
}


def load_config(path):
    """The ModelConfig of a config.json file of the GPT-2 or Llama/Mistral family.

    A relative path data/... that does not exist from the working directory is looked up in
    course_lib's data (paths.course_file), so `load_config("data/configs/gpt2.json")` works
    from notebooks/, exercises/ and with course_lib installed from a wheel.
    Raises FileNotFoundError for a missing file, ValueError for a file that is not JSON
    and, through config_from_dict, for a field TinyLM cannot follow (naming the field).
    """
    if not isinstance(path, (str, Path)):
        raise TypeError(f"load_config needs a file path, got {type(path).__name__}")
    path = course_file(path)
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in CONFIG_DIR.glob("*.json")))
        raise FileNotFoundError(f"no config file at {path}; the course's configs are in "
                                f"{CONFIG_DIR}: {known}")
    try:
        fields = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err.msg} at line {err.lineno}, "
                         f"column {err.colno}") from None
    if not isinstance(fields, dict):
        raise ValueError(f"{path} holds a JSON {type(fields).__name__}, not the object "
                         f"{{field: value}} of a config.json")
    try:
        return config_from_dict(fields)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path.name}: {err}") from None


def _check_config(config):
    if not isinstance(config, ModelConfig):
        raise TypeError(f"expected a ModelConfig, got {type(config).__name__}; "
                        f"build one with ModelConfig(vocab_size=..., d_model=..., ...) "
                        f"or load_config(path)")


def _count(value, name, minimum=0):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _positive_number(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return value


def param_breakdown(config):
    """TinyLM's parameters by part, as a dict of {part: count}; the counts sum to count_params.

    Every block part (attention, MLP, norms) is summed over all layers. The default
    (GPT-2-style) config gives the parts listed at the top of this module; the options
    of lesson 08 and 10 (RMSNorm, SwiGLU, RoPE, grouped-query attention, an untied
    head, attention biases, another MLP width) change the parts they touch.
    """
    _check_config(config)
    C, L, V, F = config.d_model, config.n_layers, config.vocab_size, config.ff_width
    kv = config.kv_heads * config.d_head  # the width of the keys, and of the values
    parts = {"token embedding (V C)": V * C}
    if config.positions == "learned":
        parts["position table (max_len C)"] = config.max_len * C
    if kv == C:
        parts["attention weights (4 C^2 per layer)"] = L * 4 * C * C
    else:
        parts["attention weights (2 C^2 + 2 C Hkv D per layer)"] = L * (2 * C * C + 2 * C * kv)
    if config.attn_bias:
        parts["attention biases (2 C + 2 Hkv D per layer)"] = L * (2 * C + 2 * kv)
    if config.mlp == "swiglu":
        parts["MLP weights (3 C d_ff per layer, SwiGLU)"] = L * 3 * C * F
    elif F == 4 * C:
        parts["MLP weights (8 C^2 per layer)"] = L * 8 * C * C
        parts["MLP biases (5 C per layer)"] = L * 5 * C
    else:
        parts["MLP weights (2 C d_ff per layer)"] = L * 2 * C * F
        parts["MLP biases (d_ff + C per layer)"] = L * (F + C)
    if config.norm == "layernorm":
        parts["block LayerNorms (4 C per layer)"] = L * 4 * C
        parts["final LayerNorm (2 C)"] = 2 * C
    else:
        parts["block RMSNorms (2 C per layer)"] = L * 2 * C
        parts["final RMSNorm (C)"] = C
    if config.tie_embeddings:
        parts["head (tied to the token embedding)"] = 0
    else:
        parts["head (V C, untied)"] = V * C
    return parts


def count_params(config):
    """The exact number of parameters of TinyLM(config), from the config alone.

    Equals sum(p.numel() for p in TinyLM(config).parameters()) without building the model.
    """
    return sum(param_breakdown(config).values())


def approx_params(*, n_layers, d_model, vocab_size):
    """The rule of thumb 12 L C^2 + V C: blocks' weight matrices plus the embedding matrix."""
    for name, value in (("n_layers", n_layers), ("d_model", d_model), ("vocab_size", vocab_size)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"approx_params needs {name} as a positive integer, got {value!r}")
    n_layers, d_model, vocab_size = int(n_layers), int(d_model), int(vocab_size)
    return 12 * n_layers * d_model ** 2 + vocab_size * d_model


def matmul_params(config):
    """The weights a token's vector is multiplied by on its way through TinyLM(config).

    Every block's attention and MLP matrices, plus the head's V x C matrix, which is a
    matrix product even when it is tied to the embedding. Not included: the embedding
    and position lookups (a row is read, nothing is multiplied), biases and norms.
    """
    _check_config(config)
    C, L, V, F = config.d_model, config.n_layers, config.vocab_size, config.ff_width
    kv = config.kv_heads * config.d_head
    attention = 2 * C * C + 2 * C * kv  # q and output C x C; k and v C x (Hkv D)
    mlp = (3 if config.mlp == "swiglu" else 2) * C * F
    return L * (attention + mlp) + V * C


def flops_per_token(config, context, training=False):
    """Floating-point operations to process one token whose query meets `context` keys.

    Counted: every matrix product, a multiply and an add being 2 FLOPs.
      - weights: 2 per weight of `matmul_params` (the blocks' matrices and the head);
        embeddings and the position table are lookups and count 0;
      - attention: per layer, the query against `context` keys (2 C context) and the
        weighted sum of as many values (2 C context): 4 L C context.
    Not counted: biases, norms, GELU/SiLU, softmax and the residual additions, which
    take O(C) operations per token against the O(C^2) above.

    A full pass over T tokens with a dense causal kernel scores every query against
    all T keys (the masked half is computed and discarded), so context = T there;
    a decode step over a cache of S positions has context = S.
    training=True: forward and backward, 3 times the forward (the backward pass
    computes a gradient for each matrix's input and for the matrix: two products
    for each one of the forward's), so 6 per weight plus 12 L C context.
    """
    _check_config(config)
    context = _count(context, "context")
    forward = 2 * matmul_params(config) + 4 * config.n_layers * config.d_model * context
    return 3 * forward if training else forward


def kv_cache_bytes(config, tokens=1, bytes_per_value=2, batch_size=1):
    """Bytes of the keys and values a KV cache keeps for `tokens` positions of each sequence.

    2 (a key and a value) x layers x KV heads x head size x bytes per value, per token:
    grouped-query attention keeps only config.kv_heads heads. bytes_per_value is 2 for
    float16 and bfloat16, 4 for float32.
    """
    _check_config(config)
    tokens = _count(tokens, "tokens")
    batch_size = _count(batch_size, "batch_size", minimum=1)
    bytes_per_value = _positive_number(bytes_per_value, "bytes_per_value")
    per_token = 2 * config.n_layers * config.kv_heads * config.d_head * bytes_per_value
    return per_token * tokens * batch_size


def training_memory_bytes(config, precision="fp32"):
    """Bytes to train TinyLM(config) with AdamW: weights, gradients and optimizer state.

    Per parameter (TRAINING_BYTES): "fp32" keeps weights, gradients and AdamW's two
    moments in float32, 4 + 4 + 8 = 16 bytes; "mixed" keeps bf16 weights and gradients,
    a float32 master copy and float32 moments, 2 + 2 + 4 + 8 = 16 bytes as well.
    Activations are not included: they depend on the batch, the context and on what
    is recomputed, and can exceed all of this.
    """
    if precision not in TRAINING_BYTES:
        raise ValueError(f"precision must be one of {sorted(TRAINING_BYTES)}, got {precision!r}")
    return count_params(config) * sum(TRAINING_BYTES[precision].values())


@contextlib.contextmanager
def _quiet_stderr():
    """Send the process's stderr (file descriptor 2) to /dev/null: some builds of PyTorch's
    profiler log a line there each time it starts and stops."""
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory_bytes(fn):
    """The most CPU memory tensors held at once while fn() ran, beyond what was held before.

    PyTorch's profiler records what each operator allocates and frees; replayed in time
    order, their running sum peaks at the answer. It sees every tensor operators hand to
    each other; a buffer an operator allocates and frees inside itself (a fused kernel's
    tiles) is not seen.
    """
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    held = np.cumsum([0] + [e.self_cpu_memory_usage for e in events])
    return int(held.max())


def _human(n, unit=""):
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}{unit}"
    return f"{n:.3g} {unit}"


def cost_table(configs, context=2048):
    """A plain-text table of each named config's costs, one row per model, for printing.

    configs: {name: ModelConfig}. Columns: exact parameters; forward and training FLOPs
    per token at `context`; training memory (fp32 AdamW, no activations); KV cache per
    token and per `context`-token sequence, in bfloat16.
    """
    if not isinstance(configs, dict) or not configs:
        raise TypeError("cost_table needs a non-empty dict {name: ModelConfig}")
    heads = ("model", "parameters", "fwd FLOPs/token", "train FLOPs/token", "train memory",
             "KV/token", f"KV at {context:,}")
    rows = [heads]
    for name, config in configs.items():
        rows.append((name, f"{count_params(config):,}",
                     _human(flops_per_token(config, context)),
                     _human(flops_per_token(config, context, training=True)),
                     f"{training_memory_bytes(config) / 2**30:,.1f} GiB",
                     f"{kv_cache_bytes(config) / 2**10:,.0f} KiB",
                     f"{kv_cache_bytes(config, context) / 2**30:,.3g} GiB"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(heads))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
