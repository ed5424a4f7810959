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

    Every block part (attention, MLP, norms) is summed over all layers.
    """
    _check_config(config)
    C, L = config.d_model, config.n_layers
    return {
        "token embedding (V C)": config.vocab_size * C,
        "position table (max_len C)": config.max_len * C,
        "attention weights (4 C^2 per layer)": L * 4 * C * C,
        "MLP weights (8 C^2 per layer)": L * 8 * C * C,
        "MLP biases (5 C per layer)": L * 5 * C,
        "block LayerNorms (4 C per layer)": L * 4 * C,
        "final LayerNorm (2 C)": 2 * C,
        "head (tied to the token embedding)": 0,
    }


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
