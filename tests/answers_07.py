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
          "store the new key and value in the caches"),
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
