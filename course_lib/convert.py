"""Real models in TinyLM's own code: Hugging Face configs and weights translated to course_lib's.

    config_from_dict(fields)        a config.json's fields (GPT-2 or Llama family) -> ModelConfig
    tinylm_state_dict(config, hf)   Hugging Face parameter names and layouts -> TinyLM's
    from_transformers(hf_model)     a GPT2LMHeadModel or LlamaForCausalLM -> TinyLM, same weights
    load_pretrained(folder)         a local Hugging Face model folder -> (TinyLM, its tokenizer)

The other library's names (`c_attn`, `q_proj`, ...) live only in this module. Two layouts
differ from ours and are converted here, where it is said why:

- GPT-2 stores its linear maps in `Conv1D` modules, whose weight is (in, out): the
  transpose of nn.Linear's (out, in). Every GPT-2 matrix is transposed on the way in.
- Llama applies RoPE "rotate-half": channel i turns with channel i + D/2. Lesson 05's
  apply_rope turns interleaved pairs (2i, 2i + 1). Reordering the rows of the q and k
  projections inside each head (row i -> 2i, row i + D/2 -> 2i + 1) makes one rotation
  the other; q . k is unchanged because q and k are reordered alike, and v is untouched.

Loading a folder never runs code from it: weights are read with safetensors or
torch.load(weights_only=True), and the tokenizer with trust_remote_code=False.
"""
import json
from pathlib import Path

import torch

from course_lib.model import ModelConfig, TinyLM

GPT2_TYPES = ("gpt2",)
LLAMA_TYPES = ("llama", "mistral")


def _need(fields, name, family):
    if name not in fields or fields[name] is None:
        raise ValueError(f"the {family} config has no {name!r}; a config.json of this family "
                         f"must give it")
    return fields[name]


def _refuse_unless(fields, name, allowed, why):
    value = fields.get(name, allowed[0])
    if value not in allowed:
        raise ValueError(f"config field {name}={value!r} is not supported: {why}")


def _gpt2_config(f):
    _refuse_unless(f, "activation_function", ("gelu_new", "gelu", "gelu_pytorch_tanh"),
                   "TinyLM's MLP uses GELU, exact or tanh-approximated")
    _refuse_unless(f, "scale_attn_weights", (True,), "TinyLM always scales scores by 1/sqrt(D)")
    _refuse_unless(f, "scale_attn_by_inverse_layer_idx", (False,),
                   "TinyLM does not scale attention by layer")
    _refuse_unless(f, "reorder_and_upcast_attn", (False,), "TinyLM has no such option")
    _refuse_unless(f, "add_cross_attention", (False,), "TinyLM is decoder-only, without cross-attention")
    C = _need(f, "n_embd", "GPT-2")
    return ModelConfig(
        vocab_size=_need(f, "vocab_size", "GPT-2"), max_len=_need(f, "n_positions", "GPT-2"),
        d_model=C, n_heads=_need(f, "n_head", "GPT-2"), n_layers=_need(f, "n_layer", "GPT-2"),
        d_ff=f.get("n_inner") or 4 * C, attn_bias=True,
        gelu_approx="none" if f.get("activation_function", "gelu_new") == "gelu" else "tanh",
        norm_eps=float(f.get("layer_norm_epsilon", 1e-5)),
        tie_embeddings=f.get("tie_word_embeddings", True))


def _rope_base(f):
    """RoPE's base from either layout of config.json: `rope_theta`, or `rope_parameters`."""
    params = f.get("rope_parameters") or {}
    scaling = f.get("rope_scaling") or {}
    for source, name in ((params, "rope_parameters"), (scaling, "rope_scaling")):
        kind = source.get("rope_type", source.get("type", "default"))
        if kind != "default":
            raise ValueError(f"config field {name} has rope_type={kind!r}, which is not "
                             f"supported: TinyLM's RoPE is the plain (default) one")
    return float(params.get("rope_theta", f.get("rope_theta", 10000.0)))


def _llama_config(f):
    _refuse_unless(f, "hidden_act", ("silu",), "TinyLM's SwiGLU gates with SiLU")
    _refuse_unless(f, "attention_bias", (False,), "Llama-family attention in TinyLM has no biases")
    _refuse_unless(f, "mlp_bias", (False,), "TinyLM's SwiGLU has no biases")
    _refuse_unless(f, "sliding_window", (None,), "TinyLM's attention sees the whole context")
    rope_base = _rope_base(f)
    C = _need(f, "hidden_size", "Llama")
    H = _need(f, "num_attention_heads", "Llama")
    if f.get("head_dim") not in (None, C // H):
        raise ValueError(f"config field head_dim={f['head_dim']} is not supported: TinyLM's head "
                         f"size is hidden_size / num_attention_heads = {C // H}")
    return ModelConfig(
        vocab_size=_need(f, "vocab_size", "Llama"),
        max_len=_need(f, "max_position_embeddings", "Llama"),
        d_model=C, n_heads=H, n_layers=_need(f, "num_hidden_layers", "Llama"),
        n_kv_heads=f.get("num_key_value_heads") or H, d_ff=_need(f, "intermediate_size", "Llama"),
        norm="rmsnorm", mlp="swiglu", positions="rope", rope_base=rope_base,
        norm_eps=float(f.get("rms_norm_eps", 1e-6)),
        tie_embeddings=f.get("tie_word_embeddings", False))


def config_from_dict(fields):
    """The ModelConfig of a Hugging Face config (the dict of a config.json), GPT-2 or Llama family.

    Raises ValueError naming the field when the config asks for something TinyLM lacks.
    """
    if not isinstance(fields, dict):
        raise TypeError(f"expected the dict of a config.json, got {type(fields).__name__}")
    kind = fields.get("model_type")
    if kind in GPT2_TYPES:
        return _gpt2_config(fields)
    if kind in LLAMA_TYPES:
        return _llama_config(fields)
    raise ValueError(f"config field model_type={kind!r} is not supported; TinyLM can run the "
                     f"GPT-2 family ({', '.join(GPT2_TYPES)}) and the Llama family "
                     f"({', '.join(LLAMA_TYPES)})")


def _strip_prefix(hf_state):
    """Names without the wrapper's prefix: `transformer.h.0...` and `h.0...` are one weight."""
    out = {}
    for name, tensor in hf_state.items():
        for prefix in ("transformer.", "model."):
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        out[name] = tensor
    return out


def _rotate_half_to_interleaved(w, n_heads):
    """Reorder each head's rows of a q or k projection from rotate-half to interleaved pairs.

    Shapes: (n_heads * D, C) -> (n_heads * D, C)
    """
    D = w.shape[0] // n_heads
    order = torch.stack([torch.arange(D // 2), torch.arange(D // 2) + D // 2], dim=1).flatten()
    return w.view(n_heads, D, -1)[:, order].reshape(w.shape)  # row 2i <- i, row 2i+1 <- i + D/2


class _Weights:
    """Hugging Face weights by name, each checked against the shape the config gives it."""

    def __init__(self, config, hf):
        self.config, self.hf = config, hf

    def __call__(self, name, *shape):
        if name not in self.hf:
            raise ValueError(f"the weights have no {name!r}, which a {self.config} needs; "
                             f"were they saved from a different model?")
        tensor = self.hf[name]
        if tuple(tensor.shape) != shape:
            raise ValueError(f"weight {name} has shape {tuple(tensor.shape)}, but config.json "
                             f"({self.config}) gives it {shape}; the weights and config.json "
                             f"do not belong together")
        return tensor


def _gpt2_state(config, hf):
    """GPT-2's names -> TinyLM's. Buffers some saved files hold (`h.0.attn.bias`, the causal
    mask of older transformers versions, and `attn.masked_bias`) are not weights: not read."""
    w = _Weights(config, hf)
    V, C, F = config.vocab_size, config.d_model, config.ff_width
    sd = {"tok_emb.weight": w("wte.weight", V, C), "pos_emb.weight": w("wpe.weight", config.max_len, C),
          "norm.weight": w("ln_f.weight", C), "norm.bias": w("ln_f.bias", C)}
    for i in range(config.n_layers):
        h, b = f"h.{i}.", f"blocks.{i}."
        sd |= {b + "norm1.weight": w(h + "ln_1.weight", C), b + "norm1.bias": w(h + "ln_1.bias", C),
               b + "norm2.weight": w(h + "ln_2.weight", C), b + "norm2.bias": w(h + "ln_2.bias", C),
               # Conv1D keeps (in, out); nn.Linear wants (out, in): transpose.
               b + "attn.qkv.weight": w(h + "attn.c_attn.weight", C, 3 * C).T,
               b + "attn.qkv.bias": w(h + "attn.c_attn.bias", 3 * C),
               b + "attn.proj.weight": w(h + "attn.c_proj.weight", C, C).T,
               b + "attn.proj.bias": w(h + "attn.c_proj.bias", C),
               b + "mlp.up.weight": w(h + "mlp.c_fc.weight", C, F).T,
               b + "mlp.up.bias": w(h + "mlp.c_fc.bias", F),
               b + "mlp.down.weight": w(h + "mlp.c_proj.weight", F, C).T,
               b + "mlp.down.bias": w(h + "mlp.c_proj.bias", C)}
    sd["head.weight"] = sd["tok_emb.weight"] if config.tie_embeddings else w("lm_head.weight", V, C)
    return sd


def _llama_state(config, hf):
    w = _Weights(config, hf)
    V, C, F = config.vocab_size, config.d_model, config.ff_width
    Q, KV = config.n_heads * config.d_head, config.kv_heads * config.d_head
    sd = {"tok_emb.weight": w("embed_tokens.weight", V, C), "norm.weight": w("norm.weight", C)}
    for i in range(config.n_layers):
        h, b = f"layers.{i}.", f"blocks.{i}."
        q = _rotate_half_to_interleaved(w(h + "self_attn.q_proj.weight", Q, C), config.n_heads)
        k = _rotate_half_to_interleaved(w(h + "self_attn.k_proj.weight", KV, C), config.kv_heads)
        sd |= {b + "norm1.weight": w(h + "input_layernorm.weight", C),
               b + "norm2.weight": w(h + "post_attention_layernorm.weight", C),
               b + "attn.qkv.weight": torch.cat([q, k, w(h + "self_attn.v_proj.weight", KV, C)]),
               b + "attn.proj.weight": w(h + "self_attn.o_proj.weight", C, Q),
               b + "mlp.gate.weight": w(h + "mlp.gate_proj.weight", F, C),
               b + "mlp.up.weight": w(h + "mlp.up_proj.weight", F, C),
               b + "mlp.down.weight": w(h + "mlp.down_proj.weight", C, F)}
    sd["head.weight"] = sd["tok_emb.weight"] if config.tie_embeddings else w("lm_head.weight", V, C)
    return sd


def tinylm_state_dict(config, hf_state):
    """TinyLM's state dict, from Hugging Face parameters (a GPT-2 or Llama state dict) for `config`.

    Raises ValueError naming the first weight that is missing or whose shape does not fit.
    The input is not changed; the result may share tensors with it.
    """
    build = _llama_state if config.positions == "rope" else _gpt2_state
    return build(config, _strip_prefix(hf_state))


def load_state(model, state):
    """Load a converted state dict into a TinyLM, refusing any shape that does not fit its config."""
    own = model.state_dict()
    for name, tensor in state.items():
        if name in own and tuple(tensor.shape) != tuple(own[name].shape):
            raise ValueError(f"weight {name} has shape {tuple(tensor.shape)}, but the config "
                             f"{model.config} needs {tuple(own[name].shape)}; the weights and "
                             f"config.json do not belong together")
    missing = sorted(set(own) - set(state))
    if missing:
        raise ValueError(f"no weights were found for {missing[:4]}")
    model.load_state_dict(state)
    return model


def from_transformers(hf_model):
    """A TinyLM with the weights of a `transformers` GPT2LMHeadModel or LlamaForCausalLM.

    Same config, same parameters, in the model's dtype: the logits agree to float rounding.
    """
    config = config_from_dict(hf_model.config.to_dict())
    state = tinylm_state_dict(config, {k: v.detach() for k, v in hf_model.state_dict().items()})
    dtype = next(hf_model.parameters()).dtype
    model = TinyLM(config).to(dtype)
    return load_state(model, state).eval()


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json",
                "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model")


def _read_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {path} as JSON: {err}") from None


def _read_weights(path):
    """One weights file as {name: tensor}; never unpickles anything but tensors."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file
        return load_file(str(path))
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # weights_only refuses pickled code: say so rather than run it
        raise ValueError(f"cannot read {path} with torch.load(weights_only=True): {err}") from None


def _load_weights(folder):
    """All of a folder's weights, from one file or from the shards an index file lists."""
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if not name.endswith(".index.json"):
            return _read_weights(path)
        weight_map = _read_json(path).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ValueError(f"{path} has no 'weight_map' of weight names to shard files")
        state = {}
        for shard in sorted(set(weight_map.values())):
            if Path(shard).name != shard or not (folder / shard).is_file():
                raise ValueError(f"{path} lists the shard {shard!r}, which is not a file in {folder}")
            state |= _read_weights(folder / shard)
        return state
    raise ValueError(f"{folder} holds no weights: expected one of {', '.join(WEIGHT_FILES)}")


def load_pretrained(folder, dtype=None):
    """A TinyLM and its tokenizer, from a local Hugging Face folder of a GPT-2 or Llama model.

    The folder holds config.json, the weights (model.safetensors or pytorch_model.bin, or
    their sharded index) and the tokenizer's files, as save_pretrained or a download from
    the Hub leaves them. Nothing is downloaded and no code from the folder runs. The model
    keeps the stored dtype unless `dtype` is given, and is returned in eval mode.

    Returns (model, tokenizer): a TinyLM, and the folder's transformers.AutoTokenizer.
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ValueError(f"no folder at {folder}; give the folder that holds config.json "
                         f"and the weights of a Hugging Face model")
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder} has no config.json, so the model's shape is unknown; "
                         f"a Hugging Face model folder holds config.json beside its weights")
    fields = _read_json(folder / "config.json")
    try:
        config = config_from_dict(fields)
    except ValueError as err:
        if not isinstance(fields, dict) or fields.get("model_type") in GPT2_TYPES + LLAMA_TYPES:
            raise
        kind = ", ".join(fields.get("architectures") or []) or "this architecture"
        raise ValueError(f"{folder} holds a {kind} model, which TinyLM cannot run: {err}") from None
    state = tinylm_state_dict(config, _load_weights(folder))
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ValueError(f"{folder} holds no tokenizer: expected one of "
                         f"{', '.join(TOKENIZER_FILES)} beside config.json")
    dtype = dtype or state["tok_emb.weight"].dtype
    model = load_state(TinyLM(config).to(dtype), {k: v.to(dtype) for k, v in state.items()})

    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    return model.eval(), tokenizer
