"""Checkers for lesson 10, real models: GPT-2's saved weights mapped into TinyLM's names and layout."""
import itertools

import torch

from course_lib.checks.core import Checker
from course_lib.convert import tinylm_state_dict
from course_lib.model import ModelConfig

# GPT-2's name for each block weight -> TinyLM's, for naming the source in feedback.
_SOURCES = {"norm1": "ln_1", "norm2": "ln_2", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj",
            "mlp.up": "mlp.c_fc", "mlp.down": "mlp.c_proj"}


def _gpt2_state(seed, n_layers, dtype, C=6, V=11, max_len=9):
    """A GPT-2 state dict as a saved file names it (no `transformer.` prefix), random numbers,
    with the `h.N.attn.bias` causal-mask buffers older files hold."""
    g = torch.Generator().manual_seed(seed)

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
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    if any(name.endswith(".bias") and "norm" not in name for name in missing):
        c.fail("biases are missing", case=case, expected=[n for n in missing if n.endswith(".bias")][:3],
               hint="GPT-2 has biases on every projection (c_attn, c_proj, c_fc): map each "
                    "h.N.<layer>.bias to blocks.N.<ours>.bias as well as the weights")
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


def check_gpt2_to_tinylm(fn):
    """Check gpt2_to_tinylm(hf, n_layers) -> TinyLM's state dict, from a GPT-2 (Conv1D) state dict."""
    __tracebackhide__ = True
    c = Checker("gpt2_to_tinylm", fn)
    for seed, n_layers, dtype in ((0, 2, torch.float32), (1, 1, torch.float64), (2, 3, torch.float32)):
        hf, expected = _gpt2_state(seed, n_layers, dtype)
        given = {name: t.clone() for name, t in hf.items()}
        case = (f"a GPT-2 state dict of width 6, vocabulary 11, {n_layers} layer(s), {dtype}, "
                f"with h.N.attn.bias buffers; n_layers={n_layers}")
        got = c.call(given, n_layers, case=case,
                     none_hint="return the new dict of TinyLM's names, e.g. `return out`")
        if set(given) != set(hf) or any(not torch.equal(given[k], hf[k]) for k in hf):
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
    c.done()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
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
        prompt="A masked-token encoder learns from the 15% of positions it masks. On average, "
               "how many targets does it get from one sequence of 512 tokens (a decoder-only "
               "model gets 512)?",
        after="The objectives differ as much as the masks",
        value=76.8, tolerance=0.1,
        why="15% of 512 is 76.8: a decoder-only model scores every position, an encoder only "
            "the ones it hid.",
        wrong=((511, 513, "that is the decoder-only count, every position a target."),
               (435, 435.5, "that counts the 85% left unmasked; those are inputs, not "
                            "targets.")),
        otherwise="take 15% of the 512 positions."),
}
