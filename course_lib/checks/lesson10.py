"""Checkers for lesson 10, real models: GPT-2's saved weights mapped into TinyLM's names and layout."""
import itertools

import numpy as np
import torch

from course_lib.checks.core import Checker, checker, seed, tensors_close
from course_lib.checks.domain import each
from course_lib.convert import tinylm_state_dict
from course_lib.model import ModelConfig

# GPT-2's name for each block weight -> TinyLM's, for naming the source in feedback.
_SOURCES = {"norm1": "ln_1", "norm2": "ln_2", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj",
            "mlp.up": "mlp.c_fc", "mlp.down": "mlp.c_proj"}


def _gpt2_state(n, n_layers, dtype, C=6, V=11, max_len=9, seeded=False):
    """A GPT-2 state dict as a saved file names it (no `transformer.` prefix), random numbers,
    with the `h.N.attn.bias` causal-mask buffers older files hold; drawn from seed(n) (from n
    itself when `seeded`)."""
    g = torch.Generator().manual_seed(n if seeded else seed(n))

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    hf = {"wte.weight": rand(V, C), "wpe.weight": rand(max_len, C),
          "ln_f.weight": rand(C), "ln_f.bias": rand(C)}
    for i in range(n_layers):
        h = f"h.{i}."
        hf |= {h + "ln_1.weight": rand(C), h + "ln_1.bias": rand(C),
               h + "attn.bias": torch.ones(1, 1, max_len, max_len, dtype=dtype).tril(),
               h + "attn.c_attn.weight": rand(C, 3 * C), h + "attn.c_attn.bias": rand(3 * C),
               h + "attn.c_proj.weight": rand(C, C), h + "attn.c_proj.bias": rand(C),
               h + "ln_2.weight": rand(C), h + "ln_2.bias": rand(C),
               h + "mlp.c_fc.weight": rand(C, 4 * C), h + "mlp.c_fc.bias": rand(4 * C),
               h + "mlp.c_proj.weight": rand(4 * C, C), h + "mlp.c_proj.bias": rand(C)}
    config = ModelConfig(vocab_size=V, max_len=max_len, d_model=C, n_heads=2, n_layers=n_layers,
                         attn_bias=True, gelu_approx="tanh")
    return hf, tinylm_state_dict(config, hf)


def _source(name):
    """GPT-2's name of a TinyLM weight, for feedback: blocks.0.norm1.weight -> h.0.ln_1.weight."""
    parts = name.split(".")
    if parts[0] == "blocks":
        return f"h.{parts[1]}.{_SOURCES['.'.join(parts[2:-1])]}.{parts[-1]}"
    return {"tok_emb.weight": "wte.weight", "pos_emb.weight": "wpe.weight", "norm.weight":
            "ln_f.weight", "norm.bias": "ln_f.bias", "head.weight": "wte.weight (tied)"}[name]


def _qkv_orders(expected):
    """The fused q/k/v weight (or bias) with its three blocks in each wrong order."""
    blocks = expected.chunk(3, dim=0)
    for order in itertools.permutations(range(3)):
        if order != (0, 1, 2):
            yield "".join("qkv"[j] for j in order), torch.cat([blocks[j] for j in order])


def _check_keys(c, got, expected, case):
    __tracebackhide__ = True
    if not all(isinstance(name, str) for name in got):
        odd = [name for name in got if not isinstance(name, str)][:3]
        c.fail("some keys of the result are not names", case=case, got=odd,
               hint="key the dict by TinyLM's parameter names, strings such as 'tok_emb.weight'")
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    prefixed = [n for n in extra if any(n.endswith("." + m) for m in missing)]
    if missing and len(prefixed) >= len(missing):
        c.fail(f"{len(extra)} names are not TinyLM's: they carry a prefix", case=case,
               expected=missing[:2], got=prefixed[:2],
               hint="use TinyLM's names exactly, with nothing before them: 'tok_emb.weight', "
                    "'blocks.0.attn.qkv.weight', ...")
    blocks = sorted({int(n.split(".")[1]) for n in expected if n.startswith("blocks.")})
    whole = [i for i in blocks if all(n in missing for n in expected if n.startswith(f"blocks.{i}."))]
    if whole:
        c.fail(f"block {whole[0]} is missing altogether" + (f" ({len(whole)} blocks are)"
                                                            if len(whole) > 1 else ""),
               case=case, expected=f"blocks.{whole[0]}.* in the result",
               hint="loop over every block, `for i in range(n_layers)`: GPT-2's h.{i}.* becomes "
                    "TinyLM's blocks.{i}.*")
    fused = [n for n in missing if ".attn.qkv.weight" in n]
    if fused:
        c.fail("the fused attn.qkv is missing", case=case, expected=fused[:2],
               got=[n for n in extra if ".attn." in n][:3] or None,
               hint="GPT-2's c_attn is TinyLM's attn.qkv: one (3C, C) weight and one (3C,) bias "
                    "holding q, k and v together (c_attn's weight transposed), not three "
                    "separate q, k, v entries")
    if missing and all(n.endswith(".bias") for n in missing):
        c.fail("biases are missing", case=case, expected=missing[:3],
               hint="GPT-2 has biases on every projection (c_attn, c_proj, c_fc) and in every "
                    "LayerNorm: map each h.N.<layer>.bias to blocks.N.<ours>.bias as well as the "
                    "weights")
    if "head.weight" in missing:
        c.fail("there is no head.weight", case=case, expected="'head.weight' in the result",
               hint="GPT-2's head is tied: it is the token embedding's matrix, so set "
                    "head.weight to the same tensor as tok_emb.weight (wte.weight)")
    if missing:
        c.fail(f"{len(missing)} of TinyLM's weights are missing", case=case, expected=missing[:4],
               got=f"{len(got)} names", hint="produce every name of TinyLM's state dict: "
                                             "tok_emb, pos_emb, blocks.N.*, norm and head")
    if any(name.endswith(".attn.bias") for name in extra):
        c.fail("the result holds GPT-2's h.N.attn.bias", case=case, got=extra[:3],
               hint="h.N.attn.bias is a causal-mask buffer some GPT-2 files hold, not a "
                    "weight: leave it out (TinyLM builds its mask itself)")
    if extra:
        c.fail(f"{len(extra)} names are not TinyLM's", case=case, got=extra[:4],
               hint="use TinyLM's names (print(TinyLM(config).state_dict().keys())), "
                    "and nothing else")
    c.ok()


def _check_value(c, name, value, want, hf, case):
    __tracebackhide__ = True
    if not isinstance(value, torch.Tensor):
        c.fail(f"{name} is not a tensor", case=case, got=type(value).__name__,
               hint="each value of the result is a torch.Tensor taken from the given state dict")
    transpose_hint = (f"GPT-2's Conv1D stores its weight as (in, out), the transpose of "
                      f"nn.Linear's (out, in): take {_source(name)}.T")
    if tuple(value.shape) != tuple(want.shape):
        hint = transpose_hint if tuple(value.shape) == tuple(want.T.shape) else (
            f"{name} comes from GPT-2's {_source(name)}")
        c.fail(f"{name} has the wrong shape", case=case, expected=tuple(want.shape),
               got=tuple(value.shape), hint=hint)
    if value.dtype != want.dtype:
        c.fail(f"{name} has the wrong dtype", case=case, expected=want.dtype, got=value.dtype,
               hint="keep the given tensors' dtype: no .float() or .double()")
    if torch.equal(value, want):
        return c.ok()
    if value.ndim == 2 and torch.equal(value, want.T):
        c.fail(f"{name} is not transposed", case=case, hint=transpose_hint)
    source = hf.get(_source(name).split(" ")[0])
    if source is not None and source.ndim == 2 and torch.equal(value, source.reshape(want.shape)):
        c.fail(f"{name} is GPT-2's matrix reshaped, not transposed", case=case, hint=(
            "reshape (or view) keeps the numbers in memory order, which is not a transpose: "
            "use .T"))
    if "attn.qkv" in name:
        for order, wrong in _qkv_orders(want):
            if torch.equal(value, wrong):
                c.fail(f"{name} holds q, k, v in the order {', '.join(order)}", case=case,
                       hint="keep GPT-2's order q, k, v: c_attn's outputs are q, then k, then v, "
                            "and TinyLM splits attn.qkv in that same order")
    for a, b in (("norm1", "norm2"), ("norm2", "norm1")):
        if f".{a}." in name and torch.equal(value, hf[_source(name.replace(a, b))]):
            c.fail(f"{name} holds GPT-2's {_source(name.replace(a, b))}", case=case, hint=(
                "ln_1 is the norm before attention (TinyLM's norm1), ln_2 the norm before "
                "the MLP (norm2)"))
    c.fail(f"the values of {name} are not right", case=case, expected=want, got=value,
           hint=f"{name} is GPT-2's {_source(name)}" + (", transposed" if value.ndim == 2 and
                                                         "norm" not in name else ""))


@checker
def check_gpt2_to_tinylm(fn):
    """Check gpt2_to_tinylm(hf, n_layers) -> TinyLM's state dict, from a GPT-2 (Conv1D) state dict."""
    __tracebackhide__ = True
    c = Checker("gpt2_to_tinylm", fn)
    for n, n_layers, dtype, C, V, max_len in ((0, 2, torch.float32, 6, 11, 9),
                                              (1, 1, torch.float64, 8, 7, 5),
                                              (2, 3, torch.float32, 4, 13, 12)):
        _gpt2_one(c, (_gpt2_state(n, n_layers, dtype, C=C, V=V, max_len=max_len), n_layers),
                  _gpt2_case(C, V, max_len, n_layers, dtype))
    # any depth, width, vocabulary, table of positions and dtype
    each(c, _draw_gpt2, _gpt2_one, n=6, stream=1003)
    c.done()


def _gpt2_case(C, V, max_len, n_layers, dtype):
    return (f"a GPT-2 state dict of width {C}, vocabulary {V}, {max_len} positions, "
            f"{n_layers} layer(s), {dtype}, with h.N.attn.bias buffers; n_layers={n_layers}")


def _draw_gpt2(d):
    n_layers, C = d.integer(1, 5), 2 * d.integer(1, 8)
    V, max_len = d.size(1, 300, small=16), d.size(1, 64, small=12)
    dtype = d.choice((torch.float32, torch.float64, torch.float16, torch.bfloat16))
    state = _gpt2_state(d.seed(), n_layers, dtype, C=C, V=V, max_len=max_len, seeded=True)
    return (state, n_layers), _gpt2_case(C, V, max_len, n_layers, dtype)


def _gpt2_one(c, args, case):
    """Check gpt2_to_tinylm on one GPT-2 state dict."""
    __tracebackhide__ = True
    (hf, expected), n_layers = args
    given = {name: t.clone() for name, t in hf.items()}
    got = c.call(given, n_layers, case=case,
                 crash_hint="read each name as the table gives it (no `transformer.` prefix) "
                            "and loop over range(n_layers); take the sizes from the tensors, "
                            "not from GPT-2 small's",
                 none_hint="return the new dict of TinyLM's names, e.g. `return out`")
    after = given   # as the call left it
    if not isinstance(after, dict) or set(after) != set(hf) or any(
            not isinstance(after[k], torch.Tensor) or after[k].shape != hf[k].shape
            or after[k].dtype != hf[k].dtype or not torch.equal(after[k], hf[k]) for k in hf):
        c.fail("the given state dict was changed", case=case, hint=(
            "build and return a new dict; leave the given one as it was (no pop, no "
            "assignment into it, no in-place .t_() or .copy_())"))
    c.ok()
    if not isinstance(got, dict):
        c.fail("expected a dict of TinyLM's names to tensors", case=case,
               got=type(got).__name__, hint="return the new dict, e.g. `return out`")
    _check_keys(c, got, expected, case)
    for name, want in expected.items():
        _check_value(c, name, got[name], want, hf, case)


# ---------------------------------------------------------------------------
# previous_token_scores
# ---------------------------------------------------------------------------

def _causal_weights(gen, shape, dtype):
    """Random causal attention weights (..., T, T): each row a distribution over keys j <= i."""
    T = shape[-1]
    scores = torch.randn(*shape, generator=gen, dtype=torch.float64) * 2
    hidden = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1).to(dtype)


def _previous_token_mistakes(w):
    T = w.shape[-1]
    below = w.diagonal(offset=-1, dim1=-2, dim2=-1)                       # (..., T - 1)
    return [
        (below.sum(-1) / T, "average over the T - 1 queries t = 1 .. T - 1 that have a previous "
                            "token: query 0 is left out, not counted as a 0"),
        (w.diagonal(dim1=-2, dim2=-1).mean(-1), "the previous token is key t - 1, one below the "
                                                "diagonal (diagonal(offset=-1)); the diagonal "
                                                "itself is each query's weight on its own token"),
        (w.diagonal(dim1=-2, dim2=-1)[..., 1:].mean(-1),
         "the previous token is key t - 1, one below the diagonal (diagonal(offset=-1)); the "
         "diagonal itself is each query's weight on its own token"),
        (below.sum(-1), "take the mean over the queries t = 1 .. T - 1, not their sum"),
        (below.amax(-1), "take the mean over the queries t = 1 .. T - 1, not the largest"),
        (w[..., 1:, 0].mean(-1), "the previous token of query t is key t - 1, not the first key"),
        (below.mean(tuple(range(below.ndim))) * torch.ones(w.shape[:-2], dtype=w.dtype),
         "keep one score for every leading index (every layer and head): average over the "
         "queries only, the last axis of diagonal(offset=-1)"),
    ]


def _scores_result(c, out, w, shape, case):
    """The learner's scores as a float64 tensor, after the type, shape, dtype and finiteness checks."""
    __tracebackhide__ = True
    if isinstance(out, np.ndarray):
        c.fail("expected a torch tensor, got a NumPy array", case=case,
               hint="stay in torch: the weights are a tensor, and torch's own operations keep "
                    "every leading axis")
    if not isinstance(out, torch.Tensor):
        c.fail(f"expected a torch tensor, got {type(out).__name__}", case=case,
               hint="return one tensor of scores, shape (...): no .item(), .tolist() or tuple")
    c.shape(out, shape, "the tensor of scores", case,
            hint=f"one score per leading index of weights: the shape {tuple(shape)}, the last "
                 f"two axes (queries, keys) gone")
    if out.dtype != w.dtype:
        c.fail("the scores have the wrong dtype", case=case, expected=str(w.dtype),
               got=str(out.dtype), hint="return the scores in the weights' dtype: no .float() "
                                        "or .double() on the result")
    got = out.detach().double()
    if not bool(torch.isfinite(got).all()):
        c.fail("the scores contain inf or NaN", case=case, got=got,
               hint="average only the T - 1 weights below the diagonal, which are finite")
    c.ok()
    return got


@checker
def check_previous_token_scores(fn):
    """Check previous_token_scores(weights) -> (...): mean of weights[..., t, t - 1] over t >= 1."""
    __tracebackhide__ = True
    c = Checker("previous_token_scores", fn)
    gen = torch.Generator().manual_seed(seed(10))
    cases = [((2, 3, 6, 6), torch.float32), ((4, 5, 5), torch.float32), ((3, 2, 2), torch.float32),
             ((2, 2, 9, 9), torch.float64), ((7, 7), torch.float32), ((3, 4, 8, 8), torch.bfloat16)]
    for shape, dtype in cases:
        _previous_one(c, _causal_weights(gen, shape, dtype))
    # any leading axes, any T from 2 (past tables of 128 and 256), every dtype
    each(c, _draw_weights, lambda c, w, case: _previous_one(c, w), n=20, stream=1002)
    c.done()


_PREVIOUS = ("the score is the weight query t puts on key t - 1 (the entries just below the "
             "diagonal of the last two axes), averaged over the queries t = 1 .. T - 1, one "
             "number for each leading index")


def _draw_weights(d):
    lead = tuple(d.integer(1, 4) for _ in range(d.integer(0, 3)))
    T = d.length(lo=2, tables=(128, 256))
    if T > 16:
        lead = lead[:1]
    dtype = d.choice((torch.float32, torch.float64, torch.bfloat16, torch.float16))
    w = _causal_weights(torch.Generator().manual_seed(d.seed()), lead + (T, T), dtype)
    return w, None


def _previous_one(c, w):
    """Check previous_token_scores on one tensor of causal weights."""
    __tracebackhide__ = True
    shape, dtype, formula = tuple(w.shape), w.dtype, _PREVIOUS
    case = (f"weights of shape {shape} in {str(dtype).replace('torch.', '')}: causal rows "
            f"that each sum to 1")
    out = c.call(w, case=case, crash_hint="the weights on the previous token are the entries "
                 "just below the diagonal of the last two axes, (..., T - 1) of them")
    lead = shape[:-2]
    if isinstance(out, torch.Tensor) and out.dim() == len(lead) + 1 and tuple(
            out.shape[:-1]) == tuple(lead) and out.shape[-1] in (1, shape[-1] - 1):
        c.fail("the result still has an axis of queries", case=case, expected=tuple(lead),
               got=tuple(out.shape), hint="average over the queries, the last axis of "
               "diagonal(offset=-1), without keepdim: one number per leading index")
    if isinstance(out, (float, int)) or (isinstance(out, torch.Tensor) and out.dim() == 0
                                         and lead):
        c.fail("the result is one number for all heads", case=case, expected=tuple(lead),
               got=out if not isinstance(out, torch.Tensor) else tuple(out.shape),
               hint="keep one score for every leading index (every layer and head): average "
                    "over the queries only")
    got = _scores_result(c, out, w, lead, case)
    want = w.double().diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)
    if not tensors_close(got, want, dtype):
        for wrong, hint in _previous_token_mistakes(w.double()):
            if wrong.shape == want.shape and tensors_close(got, wrong, dtype):
                c.fail("the scores are not right", case=case, expected=want, got=got,
                       hint=hint)
        c.fail("the scores are not right", case=case, expected=want, got=got, hint=formula)
    c.ok()


# ---------------------------------------------------------------------------
# prefix_lm_mask
# ---------------------------------------------------------------------------

def _prefix_mask(T, n_prefix, *, inclusive=False, prefix_sees_all=False):
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    in_prefix = (j <= n_prefix) if inclusive else (j < n_prefix)
    allowed = (j <= i) | in_prefix
    if prefix_sees_all:
        allowed = allowed | (i < n_prefix)
    return np.where(allowed, 0.0, -np.inf)


def _describe_mask(m):
    return np.where(np.isfinite(m), "0", "-inf") if m.ndim == 2 else m


_PREFIX_RULE = "query i sees key j when j <= i or j < n_prefix: 0 there, -inf elsewhere"


def _prefix_one(c, fn, T, n_prefix, case):
    """Check prefix_lm_mask on one (T, n_prefix)."""
    __tracebackhide__ = True
    rule = _PREFIX_RULE
    got = c.call(T, n_prefix, case=case, none_hint="end with `return` and the mask")
    if isinstance(got, torch.Tensor):
        c.fail("expected a NumPy array, got a torch tensor", case=case,
               hint="build the mask with NumPy (np.zeros, np.where, np.triu), as lesson "
                    "01's causal_mask does: lesson 01's attention takes NumPy arrays")
    if not isinstance(got, np.ndarray):
        c.fail(f"expected a NumPy array, got {type(got).__name__}", case=case,
               hint="return a (T, T) NumPy float array of 0 and -inf")
    c.shape(got, (T, T), "the mask", case,
            hint="one row per query and one column per key, for this call's T: build the "
                 "mask from T itself, not by slicing a table of a fixed size")
    if got.dtype == bool:
        c.fail("the mask is boolean", case=case, got=got,
               hint="return the additive mask: 0.0 where a query may look and -np.inf where "
                    "it may not (np.where(allowed, 0.0, -np.inf))")
    if not np.issubdtype(got.dtype, np.floating):
        c.fail(f"the mask has dtype {got.dtype}, not a float dtype", case=case, got=got,
               hint="return floats: 0.0 where a query may look and -np.inf where it may not")
    want = _prefix_mask(T, n_prefix)
    ok_values = np.isin(got, (0.0, -np.inf)) | np.isnan(got)
    if not ok_values.all():
        odd = got[~ok_values][:3]
        c.fail("the mask holds values other than 0 and -inf", case=case, got=odd,
               hint="use exactly 0.0 where a query may look and -np.inf where it may not "
                    "(a large negative number such as -1e9 is not -inf)")
    if np.isnan(got).any():
        c.fail("the mask holds NaN", case=case, got=_describe_mask(got), hint=rule)
    if not np.array_equal(got, want):
        if np.array_equal(np.isfinite(got), ~np.isfinite(want)):
            c.fail("the mask's polarity is swapped", case=case,
                   expected=_describe_mask(want), got=_describe_mask(got),
                   hint="0 goes where a query may look and -inf where it may not")
        wrongs = [
            (np.where(np.tril(np.ones((T, T), dtype=bool)), 0.0, -np.inf),
             "the prefix's positions see each other in both directions: a key j < n_prefix "
             "is visible to every query, not only to queries i >= j"),
            (_prefix_mask(T, n_prefix, inclusive=True),
             "the prefix is keys 0 .. n_prefix - 1: j < n_prefix, not j <= n_prefix"),
            (_prefix_mask(T, n_prefix, prefix_sees_all=True),
             "a prefix position sees the whole prefix and nothing after it: the keys after "
             "the prefix stay hidden from it (only j <= i or j < n_prefix)"),
            (np.zeros((T, T)), "only the prefix is bidirectional: positions after it are "
                               "causal, so key j > i is hidden unless j < n_prefix"),
            (np.where(np.tril(np.ones((T, T), dtype=bool), -1) |
                      (np.arange(T)[None, :] < n_prefix), 0.0, -np.inf),
             "each query may see its own position: j <= i, not j < i"),
        ]
        for wrong, hint in wrongs:
            if np.array_equal(got, wrong):
                c.fail("the mask is not right", case=case, expected=_describe_mask(want),
                       got=_describe_mask(got), hint=hint)
        c.fail("the mask is not right", case=case, expected=_describe_mask(want),
               got=_describe_mask(got), hint=rule)
    c.ok()


def _draw_prefix(d):
    """A length from 1 to past tables of 128, 256 and 512 positions (a named case passes GPT-2's
    1,024: masks that long are kept few, since a grading records each), and a prefix from none
    to all."""
    T = d.length(tables=(128, 256, 512))
    n_prefix = d.choice((d.integer(0, T), 0, T)) if T else 0
    return (T, n_prefix), f"prefix_lm_mask({T}, {n_prefix})"


@checker
def check_prefix_lm_mask(fn):
    """Check prefix_lm_mask(T, n_prefix) -> (T, T) NumPy additive mask, 0 / -inf."""
    __tracebackhide__ = True
    c = Checker("prefix_lm_mask", fn)
    for T, n_prefix in ((6, 3), (5, 0), (4, 4), (7, 1), (1, 0), (1, 1), (9, 5), (3, 2),
                        (1_030, 700)):   # past GPT-2's 1,024 positions, a table in reach
        _prefix_one(c, fn, T, n_prefix, f"prefix_lm_mask({T}, {n_prefix})")
    # lengths past every other table a learner might slice
    each(c, _draw_prefix, lambda c, args, case: _prefix_one(c, fn, *args, case), n=20,
         stream=1001)
    c.done()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "previous_token_scores": (
        "Query t's weight on key t - 1 sits just below the main diagonal of the (T, T) weights; "
        "take that diagonal for every leading index and average it.",
        "The diagonal is the query's weight on itself, not on the previous token; the one "
        "below it has T - 1 entries, one per query from 1 on, so average those, not over T. "
        "And keep the leading axes: reduce the last two only.",
        "torch's diagonal with an offset and the two last dims, then a mean over the new last "
        "axis, gives (...) in weights' dtype.",
    ),
    "prefix_lm_mask": (
        "Query i may see key j in two cases: j <= i (causal), or j inside the prefix. Build the "
        "condition for every (i, j) at once and turn it into 0 or -inf.",
        "The prefix opens only keys j < n_prefix to every query, not the queries i < n_prefix "
        "to every key: a prefix position must not see past the prefix. n_prefix = 0 must "
        "give exactly the causal mask.",
        "A column of query indices against a row of key indices broadcasts to (T, T); np.where "
        "on the combined condition gives a float array.",
    ),
    "gpt2_to_tinylm": (
        "Rename every GPT-2 tensor to TinyLM's name, following the table; most are copied as "
        "they are.",
        "GPT-2 stores its linear layers as Conv1D, (in, out): the attention and MLP weight "
        "matrices must be transposed to nn.Linear's (out, in); LayerNorm weights and all biases "
        "are not. The head shares the token embedding.",
        "A dict for the embeddings and the final norm, then a loop over the layers and over the "
        "six sub-layer names, transposing the weights that are matrices.",
    ),
}


# Questions on this lesson's ideas: `answer("10-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "10-transpose": Choice(
        prompt="Leaving block 0's attention output matrix untransposed moved the logits far "
               "beyond rounding, without any error. Why can forgetting to transpose a GPT-2 "
               "weight go unnoticed by the shapes?",
        after="one mistake a port can make without any error",
        choices={
            "a": ("GPT-2's Conv1D stores (in, out) and nn.Linear (out, in), and a C × C matrix "
                  "fits either way",
                  "the square attention projection has the same shape transposed or not, so "
                  "only a comparison of the logits catches it."),
            "b": ("PyTorch transposes mismatched weights by itself",
                  "PyTorch never does; a non-square matrix in the wrong layout raises a shape "
                  "error, a square one computes something else."),
            "c": ("the transpose only matters for speed, not for the result",
                  "x W and x Wᵀ are different products: the logits moved over a hundred times "
                  "further than the correct port's rounding."),
        },
        right="a"),
    "10-embedding": Number(
        prompt="GPT-2 small's embedding (50,257 × 768) is 31% of its parameters. What "
               "percentage is the embedding (50,257 × 1,024) of GPT-2 medium's 354,823,168?",
        after="## 4. Tokens: bytes against BPE",
        value=14.5, tolerance=0.1, unit="%",
        why="50,257 × 1,024 = 51,463,168, 14.5% of 354,823,168: the blocks grow as L·C² and "
            "the embedding only as C, so the share shrinks as models grow.",
        wrong=((30.5, 31.5, "that is GPT-2 small's share; medium is wider and deeper, and the "
                            "blocks grow faster than the embedding."),
               (28.5, 29.5, "that counts the embedding twice; the head is tied to it."),
               (0.14, 0.15, "that is a fraction, not a percentage.")),
        otherwise="divide V·C by the total and multiply by 100."),
    "10-encoder": Choice(
        prompt="Section 5 changed the last source token's value. In an encoder (no mask), "
               "which outputs changed?",
        after="## 5. Three families of transformer",
        choices={
            "a": ("only the last position's",
                  "that is the causal stack: a position there cannot read later ones, so only "
                  "the last sees its own change."),
            "b": ("none: the value is only read when the token is queried",
                  "every query reads every value it may see, weighted; changing one value "
                  "moves every output that reads it."),
            "c": ("every position's, the first included",
                  "without a mask every position reads every other, the last one too: "
                  "positions 0 to 6 all moved."),
        },
        right="c"),
    "10-targets": Number(
        prompt="A masked-token encoder such as BERT chooses 15% of the positions and learns to "
               "predict the original token at each chosen one (hidden, swapped or left as it "
               "was). On average, how many targets does it get from one sequence of 512 tokens "
               "(a decoder-only model gets 512)?",
        after="The objectives differ as much as the masks",
        value=76.8, tolerance=0.1,
        why="15% of 512 is 76.8: a decoder-only model scores every position, an encoder only "
            "the ones it chose, hidden or not.",
        wrong=((511, 513, "that is the decoder-only count, every position a target."),
               (435, 435.5, "that counts the positions not chosen; those are inputs, not "
                            "targets."),
               (61, 61.5, "that counts only the chosen positions that were hidden; the model "
                          "learns at the swapped and unchanged ones too.")),
        otherwise="count the positions that become targets, not those that stay inputs only."),
}
