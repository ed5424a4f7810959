"""Checkers for lesson 07, KV-cache decoding."""
import math

import torch

from course_lib.checks.core import Checker


def _attend(q, k, v):
    """One query over keys and values. Shapes: q (D,), k and v (S, D) -> (D,)"""
    weights = torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v


def _case(seed, S_max=8, D=4, length=3):
    """A preallocated cache of S_max rows: `length` filled, the rest holding stale numbers."""
    g = torch.Generator().manual_seed(seed)
    k_cache = torch.randn(S_max, D, generator=g, dtype=torch.float64) * 3  # stale rows: not zeros,
    v_cache = torch.randn(S_max, D, generator=g, dtype=torch.float64) * 3  # so reading them shows
    q, k_new, v_new = (torch.randn(D, generator=g, dtype=torch.float64) for _ in range(3))
    return q, k_new, v_new, k_cache, v_cache, length


def check_cached_attention_step(fn):
    """Check cached_attention_step(q, k_new, v_new, k_cache, v_cache, length) -> output (D,)."""
    __tracebackhide__ = True
    c = Checker("cached_attention_step", fn)
    for seed, length in ((0, 3), (1, 0), (2, 6)):
        q, k_new, v_new, k_cache, v_cache, _ = _case(seed, length=length)
        before_k, before_v = k_cache.clone(), v_cache.clone()
        case = (f"q, k_new, v_new of width 4; caches of 8 rows, the first {length} filled "
                f"(the rest hold stale numbers); length={length}")
        out = c.call(q, k_new, v_new, k_cache, v_cache, length, case=case, mutable=(3, 4),
                     none_hint="return the attention output for the new query; the caches are "
                               "written in place and not returned")
        if not isinstance(out, torch.Tensor):
            c.fail("expected a tensor", case=case, got=type(out).__name__,
                   hint="return the attention output for the new query, a tensor of shape (D,)")
        c.shape(out, (4,), "the output", case, hint="one query gives one output vector (D,)")
        if torch.equal(k_cache[length], v_new) and torch.equal(v_cache[length], k_new):
            c.fail("the new key and value are stored in each other's cache", case=case,
                   hint="k_new goes into k_cache and v_new into v_cache: the keys are what "
                        "queries are compared with, the values what is mixed")
        stored = [i for i in range(8) if torch.equal(k_cache[i], k_new)]
        if stored != [length]:
            hint = (f"the new token is position `length` = {length}: store it with "
                    f"k_cache[length] = k_new (and the same for v_cache)")
            if not stored:
                hint = "store the new key and value in the caches: k_cache[length] = k_new, v_cache[length] = v_new"
            c.fail("the new key is not stored at its position", case=case,
                   expected=f"row {length}", got=f"rows {stored}" if stored else "not stored", hint=hint)
        if not torch.equal(v_cache[length], v_new):
            c.fail("the new value is not stored at its position", case=case, expected=v_new,
                   got=v_cache[length], hint="store v_new in v_cache[length], as for the key")
        others = [i for i in range(8) if i != length]
        if not (torch.equal(k_cache[others], before_k[others]) and torch.equal(v_cache[others], before_v[others])):
            c.fail("rows of the cache other than the new position changed", case=case,
                   hint="write only row `length`; the cached positions must stay as they were")
        c.ok()
        want = _attend(q, k_cache[:length + 1], v_cache[:length + 1])
        hints = {
            "the newest token is left out": (
                _attend(q, k_cache[:length], v_cache[:length]) if length else None,
                "attend over positions 0 .. length inclusive (k_cache[:length + 1]): the new "
                "token may attend to itself"),
            "the unfilled part of the cache is read": (
                _attend(q, k_cache, v_cache),
                "attend only over the filled rows, k_cache[:length + 1]; the rows after them "
                "hold nothing of this sequence"),
            "the scores are not scaled": (
                torch.softmax(k_cache[:length + 1] @ q, -1) @ v_cache[:length + 1],
                "divide the scores by sqrt(D) before the softmax"),
        }
        if not torch.allclose(out.double(), want, atol=1e-6):
            for what, (wrong, hint) in hints.items():
                if wrong is not None and torch.allclose(out.double(), wrong, atol=1e-6):
                    c.fail(what, case=case, expected=want, got=out, hint=hint)
            c.fail("the output is not right", case=case, expected=want, got=out,
                   hint="softmax(k @ q / sqrt(D)) over the filled rows, then the weighted sum of their values")
        c.ok()
    c.done()
