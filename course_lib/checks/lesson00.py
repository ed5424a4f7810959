"""Checkers for lesson 00, start here."""
import math

import numpy as np
import torch
import torch.nn.functional as F

from course_lib import data
from course_lib.checks.core import Checker, TorchCalls, checker, learner_side, pair, seed
from course_lib.checks.domain import each

# next_byte_loss is the learner's own: these compute it whole, by whatever route they are reached.
_LOSS_FUNCTIONS = {"F.cross_entropy": F.cross_entropy, "F.nll_loss": F.nll_loss,
                   "torch's cross_entropy_loss": torch._C._nn.cross_entropy_loss,
                   "torch's nll_loss": torch._C._nn.nll_loss,
                   "torch's nll_loss_nd": torch._C._nn.nll_loss_nd}



@learner_side
class _LossCalls(TorchCalls):
    """The same, at torch's dispatch: an aten op, a builtin called from C (map, partial)."""
    FORBIDDEN = {"cross_entropy": "F.cross_entropy", "cross_entropy_loss": "F.cross_entropy",
                 "nll_loss": "F.nll_loss", "nll_loss_nd": "F.nll_loss", "nll_loss2d": "F.nll_loss"}


@checker
def check_next_token_targets(fn):
    """Check next_token_targets(ids) -> (inputs, targets) with targets[t] == ids[t + 1].

    ids is one window, a 1-D tensor (T + 1,): a batch (B, T + 1) need not work (lesson 06
    splits batches); inputs and targets are tensors of the ids' dtype.
    """
    __tracebackhide__ = True
    c = Checker("next_token_targets", fn)
    for ids in (torch.arange(10, 16), torch.tensor([72, 105, 33]), torch.tensor([7, 7, 9, 7])):
        _targets_one(c, ids, f"ids = {ids.tolist()}")
    # windows of any length (past 128, 256, 512 and 1,024), ids of any size, int64 or int32
    each(c, _draw_window, _targets_one, n=20, stream=1)
    c.done()


def _draw_window(d):
    T = d.length(lo=1)
    g = torch.Generator().manual_seed(d.seed())
    ids = torch.randint(0, d.choice((256, 2_048, 50_257)), (T + 1,), generator=g)
    ids = ids.to(d.choice((torch.long, torch.int32)))
    shown = ids.tolist() if T < 12 else f"{ids[:6].tolist()[:-1]}... ({T + 1} ids)"
    return ids, f"ids = {shown}, {str(ids.dtype).replace('torch.', '')}"


def _targets_one(c, ids, case):
    """Check next_token_targets on one window of ids."""
    __tracebackhide__ = True
    inputs, targets = pair(c, c.call(ids, case=case), case, "inputs, targets")
    if not (isinstance(inputs, torch.Tensor) and isinstance(targets, torch.Tensor)):
        c.fail("inputs and targets must be torch tensors", case=case,
               got=f"{type(inputs).__name__}, {type(targets).__name__}",
               hint="slice the ids tensor itself rather than building lists: a slice of a "
                    "tensor is a tensor")
    if inputs.is_floating_point() or targets.is_floating_point():
        c.fail("inputs and targets must hold integer token ids", case=case,
               expected=str(ids.dtype), got=f"{inputs.dtype}, {targets.dtype}",
               hint="slice the ids themselves, with no conversion; cross_entropy needs "
                    "integer targets, and an embedding cannot look up a float")
    want = (len(ids) - 1,)
    if tuple(inputs.shape) != want or tuple(targets.shape) != want:
        c.fail("inputs and targets must each have len(ids) - 1 entries", case=case,
               expected=(want, want), got=(tuple(inputs.shape), tuple(targets.shape)),
               hint="the last id has no next token to predict and the first is never a "
                    "target, so drop one id from each end")
    if inputs.dtype != ids.dtype or targets.dtype != ids.dtype:
        c.fail("inputs and targets must keep the ids' dtype", case=case,
               expected=str(ids.dtype), got=f"{inputs.dtype}, {targets.dtype}",
               hint="slice the ids themselves; cross_entropy takes int64 (torch.long) targets")
    ids_in, ids_out = ids[:-1], ids[1:]
    if torch.equal(inputs, ids_out) and torch.equal(targets, ids_in):
        c.fail("each position predicts the previous token", case=case,
               expected=ids_out.tolist()[:12], got=targets.tolist()[:12],
               hint="position t sees ids[:t + 1] and predicts the next id, ids[t + 1]: "
                    "inputs come from the front of ids, targets from one step later")
    if torch.equal(inputs, targets):
        c.fail("targets equal inputs, so the model is asked to copy its input", case=case,
               expected=ids_out.tolist()[:12], got=targets.tolist()[:12],
               hint="shift the targets by one: targets[t] = ids[t + 1] (the off-by-one "
                    "pitfall: unshifted targets make the loss collapse and teach nothing)")
    if not (torch.equal(inputs, ids_in) and torch.equal(targets, ids_out)):
        c.fail("inputs or targets hold the wrong ids", case=case,
               expected=(ids_in.tolist()[:12], ids_out.tolist()[:12]),
               got=(inputs.tolist()[:12], targets.tolist()[:12]),
               hint="inputs are every id but the last, targets every id but the first")
    c.ok()


_ENCODE = {"encode": data.encode}   # course_lib's own answer


@checker
def check_text_to_ids(fn):
    """Check text_to_ids(text) -> a 1-D int64 tensor of the text's UTF-8 bytes, without encode."""
    __tracebackhide__ = True
    c = Checker("text_to_ids", fn, forbidden=_ENCODE)
    cases = ("To be", "café", "", "a\nb", "naïve 💡", "  To be,\n", "\tend  ", "\n")
    for text in cases:
        _ids_one(c, text, f"text_to_ids({text!r})")
    # text of every character class: capitals, NUL, CR LF, accents, CJK, emoji, U+FEFF
    each(c, _draw_text, _ids_one, n=30, stream=2)
    c.done()


def _draw_text(d):
    text = d.text()
    return text, f"text_to_ids({text!r})"


def _ids_one(c, text, case):
    """Check text_to_ids on one text."""
    __tracebackhide__ = True
    got = c.call(text, case=case,
                 crash_hint="encode the text to bytes first: text.encode('utf-8') works for "
                            "every character; latin-1 or ascii cannot encode all of them")
    want = torch.tensor(list(text.encode("utf-8")), dtype=torch.long)
    if not isinstance(got, torch.Tensor):
        c.fail("expected a torch tensor", case=case, got=type(got).__name__,
               hint="build it with torch.tensor(list_of_ids, dtype=torch.long): the model "
                    "takes tensors")
    if got.dtype != torch.long:
        hint = ("the ids must be int64 (torch.long), the type an embedding looks up and "
                "cross_entropy takes as targets; pass dtype=torch.long")
        if len(text) == 0 and got.is_floating_point():
            hint = ("torch.tensor([]) of an empty list is float32: pass dtype=torch.long "
                    "so that the empty text still gives integer ids")
        c.fail("the ids have the wrong dtype", case=case, expected="torch.int64",
               got=str(got.dtype), hint=hint)
    if got.dim() != 1:
        c.fail("expected a 1-D tensor of shape (T,)", case=case, expected=tuple(want.shape),
               got=tuple(got.shape), hint="return one id per byte, in a flat tensor; the "
                                          "batch axis is added later with ids[None]")
    c.ok()
    if not torch.equal(got, want):
        codepoints = [ord(ch) for ch in text]
        near = len(got) <= 4 * len(want) + 16   # a huge answer is compared by its length alone
        if near and got.tolist() == codepoints:
            hint = ("these are the characters' code points (233 for é), one id per "
                    "character, as ord(ch) or text.encode('latin-1') give them; the ids are "
                    "the UTF-8 bytes, 2 to 4 for a character outside ASCII: use "
                    "text.encode('utf-8')")
        elif near and _stripped(got.tolist(), text.encode("utf-8")):
            hint = ("keep every byte, the whitespace at the ends too: don't strip() the "
                    "text (a space is byte 32, a tab 9, a newline 10, and a model must "
                    "learn where they go)")
        elif len(got) != len(want):
            hint = (f"there is one id per UTF-8 byte, {len(want)} here, not one per "
                    f"character; use text.encode('utf-8')")
        else:
            hint = "the ids are the values of the bytes of text.encode('utf-8'), in order"
        c.fail("the ids are not the text's UTF-8 bytes", case=case, expected=want.tolist(),
               got=got, hint=hint)
    c.ok()


def _stripped(got, want):
    """Whether ids `got` are the bytes `want` with whitespace cut from one end or both."""
    if not all(isinstance(i, int) and 0 <= i < 256 for i in got):
        return False
    got = bytes(got)
    return len(got) < len(want) and got.strip() == want.strip() and got in want


@checker
def check_next_byte_loss(fn):
    """Check next_byte_loss(logits, targets): the mean of -ln p(target) over every position.

    The loss is the learner's own: F.cross_entropy and F.nll_loss are forbidden,
    torch.log_softmax is allowed. It comes back as a 0-d tensor in the logits' dtype or as a
    Python float.
    """
    __tracebackhide__ = True
    c = Checker("next_byte_loss", fn, forbidden=_LOSS_FUNCTIONS)
    gen = torch.Generator().manual_seed(seed(0))
    cases = [
        (torch.zeros(3, 256), torch.tensor([84, 111, 32]),
         "logits = torch.zeros(3, 256) (a uniform guess), targets = [84, 111, 32]"),
        (torch.randn(5, 7, generator=gen), torch.tensor([3, 0, 6, 6, 2]),
         "random logits (5, 7), targets = [3, 0, 6, 6, 2]"),
        (torch.tensor([[0.0, 200.0, -50.0], [10.0, 0.0, 0.0]]), torch.tensor([0, 0]),
         "logits = [[0, 200, -50], [10, 0, 0]], targets = [0, 0]"),
        (torch.randn(2, 4, 6, generator=gen) * 3, torch.tensor([[1, 5, 0, 2], [4, 4, 3, 0]]),
         "a batch: random logits (2, 4, 6), targets (2, 4)"),
        (torch.tensor([[0.0, -math.inf, 2.0], [1.0, 1.0, -math.inf]]), torch.tensor([2, 0]),
         "logits = [[0, -inf, 2], [1, 1, -inf]] (bytes ruled out), targets = [2, 0]"),
        (torch.randn(3, 5, 9, generator=gen, dtype=torch.float64), torch.randint(9, (3, 5), generator=gen),
         "float64 logits (3, 5, 9), targets (3, 5): the loss comes back in float64"),
    ]
    for logits, targets, case in cases:
        _loss_one(c, (logits, targets), case)
    # any batch, length and vocabulary, logits up to +-1e4 and -inf off the targets, both dtypes
    each(c, _draw_logits, _loss_one, n=25, stream=3)
    c.done()


_BATCH_HINT = ("for a batch, logits (B, T, V) and targets (B, T): take log-probabilities along "
               "the last axis and pick with an index shaped like the logits (a trailing axis of "
               "size 1), or flatten both first, to (B*T, V) and (B*T,)")


def _draw_logits(d):
    B, T, V = d.choice((0, 1, 2, 3)), d.length(lo=1, small=12, tables=(128, 256)), d.size(
        2, 300, small=8)
    dtype, scale = d.choice((torch.float32, torch.float64)), d.choice((1.0, 10.0, 200.0, 1e4))
    g = torch.Generator().manual_seed(d.seed())
    lead = (B, T) if B else (T,)
    logits = (torch.randn(*lead, V, generator=g, dtype=torch.float64) * scale).to(dtype)
    targets = torch.randint(V, lead, generator=g)
    if V > 1 and d.boolean(0.3):   # bytes ruled out: -inf, never at a target
        hidden = torch.rand(*lead, V, generator=g) < 0.3
        hidden.scatter_(-1, targets[..., None], False)
        logits = logits.masked_fill(hidden, -math.inf)
    case = (f"random logits {tuple(logits.shape)} of scale {scale:g} in "
            f"{str(dtype).replace('torch.', '')}"
            + (" with some -inf (never at a target)" if torch.isinf(logits).any() else "")
            + f", targets {tuple(targets.shape)}")
    return (logits, targets), case


def _loss_one(c, args, case):
    """Check next_byte_loss on one (logits, targets)."""
    __tracebackhide__ = True
    logits, targets = args
    batch_hint = _BATCH_HINT
    got = c.call(logits, targets, case=case, around=_LossCalls,
                 crash_hint=batch_hint if logits.dim() == 3 else None)
    if c.seen.get("around"):
        c.fail(f"your function calls {', '.join(c.seen['around'])}, which this exercise asks you "
               f"not to use", case=case,
               hint="write the loss yourself: log-probabilities with torch.log_softmax, then "
                    "the mean over positions of minus the target's log-probability")
    want = _mean_nll(logits, targets)
    got = _scalar(c, got, logits, case)
    if not math.isfinite(got):
        hint = ("p = e^-200 underflows to 0 in float32 and ln 0 = -inf: compute the "
                "log-probabilities directly, ln p = x - logsumexp(x) over the vocabulary "
                "(a log-softmax), without ever forming p")
        if torch.isinf(logits).any():
            hint = ("a ruled-out byte has ln p = -inf, and -inf * 0 is NaN: pick each "
                    "position's own log-probability with gather (or index it) instead of "
                    "multiplying every entry by a one-hot mask and summing")
        c.fail("the loss is inf or NaN", case=case, expected=round(want, 4), got=got,
               hint=hint)
    tol = 1e-10 if logits.dtype == torch.float64 else 1e-4
    if not math.isclose(got, want, rel_tol=tol, abs_tol=tol):
        c.fail("the loss is not right", case=case, expected=round(want, 4),
               got=round(got, 4), hint=_loss_hint(got, want, logits, targets))
    c.ok()


def _mean_nll(logits, targets):
    logp = torch.log_softmax(logits.double(), dim=-1)
    return -logp.gather(-1, targets[..., None]).mean().item()


def _scalar(c, got, logits, case):
    """The learner's loss as a Python float, or feedback about its type or shape."""
    __tracebackhide__ = True
    if isinstance(got, torch.Tensor):
        if got.numel() != 1:
            c.fail("expected a single number, the mean over every position", case=case,
                   expected="a 0-d tensor", got=f"a tensor of shape {tuple(got.shape)}",
                   hint="average the per-position losses with .mean(): the loss is one number")
        if not got.is_floating_point():
            c.fail("the loss is an integer", case=case, got=str(got.dtype),
                   hint="the loss is a mean of logarithms, a float: keep the logits' dtype")
        if got.dtype != logits.dtype:
            c.fail("the loss has another dtype than the logits", case=case,
                   expected=str(logits.dtype), got=str(got.dtype),
                   hint="compute in the logits' dtype: drop the conversion (.double(), "
                        ".half(), .to(...)); a Python float from .item() passes too")
        return float(got.detach().double())
    if type(got) is float:
        return got
    if isinstance(got, np.generic):
        c.fail("expected a 0-d tensor or a Python float, got a NumPy scalar", case=case,
               got=type(got).__name__,
               hint="stay in torch: return the 0-d tensor itself (or loss.item() for a Python "
                    "float); a NumPy round trip also cuts the gradient that training needs")
    c.fail("expected a number", case=case, got=type(got).__name__,
           hint="return the mean loss, a 0-d tensor (or a Python float)")


def _loss_hint(got, want, logits, targets):
    """Name the usual mistake that gives `got`, if one does."""
    logp = torch.log_softmax(logits.double(), dim=-1)
    T = targets.numel()
    guesses = [
        (-want, "the loss is -ln p, a positive number: put a minus sign in front of the log"),
        (want / math.log(2), "use the natural logarithm (torch.log), not log2: the loss is in "
                             "nats"),
        (want / math.log(10), "use the natural logarithm (torch.log), not log10: the loss is in "
                              "nats"),
        (want * T, "average over the positions (.mean()), not the sum"),
        (-logp.mean().item(), "pick each position's log-probability of its own target "
                              "(one entry per position, chosen by its target id), not the "
                              "mean over the whole vocabulary"),
        (-torch.log_softmax(logits.double(), dim=0).gather(-1, targets[..., None]).mean().item(),
         "take the softmax over the vocabulary, the last axis (dim=-1), not over positions"),
        (-torch.softmax(logits.double(), dim=-1).gather(-1, targets[..., None]).mean().item(),
         "the loss is minus the logarithm of the probability, -ln p, not -p"),
    ]
    if logits.dim() == 2 and T > 1:
        guesses.append((-logp[:, targets].mean().item(),
                        "logp[:, targets] takes every target at every position (a T x T "
                        "block): index the pairs, logp[torch.arange(T), targets], or gather"))
        shifted = -logp[:-1].gather(-1, targets[1:, None]).mean().item()
        guesses.append((shifted, "the targets are already lined up with the positions "
                                 "(targets[t] is what position t predicts): don't shift again"))
    for value, hint in guesses:
        if math.isclose(got, value, rel_tol=1e-4, abs_tol=1e-4):
            return hint
    return "loss = mean over positions t of -ln softmax(logits[t])[targets[t]]"


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "text_to_ids": (
        "A byte tokenizer has nothing to learn: the token ids are the numbers of the text's UTF-8 "
        "bytes, one id per byte. Get the bytes first, then turn that sequence of integers into "
        "a tensor.",
        "Count bytes, not characters: 'é' is one character but two UTF-8 bytes, so `ord(ch)` for "
        "each character gives the wrong ids (and ids past 255) outside ASCII. And keep every byte, "
        "spaces and newlines at the ends included: no `.strip()`.",
        "The shape of the answer: bytes of the text -> a list of ints -> `torch.tensor(..., "
        "dtype=torch.long)`. The empty text must give a tensor of shape (0,), still int64.",
    ),
    "next_token_targets": (
        "Position t reads id t and must predict id t + 1. So the inputs are the window without "
        "its last id, and the targets are the window without its first.",
        "The usual slip is an off-by-one: targets equal to the inputs (the model learns to copy), "
        "or both slices of length T + 1. Check on ids = [10, 11, 12] by hand: inputs [10, 11], "
        "targets [11, 12].",
        "Two slices along the last axis, one dropping the end and one dropping the start, returned "
        "as a pair. No loop and no copy are needed.",
    ),
    "next_byte_loss": (
        "The loss at one position is -ln p(target), with p the softmax of that position's logits. "
        "Work in log-probabilities: a log of a softmax computed stably, then pick each position's "
        "target entry, then average over every position (batch rows included).",
        "Two common mistakes: `torch.log(torch.softmax(...))`, which gives -inf once a probability "
        "underflows to 0 (logits 200 apart), and multiplying every log-probability by a one-hot "
        "mask, which gives NaN where a logit is -inf (-inf times 0).",
        "Pick with an index, not a mask: `gather` along the vocabulary axis with the targets "
        "given a trailing axis of size 1 picks one log-probability per position. Return a 0-d "
        "tensor in the logits' dtype: no `.double()` on the way.",
    ),
}


# Questions on this lesson's ideas: `answer("00-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "00-bytes": Number(
        prompt="Section 2 found 5 bytes for `\"café\"` and the cell after exercise 1 found 6 for "
               "`\"naïve\"`. How many token ids does `encode` give for the text `\"naïve café\"` "
               "(the two words and the space between them)?",
        after="the same as encode:",
        value=12, tolerance=0,
        why="6 bytes for naïve, 1 for the space and 5 for café: ï and é take two UTF-8 bytes "
            "each, every other character one.",
        wrong=((10, 10, "10 is the number of characters; the byte tokenizer gives one id per "
                        "UTF-8 byte, and a letter outside ASCII takes more than one."),
               (11, 11, "that counts one of the two accented letters as two bytes but not the "
                        "other; both ï and é are outside ASCII."),
               (13, 13, "the space between the words is one byte, and each accented letter "
                        "two, no more.")),
        otherwise="count the bytes of each part: the lesson printed the ids of both words, and "
                  "a space is one byte."),
    "00-shape": Choice(
        prompt="Section 3 ran the model (V = 256, C = 64) on a batch of one sequence of 19 ids. "
               "Run it instead on a batch of 4 sequences of 19 ids each: what is the shape of "
               "`model(idx)`, the logits?",
        after="## 3. The model: a stack of boxes",
        choices={
            "a": ("(4, 19, 64)", "64 is the width C of the stream; the unembedding then maps "
                                 "each position's C-vector to one score per vocabulary entry."),
            "b": ("(4, 19, 256)", "one score for each of the V = 256 bytes, at every one of the "
                                  "19 positions of each of the 4 sequences: (B, T, V)."),
            "c": ("(4, 256)", "the model gives one distribution per position, not one per "
                              "sequence: training scores every position's prediction."),
            "d": ("(19, 256)", "the batch axis stays: each of the 4 sequences gets its own "
                               "logits, (B, T, V)."),
        },
        right="b"),
    "00-targets": Choice(
        prompt="A training window holds the 6 ids of `\"abcdef\"` (T + 1 = 6). Which pair is "
               "(inputs, targets), as exercise 2 cuts it?",
        after="### Exercise 2: inputs and targets",
        choices={
            "a": ("`\"abcdef\"` and `\"abcdef\"`", "with the targets equal to the inputs, "
                  "position t is asked for the byte it already sees: the model learns to copy "
                  "(lesson 06 shows that pitfall)."),
            "b": ("`\"bcdef\"` and `\"abcde\"`", "that is shifted the wrong way: each position "
                  "would be scored on the byte before it, which it has already read."),
            "c": ("`\"abcde\"` and `\"bcdef\"`", "position t reads the first t + 1 bytes and is "
                  "scored on the next one: the targets are the inputs shifted by one."),
            "d": ("`\"abcde\"` and `\"f\"`", "training scores every position at once, not only "
                  "the last: T inputs give T targets."),
        },
        right="c"),
    "00-uniform": Number(
        prompt="Section 4 showed that a model spreading its bets evenly over 256 bytes scores "
               "ln 256 = 5.545 at every position. What does a model that spreads its bets "
               "evenly over GPT-2's vocabulary of V = 50,257 tokens score, in nats per token?",
        after="loss of a uniform guess",
        value=10.825, tolerance=0.01, unit="nats",
        why="each token gets p = 1/50,257, and -ln(1/V) = ln V = ln 50,257 ≈ 10.825.",
        wrong=((5.5, 5.6, "5.545 is ln 256, the byte vocabulary's; the uniform loss is ln V "
                          "for this V."),
               (4.6, 4.8, "that is the logarithm base 10; the loss is measured in nats, with "
                          "the natural logarithm."),
               (15.5, 15.7, "that is the logarithm base 2, bits; the course measures the loss "
                            "in nats, with the natural logarithm.")),
        otherwise="the loss of one prediction is -ln p; work out p for an even spread over "
                  "this vocabulary."),
}
