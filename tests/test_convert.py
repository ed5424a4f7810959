"""course_lib.convert: Hugging Face GPT-2 and Llama models run in TinyLM's code, equal to the original.

Models are built from tiny random configs: nothing is downloaded.
"""
import json
from pathlib import Path

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


# --- load_pretrained: a Hugging Face folder, written here by save_pretrained ---

from course_lib.convert import load_pretrained  # noqa: E402
from course_lib.data import CORPUS_PATH  # noqa: E402

SHAPE = dict(gpt2=dict(n_positions=32, n_embd=48, n_layer=2, n_head=4),
             llama=dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))


@pytest.fixture(scope="module")
def tokenizer():
    """A byte-level BPE of 300 tokens trained on a paragraph of the corpus: no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([CORPUS_PATH.read_text()[:3000]], trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")


def save(folder, hf, tokenizer):
    hf.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def saved_model(kind, tokenizer, **overrides):
    V = len(tokenizer)
    if kind == "gpt2":
        return gpt2(**{"vocab_size": V, **SHAPE["gpt2"], **overrides})
    return llama(**{"vocab_size": V, "bos_token_id": 0, "eos_token_id": 0, **SHAPE["llama"],
                    **overrides})


def _torch_save_folder(folder, hf, tokenizer, state=None):
    """A folder as older transformers versions saved it: pytorch_model.bin, a pickle of tensors."""
    folder.mkdir(exist_ok=True)
    hf.config.save_pretrained(folder)
    torch.save(state if state is not None else hf.state_dict(), folder / "pytorch_model.bin")
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_loaded_folder_gives_the_same_logits_and_greedy_tokens(kind, tokenizer, tmp_path):
    hf = saved_model(kind, tokenizer)
    model, tok = load_pretrained(save(tmp_path, hf, tokenizer))
    ids = torch.tensor([tok("To be, or not to be, that is the question:").input_ids])   # (1, T)
    assert tok.decode(ids[0]) == "To be, or not to be, that is the question:"
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, rtol=0, atol=1e-5)
    theirs = hf.generate(ids[:, :5], max_new_tokens=20, do_sample=False, pad_token_id=0)
    assert torch.equal(generate(model, ids[:, :5], 20, temperature=0), theirs)
    assert not model.training and model.tok_emb.weight.dtype == torch.float32


def test_pytorch_model_bin_with_old_gpt2_buffers_loads(tokenizer, tmp_path):
    """Older GPT-2 files hold `h.N.attn.bias` (a causal-mask buffer) and `attn.masked_bias`:
    not weights, ignored. Names may come with or without the `transformer.` prefix."""
    hf = saved_model("gpt2", tokenizer)
    state = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items()}
    for i in range(2):
        state[f"h.{i}.attn.bias"] = torch.ones(1, 1, 32, 32).tril()
        state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    model, _ = load_pretrained(_torch_save_folder(tmp_path, hf, tokenizer, state))
    ids = torch.randint(0, len(tokenizer), (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, rtol=0, atol=1e-5)


def test_sharded_safetensors_load(tokenizer, tmp_path):
    hf = saved_model("llama", tokenizer, tie_word_embeddings=False)
    hf.save_pretrained(tmp_path, max_shard_size="50KB")
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors.index.json").is_file()
    model, _ = load_pretrained(tmp_path)
    ids = torch.randint(0, len(tokenizer), (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, rtol=0, atol=1e-5)


def test_dtype_is_kept_or_converted(tokenizer, tmp_path):
    save(tmp_path, saved_model("gpt2", tokenizer).to(torch.bfloat16), tokenizer)
    assert load_pretrained(tmp_path)[0].tok_emb.weight.dtype == torch.bfloat16
    assert load_pretrained(tmp_path, dtype=torch.float32)[0].head.weight.dtype == torch.float32


def test_missing_folder_config_weights_and_tokenizer_are_named(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="no folder at"):
        load_pretrained(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="has no config.json"):
        load_pretrained(tmp_path)
    hf = saved_model("gpt2", tokenizer)
    hf.config.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="holds no weights: expected one of model.safetensors"):
        load_pretrained(tmp_path)
    hf.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="holds no tokenizer"):
        load_pretrained(tmp_path)


def test_unsupported_architecture_is_named(tmp_path):
    config = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64)
    transformers.BertForMaskedLM(config).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="BertForMaskedLM model, which TinyLM cannot run.*'bert'"):
        load_pretrained(tmp_path)


@pytest.mark.parametrize("kind, field, value, weight", [
    ("gpt2", "n_embd", 64, "wte.weight"),
    ("gpt2", "n_inner", 100, "h.0.mlp.c_fc.weight"),
    ("llama", "num_key_value_heads", 4, "layers.0.self_attn.k_proj.weight"),
    ("llama", "vocab_size", 299, "embed_tokens.weight"),
])
def test_weights_that_do_not_fit_the_config_are_refused(kind, field, value, weight, tokenizer,
                                                        tmp_path):
    save(tmp_path, saved_model(kind, tokenizer), tokenizer)
    fields = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**fields, field: value}))
    with pytest.raises(ValueError, match=f"weight {weight} has shape .* do not belong together"):
        load_pretrained(tmp_path)


def test_pickled_code_is_refused_not_run(tokenizer, tmp_path):
    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('code from the file ran')",))

    hf = saved_model("gpt2", tokenizer)
    _torch_save_folder(tmp_path, hf, tokenizer, {"wte.weight": Boom()})
    with pytest.raises(ValueError, match="weights_only=True"):
        load_pretrained(tmp_path)


def test_lesson10_checker_accepts_a_correct_answer_written_differently(capsys):
    """Copies, .t().contiguous(), a head cloned from wte, a loop over the given names: all right."""
    from course_lib.checks import check_gpt2_to_tinylm

    ours = {"ln_1": "norm1", "ln_2": "norm2", "c_attn": "qkv", "attn.c_proj": "attn.proj",
            "c_fc": "up", "mlp.c_proj": "mlp.down"}

    def gpt2_to_tinylm(hf, n_layers):
        out = {"tok_emb.weight": hf["wte.weight"].clone(), "head.weight": hf["wte.weight"].clone(),
               "pos_emb.weight": hf["wpe.weight"] + 0, "norm.weight": hf["ln_f.weight"].clone(),
               "norm.bias": hf["ln_f.bias"].clone()}
        for name, t in hf.items():
            if not name.startswith("h.") or name.endswith(".attn.bias"):
                continue
            for a, b in ours.items():
                name = name.replace(a, b)
            out["blocks." + name[2:]] = t.t().contiguous() if t.ndim == 2 else t.clone()
        assert len(out) == 5 + 12 * n_layers
        return out

    check_gpt2_to_tinylm(gpt2_to_tinylm)
    import nbformat
    from course_lib.grading.partial import stored_counts
    lesson = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / "10_real_models.ipynb", as_version=4)
    assert capsys.readouterr().out == f"gpt2_to_tinylm: {stored_counts(lesson)['gpt2_to_tinylm']} checks passed\n"


def test_lesson10_checker_catches_an_in_place_transpose_of_a_given_tensor():
    from course_lib.checks import check_gpt2_to_tinylm
    from course_lib.convert import tinylm_state_dict
    from course_lib.model import ModelConfig

    def gpt2_to_tinylm(hf, n_layers):
        (V, C), (P, _) = hf["wte.weight"].shape, hf["wpe.weight"].shape
        out = tinylm_state_dict(ModelConfig(V, P, C, 1, n_layers), hf)
        hf["h.0.mlp.c_fc.bias"].mul_(1.0001)
        return out

    with pytest.raises(AssertionError, match="the given state dict was changed"):
        check_gpt2_to_tinylm(gpt2_to_tinylm)


def test_unreadable_config_and_bad_shard_index_are_named(tokenizer, tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="cannot read .*config.json as JSON"):
        load_pretrained(tmp_path)
    saved_model("gpt2", tokenizer).config.save_pretrained(tmp_path)
    index = {"weight_map": {"wte.weight": "../elsewhere.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="lists the shard '../elsewhere.safetensors', which is not"):
        load_pretrained(tmp_path)
