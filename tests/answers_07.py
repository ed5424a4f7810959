"""Answers to lesson 07's exercise: the reference, and known-wrong ones with their hints."""
from answers import Wrong

REFERENCE = {
    "cached_attention_step": """\
from course_lib.attention import scaled_dot_product_attention
k_cache[length], v_cache[length] = k_new, v_new
return scaled_dot_product_attention(q[None], k_cache[:length + 1], v_cache[:length + 1])[0]""",
}

_STORE = "k_cache[length] = k_new\nv_cache[length] = v_new\n"
_ATTEND = "weights = torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1)\nreturn weights @ v"

WRONG = [
    Wrong("cached_attention_step", "drops the newest token",
          _STORE + "k, v = k_cache[:length], v_cache[:length]\n" + _ATTEND,
          "the new token may attend to itself", inject=True),
    Wrong("cached_attention_step", "reads the unfilled part of the cache",
          _STORE + "k, v = k_cache, v_cache\n" + _ATTEND,
          "attend only over the filled rows"),
    Wrong("cached_attention_step", "stores at the wrong position",
          "k_cache[length + 1] = k_new\nv_cache[length + 1] = v_new\n"
          "k, v = k_cache[:length + 1], v_cache[:length + 1]\n" + _ATTEND,
          "the new token is position `length`"),
    Wrong("cached_attention_step", "never stores the new token",
          "k = torch.cat([k_cache[:length], k_new[None]])\nv = torch.cat([v_cache[:length], v_new[None]])\n"
          + _ATTEND,
          "write the new key and value into the caches, in place"),
    Wrong("cached_attention_step", "no 1/sqrt(D)",
          _STORE + "k, v = k_cache[:length + 1], v_cache[:length + 1]\n"
          "return torch.softmax(k @ q, dim=-1) @ v",
          "divide the scores by sqrt(D)"),
]

WRONG += [
    Wrong("cached_attention_step", "keys and values swapped in the cache",
          "k_cache[length] = v_new\nv_cache[length] = k_new\n"
          "k, v = k_cache[:length + 1], v_cache[:length + 1]\n" + _ATTEND,
          "k_new goes into k_cache and v_new into v_cache"),
    Wrong("cached_attention_step", "forgets to return",
          _STORE + "k, v = k_cache[:length + 1], v_cache[:length + 1]\n"
          "out = torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1) @ v",
          "the caches are written in place and not returned"),
    Wrong("cached_attention_step", "returns the caches with the output",
          _STORE + "k, v = k_cache[:length + 1], v_cache[:length + 1]\n"
          "return torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1) @ v, k_cache, v_cache",
          "return the attention output for the new query"),
]

REFERENCE["greedy_decode"] = """\
from course_lib.kv_cache import KVCache
cache = KVCache.for_model(model, batch_size=prompt.shape[0])
tokens = [prompt]
with torch.no_grad():
    logits = model(prompt, cache)
    for step in range(n_new):
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens.append(next_token)
        if step < n_new - 1:
            logits = model(next_token, cache)
return torch.cat(tokens, dim=1)"""

REFERENCE["kv_bytes_per_token"] = """\
return 2 * config.n_layers * config.kv_heads * config.d_head * bytes_per_value"""

_CACHE = "from course_lib.kv_cache import KVCache\ncache = KVCache.for_model(model, batch_size=prompt.shape[0])\n"


def _decode(prefill="logits = model(prompt, cache)", pick="logits[:, -1].argmax(dim=-1, keepdim=True)",
            feed="logits = model(next_token, cache)", result="torch.cat(tokens, dim=1)", cache=_CACHE):
    """A greedy_decode body with one piece swapped for a mistake."""
    return f"""\
{cache}{prefill}
tokens = [prompt]
for step in range(n_new):
    next_token = {pick}
    tokens.append(next_token)
    if step < n_new - 1:
        {feed}
return {result}"""


_KV = "L, kv, H, D = config.n_layers, config.kv_heads, config.n_heads, config.d_head\n"

WRONG += [
    # greedy_decode
    Wrong("greedy_decode", "reruns the whole sequence with the cache", _CACHE + """\
seq = prompt
for _ in range(n_new):
    logits = model(seq, cache)
    seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
return seq""",
          "counts them twice", inject=True),
    Wrong("greedy_decode", "feeds the prompt's last token every step",
          _decode(feed="logits = model(prompt[:, -1:], cache)"),
          "feed the token you have just chosen"),
    Wrong("greedy_decode", "feeds the same token again",
          _decode(feed="logits = model(tokens[-2][:, -1:], cache)"),
          "feed the token you have just chosen"),
    Wrong("greedy_decode", "no prefill: only the prompt's last token",
          _decode(prefill="logits = model(prompt[:, -1:], cache)"),
          "prefill first"),
    Wrong("greedy_decode", "argmax over the batch axis",
          _decode(pick="logits[:, -1].argmax(dim=0, keepdim=True)"),
          "argmax over the vocabulary"),
    Wrong("greedy_decode", "argmax of the first position",
          _decode(pick="logits[:, 0].argmax(dim=-1, keepdim=True)"),
          "the last position's logits"),
    Wrong("greedy_decode", "the new token without its batch shape",
          _decode(pick="logits[:, -1].argmax(dim=-1)", result="torch.cat([prompt, torch.stack(tokens[1:], 1)], 1)"),
          "the model takes (B, t) token ids"),
    Wrong("greedy_decode", "returns only the new tokens",
          _decode(result="torch.cat(tokens[1:], dim=1)"),
          "return the prompt followed by the new tokens"),
    Wrong("greedy_decode", "a fresh cache every step", """\
from course_lib.kv_cache import KVCache
seq = prompt
for _ in range(n_new):
    cache = KVCache.for_model(model, batch_size=prompt.shape[0])
    seq = torch.cat([seq, model(seq, cache)[:, -1].argmax(-1, keepdim=True)], dim=1)
return seq""",
          "make one cache before the loop"),
    Wrong("greedy_decode", "never uses the cache", """\
seq = prompt
for _ in range(n_new):
    seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
return seq""",
          "never called with the cache"),
    Wrong("greedy_decode", "a cache for one sequence",
          _decode(cache="from course_lib.kv_cache import KVCache\ncache = KVCache.for_model(model, 1)\n"),
          "KVCache.for_model(model, batch_size=B)"),
    Wrong("greedy_decode", "token ids as floats", _decode(result="torch.cat(tokens, dim=1).float()"),
          "token ids are integers"),
    Wrong("greedy_decode", "forgets to return", _decode().replace("return torch.cat", "out = torch.cat"),
          "end with `return`"),
    # kv_bytes_per_token
    Wrong("kv_bytes_per_token", "forgets the 2 for keys and values",
          _KV + "return L * kv * D * bytes_per_value", "a key AND a value", inject=True),
    Wrong("kv_bytes_per_token", "n_heads instead of the KV heads",
          _KV + "return 2 * L * H * D * bytes_per_value", "only the KV heads store keys and values"),
    Wrong("kv_bytes_per_token", "d_model instead of the KV width",
          "return 2 * config.n_layers * config.d_model * bytes_per_value",
          "only the KV heads store keys and values"),
    Wrong("kv_bytes_per_token", "bits instead of bytes",
          _KV + "return 2 * L * kv * D * bytes_per_value * 8", "bytes, not bits"),
    Wrong("kv_bytes_per_token", "a float", _KV + "return 2.0 * L * kv * D * bytes_per_value",
          "not an integer"),
    Wrong("kv_bytes_per_token", "n_kv_heads, which can be None",
          "return 2 * config.n_layers * config.n_kv_heads * config.d_head * bytes_per_value",
          "config.kv_heads gives the number"),
    Wrong("kv_bytes_per_token", "the whole cache",
          _KV + "return 2 * L * kv * D * bytes_per_value * config.max_len", "the bytes for one token"),
    Wrong("kv_bytes_per_token", "one layer only", _KV + "return 2 * kv * D * bytes_per_value",
          "multiply by config.n_layers"),
    Wrong("kv_bytes_per_token", "numbers, not bytes", _KV + "return 2 * L * kv * D",
          "multiply by bytes_per_value"),
    Wrong("kv_bytes_per_token", "forgets to return", _KV + "total = 2 * L * kv * D * bytes_per_value",
          "end with `return`"),
]

ALTERNATIVES = [
    ("greedy_decode", "the prompt fed one token at a time", """\
from course_lib.kv_cache import KVCache
cache = KVCache.for_model(model, prompt.shape[0])
for t in range(prompt.shape[1]):
    logits = model(prompt[:, t:t + 1], cache)
out = prompt
while out.shape[1] < prompt.shape[1] + n_new:
    nxt = logits[:, -1, :].argmax(dim=-1).unsqueeze(1)
    out = torch.cat((out, nxt), 1)
    if out.shape[1] < prompt.shape[1] + n_new:
        logits = model(nxt, cache)
return out"""),
    ("greedy_decode", "feeds the last token too, no torch.no_grad", """\
from course_lib.kv_cache import KVCache
cache = KVCache.for_model(model, prompt.shape[0])
out, logits = prompt, model(prompt, cache)
for _ in range(n_new):
    nxt = torch.argmax(logits[:, -1], dim=1)[:, None]
    out = torch.cat([out, nxt], dim=-1)
    logits = model(nxt, cache)
return out"""),
    ("kv_bytes_per_token", "from the widths", """\
kv_heads = config.n_kv_heads or config.n_heads
head_size = config.d_model // config.n_heads
return 2 * config.n_layers * kv_heads * head_size * bytes_per_value"""),
]

# Kinds a class found (issue 21), each with more than one instance.
WRONG += [
    # cached_attention_step: results that are not a tensor, backward after an in-place edit
    Wrong("cached_attention_step", "returns (None, None)", _STORE + "return None, None",
          "expected a tensor"),
    Wrong("cached_attention_step", "returns the output and the weights", _STORE + """\
k, v = k_cache[:length + 1], v_cache[:length + 1]
weights = torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1)
return weights @ v, weights""", "and only that"),
    Wrong("cached_attention_step", "returns a NumPy array", _STORE + """\
k, v = k_cache[:length + 1], v_cache[:length + 1]
return (torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1) @ v).numpy()""",
          "expected a tensor"),
    Wrong("cached_attention_step", "returns a list", _STORE + """\
k, v = k_cache[:length + 1], v_cache[:length + 1]
return (torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1) @ v).tolist()""",
          "expected a tensor"),
    Wrong("cached_attention_step", "a shape the checker cannot compare", _STORE + """\
k, v = k_cache[:length + 1], v_cache[:length + 1]
return (torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1) @ v)[None]""",
          "the output has the wrong shape"),
    # greedy_decode: the course's own generate is the answer key
    Wrong("greedy_decode", "generate at temperature 0", """\
from course_lib.generation import generate
return generate(model, prompt, n_new, temperature=0)""", "calls course_lib's generate"),
    Wrong("greedy_decode", "generate, fast", """\
from course_lib import generation
return generation.generate(model, prompt, n_new, temperature=0, fast=True)""",
          "calls course_lib's generate"),
    Wrong("greedy_decode", "generate without the cache", """\
from course_lib.generation import generate
return generate(model, prompt, n_new, temperature=0, use_cache=False)""",
          "calls course_lib's generate"),
    # kv_bytes_per_token: a Python int, and not the course's own formula
    Wrong("kv_bytes_per_token", "true division makes a float", _KV + """\
return 2 * L * kv * (config.d_model / config.n_heads) * bytes_per_value""", "not an integer"),
    Wrong("kv_bytes_per_token", "np.prod of the factors", _KV + """\
return np.prod([2, L, kv, D, bytes_per_value])""", "should be a Python int"),
    Wrong("kv_bytes_per_token", "a tensor", _KV + """\
return torch.tensor(2 * L * kv * D * bytes_per_value)""", "should be a Python int"),
    Wrong("kv_bytes_per_token", "course_lib's kv_cache_bytes", """\
from course_lib import costs
return costs.kv_cache_bytes(config, tokens=1, bytes_per_value=bytes_per_value)""",
          "calls course_lib's own kv_cache_bytes"),
    Wrong("kv_bytes_per_token", "kv_cache_bytes divided by max_len", """\
from course_lib.costs import kv_cache_bytes
return kv_cache_bytes(config, tokens=config.max_len, bytes_per_value=bytes_per_value) // config.max_len""",
          "calls course_lib's own kv_cache_bytes"),
]

ALTERNATIVES += [
    ("cached_attention_step", "copy_ into the rows, scores by einsum", """\
k_cache[length].copy_(k_new)
v_cache[length].copy_(v_new)
keys = k_cache.narrow(0, 0, length + 1)
scores = torch.einsum("d,sd->s", q, keys) / q.shape[-1] ** 0.5
return torch.einsum("s,sd->d", scores.softmax(-1), v_cache[: length + 1])"""),
    ("greedy_decode", "a preallocated output tensor", """\
from course_lib.kv_cache import KVCache
B, T = prompt.shape
out = torch.empty(B, T + n_new, dtype=torch.long)
out[:, :T] = prompt
cache = KVCache.for_model(model, B)
with torch.inference_mode():
    logits = model(prompt, cache)[:, -1]
    for t in range(T, T + n_new):
        out[:, t] = logits.argmax(-1)
        if t + 1 < T + n_new:
            logits = model(out[:, t:t + 1], cache)[:, -1]
return out"""),
    ("kv_bytes_per_token", "math.prod", """\
return math.prod((2, config.n_layers, config.kv_heads, config.d_head, bytes_per_value))"""),
]

WRONG += [
    Wrong("greedy_decode", "one token too few", _decode().replace("for step in range(n_new):",
                                                                  "for step in range(n_new - 1):"),
          "the result has the wrong shape"),
    Wrong("greedy_decode", "sampled, not greedy", _decode(
        pick="torch.multinomial(torch.softmax(logits[:, -1], dim=-1), 1)"), "their argmax over the vocabulary"),
    Wrong("greedy_decode", "returns a list of tensors", _decode(result="tokens"),
          "expected a tensor of token ids"),
]

# A class's view (review of 2026-12-04): wrong answers that passed before the checks looked further.
WRONG += [
    Wrong("cached_attention_step", "computes and returns float32 whatever the inputs", """\
k_cache[length] = k_new
v_cache[length] = v_new
k, v = k_cache[:length + 1].float(), v_cache[:length + 1].float()
return torch.softmax(k @ q.float() / math.sqrt(q.shape[-1]), dim=-1) @ v""", "the output has the wrong dtype"),
    Wrong("greedy_decode", "the cache used for the prefill only", """\
from course_lib.kv_cache import KVCache
cache = KVCache.for_model(model, batch_size=prompt.shape[0])
with torch.no_grad():
    logits = model(prompt, cache)
    seq = prompt
    for step in range(n_new):
        seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        if step < n_new - 1:
            logits = model(seq)
return seq""", "after the prefill the model was run without the cache"),
    Wrong("greedy_decode", "leaves the model in training mode", """\
from course_lib.kv_cache import KVCache
model.train()
cache = KVCache.for_model(model, batch_size=prompt.shape[0])
with torch.no_grad():
    logits = model(prompt, cache)
    seq = prompt
    for _ in range(n_new):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
        logits = model(nxt, cache)
return seq""", "left the model in training mode"),
]
