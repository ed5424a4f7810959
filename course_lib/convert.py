"""Real models in TinyLM's own code: Hugging Face configs and weights translated to course_lib's.

    config_from_dict(fields)        a config.json's fields (GPT-2 or Llama family) -> ModelConfig
    tinylm_state_dict(config, hf)   Hugging Face parameter names and layouts -> TinyLM's
    from_transformers(hf_model)     a GPT2LMHeadModel or LlamaForCausalLM -> TinyLM, same weights

The other library's names (`c_attn`, `q_proj`, ...) live only in this module. Two layouts
differ from ours and are converted here, where it is said why:

- GPT-2 stores its linear maps in `Conv1D` modules, whose weight is (in, out): the
  transpose of nn.Linear's (out, in). Every GPT-2 matrix is transposed on the way in.
- Llama applies RoPE "rotate-half": channel i turns with channel i + D/2. Lesson 05's
  apply_rope turns interleaved pairs (2i, 2i + 1). Reordering the rows of the q and k
  projections inside each head (row i -> 2i, row i + D/2 -> 2i + 1) makes one rotation
  the other; q . k is unchanged because q and k are reordered alike, and v is untouched.
"""
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


def _gpt2_state(config, hf):
    sd = {"tok_emb.weight": hf["wte.weight"], "pos_emb.weight": hf["wpe.weight"],
          "norm.weight": hf["ln_f.weight"], "norm.bias": hf["ln_f.bias"]}
    for i in range(config.n_layers):
        h, b = f"h.{i}.", f"blocks.{i}."
        sd |= {b + "norm1.weight": hf[h + "ln_1.weight"], b + "norm1.bias": hf[h + "ln_1.bias"],
               b + "norm2.weight": hf[h + "ln_2.weight"], b + "norm2.bias": hf[h + "ln_2.bias"],
               # Conv1D keeps (in, out); nn.Linear wants (out, in): transpose.
               b + "attn.qkv.weight": hf[h + "attn.c_attn.weight"].T,
               b + "attn.qkv.bias": hf[h + "attn.c_attn.bias"],
               b + "attn.proj.weight": hf[h + "attn.c_proj.weight"].T,
               b + "attn.proj.bias": hf[h + "attn.c_proj.bias"],
               b + "mlp.up.weight": hf[h + "mlp.c_fc.weight"].T, b + "mlp.up.bias": hf[h + "mlp.c_fc.bias"],
               b + "mlp.down.weight": hf[h + "mlp.c_proj.weight"].T,
               b + "mlp.down.bias": hf[h + "mlp.c_proj.bias"]}
    sd["head.weight"] = sd["tok_emb.weight"] if config.tie_embeddings else hf["lm_head.weight"]
    return sd


def _llama_state(config, hf):
    sd = {"tok_emb.weight": hf["embed_tokens.weight"], "norm.weight": hf["norm.weight"]}
    for i in range(config.n_layers):
        h, b = f"layers.{i}.", f"blocks.{i}."
        q = _rotate_half_to_interleaved(hf[h + "self_attn.q_proj.weight"], config.n_heads)
        k = _rotate_half_to_interleaved(hf[h + "self_attn.k_proj.weight"], config.kv_heads)
        sd |= {b + "norm1.weight": hf[h + "input_layernorm.weight"],
               b + "norm2.weight": hf[h + "post_attention_layernorm.weight"],
               b + "attn.qkv.weight": torch.cat([q, k, hf[h + "self_attn.v_proj.weight"]]),
               b + "attn.proj.weight": hf[h + "self_attn.o_proj.weight"],
               b + "mlp.gate.weight": hf[h + "mlp.gate_proj.weight"],
               b + "mlp.up.weight": hf[h + "mlp.up_proj.weight"],
               b + "mlp.down.weight": hf[h + "mlp.down_proj.weight"]}
    sd["head.weight"] = sd["tok_emb.weight"] if config.tie_embeddings else hf["lm_head.weight"]
    return sd


def tinylm_state_dict(config, hf_state):
    """TinyLM's state dict, from Hugging Face parameters (a GPT-2 or Llama state dict) for `config`.

    Raises ValueError naming the first missing weight.
    """
    hf = _strip_prefix(hf_state)
    build = _llama_state if config.positions == "rope" else _gpt2_state
    try:
        return build(config, hf)
    except KeyError as err:
        raise ValueError(f"the weights have no {err.args[0]!r}, which a {config} needs; "
                         f"were they saved from a different model?") from None


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
