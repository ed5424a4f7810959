"""Answers to lesson 09's exercises (what it costs): the reference, and known-wrong ones."""
from answers import Wrong

REFERENCE = {
    "params_from_config": """\
from course_lib.convert import config_from_dict
from course_lib.costs import count_params
return count_params(config_from_dict(dict(fields, model_type="llama", max_position_embeddings=1)))""",
    "attention_flops": """\
from course_lib.checks.lesson09 import _attention_flop_variants
return _attention_flop_variants(T, d_model, causal)["right"]""",
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
    Wrong("params_from_config", "a NumPy integer",
          _FIELDS + "return np.int64(V * C + L * (2 * C * C + 2 * C * kv + 3 * C * F + 2 * C) + C + head)",
          "a NumPy or torch number is not one"),
    Wrong("params_from_config", "a float that is whole",
          _FIELDS + "return float(V * C + L * (2 * C * C + 2 * C * kv + 3 * C * F + 2 * C) + C + head)",
          "use // rather than /"),
    Wrong("params_from_config", "a pair of None", "return None, None", "got tuple"),
    Wrong("params_from_config", "an MLP of 4C whatever the config",
          _FIELDS + "return V * C + L * (2 * C * C + 2 * C * kv + 3 * C * 4 * C + 2 * C) + C + head",
          "three SwiGLU matrices"),
    Wrong("params_from_config", "the head counted even when tied",
          _FIELDS + "return V * C + L * (2 * C * C + 2 * C * kv + 3 * C * F + 2 * C) + C + V * C",
          "with tie_word_embeddings true the head reuses"),
    # attention_flops
    Wrong("attention_flops", "every pair, although causal", "return 4 * d_model * T * T",
          "a causal kernel skips the hidden keys", inject=True),
    Wrong("attention_flops", "the diagonal left out",
          "pairs = T * (T - 1) // 2 if causal else T * T\nreturn 4 * d_model * pairs",
          "each query also meets its own key"),
    Wrong("attention_flops", "2C per pair (the weighted sum forgotten)",
          "pairs = T * (T + 1) // 2 if causal else T * T\nreturn 2 * d_model * pairs",
          "another 2C for adding its value"),
    Wrong("attention_flops", "multiplications only, sums counted twice",
          "pairs = T * (T + 1) // 2 if causal else T * T\nreturn 8 * d_model * pairs",
          "you counted more"),
    Wrong("attention_flops", "always causal", "return 4 * d_model * (T * (T + 1) // 2)",
          "with causal=False every query meets all T keys"),
    Wrong("attention_flops", "projections counted too",
          "pairs = T * (T + 1) // 2 if causal else T * T\nreturn 4 * d_model * pairs + 8 * T * d_model**2",
          "the q, k, v and output projections are not part of this count"),
    Wrong("attention_flops", "float division", "return 4 * d_model * (T * (T + 1) / 2 if causal else T * T)",
          "use // for the division by 2"),
    Wrong("attention_flops", "a NumPy integer",
          "t = np.arange(T)\nreturn (4 * d_model * (t + 1 if causal else np.full(T, T))).sum()",
          "a NumPy or torch number is not one"),
    Wrong("attention_flops", "a torch number",
          "t = torch.arange(T)\nreturn (4 * d_model * (t + 1 if causal else torch.full((T,), T))).sum()",
          "a NumPy or torch number is not one"),
    Wrong("attention_flops", "a bool for T = 1 tricks", "return True",
          "expected a Python int, got bool"),
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
    Wrong("tiled_attention", "running maximum starts at -1e9",
          _TILED.replace('m = torch.full((n, 1), float("-inf"), dtype=q.dtype)',
                         'm = torch.full((n, 1), -1e9, dtype=q.dtype)'),
          "not at a finite number"),
    Wrong("tiled_attention", "running maximum starts at -1e30 (issue 44)",
          _TILED.replace('m = torch.full((n, 1), float("-inf"), dtype=q.dtype)',
                         'm = torch.full((n, 1), -1e30, dtype=q.dtype)'),
          "not at a finite number"),
    Wrong("tiled_attention", "running maximum starts at 0",
          _TILED.replace('m = torch.full((n, 1), float("-inf"), dtype=q.dtype)',
                         'm = torch.zeros(n, 1, dtype=q.dtype)'),
          "not at a finite number"),
    Wrong("tiled_attention", "a block of queries against all keys at once", """\
T, D = q.shape
out = torch.empty(T, v.shape[1], dtype=q.dtype)
for qs in range(0, T, block_size):
    qb = q[qs:qs + block_size] / math.sqrt(D)
    n = qb.shape[0]
    s = qb @ k[:qs + n].T
    rows, cols = torch.arange(n)[:, None] + qs, torch.arange(qs + n)[None, :]
    s = s.masked_fill(cols > rows, float("-inf"))
    out[qs:qs + n] = torch.softmax(s, dim=-1) @ v[:qs + n]
return out""", "larger than one block of scores"),
    Wrong("tiled_attention", "computes float64 inputs in float32",
          "from course_lib.checks.lesson09 import _tiled\n"
          "return _tiled(q.float(), k.float(), v.float(), block_size).to(q.dtype)",
          "right only to float32 precision"),
    Wrong("tiled_attention", "through NumPy",
          "from course_lib.checks.lesson09 import _tiled\nreturn _tiled(q, k, v, block_size).numpy()",
          "got a NumPy array"),
    Wrong("tiled_attention", "a pair of None", "return None, None", "got tuple"),
    Wrong("tiled_attention", "float64 result",
          _TILED.replace("dtype=q.dtype)\nfor", "dtype=torch.float64)\nfor"),
          "make new tensors with q's dtype"),
]

ALTERNATIVES = [
    ("attention_flops", "a loop over the queries", """\
total = 0
for t in range(T):
    keys = t + 1 if causal else T
    total += 4 * d_model * keys
return total"""),
    ("attention_flops", "math.comb and a NumPy sum cast to int", """\
if causal:
    return 4 * d_model * math.comb(T + 1, 2)
return int(np.int64(4) * d_model * T * T)"""),
    ("attention_flops", "a boolean mask counted", """\
allowed = torch.ones(T, T, dtype=torch.bool)
if causal:
    allowed = allowed.tril()
return 4 * d_model * int(allowed.sum())"""),
    ("params_from_config", "per-part dict summed", """\
C, L = fields["hidden_size"], fields["num_hidden_layers"]
head_size = C // fields["num_attention_heads"]
kv = fields["num_key_value_heads"] * head_size
parts = {"embedding": fields["vocab_size"] * C,
         "attention": L * (2 * C * C + 2 * C * kv),
         "mlp": L * 3 * C * fields["intermediate_size"],
         "norms": L * 2 * C + C,
         "head": 0 if fields["tie_word_embeddings"] else fields["vocab_size"] * C}
return sum(parts.values())"""),
    ("tiled_attention", "one query row at a time, lists of blocks", _TILED.replace(
        "s = s.masked_fill(cols > rows, float(\"-inf\"))", "s = torch.where(cols > rows, float(\"-inf\"), s)")),
]
