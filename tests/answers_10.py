"""Answers to lesson 10's exercise: the reference, and known-wrong ones with their hints."""
from answers import Wrong

REFERENCE = {
    "gpt2_to_tinylm": """\
from course_lib.convert import tinylm_state_dict
from course_lib.model import ModelConfig
(V, C), (max_len, _) = hf["wte.weight"].shape, hf["wpe.weight"].shape
config = ModelConfig(vocab_size=V, max_len=max_len, d_model=C, n_heads=1, n_layers=n_layers)
return tinylm_state_dict(config, hf)""",
}

_NAMES = ('{"ln_1": "norm1", "ln_2": "norm2", "attn.c_attn": "attn.qkv", "attn.c_proj": "attn.proj",'
          ' "mlp.c_fc": "mlp.up", "mlp.c_proj": "mlp.down"}')
_TOP = ('out = {"tok_emb.weight": hf["wte.weight"], "pos_emb.weight": hf["wpe.weight"],\n'
        '       "norm.weight": hf["ln_f.weight"], "norm.bias": hf["ln_f.bias"],\n'
        '       "head.weight": hf["wte.weight"]}\n')


def _loop(weight="w if theirs.startswith('ln') else w.T", bias=True, names=_NAMES, top=_TOP):
    """A whole answer: the top-level weights, then a loop over the blocks with one line changed."""
    body = top + f"names = {names}\nfor i in range(n_layers):\n    for theirs, ours in names.items():\n"
    body += f'        w = hf[f"h.{{i}}.{{theirs}}.weight"]\n'
    body += f'        out[f"blocks.{{i}}.{{ours}}.weight"] = {weight}\n'
    if bias:
        body += '        out[f"blocks.{i}.{ours}.bias"] = hf[f"h.{i}.{theirs}.bias"]\n'
    return body + "return out"


WRONG = [
    Wrong("gpt2_to_tinylm", "forgets the Conv1D transpose", _loop(weight="w"),
          "Conv1D stores its weight as (in, out)", inject=True),
    Wrong("gpt2_to_tinylm", "transposes all but the square attention output", _loop(
        weight="w if theirs.startswith('ln') or theirs == 'attn.c_proj' else w.T"),
          "take h.0.attn.c_proj.weight.T"),
    Wrong("gpt2_to_tinylm", "reshapes instead of transposing", _loop(
        weight="w if theirs.startswith('ln') else w.reshape(w.shape[1], w.shape[0])"),
          "reshape (or view) keeps the numbers in memory order"),
    Wrong("gpt2_to_tinylm", "splits q, k, v and puts them back as k, q, v", _loop(weight="""\
w if theirs.startswith('ln') else w.T
        if theirs == "attn.c_attn":
            q, k, v = w.T.chunk(3, dim=0)
            out[f"blocks.{i}.attn.qkv.weight"] = torch.cat([k, q, v])"""),
          "keep GPT-2's order q, k, v"),
    Wrong("gpt2_to_tinylm", "forgets the biases", _loop(bias=False),
          "GPT-2 has biases on every projection"),
    Wrong("gpt2_to_tinylm", "leaves out the tied head", _loop(top=_TOP.replace(
        ',\n       "head.weight": hf["wte.weight"]', "")),
          "GPT-2's head is tied"),
    Wrong("gpt2_to_tinylm", "swaps ln_1 and ln_2", _loop(names=_NAMES.replace(
        '"ln_1": "norm1", "ln_2": "norm2"', '"ln_1": "norm2", "ln_2": "norm1"')),
          "ln_1 is the norm before attention"),
    Wrong("gpt2_to_tinylm", "transposes in place in the given dict", """\
for name in list(hf):
    if name.endswith("weight") and hf[name].ndim == 2 and name.startswith("h."):
        hf[name] = hf[name].T
""" + _loop(weight="w"),
          "leave the given one as it was"),
    Wrong("gpt2_to_tinylm", "renames every key, the causal-mask buffers too", """\
out = {}
for name, t in hf.items():
    for a, b in (("wte", "tok_emb"), ("wpe", "pos_emb"), ("ln_f", "norm"), ("h.", "blocks."),
                 ("ln_1", "norm1"), ("ln_2", "norm2"), ("c_attn", "qkv"), ("attn.c_proj", "attn.proj"),
                 ("c_fc", "up"), ("mlp.c_proj", "mlp.down")):
        name = name.replace(a, b)
    out[name] = t.T if t.ndim == 2 and name.startswith("blocks.") else t
out["head.weight"] = out["tok_emb.weight"]
return out""",
          "h.N.attn.bias is a causal-mask buffer"),
    Wrong("gpt2_to_tinylm", "converts everything to float32",
          _loop(weight="(w if theirs.startswith('ln') else w.T).float()"),
          "keep the given tensors' dtype"),
    Wrong("gpt2_to_tinylm", "returns nothing", _loop().replace("return out", "out = out"),
          "return the new dict"),
]
