"""Answers to lesson 10's exercise: the reference, and known-wrong ones with their hints."""
from answers import Wrong

REFERENCE = {
    "previous_token_scores": """\
T = weights.shape[-1]
below = torch.ones(T, T, dtype=torch.bool, device=weights.device).tril(-1) & ~torch.ones(
    T, T, dtype=torch.bool, device=weights.device).tril(-2)
return (weights * below).sum((-2, -1)) / (T - 1)""",
    "prefix_lm_mask": """\
from course_lib.attention import causal_mask
mask = causal_mask(T).astype(float)
mask[:, :n_prefix] = 0.0
return mask""",
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
    # previous_token_scores
    Wrong("previous_token_scores", "the diagonal (each token's weight on itself)",
          "return weights.diagonal(dim1=-2, dim2=-1).mean(-1)", "one below the diagonal",
          inject=True),
    Wrong("previous_token_scores", "divides by T, counting query 0 as a 0",
          "return weights.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / weights.shape[-1]",
          "query 0 is left out"),
    Wrong("previous_token_scores", "the sum, not the mean",
          "return weights.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1)", "not their sum"),
    Wrong("previous_token_scores", "the largest, not the mean",
          "return weights.diagonal(offset=-1, dim1=-2, dim2=-1).amax(-1)", "not the largest"),
    Wrong("previous_token_scores", "one number for all heads",
          "return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean()", "one number for all heads"),
    Wrong("previous_token_scores", "keeps the query axis",
          "return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1, keepdim=True)",
          "still has an axis of queries"),
    Wrong("previous_token_scores", "the first key, not the previous one",
          "return weights[..., 1:, 0].mean(-1)", "not the first key"),
    Wrong("previous_token_scores", "float32 for any input",
          "return weights.float().diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)",
          "in the weights' dtype"),
    Wrong("previous_token_scores", "through NumPy",
          "return np.diagonal(weights.numpy(), offset=-1, axis1=-2, axis2=-1).mean(-1)",
          "got a NumPy array"),
    Wrong("previous_token_scores", "a pair", "s = weights.diagonal(offset=-1, dim1=-2, dim2=-1)\nreturn s.mean(-1), s",
          "got tuple"),
    Wrong("previous_token_scores", "a Python list",
          "return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1).tolist()", "got list"),
    # prefix_lm_mask
    Wrong("prefix_lm_mask", "causal only, the prefix ignored",
          "return np.where(np.tril(np.ones((T, T), dtype=bool)), 0.0, -np.inf)",
          "the prefix's positions see each other in both directions", inject=True),
    Wrong("prefix_lm_mask", "the prefix one too long",
          "i, j = np.arange(T)[:, None], np.arange(T)[None, :]\n"
          "return np.where((j <= i) | (j <= n_prefix), 0.0, -np.inf)", "not j <= n_prefix"),
    Wrong("prefix_lm_mask", "prefix rows see everything",
          "i, j = np.arange(T)[:, None], np.arange(T)[None, :]\n"
          "return np.where((j <= i) | (j < n_prefix) | (i < n_prefix), 0.0, -np.inf)",
          "nothing after it"),
    Wrong("prefix_lm_mask", "no mask at all", "return np.zeros((T, T))",
          "positions after it are causal"),
    Wrong("prefix_lm_mask", "hides the diagonal",
          "i, j = np.arange(T)[:, None], np.arange(T)[None, :]\n"
          "return np.where((j < i) | (j < n_prefix), 0.0, -np.inf)", "j <= i, not j < i"),
    Wrong("prefix_lm_mask", "polarity swapped",
          "i, j = np.arange(T)[:, None], np.arange(T)[None, :]\n"
          "return np.where((j <= i) | (j < n_prefix), -np.inf, 0.0)", "polarity is swapped"),
    Wrong("prefix_lm_mask", "a boolean mask",
          "i, j = np.arange(T)[:, None], np.arange(T)[None, :]\nreturn (j <= i) | (j < n_prefix)",
          "the mask is boolean"),
    Wrong("prefix_lm_mask", "-1e9 for hidden",
          "i, j = np.arange(T)[:, None], np.arange(T)[None, :]\n"
          "return np.where((j <= i) | (j < n_prefix), 0.0, -1e9)", "-1e9 is not -inf"),
    Wrong("prefix_lm_mask", "indices sliced from a 128-long table",
          "i, j = np.arange(128)[:T, None], np.arange(128)[None, :T]\n"
          "return np.where((j <= i) | (j < n_prefix), 0.0, -np.inf)",
          "not by slicing a table of a fixed size"),
    Wrong("prefix_lm_mask", "a 64 x 64 causal table, sliced, the prefix opened",
          "m = np.triu(np.full((64, 64), -np.inf), k=1)[:T, :T].copy()\n"
          "m[:, :n_prefix] = 0.0\nreturn m", "not by slicing a table of a fixed size"),
    Wrong("prefix_lm_mask", "a 256 x 256 table, sliced (issue 44)",
          "table = np.where(np.arange(256)[None, :] <= np.arange(256)[:, None], 0.0, -np.inf)\n"
          "m = table[:T, :T].copy()\nm[:, :n_prefix] = 0.0\nreturn m",
          "not by slicing a table of a fixed size"),
    Wrong("prefix_lm_mask", "a torch tensor",
          "i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]\n"
          "return torch.where((j <= i) | (j < n_prefix), 0.0, float('-inf'))", "got a torch tensor"),
    Wrong("prefix_lm_mask", "an int mask of 0 and 1",
          "i, j = np.arange(T)[:, None], np.arange(T)[None, :]\n"
          "return ((j > i) & (j >= n_prefix)).astype(int)", "not a float dtype"),
    # gpt2_to_tinylm
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
    Wrong("gpt2_to_tinylm", "only the first block",
          _loop().replace("for i in range(n_layers):", "for i in range(1):"),
          "is missing altogether"),
    Wrong("gpt2_to_tinylm", "q, k and v as three entries", _loop(weight="""\
w if theirs.startswith('ln') else w.T
        if theirs == "attn.c_attn":
            del out[f"blocks.{i}.attn.qkv.weight"]
            for name, part in zip("qkv", w.T.chunk(3, dim=0)):
                out[f"blocks.{i}.attn.{name}.weight"] = part
            continue""").replace(
        'out[f"blocks.{i}.{ours}.weight"] = w if', 'out[f"blocks.{i}.{ours}.weight"] = w if'),
          "the fused attn.qkv is missing"),
    Wrong("gpt2_to_tinylm", "hard-codes GPT-2 small's 12 layers",
          _loop().replace("for i in range(n_layers):", "for i in range(12):"),
          "loop over range(n_layers)"),
    Wrong("gpt2_to_tinylm", "keeps the transformer. prefix",
          _loop().replace("return out", 'return {"transformer." + k: t for k, t in out.items()}'),
          "names are not TinyLM's"),
    Wrong("gpt2_to_tinylm", "writes NumPy arrays into the given dict",
          "for name in list(hf):\n    hf[name] = hf[name].numpy()\nreturn {}",
          "leave the given one as it was"),
    Wrong("gpt2_to_tinylm", "integer keys", "return {i: t for i, t in enumerate(hf.values())}",
          "not names"),
    Wrong("gpt2_to_tinylm", "returns nothing", _loop().replace("return out", "out = out"),
          "return the new dict"),
]

ALTERNATIVES = [
    ("previous_token_scores", "index the previous key with arange", """\
T = weights.shape[-1]
t = torch.arange(1, T)
return weights[..., t, t - 1].mean(-1)"""),
    ("previous_token_scores", "the transpose's upper diagonal", """\
return torch.diagonal(weights.transpose(-1, -2), 1, -2, -1).sum(-1) / (weights.shape[-1] - 1)"""),
    ("prefix_lm_mask", "np.triu and a slice", """\
mask = np.triu(np.full((T, T), -np.inf), k=1)
mask[:n_prefix, :n_prefix] = 0.0
return mask"""),
    ("prefix_lm_mask", "nested loops", """\
mask = np.empty((T, T))
for i in range(T):
    for j in range(T):
        mask[i, j] = 0.0 if j <= i or j < n_prefix else float("-inf")
return mask"""),
    ("gpt2_to_tinylm", "built with a dict comprehension per block", """\
out = {"tok_emb.weight": hf["wte.weight"], "pos_emb.weight": hf["wpe.weight"],
       "norm.weight": hf["ln_f.weight"], "norm.bias": hf["ln_f.bias"], "head.weight": hf["wte.weight"]}
pairs = [("ln_1", "norm1"), ("ln_2", "norm2"), ("attn.c_attn", "attn.qkv"),
         ("attn.c_proj", "attn.proj"), ("mlp.c_fc", "mlp.up"), ("mlp.c_proj", "mlp.down")]
for i in range(n_layers):
    out.update({f"blocks.{i}.{b}.{p}": (hf[f"h.{i}.{a}.{p}"].t() if p == "weight" and not a.startswith("ln")
                                        else hf[f"h.{i}.{a}.{p}"])
                for a, b in pairs for p in ("weight", "bias")})
return out"""),
]
