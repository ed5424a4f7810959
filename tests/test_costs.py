"""Tests for course_lib.costs: parameters, FLOPs, KV-cache bytes and training memory."""
import dataclasses
import json
import random

import numpy as np
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from course_lib.costs import (CONFIG_DIR, TRAINING_BYTES, approx_params, cost_table, count_params,
                              flops_per_token, kv_cache_bytes, load_config, matmul_params,
                              param_breakdown, peak_memory_bytes, training_memory_bytes)
from course_lib.kv_cache import KVCache
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


# Real models' configs: counts against transformers, FLOPs against torch's counter, KV bytes
# against a real cache, and the errors load_config gives.

CONFIGS = sorted(CONFIG_DIR.glob("*.json"))
HF_CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM"}


def _hf_count(path):
    transformers = pytest.importorskip("transformers")
    fields = json.loads(path.read_text())
    hf_config = transformers.AutoConfig.for_model(**fields)
    with torch.device("meta"):  # shapes only: nothing is allocated
        model = getattr(transformers, HF_CLASSES[fields["model_type"]])(hf_config)
    return sum(p.numel() for p in model.parameters())


def test_every_config_family_is_covered():
    kinds = {json.loads(p.read_text())["model_type"] for p in CONFIGS}
    assert kinds == set(HF_CLASSES) and len(CONFIGS) == 7


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_count_params_equals_transformers_on_the_meta_device(path):
    config = load_config(path)
    assert count_params(config) == _hf_count(path)
    with torch.device("meta"):
        assert count_params(config) == sum(p.numel() for p in TinyLM(config).parameters())


def test_published_counts():
    assert count_params(load_config(CONFIG_DIR / "gpt2.json")) == 124_439_808
    assert count_params(load_config(CONFIG_DIR / "llama3-8b.json")) == 8_030_261_248
    # TinyLM's default GPT-2 shape has no attention biases: lesson 04's count
    no_bias = dataclasses.replace(load_config(CONFIG_DIR / "gpt2.json"), attn_bias=False)
    assert count_params(no_bias) == count_params(GPT2_SMALL) == 124_402_944


def test_load_config_finds_a_path_relative_to_the_course_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config("data/configs/gpt2.json") == load_config(CONFIG_DIR / "gpt2.json")


def test_load_config_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no config file at .*nope.json.*llama3-8b.json"):
        load_config(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "gpt2",')
    with pytest.raises(ValueError, match=r"bad.json is not valid JSON: .* line 1"):
        load_config(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a JSON list"):
        load_config(bad)
    fields = json.loads((CONFIG_DIR / "llama3-8b.json").read_text())
    del fields["hidden_size"]
    bad.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=r"bad.json: .*'hidden_size'"):
        load_config(bad)
    with pytest.raises(TypeError, match="needs a file path, got dict"):
        load_config(fields)


TINY = [ModelConfig(vocab_size=50, max_len=32, d_model=32, n_heads=4, n_layers=2),
        ModelConfig(vocab_size=50, max_len=32, d_model=32, n_heads=4, n_layers=3, mlp="swiglu",
                    n_kv_heads=2, positions="rope", norm="rmsnorm", tie_embeddings=False,
                    attn_bias=True, d_ff=40)]


def _counted_flops(run):
    # The math backend runs attention as matrix products, which the counter sees; torch's
    # fused CPU kernel is not in its table.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


@pytest.mark.parametrize("config", TINY, ids=["gpt2-like", "llama-like"])
@pytest.mark.parametrize("T", [1, 16, 32])
def test_flops_per_token_equals_torchs_flop_counter(config, T):
    torch.manual_seed(0)
    model, idx = TinyLM(config), torch.randint(0, 50, (3, T))
    assert _counted_flops(lambda: model(idx)) == 3 * T * flops_per_token(config, T)
    assert _counted_flops(lambda: model(idx).sum().backward()) == \
        3 * T * flops_per_token(config, T, training=True)


@pytest.mark.parametrize("config", TINY, ids=["gpt2-like", "llama-like"])
def test_flops_of_a_decode_step_over_a_cache(config):
    model, idx = TinyLM(config).eval(), torch.randint(0, 50, (2, 11))
    cache = KVCache.for_model(model, 2)
    with torch.no_grad():
        model(idx[:, :10], cache)
        flops = _counted_flops(lambda: model(idx[:, 10:], cache))
    assert flops == 2 * flops_per_token(config, context=11)


def test_flops_rule_of_2_and_6_per_parameter():
    config = load_config(CONFIG_DIR / "llama3-8b.json")
    # untied head: every parameter but the embedding's and the norms' is a matrix weight
    assert matmul_params(config) == count_params(config) - 128256 * 4096 - 65 * 4096
    assert flops_per_token(config, 0) == 2 * matmul_params(config)
    assert flops_per_token(config, 8192, training=True) == \
        6 * matmul_params(config) + 12 * 32 * 4096 * 8192


@pytest.mark.parametrize("config", TINY + [GPT2_SMALL], ids=["gpt2-like", "llama-like", "default"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_bytes_equals_the_tensors_of_a_real_cache(config, dtype):
    with torch.device("meta") if config is GPT2_SMALL else torch.device("cpu"):
        model = TinyLM(config).to(dtype)
    if config is GPT2_SMALL:
        cache = KVCache(config.n_layers, 3, config.kv_heads, config.max_len, config.d_head,
                        dtype=dtype, device="meta")
    else:
        cache = KVCache.for_model(model, 3)
    size = torch.finfo(dtype).bits // 8
    assert kv_cache_bytes(config, config.max_len, size, batch_size=3) == cache.nbytes
    assert kv_cache_bytes(config, bytes_per_value=size) == cache.bytes_per_token


def test_kv_cache_of_llama3_8b():
    config = load_config(CONFIG_DIR / "llama3-8b.json")
    assert kv_cache_bytes(config) == 131_072
    assert kv_cache_bytes(config, 8192) == 2**30
    assert kv_cache_bytes(dataclasses.replace(config, n_kv_heads=None), 8192) == 4 * 2**30


def test_training_memory():
    config = load_config(CONFIG_DIR / "gpt2.json")
    assert training_memory_bytes(config) == 16 * 124_439_808
    assert training_memory_bytes(config, "mixed") == 16 * 124_439_808
    assert sum(TRAINING_BYTES["mixed"].values()) == 16
    with pytest.raises(ValueError, match=r"one of \['fp32', 'mixed'\], got 'fp16'"):
        training_memory_bytes(config, "fp16")


def test_cost_table_lists_every_model():
    configs = {p.stem: load_config(p) for p in CONFIGS}
    table = cost_table(configs, context=8192).splitlines()
    assert len(table) == 2 + len(CONFIGS)
    row = next(line for line in table if line.startswith("llama3-8b "))
    assert "8,030,261,248" in row and "128 KiB" in row and "1 GiB" in row


def test_cost_errors():
    config = TINY[0]
    with pytest.raises(ValueError, match="context must be an integer >= 0, got -1"):
        flops_per_token(config, -1)
    with pytest.raises(ValueError, match="tokens must be an integer >= 0, got 2.5"):
        kv_cache_bytes(config, 2.5)
    with pytest.raises(ValueError, match="bytes_per_value must be a positive number, got 0"):
        kv_cache_bytes(config, 1, 0)
    with pytest.raises(TypeError, match="expected a ModelConfig, got str"):
        flops_per_token("gpt2", 10)
    with pytest.raises(TypeError, match="non-empty dict"):
        cost_table([config])


def test_peak_memory_bytes_sees_temporaries_and_frees():
    def two_temporaries():
        a = torch.ones(1000, 250)         # 1,000,000 bytes
        b = a * 2                         # another 1,000,000 while a is held
        del a
        return (b + 1).sum()              # b and a third 1,000,000: the peak stays 2,000,000

    assert 2_000_000 <= peak_memory_bytes(two_temporaries) < 2_000_100  # and a few scalars
    assert peak_memory_bytes(lambda: None) == 0
