"""course_lib.convert: Hugging Face GPT-2 and Llama models run in TinyLM's code, equal to the original.

Models are built from tiny random configs: nothing is downloaded.
"""
import pytest
import torch

transformers = pytest.importorskip("transformers")

from course_lib.convert import config_from_dict, from_transformers  # noqa: E402
from course_lib.generation import generate  # noqa: E402


def llama(seed=0, **overrides):
    torch.manual_seed(seed)
    fields = dict(vocab_size=97, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                  rms_norm_eps=1e-5, tie_word_embeddings=False)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**fields, **overrides})).eval()


def gpt2(seed=0, **overrides):
    torch.manual_seed(seed)
    fields = dict(vocab_size=101, n_positions=32, n_embd=48, n_layer=2, n_head=4,
                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**{**fields, **overrides})).eval()


LLAMAS = [dict(), dict(num_key_value_heads=2), dict(num_key_value_heads=1),
          dict(tie_word_embeddings=True), dict(rope_theta=500000.0), dict(rope_theta=100.0)]
GPT2S = [dict(), dict(activation_function="gelu"), dict(n_inner=80), dict(tie_word_embeddings=False)]


def _same_logits(hf, vocab):
    ours = from_transformers(hf)
    ids = torch.randint(0, vocab, (2, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, rtol=0, atol=1e-5)
    return ours, ids


@pytest.mark.parametrize("overrides", LLAMAS, ids=str)
def test_llama_logits_equal(overrides):
    _same_logits(llama(**overrides), 97)


@pytest.mark.parametrize("overrides", GPT2S, ids=str)
def test_gpt2_logits_equal(overrides):
    _same_logits(gpt2(**overrides), 101)


@pytest.mark.parametrize("make, vocab", [(lambda: llama(num_key_value_heads=2), 97), (gpt2, 101)],
                         ids=["llama-gqa", "gpt2"])
def test_cached_greedy_generation_equals_transformers(make, vocab):
    hf = make()
    ours, ids = _same_logits(hf, vocab)
    prompt = ids[:1, :6]
    theirs = hf.generate(prompt, max_new_tokens=20, do_sample=False, pad_token_id=0)
    assert torch.equal(generate(ours, prompt, 20, temperature=0), theirs)


def test_conversion_keeps_the_dtype():
    assert from_transformers(llama().to(torch.bfloat16)).tok_emb.weight.dtype == torch.bfloat16


@pytest.mark.parametrize("fields, message", [
    (dict(model_type="bert"), "model_type='bert' is not supported"),
    (dict(model_type="llama", hidden_size=64, num_attention_heads=4, hidden_act="gelu"),
     "hidden_act='gelu'"),
    (dict(model_type="llama", hidden_size=64, num_attention_heads=4,
          rope_scaling={"rope_type": "llama3", "factor": 8.0}), "rope_scaling"),
    (dict(model_type="llama", hidden_size=64, num_attention_heads=4, attention_bias=True),
     "attention_bias=True"),
    (dict(model_type="gpt2", n_embd=48, scale_attn_by_inverse_layer_idx=True),
     "scale_attn_by_inverse_layer_idx"),
    (dict(model_type="gpt2", n_embd=48), "has no 'vocab_size'"),
])
def test_unsupported_configs_are_named(fields, message):
    with pytest.raises(ValueError, match=message):
        config_from_dict(fields)
