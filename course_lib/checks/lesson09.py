"""Checkers for lesson 09, what it costs."""
import copy
import math
import numbers

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course_lib.checks.core import Checker, checker, learner_side, seed
from course_lib.checks.domain import each
from course_lib.checks.lesson06 import call_inside
from course_lib.convert import config_from_dict
from course_lib.costs import CONFIG_DIR, count_params

_LLAMA_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "vocab_size", "tie_word_embeddings")


def _llama_cases():
    """Small configs that separate the usual mistakes, then real Llama-family ones.

    The small ones come first: on a real config two different mistakes can be off by the
    same number (for Llama 3 8B, an MLP of 4C and no grouped-query attention both add
    805,306,368), and the hint would name the wrong one.
    """
    import json
    small = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=8,
                 num_key_value_heads=2, vocab_size=100, tie_word_embeddings=False)
    cases = [("a small config, 2 KV heads", small),
             ("the same, tied head", dict(small, tie_word_embeddings=True)),
             ("the same, one KV head per query head", dict(small, num_key_value_heads=8))]
    for name in ("llama3-8b", "mistral-7b-v0.3", "llama3-70b"):
        fields = json.loads((CONFIG_DIR / f"{name}.json").read_text())
        cases.append((name, {k: fields[k] for k in _LLAMA_FIELDS}))
    return cases


def _param_variants(f):
    """The right count and what the usual mistakes give, by name."""
    C, F, L, V = f["hidden_size"], f["intermediate_size"], f["num_hidden_layers"], f["vocab_size"]
    kv = f["num_key_value_heads"] * (C // f["num_attention_heads"])
    head = 0 if f["tie_word_embeddings"] else V * C

    def total(attention=2 * C * C + 2 * C * kv, mlp=3 * C * F, norms=2 * C, final=C, head=head):
        return V * C + L * (attention + mlp + norms) + final + head

    return {
        "right": total(),
        "no GQA": total(attention=4 * C * C),
        "no gate": total(mlp=2 * C * F),
        "head always tied": total(head=0),
        "head always untied": total(head=V * C),
        "no norms": total(norms=0, final=0),
        "LayerNorm-sized norms": total(norms=4 * C, final=2 * C),
    }


_PARAM_HINTS = {
    "no GQA": "grouped-query attention: k and v project to num_key_value_heads x head size "
              "(head size = hidden_size / num_attention_heads), not to hidden_size; only q and "
              "the output projection are hidden_size x hidden_size",
    "no gate": "SwiGLU has three matrices of hidden_size x intermediate_size: gate, up and down",
    "head always tied": "with tie_word_embeddings false the head is a second vocab_size x "
                        "hidden_size matrix of its own",
    "head always untied": "with tie_word_embeddings true the head reuses the embedding's matrix "
                          "and adds nothing",
    "no norms": "count the RMSNorms: one weight vector of hidden_size in each of the two norms "
                "of every layer, and one final norm",
    "LayerNorm-sized norms": "RMSNorm has a weight but no bias: hidden_size numbers per norm, "
                             "not 2 x hidden_size",
}


def _python_int(c, got, case, expected, float_hint):
    """Fail unless the learner's count is a Python int (not a bool, float, NumPy or torch number)."""
    __tracebackhide__ = True
    if isinstance(got, bool) or type(got) is not int:
        if isinstance(got, float):
            hint = f"return the count as an int: {float_hint}"
        elif isinstance(got, numbers.Integral) or hasattr(got, "item"):
            hint = "return a Python int: convert with int(...); a NumPy or torch number is not one"
        else:
            hint = "return the count as one Python int"
        c.fail(f"expected {expected}, got {type(got).__name__}", case=case, got=got, hint=hint)
    c.ok()


@checker
def check_params_from_config(fn):
    """Check params_from_config(fields) -> int against costs.count_params of the same config."""
    __tracebackhide__ = True
    c = Checker("params_from_config", fn)
    for label, fields in _llama_cases():
        _params_one(c, (label, fields), f"{label}: {fields}")
    # any width, heads (KV heads dividing them), MLP width, depth, vocabulary and tying
    each(c, _draw_fields, _params_one, n=25, stream=902)
    c.done()


def _draw_fields(d):
    heads = d.size(1, 128, small=16)
    kv = d.choice([n for n in range(1, heads + 1) if heads % n == 0])
    fields = dict(hidden_size=heads * 2 * d.size(1, 128, small=8),
                  intermediate_size=d.size(1, 65_536, small=256),
                  num_hidden_layers=d.size(1, 128, small=8), num_attention_heads=heads,
                  num_key_value_heads=kv, vocab_size=d.size(1, 256_000, small=500),
                  tie_word_embeddings=d.boolean())
    return ("a drawn config", fields), f"a drawn config: {fields}"


def _params_one(c, args, case):
    """Check params_from_config on one dict of fields."""
    __tracebackhide__ = True
    label, fields = args
    given = copy.deepcopy(fields)
    got = c.call(given, case=case)
    after = given   # as the call left it
    if after != fields:
        c.fail("the config dict was changed", case=case, hint="read the fields; do not "
               "add, remove or change entries of the dict you are given")
    if got is None:
        c.fail("nothing was returned", case=case, hint="end with `return total`")
    _python_int(c, got, case, "a whole number of parameters as a Python int",
                "use // rather than / for divisions")
    full = dict(fields, model_type="llama", max_position_embeddings=1)
    want = count_params(config_from_dict(full))
    if got != want:
        for what, value in _param_variants(fields).items():
            if what != "right" and got == value and value != want:
                c.fail(f"the count is off by {got - want:+,}", case=label, expected=f"{want:,}",
                       got=f"{got:,}", hint=_PARAM_HINTS[what])
        c.fail(f"the count is off by {got - want:+,}", case=label, expected=f"{want:,}",
               got=f"{got:,}", hint="per layer: q, k, v and output projections, three "
               "SwiGLU matrices, two RMSNorm weights; then the embedding, the final norm "
               "and, unless tied, the head")
    c.ok()


def _attention_flop_variants(T, C, causal):
    """The right count and what the usual mistakes give, by name."""
    pairs = T * (T + 1) // 2 if causal else T * T
    return {
        "right": 4 * C * pairs,
        "every pair although causal": 4 * C * T * T,
        "the diagonal left out": 4 * C * (T * (T - 1) // 2 if causal else T * T),
        "causal although not": 4 * C * (T * (T + 1) // 2),
        "2C per pair": 2 * C * pairs,
        "8C per pair": 8 * C * pairs,
        "projections counted too": 4 * C * pairs + 8 * T * C * C,
    }


_FLOP_HINTS = {
    "every pair although causal": "with causal=True query t meets only keys 0..t, so there are "
                                  "T(T+1)/2 query-key pairs, not T x T: a causal kernel skips the "
                                  "hidden keys",
    "the diagonal left out": "each query also meets its own key: query t meets t + 1 keys "
                             "(0..t), T(T+1)/2 pairs in all",
    "causal although not": "with causal=False every query meets all T keys: T x T pairs",
    "2C per pair": "each pair costs 2C FLOPs for its score and another 2C for adding its value "
                   "into the weighted sum: 4C per pair",
    "8C per pair": "each pair costs 4C FLOPs in all: 2C for the score (C multiplications and C "
                   "additions) and 2C for the weighted sum; you counted more",
    "projections counted too": "count only the scores and the weighted sums: the q, k, v and "
                               "output projections are not part of this count",
}


@checker
def check_attention_flops(fn):
    """Check attention_flops(T, d_model, causal=True) -> int: 4 C x (query-key pairs computed)."""
    __tracebackhide__ = True
    c = Checker("attention_flops", fn)
    cases = [(6, 8, True), (6, 8, False), (1, 4, True), (1, 4, False), (2, 3, True),
             (7, 16, True), (7, 16, False), (128, 64, True), (1024, 128, True), (1024, 128, False),
             (5, 768, None)]                    # None: the default, which is causal
    for T, C, causal in cases:
        _flops_one(c, (T, C, causal))
    # any length up to past Llama 3's 8,192 positions, any width up to 16,384
    each(c, _draw_flops, lambda c, args, case: _flops_one(c, args), n=25, stream=903)
    c.done()


def _draw_flops(d):
    T = d.length(small=64, tables=(128, 1_024, 8_192))
    C = d.size(1, 16_384, small=64)
    causal = d.choice((True, False, None))
    return (T, C, causal), None


def _flops_one(c, args):
    """Check attention_flops on one (T, d_model, causal); causal None: the default."""
    __tracebackhide__ = True
    T, C, causal = args
    args = (T, C) if causal is None else (T, C, causal)
    case = (f"attention_flops({T}, {C})" if causal is None
            else f"attention_flops({T}, {C}, causal={causal})")
    got = c.call(*args, case=case, none_hint="end with `return` and the count")
    _python_int(c, got, case, "a Python int",
                "use // for the division by 2, or int(...) around the result")
    variants = _attention_flop_variants(T, C, True if causal is None else causal)
    want = variants.pop("right")
    if got != want:
        for what, value in variants.items():
            if got == value and value != want:
                c.fail(f"the count is off by {got - want:+,}", case=case,
                       expected=f"{want:,}", got=f"{got:,}", hint=_FLOP_HINTS[what])
        c.fail(f"the count is off by {got - want:+,}", case=case, expected=f"{want:,}",
               got=f"{got:,}", hint="4C FLOPs per query-key pair (2C for the score, 2C for "
               "the weighted sum); causal: query t meets keys 0..t, T(T+1)/2 pairs; not "
               "causal: T x T pairs")
    c.ok()


def _tiled(q, k, v, block, *, rescale_out=True, rescale_sum=True, local_mask=False, scale=True):
    """Causal attention by key blocks with an online softmax, and the usual mistakes as options.

    Shapes: q, k (T, D), v (T, Dv) -> (T, Dv)
    """
    T, D = q.shape
    out = torch.empty(T, v.shape[1], dtype=q.dtype)
    for qs in range(0, T, block):
        qb = q[qs:qs + block] / (math.sqrt(D) if scale else 1)
        n = qb.shape[0]
        m = torch.full((n, 1), float("-inf"), dtype=q.dtype)
        l, acc = torch.zeros(n, 1, dtype=q.dtype), torch.zeros(n, v.shape[1], dtype=q.dtype)
        for ks in range(0, qs + n, block):
            kb, vb = k[ks:ks + block], v[ks:ks + block]
            s = qb @ kb.T
            rows = torch.arange(n)[:, None] + (0 if local_mask else qs)
            cols = torch.arange(kb.shape[0])[None, :] + (0 if local_mask else ks)
            s = s.masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=1, keepdim=True))
            p = torch.exp(s - m_new)
            factor = torch.exp(m - m_new)
            l = (l * factor if rescale_sum else l) + p.sum(dim=1, keepdim=True)
            acc = (acc * factor if rescale_out else acc) + p @ vb
            m = m_new
        out[qs:qs + n] = acc / l
    return out


def _reference(q, k, v):
    T = q.shape[0]
    scores = q @ k.T / math.sqrt(q.shape[1])
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


_TILED_HINTS = {
    "never rescales": (dict(rescale_out=False, rescale_sum=False),
                       "when a block raises the running maximum from m to m_new, everything "
                       "summed so far was exponentiated against the old maximum: multiply both "
                       "the running sum of values and the normaliser by exp(m - m_new)"),
    "running sum of values not rescaled": (
        dict(rescale_out=False), "rescale the running sum of values too: acc = acc * "
        "exp(m - m_new) + p @ v_block, as you do for the normaliser"),
    "normaliser not rescaled": (
        dict(rescale_sum=False), "rescale the normaliser as well as the output: l = l * "
        "exp(m - m_new) + p.sum(...); otherwise the final division uses a sum of mixed scales"),
    "mis-aligned causal mask": (
        dict(local_mask=True), "the causal mask must compare global positions: query "
        "q_start + i may see key k_start + j when k_start + j <= q_start + i; indices inside a "
        "block are not positions"),
    "no scaling": (dict(scale=False), "divide the scores by sqrt(D) before the softmax"),
}


@learner_side
class _Largest(TorchDispatchMode):
    """Records the largest tensor any operation produces (`Checker.call`'s around: where it ran)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out

    def report(self):
        return self.largest


def _qkv(n, T, D=4, Dv=3, dtype=torch.float64, scale=2.0):
    g = torch.Generator().manual_seed(seed(n))
    q = torch.randn(T, D, generator=g, dtype=dtype) * scale  # wide scores: the maximum moves
    k = torch.randn(T, D, generator=g, dtype=dtype) * scale
    return q, k, torch.randn(T, Dv, generator=g, dtype=dtype)


def _tiled_result(c, out, T, case, Dv=3):
    """The learner's output after the checks of type, shape and finiteness."""
    __tracebackhide__ = True
    if isinstance(out, np.ndarray):
        c.fail("expected a torch tensor, got a NumPy array", case=case,
               hint="stay in torch: build the output from q, k and v with torch operations")
    if not isinstance(out, torch.Tensor):
        c.fail(f"expected a torch tensor, got {type(out).__name__}", case=case,
               hint="return the (T, Dv) attention output, one tensor")
    c.shape(out, (T, Dv), "the output", case, hint="one output row per query, as wide as v")
    if not torch.isfinite(out).all():
        c.fail("the output contains inf or NaN", case=case, got=out,
               hint="start the running maximum at -inf (float('-inf')), not at a finite number, "
                    "and the sums at 0; process only key blocks that start at or before the "
                    "query block's last position. A finite start such as 0 or -1e9 breaks rows "
                    "whose scores all lie below it: every exp(s - m) underflows to 0 and acc / l "
                    "is 0 / 0")
    return out


def _tiled_one(c, fn, q, k, v, block, case):
    """Check tiled_attention on one input, against causal attention at the inputs' precision."""
    __tracebackhide__ = True
    T, Dv = q.shape[0], v.shape[1]
    out = _tiled_result(c, c.call(q, k, v, block, case=case), T, case, Dv)
    want = _reference(q, k, v)
    atol, rtol = (1e-9, 1e-8) if q.dtype == torch.float64 else (1e-5, 1e-4)
    if out.dtype != q.dtype:
        c.fail(f"{str(q.dtype).replace('torch.', '')} inputs give a result of another dtype",
               case=case, expected=q.dtype, got=out.dtype,
               hint="make new tensors with q's dtype (dtype=q.dtype) so the result stays in "
                    "the inputs' precision")
    if not torch.allclose(out.double(), want.double(), atol=atol, rtol=rtol):
        later = v.clone()
        later[T // 2:] += 5
        moved = c.call(q, k, later, block, case=case)
        early = slice(0, T // 2)
        if (T > 1 and isinstance(moved, torch.Tensor) and moved.shape == out.shape
                and not torch.allclose(moved[early].double(), out[early].double(), atol=atol)):
            c.fail("an early query's output changed when later values changed", case=case,
                   hint="a query must not see keys after it: mask them, comparing global "
                        "positions (q_start + i, k_start + j)")
        for what, (options, hint) in _TILED_HINTS.items():
            wrong = _tiled(q, k, v, block, **options)
            if not torch.allclose(wrong, want, atol=atol) and torch.allclose(
                    out.double(), wrong.double(), atol=atol):
                c.fail(f"the output is wrong: {what}", case=case, expected=want[:3],
                       got=out[:3], hint=hint)
        if q.dtype == torch.float64 and torch.allclose(out.double(), want, atol=1e-4):
            c.fail("the output is right only to float32 precision", case=case,
                   expected=want[:3], got=out[:3],
                   hint="the inputs are float64: compute in their dtype (make new tensors "
                        "with dtype=q.dtype, and no .float()), so the result keeps float64's "
                        "precision")
        c.fail("the output differs from causal attention", case=case, expected=want[:3],
               got=out[:3], hint="for each query block keep a running maximum m, normaliser "
               "l and sum of values acc; for each key block: scores, mask, m_new, rescale "
               "l and acc by exp(m - m_new), add the block's exp(s - m_new); return acc / l")
    c.ok()


# Scores of every size the domain holds, finite float64 (or float32): ordinary, large, and far
# below any finite stand-in for -inf (a running maximum started at -1e30 turns rows of scores
# near -1e32 into 0 / 0). float32 stops at 1e36, below its largest number, 3.4e38.
_SCALES = {torch.float64: (1.0, 30.0, 1e8, 1e17, 1e33, 1e40, 1e100, 1e250),
           torch.float32: (1.0, 30.0, 1e8, 1e17, 1e33, 1e36)}


def _draw_tiled(d):
    """Any T and block size (block sizes of 1 only for short T, to keep the loops short), q and k
    scaled so that scores reach 1e200 either way, or all lie far below zero."""
    T = d.length(tables=(128, 256), p_long=0.15)
    shortest = max(1, T // 12)
    block = d.integer(shortest, T + 3) if d.boolean(0.3) else d.integer(shortest,
                                                                        max(shortest, min(T, 12)))
    dtype = d.choice((torch.float64, torch.float64, torch.float32))
    scale = d.choice(_SCALES[dtype])
    below = d.boolean(0.6)
    D, Dv = d.choice((4, 1, 8)), d.choice((3, 1, 5))
    g = torch.Generator().manual_seed(d.seed())
    q = torch.randn(T, D, generator=g, dtype=torch.float64) * math.sqrt(scale)
    k = torch.randn(T, D, generator=g, dtype=torch.float64) * math.sqrt(scale)
    if below:   # every score far below zero
        q, k = q.abs(), -k.abs()
    v = torch.randn(T, Dv, generator=g, dtype=torch.float64)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    scores = "every score below zero, " if below else ""
    case = (f"q, k (T={T}, D={D}) of scale {math.sqrt(scale):.3g} ({scores}scores up to about "
            f"{scale:.0e}), v (T={T}, {Dv}), {str(dtype).replace('torch.', '')}, "
            f"block_size={block}")
    if T * max(D, Dv) <= 12:   # small enough to show: the learner can type it in
        case += "".join(f"\n            {name} = {t.tolist()}" for name, t in zip("qkv", (q, k, v)))
    return (q, k, v, block), case


@checker
def check_tiled_attention(fn):
    """Check tiled_attention(q, k, v, block_size) -> (T, Dv): causal, equal to the reference,
    holding one block_size x block_size tile of scores at a time."""
    __tracebackhide__ = True
    c = Checker("tiled_attention", fn)
    cases = [(0, 10, 3), (1, 8, 8), (2, 7, 1), (3, 5, 16), (4, 12, 4), (7, 33, 5)]
    for n, T, block in cases:
        q, k, v = _qkv(n, T)
        _tiled_one(c, fn, q, k, v, block,
                   f"q, k (T={T}, D=4), v (T={T}, 3), float64, block_size={block}")
    # every score far below any finite starting maximum: a finite start gives 0 / 0
    q, k, v = _qkv(8, 9)
    q = q.abs() * 1e20
    k = -k.abs() * 1e20
    case = ("q, k (T=9, D=4) whose every score is about -1e40, v (9, 3), float64, block_size=4")
    out = _tiled_result(c, c.call(q, k, v, 4, case=case), 9, case)
    if not torch.allclose(out.double(), _reference(q, k, v), atol=1e-9):
        c.fail("the output differs from causal attention when every score is very negative",
               case=case, expected=_reference(q, k, v)[:3], got=out[:3],
               hint="start the running maximum at -inf and subtract the running maximum before "
                    "every exp, so the largest score of a row always gives exp(0) = 1")
    c.ok()
    # memory: one block of scores at a time, never a block of queries against all keys
    T, D, block = 128, 4, 8
    q, k, v = _qkv(5, T, D=D)
    _, seen = call_inside(c, q, k, v, block, around=_Largest, case=f"T={T}, D={D}, block_size={block}")
    largest = seen["around"]
    allowed = max(block * block, T * max(D, 3))
    if not isinstance(largest, int) or largest > allowed:
        square = isinstance(largest, int) and largest >= T * T // 2
        c.fail("a tensor of T x T size was built" if square else
               "a tensor larger than one block of scores was built",
               case=f"T={T}, D={D}, block_size={block}",
               expected=f"tensors of at most {allowed:,} elements (block_size x block_size, or "
                        f"the inputs' T x D)",
               got=f"a tensor of {largest:,} elements" if isinstance(largest, int) else largest,
               hint="hold only one block of scores at a time (block_size x block_size): loop "
                    "over key blocks as well as query blocks, rather than scoring a block of "
                    "queries against all T keys at once, and build the causal mask per block "
                    "from positions, not as one T x T matrix")
    c.ok()
    q, k, v = (t.float() for t in _qkv(6, 9))
    case = "float32 inputs, T=9, block_size=4"
    out = _tiled_result(c, c.call(q, k, v, 4, case=case), 9, case)
    if out.dtype != torch.float32:
        c.fail("float32 inputs give a result of another dtype", case=case, expected="float32",
               got=out.dtype, hint="make new tensors with q's dtype (dtype=q.dtype) so the "
                                   "result stays in the inputs' precision")
    if not torch.allclose(out, _reference(q, k, v), atol=1e-5):
        c.fail("the output differs from causal attention for float32 inputs", case=case,
               expected=_reference(q, k, v)[:3], got=out[:3],
               hint="the same computation as for float64 inputs, in float32")
    c.ok()
    # any length, block size, dtype and scale of scores, far below zero too
    each(c, _draw_tiled, lambda c, args, case: _tiled_one(c, fn, *args, case), n=30,
         stream=901)
    c.done()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "params_from_config": (
        "Add up every weight of one layer (four attention projections, three SwiGLU matrices, two "
        "RMSNorm gains), times the layers, then the embedding, the final norm and the head.",
        "With grouped-query attention the k and v projections are C by (KV heads x head size), "
        "not C by C; the head is a separate matrix only when tie_word_embeddings is false.",
        "Read the fields from the dict, compute the head size as C / attention heads, and return "
        "an int.",
    ),
    "attention_flops": (
        "Count the query-key pairs the kernel computes, then multiply by the FLOPs one pair "
        "costs: 2C for its score and 2C for adding its value into the output.",
        "Causal query t meets t + 1 keys (itself included), not t; summed over T queries that "
        "is T(T + 1)/2 pairs. Without the mask every query meets all T keys. Keep the "
        "arithmetic in integers: a division with / makes a float.",
        "One expression for the pairs (chosen by causal), one multiplication, and an int "
        "returned.",
    ),
    "tiled_attention": (
        "Process the keys one block at a time, keeping per query a running maximum m, a running "
        "normaliser l and an unnormalised output acc; rescale l and acc whenever m grows.",
        "Start m at -inf (not 0 or a finite number: rows whose scores are all very negative then "
        "give NaN or zeros); multiply both l and acc by exp(m_old - m_new); apply the causal "
        "mask inside each block; divide acc by l only at the end.",
        "Loop over query blocks, and inside over key blocks up to the diagonal; never build the "
        "(T, T) score matrix or a block of all keys at once.",
    ),
}


# Questions on this lesson's ideas: `answer("09-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "09-train-memory": Number(
        prompt="Training with AdamW takes 16 bytes per parameter before activations. Mistral 7B "
               "v0.3 has 7,248,023,552 parameters: how many GiB does training it take, by that "
               "rule?",
        after="## 3. Memory",
        value=108.0, tolerance=0.5, unit="GiB",
        why="7,248,023,552 × 16 bytes = 115,968,376,832 bytes, divided by 2³⁰ bytes per GiB: "
            "about 108 GiB, more than one 80 GB GPU holds.",
        wrong=((115.5, 116.5, "that is in GB, 10⁹ bytes; a GiB is 2³⁰ = 1,073,741,824 bytes."),
               (13.0, 14.0, "that is its bfloat16 weights alone; training also keeps gradients, "
                            "master weights and AdamW's two moments."),
               (26.5, 27.5, "that is float32 weights alone, 4 bytes a parameter; AdamW's "
                            "moments and the gradients come on top.")),
        otherwise="multiply the parameters by 16 bytes, then divide by 1,073,741,824."),
    "09-attn-flops": Number(
        prompt="Attention's own arithmetic is 4·L·C·context FLOPs per token in the forward "
               "pass. How many MFLOP (millions) per token is that for GPT-2 small (L = 12, "
               "C = 768) at a context of 1,024?",
        after="## 2. FLOPs",
        value=37.75, tolerance=0.05, unit="MFLOP",
        why="4 × 12 × 768 × 1,024 = 37,748,736 FLOPs, small beside the 2N ≈ 249 MFLOP of its "
            "weights: attention is half of the forward pass only past about 6,700 tokens.",
        wrong=((18.8, 18.95, "that is 2·L·C·context, the scores alone; the weighted sum of the "
                             "values costs as much again."),
               (113, 113.5, "that is the training figure, 3 times the forward's."),
               (248, 250, "that is 2N, the weights' share; the question asks the attention "
                          "term.")),
        otherwise="multiply 4 × L × C × context, then divide by a million."),
    "09-decode-bound": Choice(
        prompt="Section 5 decoded a 200 MB model at batch 1 on this CPU. What set its time per "
               "token?",
        after="## 5. The roofline: compute or bandwidth?",
        choices={
            "a": ("the arithmetic: FLOPs per token over the matmul peak",
                  "the cell printed what compute alone would take beside the measured step: "
                  "at half a FLOP per byte, left of the balance point, the arithmetic units "
                  "wait for the weights to arrive, and the step followed the bytes read."),
            "b": ("reading every weight from memory once per token: bytes over bandwidth",
                  "decode at batch 1 does about half a FLOP per byte of weights, left of the "
                  "machine's balance point (the roofline cell says how far); the time "
                  "predicted from bandwidth was within a small factor of the measured one "
                  "(asserted)."),
            "c": ("attention over the growing context",
                  "at short contexts attention's arithmetic is a rounding error next to the "
                  "weights' (section 2)."),
            "d": ("Python's fixed overhead per step",
                  "that dominates a tiny model (section 5's width-128 TinyLM); at 200 MB the "
                  "weights take far longer to read than the overhead."),
        },
        right="b"),
    "09-tiled": Choice(
        prompt="Tiled attention with an online softmax (exercise 3) against the naive version "
               "at the same T: what does it change?",
        after="## 4. The FlashAttention idea: softmax one block at a time",
        choices={
            "a": ("it never holds the T × T matrix, so its peak memory stops growing as T²; "
                  "the arithmetic stays",
                  "it computes the same result block by block, rescaling the running sums; "
                  "the FLOPs are the same, the memory far smaller."),
            "b": ("it does fewer FLOPs, since it skips most of the scores",
                  "every query still meets every key it may see; the tiles change what is "
                  "held at once, not what is computed."),
            "c": ("it gives a slightly different, approximate result",
                  "the online softmax is exact: yours matched the fused kernel to 1e-5."),
        },
        right="a"),
}
