"""What a model costs: its parameters, counted exactly and estimated by the 12 L C^2 + V C rule.

For TinyLM (pre-norm blocks, 4x GELU MLP, learned positions, tied unembedding), with
L layers, width C, vocabulary V and a position table of max_len rows:

    per block:   attention   4 C^2           (fused qkv 3 C^2 + output C^2, no biases)
                 MLP         8 C^2 + 5 C     (up C x 4C + 4C bias, down 4C x C + C bias)
                 LayerNorms  4 C             (two, a weight and a bias of C each)
    the rest:    token embedding V C, position table max_len C, final LayerNorm 2 C,
                 head 0 (it is the token embedding's matrix, tied)

Dropping everything but the C^2 and V C terms gives the rule of thumb 12 L C^2 + V C.
"""
import numbers

from course_lib.model import ModelConfig


def _check_config(config):
    if not isinstance(config, ModelConfig):
        raise TypeError(f"expected a ModelConfig, got {type(config).__name__}; "
                        f"build one with ModelConfig(vocab_size=..., d_model=..., ...)")


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
