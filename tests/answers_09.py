"""Answers to lesson 09's exercises (what it costs): the reference, and known-wrong ones."""
from answers import Wrong

REFERENCE = {
    "params_from_config": """\
from course_lib.convert import config_from_dict
from course_lib.costs import count_params
return count_params(config_from_dict(dict(fields, model_type="llama", max_position_embeddings=1)))""",
    "tiled_attention": """\
from course_lib.checks.lesson09 import _tiled
return _tiled(q, k, v, block_size)""",
}

_FIELDS = """\
C, F, L = fields["hidden_size"], fields["intermediate_size"], fields["num_hidden_layers"]
V = fields["vocab_size"]
kv = fields["num_key_value_heads"] * (C // fields["num_attention_heads"])
head = 0 if fields["tie_word_embeddings"] else V * C
"""

_TILED = """\
T, D = q.shape
out = torch.empty(T, v.shape[1], dtype=q.dtype)
for qs in range(0, T, block_size):
    qb = q[qs:qs + block_size] / math.sqrt(D)
    n = qb.shape[0]
    m = torch.full((n, 1), float("-inf"), dtype=q.dtype)
    l, acc = torch.zeros(n, 1, dtype=q.dtype), torch.zeros(n, v.shape[1], dtype=q.dtype)
    for ks in range(0, qs + n, block_size):
        kb, vb = k[ks:ks + block_size], v[ks:ks + block_size]
        s = qb @ kb.T
        rows, cols = torch.arange(n)[:, None] + qs, torch.arange(kb.shape[0])[None, :] + ks
        s = s.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l * torch.exp(m - m_new) + p.sum(dim=1, keepdim=True)
        acc = acc * torch.exp(m - m_new) + p @ vb
        m = m_new
    out[qs:qs + n] = acc / l
return out"""

WRONG = [
    # params_from_config
    Wrong("params_from_config", "no grouped-query attention",
          _FIELDS + "return V * C + L * (4 * C * C + 3 * C * F + 2 * C) + C + head",
          "grouped-query attention", inject=True),
    Wrong("params_from_config", "MLP without the gate",
          _FIELDS + "return V * C + L * (2 * C * C + 2 * C * kv + 2 * C * F + 2 * C) + C + head",
          "SwiGLU has three matrices"),
    Wrong("params_from_config", "head always tied",
          _FIELDS + "return V * C + L * (2 * C * C + 2 * C * kv + 3 * C * F + 2 * C) + C",
          "a second vocab_size x hidden_size matrix"),
    Wrong("params_from_config", "norms forgotten",
          _FIELDS + "return V * C + L * (2 * C * C + 2 * C * kv + 3 * C * F) + head",
          "count the RMSNorms"),
    Wrong("params_from_config", "LayerNorm-sized norms",
          _FIELDS + "return V * C + L * (2 * C * C + 2 * C * kv + 3 * C * F + 4 * C) + 2 * C + head",
          "RMSNorm has a weight but no bias"),
    Wrong("params_from_config", "float division",
          "C = fields['hidden_size']\nkv = fields['num_key_value_heads'] * C / fields['num_attention_heads'] / 3\n"
          "return fields['vocab_size'] * C + kv",
          "return the count as an int"),
    Wrong("params_from_config", "changes the dict",
          "fields.update(model_type='llama', max_position_embeddings=1)\nfrom course_lib.convert import config_from_dict\n"
          "from course_lib.costs import count_params\nreturn count_params(config_from_dict(fields))",
          "do not add, remove or change entries"),
    # tiled_attention
    Wrong("tiled_attention", "never rescales",
          _TILED.replace("l * torch.exp(m - m_new)", "l").replace("acc * torch.exp(m - m_new)", "acc"),
          "multiply both the running sum of values and the normaliser", inject=True),
    Wrong("tiled_attention", "running sum of values not rescaled",
          _TILED.replace("acc * torch.exp(m - m_new)", "acc"),
          "rescale the running sum of values too"),
    Wrong("tiled_attention", "output rescaled but not the normaliser",
          _TILED.replace("l * torch.exp(m - m_new)", "l"),
          "rescale the normaliser as well as the output"),
    Wrong("tiled_attention", "mis-aligned causal block",
          _TILED.replace("[:, None] + qs", "[:, None]").replace("[None, :] + ks", "[None, :]"),
          "the causal mask must compare global positions"),
    Wrong("tiled_attention", "sees the future",
          _TILED.replace("range(0, qs + n, block_size)", "range(0, T, block_size)")
                .replace("s = s.masked_fill(cols > rows, float(\"-inf\"))", "pass"),
          "a query must not see keys after it"),
    Wrong("tiled_attention", "no 1/sqrt(D)",
          _TILED.replace("/ math.sqrt(D)", ""),
          "divide the scores by sqrt(D)"),
    Wrong("tiled_attention", "builds the T x T matrix",
          "scores = q @ k.T / math.sqrt(q.shape[1])\n"
          "scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float('-inf'))\n"
          "return torch.softmax(scores, dim=-1) @ v",
          "hold only one block of scores at a time"),
    Wrong("tiled_attention", "float64 result",
          _TILED.replace("dtype=q.dtype)\nfor", "dtype=torch.float64)\nfor"),
          "make new tensors with q's dtype"),
]
