"""Tests for course_lib.costs: the exact parameter count and the 12 L C^2 + V C rule."""
import random

import numpy as np
import pytest
import torch

from course_lib.costs import approx_params, count_params, param_breakdown
from course_lib.model import ModelConfig, TinyLM

GPT2_SMALL = ModelConfig(vocab_size=50257, max_len=1024, d_model=768, n_heads=12, n_layers=12)


def _real_count(config):
    return sum(p.numel() for p in TinyLM(config).parameters())


def _random_configs(n, seed=0):
    rng = random.Random(seed)
    for _ in range(n):
        n_heads = rng.randint(1, 4)
        yield ModelConfig(vocab_size=rng.randint(1, 300), max_len=rng.randint(1, 40),
                          d_model=n_heads * rng.randint(1, 12), n_heads=n_heads,
                          n_layers=rng.randint(1, 4), causal=rng.random() < 0.5,
                          residual=rng.random() < 0.5)


@pytest.mark.parametrize("config", list(_random_configs(40)), ids=str)
def test_count_params_equals_the_instantiated_model(config):
    assert count_params(config) == _real_count(config)


def test_count_params_of_gpt2_small_shape():
    with torch.device("meta"):  # the shape without the 0.5 GB of numbers
        model = TinyLM(GPT2_SMALL)
    assert count_params(GPT2_SMALL) == sum(p.numel() for p in model.parameters()) == 124_402_944


def test_gpt2_small_published_count_differs_only_by_attention_biases():
    # GPT-2 small has 124,439,808 parameters; its qkv (3C) and output projection (C) carry
    # biases in each of its 12 layers, ours do not.
    assert count_params(GPT2_SMALL) + 12 * (3 * 768 + 768) == 124_439_808


def test_approx_params_gpt2_small():
    assert approx_params(n_layers=12, d_model=768, vocab_size=50257) == 123_532_032
    assert round(12 * 12 * 768 ** 2 / 1e6) == 85 and round(50257 * 768 / 1e6) == 39
    assert approx_params(n_layers=np.int64(12), d_model=768, vocab_size=50257) == 123_532_032


@pytest.mark.parametrize("config", list(_random_configs(10, seed=1)), ids=str)
def test_exact_minus_approx_is_biases_norms_and_positions(config):
    C, L = config.d_model, config.n_layers
    gap = count_params(config) - approx_params(n_layers=L, d_model=C, vocab_size=config.vocab_size)
    assert gap == L * 5 * C + L * 4 * C + 2 * C + config.max_len * C


def test_breakdown_sums_to_count_and_names_every_part():
    parts = param_breakdown(GPT2_SMALL)
    assert sum(parts.values()) == count_params(GPT2_SMALL)
    assert parts["token embedding (V C)"] == 38_597_376
    assert parts["position table (max_len C)"] == 786_432
    assert parts["head (tied to the token embedding)"] == 0
    blocks = sum(v for k, v in parts.items() if "per layer" in k)
    assert blocks == 85_017_600


def test_breakdown_matches_the_modules():
    config = ModelConfig(vocab_size=30, max_len=9, d_model=12, n_heads=3, n_layers=2)
    model, parts = TinyLM(config), param_breakdown(config)

    def count(keep):
        return sum(p.numel() for n, p in model.named_parameters() if keep(n))

    assert parts["attention weights (4 C^2 per layer)"] == count(lambda n: ".attn." in n)
    assert parts["MLP weights (8 C^2 per layer)"] == count(lambda n: ".mlp." in n and n.endswith("weight"))
    assert parts["MLP biases (5 C per layer)"] == count(lambda n: ".mlp." in n and n.endswith("bias"))
    assert parts["block LayerNorms (4 C per layer)"] == count(lambda n: ".norm" in n)
    assert parts["final LayerNorm (2 C)"] == count(lambda n: n.startswith("norm."))
    assert parts["position table (max_len C)"] == count(lambda n: n.startswith("pos_emb"))


def test_errors():
    with pytest.raises(TypeError, match="expected a ModelConfig, got dict"):
        count_params(dict(d_model=8))
    with pytest.raises(ValueError, match="n_layers as a positive integer, got 0"):
        approx_params(n_layers=0, d_model=8, vocab_size=10)
    with pytest.raises(ValueError, match="d_model as a positive integer, got 7.5"):
        approx_params(n_layers=1, d_model=7.5, vocab_size=10)
