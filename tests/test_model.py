"""Tests for course_lib.model (ModelConfig, TinyLM) and course_lib.blocks (MLP, Block)."""
import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.blocks import Block
from course_lib.data import encode
from course_lib.model import ModelConfig, TinyLM
from course_lib.training import fit

from conftest import TINY, random_ids, tiny_model


# --- ModelConfig ------------------------------------------------------------


def test_config_d_head():
    assert ModelConfig(d_model=48, n_heads=6).d_head == 8
    assert ModelConfig().d_head == 32


def test_config_not_divisible():
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        ModelConfig(d_model=30, n_heads=4)


@pytest.mark.parametrize("field", ["vocab_size", "max_len", "d_model", "n_heads", "n_layers"])
@pytest.mark.parametrize("value", [0, -3])
def test_config_non_positive(field, value):
    with pytest.raises(ValueError, match=f"ModelConfig.{field} must be a positive integer"):
        ModelConfig(**{field: value})


def test_config_is_frozen():
    cfg = ModelConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 64


# --- TinyLM: shapes, tying, parameter count, initial loss --------------------


def test_logits_shape():
    model = tiny_model()
    logits = model(random_ids(3, 5))
    assert logits.shape == (3, 5, 256)


def test_weight_tying():
    model = tiny_model()
    assert model.head.weight is model.tok_emb.weight


def _expected_params(V, L, C, n_layers):
    per_block = (
        2 * 2 * C              # two LayerNorms, weight and bias each
        + 3 * C * C            # fused qkv, no bias
        + C * C                # output projection, no bias
        + C * 4 * C + 4 * C    # MLP up
        + 4 * C * C + C        # MLP down
    )
    return V * C + L * C + n_layers * per_block + 2 * C  # head tied to tok_emb: 0 extra


@pytest.mark.parametrize("cfg", [TINY, dict(vocab_size=50, max_len=7, d_model=24, n_heads=3, n_layers=3)])
def test_parameter_count(cfg):
    model = TinyLM(ModelConfig(**cfg))
    n = sum(p.numel() for p in model.parameters())
    assert n == _expected_params(cfg["vocab_size"], cfg["max_len"], cfg["d_model"], cfg["n_layers"])


def test_untrained_loss_near_uniform():
    model = tiny_model()
    ids = random_ids(8, 16, seed=2)
    with torch.no_grad():
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), ids[:, 1:].reshape(-1))
    assert abs(loss.item() - math.log(256)) < 0.1


# --- TinyLM: causality --------------------------------------------------------


@pytest.mark.parametrize("k", [1, 4, 11])
def test_causal_future_tokens_do_not_change_past_logits(k):
    model = tiny_model()
    ids = random_ids(2, 12)
    ids2 = ids.clone()
    ids2[:, k:] = (ids2[:, k:] + 1 + random_ids(2, 12 - k, seed=3, V=254)) % 256  # every later token changes
    assert (ids2[:, k:] != ids[:, k:]).all()
    with torch.no_grad():
        a, b = model(ids), model(ids2)
    assert torch.equal(a[:, :k], b[:, :k])
    assert not torch.allclose(a[:, k:], b[:, k:])


def test_non_causal_future_tokens_change_past_logits():
    model = tiny_model(causal=False)
    ids = random_ids(2, 12)
    ids2 = ids.clone()
    ids2[:, 8:] = (ids2[:, 8:] + 7) % 256
    with torch.no_grad():
        a, b = model(ids), model(ids2)
    assert not torch.allclose(a[:, :8], b[:, :8])


# --- Block ------------------------------------------------------------------


def test_block_shape_and_manual_residuals():
    torch.manual_seed(4)
    blk = Block(16, 4)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        y = blk(x)
        h = x + blk.attn(blk.norm1(x))
        expected = h + blk.mlp.down(F.gelu(blk.mlp.up(blk.norm2(h))))
    assert y.shape == (2, 5, 16)
    assert torch.equal(y, expected)


def test_block_layernorm_normalises():
    torch.manual_seed(5)
    blk = Block(16, 4)
    x = torch.randn(3, 4, 16) * 5 + 2
    with torch.no_grad():
        n = blk.norm1(x)
    assert n.mean(-1).abs().max() < 1e-5
    assert (n.var(-1, unbiased=False) - 1).abs().max() < 1e-3


# --- TinyLM: input errors ------------------------------------------------------


def test_accepts_exactly_max_len():
    model = tiny_model()
    assert model(random_ids(1, 16)).shape == (1, 16, 256)


def test_error_too_long():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"length 17 is longer than max_len=16.*idx\[:, -16:\]"):
        model(random_ids(1, 17))


@pytest.mark.parametrize("bad", [256, -1])
def test_error_id_out_of_vocab(bad):
    model = tiny_model()
    ids = random_ids(2, 5)
    ids[1, 3] = bad
    with pytest.raises(ValueError, match=f"token id {bad} is outside the vocabulary"):
        model(ids)


def test_error_float_tensor():
    with pytest.raises(TypeError, match=r"idx.long\(\)"):
        tiny_model()(torch.zeros(1, 4))


def test_error_1d_input():
    with pytest.raises(ValueError, match=r"idx\[None\]"):
        tiny_model()(torch.zeros(4, dtype=torch.long))


def test_error_empty_sequence():
    with pytest.raises(ValueError, match="T = 0"):
        tiny_model()(torch.zeros(1, 0, dtype=torch.long))


def test_error_python_list():
    with pytest.raises(TypeError, match="torch.Tensor"):
        tiny_model()([[1, 2, 3]])


# --- overfitting sanity ---------------------------------------------------------


def test_overfits_repetitive_corpus():
    model = tiny_model(seed=6)
    ids = encode("abc" * 200)
    losses = fit(model, ids, steps=150, batch_size=8, block_size=16, lr=3e-3, seed=0, progress=False)
    assert len(losses) == 150
    assert losses[0] > 4.0
    assert losses[-1] < 0.2
