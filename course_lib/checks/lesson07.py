"""Checkers for lesson 07, KV-cache decoding."""
import math

import torch

from course_lib import generation
from course_lib.checks.core import Checker, checker, learner_side, seed
from course_lib.checks.domain import each
from course_lib.checks.lesson04 import observed_call, python_int
from course_lib.costs import kv_cache_bytes
from course_lib.model import ModelConfig, TinyLM


def _attend(q, k, v):
    """One query over keys and values. Shapes: q (D,), k and v (S, D) -> (D,)"""
    weights = torch.softmax(k @ q / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v


def _case(rng_seed, S_max=8, D=4, length=3):
    """A preallocated cache of S_max rows, drawn from `rng_seed`: `length` filled, the rest
    holding stale numbers."""
    g = torch.Generator().manual_seed(rng_seed)
    k_cache = torch.randn(S_max, D, generator=g, dtype=torch.float64) * 3  # stale rows: not zeros,
    v_cache = torch.randn(S_max, D, generator=g, dtype=torch.float64) * 3  # so reading them shows
    q, k_new, v_new = (torch.randn(D, generator=g, dtype=torch.float64) for _ in range(3))
    return q, k_new, v_new, k_cache, v_cache, length


@checker
def check_cached_attention_step(fn):
    """Check cached_attention_step(q, k_new, v_new, k_cache, v_cache, length) -> output (D,)."""
    __tracebackhide__ = True
    c = Checker("cached_attention_step", fn)
    for n, length in ((0, 3), (1, 0), (2, 6)):
        _step_one(c, _case(seed(n), length=length), None)
    # any cache size (past 128 to 1,024 rows), width, position in it and dtype
    each(c, _draw_step, _step_one, n=20, stream=70)
    c.done()


def _draw_step(d):
    S_max, D = d.length(), d.integer(1, 64)
    dtype = d.choice((torch.float64, torch.float32))
    q, k_new, v_new, k_cache, v_cache, length = _case(d.seed(), S_max, D, d.integer(0, S_max - 1))
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) else t
                 for t in (q, k_new, v_new, k_cache, v_cache, length)), None


def _step_one(c, args, _):
    """Check cached_attention_step on one cache and new token."""
    __tracebackhide__ = True
    q, k_new, v_new, k_cache, v_cache, length = args
    k_cache, v_cache = k_cache.clone(), v_cache.clone()   # written in place: each try its own
    S_max, D = k_cache.shape
    # float32 accumulation is allowed (the statement asks for no precision): its rounding over
    # D products of values of about 3 stays far below 1e-5 (1e-4 for float32 inputs)
    tol = 1e-5 if q.dtype == torch.float64 else 1e-4
    before_k, before_v = k_cache.clone(), v_cache.clone()
    case = (f"q, k_new, v_new of width {D} ({str(q.dtype).replace('torch.', '')}); caches "
            f"of {S_max} rows, the first {length} filled (the rest hold stale numbers); "
            f"length={length}")
    out = c.call(q, k_new, v_new, k_cache, v_cache, length, case=case, mutable=(3, 4),
                 none_hint="return the attention output for the new query; the caches are "
                           "written in place and not returned")
    if not isinstance(out, torch.Tensor):
        c.fail("expected a tensor", case=case,
               got=type(out).__name__ + (f" of {len(out)}" if isinstance(out, tuple) else ""),
               hint="return the attention output for the new query, a tensor of shape (D,), "
                    "and only that: the caches are written in place")
    c.shape(out, (D,), "the output", case, hint="one query gives one output vector (D,)")
    if out.dtype != q.dtype:
        c.fail("the output has the wrong dtype", case=case, expected=str(q.dtype), got=str(out.dtype),
               hint="return the output in the inputs' dtype: no .float() or .double() on the way "
                    "(a float64 model gets float64 attention, a float32 one float32)")
    if torch.equal(k_cache[length], v_new) and torch.equal(v_cache[length], k_new):
        c.fail("the new key and value are stored in each other's cache", case=case,
               hint="k_new goes into k_cache and v_new into v_cache: the keys are what "
                    "queries are compared with, the values what is mixed")
    stored = [i for i in range(S_max) if torch.equal(k_cache[i], k_new)]
    if stored != [length]:
        hint = (f"the new token is position `length` = {length}: its key goes into that row "
                f"of k_cache (and its value into the same row of v_cache)")
        if not stored:
            hint = ("write the new key and value into the caches, in place, at the new "
                    "token's row, before attending")
        c.fail("the new key is not stored at its position", case=case,
               expected=f"row {length}", got=f"rows {stored}" if stored else "not stored", hint=hint)
    if not torch.equal(v_cache[length], v_new):
        c.fail("the new value is not stored at its position", case=case, expected=v_new,
               got=v_cache[length], hint="store v_new in v_cache[length], as for the key")
    others = [i for i in range(S_max) if i != length]
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
    if not torch.allclose(out.double(), want.double(), atol=tol):
        for what, (wrong, hint) in hints.items():
            if wrong is not None and torch.allclose(out.double(), wrong.double(), atol=tol):
                c.fail(what, case=case, expected=want, got=out, hint=hint)
        c.fail("the output is not right", case=case, expected=want, got=out,
               hint="softmax(k @ q / sqrt(D)) over the filled rows, then the weighted sum of their values")
    c.ok()


# ---------------------------------------------------------------------------
# greedy_decode
# ---------------------------------------------------------------------------

class _Recorder(TinyLM):
    """A TinyLM that notes every call: the tokens fed, the cache (if any) and its length then."""

    def __init__(self, config):
        super().__init__(config)
        self.calls = []

    def forward(self, idx, cache=None):
        if isinstance(idx, torch.Tensor):
            self.calls.append((idx.detach().clone(), cache,
                               None if cache is None else cache.length))
        return super().forward(idx, cache)


def _decode_model(rng_seed, V=23, max_len=16, C=16, L=2):
    """A small float64 TinyLM with weights large enough that its greedy choices are clear-cut,
    drawn from `rng_seed` (the learner's own torch random state is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(rng_seed)
        model = _Recorder(ModelConfig(vocab_size=V, max_len=max_len, d_model=C, n_heads=2,
                                      n_layers=L))
    model = model.double().eval()
    gen = torch.Generator().manual_seed(rng_seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    model.calls = []
    return model


def _greedy(model, prompt, n_new):
    """The expected sequence, prompt + n_new greedy tokens, by rerunning the whole prefix,
    and each step's logits of the last position: (seq (B, T + n_new), logits (n_new, B, V))."""
    seq, steps = prompt, []
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(seq)[:, -1]                                   # (B, V)
            steps.append(logits)
            seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], dim=1)
    model.calls = []
    return seq, torch.stack(steps)


def _tells_mistakes_apart(model, prompt, seq, steps):
    """Whether this model and prompt tell the usual mistakes from the right answer: each greedy
    choice clear of the runner-up (a right answer computed another way picks the same token),
    the first new token unlike the prompt's last one (feeding a token again shows) and unlike
    the argmax at position 0 (reading the first position's logits shows), the prompt's last
    token unlike its first (feeding only the last one shows), and sampling unlikely to follow
    the greedy path (at most 1 in 1000)."""
    T = prompt.shape[1]
    if T > 1 and bool((prompt[:, 0] == prompt[:, -1]).any()):
        return False
    top = steps.topk(2, dim=-1).values                                    # (n_new, B, 2)
    if not bool((top[..., 0] - top[..., 1] > 1e-6).all()):
        return False
    if bool((seq[:, T] == seq[:, T - 1]).any()):
        return False
    if T > 1:
        with torch.no_grad():
            first = model(prompt)[:, 0].argmax(-1)
        model.calls = []
        if bool((first == seq[:, T]).any()):
            return False
    return float(torch.softmax(steps, dim=-1).amax(-1).prod()) <= 1e-3


def _decode_case(n, B, T, n_new):
    """(model, prompt, greedy sequence) for case n: the first of the draws from seed(n) that
    tells the usual mistakes apart (_DRAWS are tried; one in three or so does)."""
    for k in range(_DRAWS):
        rng_seed = (seed(n) + 7919 * k) % 2**63
        model = _decode_model(rng_seed)
        gen = torch.Generator().manual_seed((rng_seed + 10) % 2**63)
        prompt = torch.randint(0, 23, (B, T), generator=gen)
        seq, steps = _greedy(model, prompt, n_new)
        if _tells_mistakes_apart(model, prompt, seq, steps):
            return model, prompt, seq
    raise RuntimeError(f"none of {_DRAWS} draws of greedy_decode's test model told the usual "
                       f"mistakes apart (a bug in course_lib.checks, not in the answer)")


_DRAWS = 200


_ARGMAX_HINT = ("after each call take the last position's logits, logits[:, -1] of shape (B, V), "
                "and their argmax over the vocabulary, dim=-1; feed that token, shape (B, 1), at "
                "the next step")


@learner_side
def _fed(calls):
    """The model's calls as plain data, (tokens fed, which cache, its length then), the caches
    numbered in the order they first appear (None: a call without one)."""
    caches, fed = [], []
    for idx, cache, start in calls:
        which = None
        if cache is not None:
            which = next((i for i, seen in enumerate(caches) if seen is cache), None)
            if which is None:
                caches.append(cache)
                which = len(caches) - 1
        fed.append((idx, which, start))
    return fed


def _feeding_fault(fed, seq, T, out):
    """(what, hint) for the first call that fed the model the wrong tokens, or None.

    `fed` is what `_fed` made of the model's calls; `out` what the learner returned: a token
    fed at the position where the learner's own result has it is consistent feeding, and
    only the choice of that token can be wrong."""
    filled = False   # has a call with the cache been made yet?
    for idx, which, start in fed:
        if which is None:
            if filled:
                return ("after the prefill the model was run without the cache",
                        "once the cache holds the prompt, feed only the newest token with it, "
                        "model(next_token[:, None], cache): a call without the cache reruns the "
                        "whole sequence, the cost the cache is there to save")
            continue
        filled = True
        if which > 0:
            return ("a new cache was made during decoding",
                    "make one cache before the loop, KVCache.for_model(model, "
                    "batch_size=B), and pass that same cache to every call: a "
                    "fresh cache each step throws away what it kept")
        if idx.ndim != 2:
            return (f"the model was fed token ids of shape {tuple(idx.shape)}",
                    "the model takes (B, t) token ids: feed the new token as (B, 1), "
                    "next_token[:, None]")
        n = idx.shape[-1]
        if idx.shape[0] == seq.shape[0] and start + n <= seq.shape[1] \
                and torch.equal(idx, seq[:, start:start + n]):
            continue
        where = f"a call with the cache holding {start} positions"
        if start > 0 and n > 1 and n <= seq.shape[1] and torch.equal(idx, seq[:, :n]):
            return (f"{where} was fed the whole sequence again",
                    "the cache already holds those positions, so feeding them again counts them "
                    "twice (the model gives them the positions after the cached ones); after the "
                    "prefill feed only the newest token, seq[:, -1:]")
        if start == 0 and 0 < n < T and torch.equal(idx, seq[:, T - n:T]):
            return ("the cache was never filled with the prompt",
                    "prefill first: run the whole prompt through the model with the cache, "
                    "model(prompt, cache), so the cache holds its keys and values; then feed "
                    "one new token per step")
        if start == 0:
            return ("the first call with the cache did not start with the prompt",
                    "the first call fills the cache from position 0: model(prompt, cache)")
        returned = (isinstance(out, torch.Tensor) and out.ndim == 2 and out.shape[1] > start
                    and out.shape[0] == idx.shape[0]
                    and torch.equal(idx, out[:, start:start + 1].to(idx.dtype)))
        if n == 1 and start >= T and not returned and (torch.equal(idx, seq[:, start - 1:start])
                                                       or torch.equal(idx, seq[:, T - 1:T])):
            return (f"{where} was fed a token it had already seen",
                    "feed the token you have just chosen, so the sequence advances by one each "
                    "step; the cache moves its position forward by itself")
        return (f"{where} was not fed the next token of the greedy sequence", _ARGMAX_HINT)
    return None


@learner_side
def _fed_to(result, model, *args):
    """After a decoding call, where it ran: what the model was fed (`_fed`)."""
    return _fed(model.calls)


def _course_decoders():
    """generate and the loops it runs, looked up by name: a renamed private helper is skipped."""
    found = [getattr(generation, name, None)
             for name in ("generate", "_cached", "_cached_fast", "_uncached")]
    found.append(getattr(getattr(generation, "FastDecoder", None), "step", None))
    return tuple(f for f in found if callable(f))


_DECODE_CASES = ((0, 1, 3, 6), (1, 2, 4, 5), (2, 3, 1, 4))   # n, B, T, n_new
_DECODERS = _course_decoders()


@checker
def check_greedy_decode(fn):
    """Check greedy_decode(model, prompt, n_new) -> prompt followed by n_new greedy tokens."""
    __tracebackhide__ = True
    c = Checker("greedy_decode", fn)
    for n, B, T, n_new in _DECODE_CASES:
        _decode_one(c, _decode_case(n, B, T, n_new), None)
    # any vocabulary, table of positions, width and depth; any batch, prompt and n_new that fit
    each(c, _draw_decode, _decode_one, n=4, stream=71)
    c.done()


def _draw_decode(d):
    """A model and prompt whose greedy choices are clear of the runner-up at every step, so
    that a right answer computed another way picks the same tokens (the first of up to 50
    draws from the drawn seed)."""
    V, max_len, C, L = d.size(2, 300, small=23), d.size(2, 64, small=16), 2 * d.integer(2, 8), \
        d.integer(1, 2)
    B, T = d.integer(1, 3), d.integer(1, max_len - 1)
    n_new, base = d.integer(1, max_len - T), d.seed()
    for k in range(50):
        model = _decode_model(base + 7919 * k, V, max_len, C, L)
        gen = torch.Generator().manual_seed(base + 7919 * k + 10)
        prompt = torch.randint(0, V, (B, T), generator=gen)
        seq, steps = _greedy(model, prompt, n_new)
        top = steps.topk(2, dim=-1).values
        if bool((top[..., 0] - top[..., 1] > 1e-6).all()):
            break
    return (model, prompt, seq), None


def _decode_one(c, args, _):
    """Check greedy_decode on one model and prompt."""
    __tracebackhide__ = True
    model, prompt, seq = args
    (B, T), n_new = prompt.shape, seq.shape[1] - prompt.shape[1]
    cfg = model.config
    model.calls = []
    case = (f"a small TinyLM (V={cfg.vocab_size}, max_len={cfg.max_len}, d_model="
            f"{cfg.d_model}, n_layers={cfg.n_layers}, float64), a prompt of shape (B, T) = "
            f"({B}, {T}), n_new={n_new}")
    out, seen = observed_call(c, model, prompt, n_new, case=case, catch=True,
                              watch=_DECODERS, observe=_fed_to,
                              none_hint="end with `return` and the prompt followed by the "
                                        "new tokens, (B, T + n_new)")
    if seen["called"]:
        c.fail("your function calls course_lib's generate", case=case,
               hint="write the decode loop yourself, with KVCache.for_model and model(idx, "
                    "cache): generate runs the course's own loop, the answer key, and earns "
                    "no credit")
    fed = seen["observed"]
    fault = _feeding_fault(fed, seq, T, out)
    if fault:
        c.fail(fault[0], case=case, hint=fault[1])
    if seen["raised"] is not None:
        kind, message = seen["raised"]
        c.fail(f"your function raised {kind}: {message}", case=case,
               hint="make the cache with KVCache.for_model(model, batch_size=B) "
                    "and feed the model (B, t) token ids: the newest token as "
                    "next_token[:, None], shape (B, 1)")
    if not any(which is not None for _, which, _ in fed):
        c.fail("the model was never called with the cache", case=case,
               hint="make a cache with KVCache.for_model(model, batch_size=B) "
                    "and pass it to every call, model(idx, cache): without it each step "
                    "reruns the whole prefix")
    if model.training:
        c.fail("your function left the model in training mode", case=case,
               hint="decoding is evaluation: leave the model in eval mode (model.eval()), where "
                    "dropout is off, so that greedy decoding picks the same tokens every time")
    c.ok()
    if not isinstance(out, torch.Tensor):
        c.fail("expected a tensor of token ids", case=case, got=type(out).__name__,
               hint="return one tensor, torch.cat([prompt, new_tokens], dim=1)")
    if tuple(out.shape) == (B, n_new) and torch.equal(out.long(), seq[:, T:]):
        c.fail("the result holds only the new tokens", case=case,
               expected=(B, T + n_new), got=tuple(out.shape),
               hint="return the prompt followed by the new tokens: "
                    "torch.cat([prompt, new_tokens], dim=1)")
    c.shape(out, seq.shape, "the result", case,
            hint="the prompt (B, T) followed by n_new tokens: (B, T + n_new)")
    if out.dtype != torch.long:
        c.fail("the token ids have the wrong dtype", case=case, expected="torch.int64",
               got=str(out.dtype),
               hint="token ids are integers: argmax already returns int64; keep them so, "
                    "without converting to float")
    if not torch.equal(out, seq):
        c.fail("the tokens are not the greedy ones", case=case, expected=seq, got=out,
               hint=_ARGMAX_HINT)
    c.ok()


# ---------------------------------------------------------------------------
# kv_bytes_per_token
# ---------------------------------------------------------------------------

def _kv_mistakes(config, bytes_per_value):
    """The right bytes per token, and (value, hint) for each usual slip."""
    L, kv, H, D = config.n_layers, config.kv_heads, config.n_heads, config.d_head
    exact = 2 * L * kv * D * bytes_per_value
    heads = ("only the KV heads store keys and values: with grouped-query attention "
             "config.kv_heads is fewer than config.n_heads (and kv_heads x d_head is narrower "
             "than d_model)")
    return exact, [
        (exact // 2, "each position keeps a key AND a value: multiply by 2"),
        (2 * L * H * D * bytes_per_value, heads),
        (L * H * D * bytes_per_value, heads + "; and multiply by 2, for the key and the value"),
        (exact * 8, "the answer is in bytes, not bits: do not multiply by 8"),
        (exact // L, "every layer keeps its own keys and values: multiply by config.n_layers"),
        (exact * config.max_len, "that is the whole cache of max_len positions; the question is "
                                 "the bytes for one token"),
        (2 * L * kv * D, "multiply by bytes_per_value: that count is of numbers, not bytes"),
    ]


_KV_BYTES = (kv_cache_bytes,)   # course_lib's own count: the answer key


@checker
def check_kv_bytes_per_token(fn):
    """Check kv_bytes_per_token(config, bytes_per_value) -> the KV cache's bytes per token, an int."""
    __tracebackhide__ = True
    c = Checker("kv_bytes_per_token", fn)
    cases = ((ModelConfig(d_model=64, n_heads=8, n_kv_heads=2, n_layers=3, max_len=32), 2),
             (ModelConfig(d_model=128, n_heads=4, n_layers=4, max_len=128), 4),
             (ModelConfig(vocab_size=128256, max_len=8192, d_model=4096, n_heads=32,
                          n_kv_heads=8, n_layers=32), 2),
             (ModelConfig(d_model=96, n_heads=6, n_kv_heads=3, n_layers=5, max_len=64), 1))
    found = []
    for config, bpv in cases:
        found.append(_kv_call(c, config, bpv))
    for case, got, exact, _ in found:
        if got != exact:
            named = set.intersection(*({h for value, h in mistakes if value == g}
                                       for _, g, e, mistakes in found if g != e))
            hint = named.pop() if len(named) == 1 else _KV_FORMULA
            c.fail("the number of bytes is not right", case=case, expected=exact, got=got,
                   hint=hint)
        c.ok()
    # any depth, heads (KV heads dividing them, or None), head size and bytes per value
    each(c, _draw_kv, _kv_one, n=25, stream=72)
    c.done()


_KV_FORMULA = "2 (a key and a value) x n_layers x kv_heads x d_head x bytes_per_value"


def _draw_kv(d):
    H = d.size(1, 128, small=8)
    kv = d.choice((None, *[n for n in range(1, H + 1) if H % n == 0]))
    config = ModelConfig(d_model=H * d.size(1, 256, small=16), n_heads=H, n_kv_heads=kv,
                         n_layers=d.size(1, 128, small=6), max_len=d.size(1, 131_072, small=64))
    return (config, d.choice((1, 2, 4))), None


def _kv_one(c, args, _):
    """Check kv_bytes_per_token on one config."""
    __tracebackhide__ = True
    case, got, exact, mistakes = _kv_call(c, *args)
    if got != exact:
        named = {h for value, h in mistakes if value == got}
        c.fail("the number of bytes is not right", case=case, expected=exact, got=got,
               hint=named.pop() if len(named) == 1 else _KV_FORMULA)
    c.ok()


def _kv_call(c, config, bpv):
    """(case, the learner's count, the right one, the usual slips) for one config."""
    __tracebackhide__ = True
    case = (f"ModelConfig(d_model={config.d_model}, n_heads={config.n_heads}, n_kv_heads="
            f"{config.n_kv_heads}, n_layers={config.n_layers}, max_len={config.max_len}), "
            f"bytes_per_value={bpv}")
    got, seen = observed_call(
        c, config, bpv, case=case, watch=_KV_BYTES,
        crash_hint="config.n_kv_heads is None when every head keeps its own keys and "
                   "values; config.kv_heads gives the number of KV heads in both cases, "
                   "and config.d_head the head size",
        none_hint="end with `return` and the number of bytes, an int")
    if seen["called"]:
        c.fail("your function calls course_lib's own kv_cache_bytes", case=case,
               hint="work it out from the config's fields: costs.kv_cache_bytes is the "
                    "answer key and earns no credit")
    python_int(c, got, case, "the number of bytes",
               hint="a count of bytes is a whole number: use // rather than /, or int(...)")
    return (case, got, *_kv_mistakes(config, bpv))


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "cached_attention_step": (
        "Write the new key and value into the caches at row `length`, then attend the query over "
        "rows 0 to length inclusive: the earlier positions and the new one.",
        "Rows after `length` hold rubbish (even an earlier sequence's numbers): do not attend over "
        "the whole cache. Forgetting to store the new row, or slicing one row short, drops the "
        "newest token.",
        "The filled keys (length + 1, D) against q give the scores; scale by the square root of "
        "D, softmax over the keys, then the weighted sum of the filled values gives (D,). Return "
        "only that output.",
    ),
    "greedy_decode": (
        "One cache, one prefill call with the whole prompt, then n_new times: the argmax of the "
        "last position's logits, fed back alone as a (B, 1) tensor.",
        "Feed only the new token after the prefill, not the whole sequence again (the cache "
        "already holds it); take the argmax over the vocabulary axis with keepdim so it stays "
        "(B, 1); do not call the course's generate.",
        "Collect the prompt and each new token in a list and join them along the time axis at "
        "the end: (B, T + n_new), int64.",
    ),
    "kv_bytes_per_token": (
        "Every layer keeps one key and one value vector per KV head for each token: multiply the "
        "layers, the KV heads, the head size, two (keys and values) and the bytes per value.",
        "Use config.kv_heads (which is n_heads when there is no grouped-query attention), not "
        "config.n_kv_heads, which is None then; and return an int.",
    ),
}


# Questions on this lesson's ideas: `answer("07-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "07-positions": Number(
        prompt="Without a cache, step t (counting from 0) runs the model on all p + t tokens so "
               "far. With a prompt of p = 10 tokens, how many positions do the steps that "
               "generate n = 5 new tokens process in all?",
        after="## 1. The trained model, and generation without a cache",
        value=60, tolerance=0,
        why="the steps run on 10, 11, 12, 13 and 14 positions: 60 in all, where a cached run "
            "processes each position once.",
        wrong=((50, 50, "that counts the prompt alone at every step; each step also reruns the "
                        "tokens generated so far."),
               (75, 75, "that runs every step at the final length of 15; the prefix grows one "
                        "token per step."),
               (15, 15, "that is about what a cached run processes, each position once; the "
                        "uncached loop reruns the whole prefix."),
               (65, 65, "that counts one step too many: 5 new tokens take 5 steps, t = 0 to "
                        "4.")),
        otherwise="add up p + t for each of the 5 steps."),
    "07-kv": Number(
        prompt="Section 5's formula: 2 × layers × KV heads × head size × bytes per value. "
               "How many bytes per token does the cache of GPT-2 small take (12 layers, 12 "
               "heads of 64, every head its own keys and values) in float16?",
        after="### Exercise 3: the cache's bytes per token",
        value=36_864, tolerance=0, unit="bytes",
        why="2 (keys and values) × 12 layers × 12 heads × 64 × 2 bytes = 36,864 bytes, 36 KiB "
            "a token.",
        wrong=((18_432, 18_432, "that leaves out the factor 2: the cache keeps keys *and* "
                                "values."),
               (73_728, 73_728, "that is float32, 4 bytes a value; float16 takes 2."),
               (3_072, 3_072, "that is one layer's worth; every layer keeps its own keys and "
                              "values.")),
        otherwise="multiply the five factors of the formula."),
    "07-speedup": Choice(
        prompt="For 384 new tokens the uncached run processes about 200 times as many "
               "positions as the cached one, yet section 4 measured the cached run far less "
               "than 200 times faster (a few times on a CPU, hardly at all on a GPU at batch "
               "1). What did it find as the reason?",
        after="## 4. What the cache buys: time per token",
        choices={
            "a": ("reading the cache from memory is slower than recomputing it",
                  "a cached step at width 8 took almost the time of one at width 64: the time "
                  "is not spent on the cache's data."),
            "b": ("the cached loop recomputes the keys of the prefix too",
                  "its logits equal a full pass while it computes only the new token's "
                  "query, key and value; the cache holds the rest."),
            "c": ("each step of a tiny model costs mostly a fixed overhead, which the cache "
                  "cannot remove",
                  "a cached step at width 8 took nearly the time of one at width 64: the step "
                  "is mostly overhead, and the cache removes only work."),
            "d": ("timing noise on a busy machine",
                  "the lesson took medians over repeats in turns, and the fixed cost showed "
                  "in every measurement: a cause, not noise."),
        },
        right="c"),
    "07-topk": Choice(
        prompt="Section 7's explorer samples with a temperature and `top_k`. What does "
               "`generate(model, prompt, n, temperature=0.8, top_k=1)` produce?",
        after="## 7. Explore: temperature and top-k",
        choices={
            "a": ("the same tokens as greedy decoding, temperature 0",
                  "top_k = 1 keeps only the likeliest token, so sampling from what is left "
                  "always picks it (the generator's seed does not matter)."),
            "b": ("a different sample for every seed, a little less random than top_k = 3",
                  "with one token left there is nothing to draw between, so the seed has "
                  "nothing left to change."),
            "c": ("an error: top_k needs temperature 0",
                  "generate accepts any temperature with top_k; only a top_k below 1 is "
                  "refused."),
        },
        right="a"),
}
