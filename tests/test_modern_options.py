"""ModelConfig's options for the modern block (lesson 08) and GPT-2's details (lesson 10).

The defaults keep lessons 00-07's TinyLM exactly; every combination of options keeps
cached and uncached generation equal and the parameter count exact.
"""
import itertools

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention, repeat_kv
from course_lib.blocks import RMSNorm, SwiGLU
from course_lib.checkpoint import load_model
from course_lib.costs import count_params
from course_lib.generation import generate
from course_lib.kv_cache import KVCache
from course_lib.model import ModelConfig, TinyLM

from conftest import ROOT, TINY, random_ids, tiny_model

OPTIONS = dict(norm=["layernorm", "rmsnorm"], mlp=["gelu", "swiglu"], positions=["learned", "rope"],
               n_kv_heads=[None, 2, 1], tie_embeddings=[True, False])
COMBINATIONS = [dict(zip(OPTIONS, values)) for values in itertools.product(*OPTIONS.values())]


def test_defaults_are_the_lessons_model():
    model = tiny_model()
    names = [name for name, _ in model.named_parameters()]
    assert names[:2] == ["tok_emb.weight", "pos_emb.weight"]
    assert model.head.weight is model.tok_emb.weight
    assert tuple(model.blocks[0].attn.qkv.weight.shape) == (3 * 32, 32)
    assert model.blocks[0].attn.qkv.bias is None and model.blocks[0].mlp.up.bias is not None
    assert isinstance(model.norm, torch.nn.LayerNorm)
    assert repr(ModelConfig()) == ("ModelConfig(vocab_size=256, max_len=256, d_model=128, n_heads=4, "
                                   "n_layers=4, causal=True, residual=True)")


def test_the_shipped_checkpoint_still_loads_and_predicts():
    model = load_model(ROOT / "data" / "tinylm.pt")
    assert model.config == ModelConfig(**{**TINY, "max_len": 128, "d_model": 128, "n_layers": 4})
    ids = torch.tensor([list(b"ROMEO:\nBut soft, what light")])
    with torch.no_grad():
        loss = F.cross_entropy(model(ids[:, :-1])[0], ids[0, 1:])
    assert loss < 2.5  # trained: far below ln 256 = 5.55


def test_repr_names_the_options_that_differ():
    cfg = ModelConfig(norm="rmsnorm", n_kv_heads=2)
    assert repr(cfg).endswith("residual=True, norm='rmsnorm', n_kv_heads=2)")


@pytest.mark.parametrize("options", COMBINATIONS, ids=lambda o: "-".join(map(str, o.values())))
def test_every_combination_counts_exactly_and_decodes_equally(options):
    cfg = ModelConfig(**{**TINY, **options})
    torch.manual_seed(0)
    model = TinyLM(cfg)
    assert count_params(cfg) == sum(p.numel() for p in model.parameters())
    ids = random_ids(2, 5)
    cached = generate(model, ids, 20, temperature=0, use_cache=True)  # 25 > max_len: the window slides
    assert torch.equal(cached, generate(model, ids, 20, temperature=0, use_cache=False))


@pytest.mark.parametrize("options", [dict(positions="rope"), dict(n_kv_heads=1), dict(attn_bias=True)])
def test_a_cached_step_equals_the_full_pass(options):
    model = tiny_model(**options).eval()
    ids = random_ids(2, 9)
    cache = KVCache.for_model(model, 2)
    with torch.no_grad():
        full = model(ids)
        model(ids[:, :6], cache)
        step = model(ids[:, 6:], cache)
    torch.testing.assert_close(step, full[:, 6:], rtol=1e-5, atol=1e-5)


def test_grouped_query_cache_holds_fewer_heads():
    full, grouped = tiny_model(), tiny_model(n_kv_heads=1)
    ratio = KVCache.for_model(full, 1).bytes_per_token / KVCache.for_model(grouped, 1).bytes_per_token
    assert ratio == 4 == full.config.n_heads / grouped.config.kv_heads


def test_rope_model_is_order_aware_without_a_position_table():
    model = tiny_model(positions="rope").eval()
    assert not hasattr(model, "pos_emb")
    ids = random_ids(1, 6)
    with torch.no_grad():
        forward, swapped = model(ids)[0, -1], model(ids[:, [1, 0, 2, 3, 4, 5]])[0, -1]
    assert not torch.allclose(forward, swapped, atol=1e-4)


def test_rms_norm_equals_torch():
    x = torch.randn(3, 5, 16) * 4 + 2
    ours, theirs = RMSNorm(16, eps=1e-6), torch.nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        theirs.weight.copy_(ours.weight)
    torch.testing.assert_close(ours(x), theirs(x))


def test_rms_norm_keeps_half_precision_dtype():
    norm = RMSNorm(8).to(torch.bfloat16)
    assert norm(torch.randn(2, 8, dtype=torch.bfloat16) * 1e3).dtype == torch.bfloat16


def test_swiglu_default_width_matches_the_gelu_mlp_parameters():
    mlp = SwiGLU(96)
    assert mlp.gate.out_features == 256
    x = torch.randn(2, 3, 96)
    manual = mlp.down(F.silu(mlp.gate(x)) * mlp.up(x))
    torch.testing.assert_close(mlp(x), manual)
    assert sum(p.numel() for p in mlp.parameters()) == 3 * 96 * 256 == 8 * 96 * 96


def test_repeat_kv_puts_copies_of_a_head_next_to_each_other():
    x = torch.arange(2 * 3 * 1 * 1.).view(2, 3, 1, 1)  # (B=2, Hkv=3, S=1, D=1)
    out = repeat_kv(x, 2)
    assert out.shape == (2, 6, 1, 1)
    assert out[0, :, 0, 0].tolist() == [0, 0, 1, 1, 2, 2]
    assert repeat_kv(x, 1) is x


def test_grouped_query_attention_equals_full_heads_with_shared_weights():
    """GQA is full attention whose key/value heads happen to be copies: build that and compare."""
    torch.manual_seed(0)
    grouped = MultiHeadAttention(16, 4, n_kv_heads=2)
    full = MultiHeadAttention(16, 4)
    q, k, v = grouped.qkv.weight.split([16, 8, 8])
    D = 4
    widen = lambda w: w.view(2, D, 16).repeat_interleave(2, dim=0).reshape(16, 16)  # noqa: E731
    with torch.no_grad():
        full.qkv.weight.copy_(torch.cat([q, widen(k), widen(v)]))
        full.proj.weight.copy_(grouped.proj.weight)
    x = torch.randn(2, 7, 16)
    torch.testing.assert_close(grouped(x), full(x))
    torch.testing.assert_close(grouped.attention_weights(x), full.attention_weights(x))


@pytest.mark.parametrize("field, value, message", [
    ("norm", "batchnorm", "ModelConfig.norm must be one of"),
    ("mlp", "relu", "ModelConfig.mlp must be one of"),
    ("positions", "alibi", "ModelConfig.positions must be one of"),
    ("n_kv_heads", 3, "n_kv_heads=3 must divide n_heads=4"),
    ("n_kv_heads", 0, "ModelConfig.n_kv_heads must be a positive integer"),
    ("d_ff", 0, "ModelConfig.d_ff must be a positive integer"),
    ("rope_base", -1.0, "ModelConfig.rope_base must be a positive number"),
    ("gelu_approx", "sigmoid", "ModelConfig.gelu_approx must be one of"),
])
def test_bad_options_are_refused_by_name(field, value, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{**TINY, field: value})


def test_rope_needs_an_even_head_size():
    with pytest.raises(ValueError, match="head size must be even"):
        ModelConfig(d_model=12, n_heads=4, positions="rope")


def test_rope_model_refuses_past_its_context_length():
    model = tiny_model(positions="rope")
    with pytest.raises(ValueError, match="the context length it was built for"):
        model(random_ids(1, 17))
