"""Checkers for lesson 06, training: one optimisation step on shifted next-token targets."""
import copy
import math
import numbers

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.checks.core import Checker, TorchCalls, backward, learner_side, seed
from course_lib.checks.domain import each
from course_lib.checks.lesson04 import own_messages
from course_lib.data import get_batch
from course_lib.model import ModelConfig, TinyLM
from course_lib.training import TrainConfig, lr_at, next_token_loss
from course_lib.training import train_step as reference_step


def call_inside(c, *args, case, own=(), around=None, none_hint=None, **kwargs):
    """c.call(*args, **kwargs), watching which of course_lib's answers in `own` ran (seen["own"])
    and, with `around` (a learner_side context manager class, see `Checker.call`), what it
    reported (seen["around"]). Returns (the result, seen); a result None is feedback, as in
    `Checker.call`."""
    __tracebackhide__ = True
    result = c.call(*args, case=case, watch=own, around=around, none_hint=none_hint, **kwargs)
    return result, {"own": c.seen.get("watched", []), "around": c.seen.get("around")}


# course_lib's own answers, which an exercise's function must not call
_OWN_STEP, _OWN_BATCH, _OWN_LOSS, _OWN_SCHEDULE = (reference_step,), (get_batch,), (next_token_loss,), (lr_at,)


def _no_own_answer(c, called, what, case):
    """Fail if the learner's function called course_lib's own answer (the names in `called`)."""
    __tracebackhide__ = True
    if called:
        c.fail(f"your function calls course_lib's own {', '.join(called)}", case=case,
               hint=f"write {what} yourself: course_lib's version is the answer key and earns "
                    f"no credit")

_CRASH_HINT = ("batch is (B, T + 1): inputs (each row without its last id) and targets (each "
               "row without its first) are each (B, T); model(inputs) gives logits (B, T, V); cross_entropy wants them flat, "
               "logits.reshape(-1, V) against targets.reshape(-1) (use reshape, not view: the "
               "sliced targets are not contiguous)")

def _step_crash_hint(kind, message):
    """The hint for what train_step raised: the usual slips of a step's order, else the shapes."""
    if "does not require grad" in message:
        return ("the loss has no gradient: the forward pass ran without one (torch.no_grad(), "
                ".detach(), or .item() before backward); run model(inputs) and the loss with "
                "gradients on, then loss.backward()")
    if "modified by an inplace operation" in message:
        return ("keep a step's order: opt.zero_grad(), the forward pass and the loss, "
                "loss.backward(), then opt.step(); stepping before backward changes the "
                "weights the backward pass still needs")
    if "backward through the graph a second time" in message:
        return "call loss.backward() once a step, on this batch's loss"
    return _CRASH_HINT


_SHIFT_HINTS = {
    "unshifted": "the targets are not shifted: with targets equal to the inputs the model is "
                 "asked to copy the token it already sees (the off-by-one pitfall); the "
                 "targets are each row without its first id",
    "backwards": "the targets are shifted the wrong way: position t must predict the NEXT "
                 "token, so the inputs drop each row's last id and the targets its first, not "
                 "the other way round (that teaches the model the previous token)",
    "flattened inconsistently": "logits and targets are flattened in different orders, so each "
                                "score is paired with another position's target: flatten both "
                                "the same way, logits.reshape(-1, V) with targets.reshape(-1), "
                                "and transpose neither",
    "summed": "the loss is summed over the positions; take the mean (cross_entropy's default "
              "reduction) so its size does not depend on B and T",
}


def _loss(model, batch, variant="right"):
    """The loss of one of the usual ways (right or wrong) of scoring a (B, T + 1) batch."""
    inputs, targets = batch[:, :-1], batch[:, 1:]
    if variant == "backwards":
        inputs, targets = batch[:, 1:], batch[:, :-1]
    elif variant == "unshifted":
        targets = inputs
    elif variant == "unshifted, whole batch":
        inputs = targets = batch
    elif variant == "unshifted, last T":
        inputs = targets
    logits = model(inputs)  # (B, T, V)
    V = logits.shape[-1]
    if variant == "targets transposed":
        return F.cross_entropy(logits.reshape(-1, V), targets.T.reshape(-1))
    if variant == "logits transposed":
        return F.cross_entropy(logits.transpose(0, 1).reshape(-1, V), targets.reshape(-1))
    reduction = "sum" if variant == "summed" else "mean"
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction=reduction)


_LOSS_VARIANTS = {
    "unshifted": "unshifted", "unshifted, whole batch": "unshifted",
    "unshifted, last T": "unshifted", "backwards": "backwards",
    "targets transposed": "flattened inconsistently", "logits transposed": "flattened inconsistently",
    "summed": "summed",
}


def _step(model, opt, batch, order=("zero_grad", "backward", "step")):
    """A right step, or one with its zero_grad / step calls moved or left out."""
    loss = _loss(model, batch)
    for action in order:
        if action == "zero_grad":
            opt.zero_grad()
        elif action == "backward":
            loss.backward()
        else:
            opt.step()
    return loss.item()


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def _same(a, b, exact=False):
    if exact:
        return all(torch.equal(x, y) for x, y in zip(a, b))
    return all(x.shape == y.shape and torch.allclose(x, y, atol=1e-9, rtol=1e-6) for x, y in zip(a, b))


def _setup(n, B, T, V, C=12, L=1, seeded=False):
    """A float64 TinyLM with weights larger than the default, and three (B, T + 1) batches,
    drawn from seed(n) (from n itself when `seeded`)."""
    torch.manual_seed(n if seeded else seed(n))
    model = TinyLM(ModelConfig(vocab_size=V, max_len=T + 2, d_model=C, n_heads=2,
                               n_layers=L)).double()
    gen = torch.Generator().manual_seed(n + 100 if seeded else seed(100 + n))
    with torch.no_grad():  # larger weights than the default init, so every mistake moves the loss
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    batches = [torch.randint(0, V, (B, T + 1), generator=gen) for _ in range(3)]
    return model, batches


def _stale_gradients(model, n, seeded=False):
    """Leave gradients in .grad, as an earlier backward() would: a step must clear them first."""
    gen = torch.Generator().manual_seed(n + 200 if seeded else seed(200 + n))
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)


@own_messages("train_step")
def check_train_step(fn):
    """Check train_step(model, opt, batch) -> float, step by step against the reference."""
    __tracebackhide__ = True
    c = Checker("train_step", fn)
    cases = (
        (0, 3, 5, 11, "SGD(lr=0.5)", lambda ps: torch.optim.SGD(ps, lr=0.5)),
        (1, 2, 7, 13, "AdamW(lr=0.01, weight_decay=0.1)",
         lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1)),
    )
    for n, B, T, V, opt_name, make_opt in cases:
        _train_one(c, (n, B, T, V, 12, 1, opt_name, make_opt, False), None)
    # any batch, length, vocabulary, width and depth, with SGD, Adam or AdamW
    each(c, _draw_training, _train_one, n=3, stream=63)
    c.done()


_OPTIMIZERS = (("SGD(lr=0.5)", lambda ps: torch.optim.SGD(ps, lr=0.5)),
               ("AdamW(lr=0.01, weight_decay=0.1)",
                lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1)),
               ("SGD(lr=0.1, momentum=0.9)", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
               ("Adam(lr=0.003)", lambda ps: torch.optim.Adam(ps, lr=0.003)))


def _draw_training(d):
    B, T, V = d.integer(1, 4), d.size(1, 40, small=6), d.size(2, 300, small=16)
    C, L = 2 * d.integer(2, 8), d.integer(1, 2)
    opt_name, make_opt = d.choice(_OPTIMIZERS)
    return (d.seed(), B, T, V, C, L, opt_name, make_opt, True), None


def _train_one(c, args, _):
    """Check train_step on three batches in a row, on one model and optimizer."""
    __tracebackhide__ = True
    n, B, T, V, C, L, opt_name, make_opt, seeded = args
    model, batches = _setup(n, B, T, V, C, L, seeded)
    ref_model = copy.deepcopy(model)
    ref_opt = make_opt(ref_model.parameters())
    opt = make_opt(model.parameters())
    wrong = {order: copy.deepcopy(model) for order in (("backward", "step"),)}
    wrong_opts = {k: make_opt(m.parameters()) for k, m in wrong.items()}
    for m in (model, ref_model, *wrong.values()):
        _stale_gradients(m, n, seeded)
    for k, batch in enumerate(batches, start=1):
        case = (f"a TinyLM(vocab_size={V}, d_model={C}, n_layers={L}) in float64, opt = "
                f"{opt_name}, batch of shape (B, T + 1) = {tuple(batch.shape)}, "
                f"call {k} of {len(batches)} on the same model and optimizer, which "
                f"arrived with old gradients in .grad")
        before = _params(model)
        with torch.no_grad():
            variants = {name: _loss(model, batch, name).item() for name in _LOSS_VARIANTS}
        want_loss = reference_step(ref_model, ref_opt, batch.clone())
        for order, m in wrong.items():
            _step(m, wrong_opts[order], batch, order)
        model.train()
        got, seen = call_inside(c, model, opt, batch, own=_OWN_STEP,
                                case=case, crash_hint=_step_crash_hint,
                                none_hint="end with a `return` of the loss of this batch as "
                                          "a Python float (the tensor's .item())")
        state = _model_state(model)   # as the call left it (the grader's copy comes back so)
        after = _take_state(c, model, state, before, case)
        _no_own_answer(c, seen["own"], "the step", case)
        _check_loss(c, got, want_loss, variants, case)
        if state["training"] is not True:
            c.fail("your function left the model in eval mode", case=case,
                   hint="a training step trains: leave the model in train mode (if you "
                        "call model.eval() to look at something, call model.train() after)")
        c.ok()
        if not _same(after, _params(ref_model)):
            c.fail("the parameters after the step are not right", case=case,
                   expected=_params(ref_model)[0][0, :4], got=after[0][0, :4],
                   hint=_param_hint(state["gradients_gone"], before, after, wrong, k)
                   + " (shown: the first 4 numbers of the token embedding's first row)")
        c.ok()


def _model_state(model):
    """What a step left in the model: its parameters, its mode, whether its gradients were cleared."""
    params = list(model.parameters())
    return {"params": [p.detach().clone() for p in params],
            "training": bool(model.training),
            "gradients_gone": all(p.grad is None or not bool(p.grad.any()) for p in params)}


def _take_state(c, model, state, before, case):
    """The parameters the step left (from `_model_state`), checked to be the model's own still."""
    __tracebackhide__ = True
    after = state["params"]
    if len(after) != len(before) or not all(
            isinstance(a, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
            for a, b in zip(after, before)):
        c.fail("the model's parameters changed their number, shape or dtype", case=case,
               expected=f"{len(before)} parameters, the first of shape {tuple(before[0].shape)}",
               got=f"{len(after)} parameters",
               hint="change the parameters only through opt.step(): do not replace, add or "
                    "convert the model's layers")
    with torch.no_grad():
        for p, a in zip(model.parameters(), after):
            p.copy_(a)
    return after


def _check_loss(c, got, want, variants, case):
    __tracebackhide__ = True
    if isinstance(got, torch.Tensor):
        c.fail("your function returned a tensor, not a float", case=case, expected="float",
               got=f"torch.Tensor of shape {tuple(got.shape)}",
               hint="return a Python float (the tensor's .item()). Keeping the tensor also keeps its whole "
                    "autograd graph alive, and a training loop that stores every loss then runs "
                    "out of memory")
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        c.fail("expected the loss as a float", case=case, got=type(got).__name__,
               hint="return the loss as a Python float (the tensor's .item())")
    c.ok()
    if not math.isfinite(got):
        c.fail("the loss is inf or NaN", case=case, got=got,
               hint="use F.cross_entropy on the raw logits; it applies the log-softmax itself")
    c.ok()
    if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9):
        hint = next((_SHIFT_HINTS[_LOSS_VARIANTS[name]] for name, value in variants.items()
                     if math.isclose(got, value, rel_tol=1e-6, abs_tol=1e-9)),
                    "the loss is the mean cross-entropy of model(batch[:, :-1]) against "
                    "batch[:, 1:], computed BEFORE the optimizer's step; pass cross_entropy the "
                    "raw logits, not probabilities")
        c.fail("the loss is not right", case=case, expected=round(want, 6), got=round(got, 6),
               hint=hint)
    c.ok()


def _param_hint(gradients_gone, before, after, wrong, k):
    """Name the step mistake that explains the parameters, if one does."""
    if _same(after, before, exact=True):
        if gradients_gone:
            return ("the parameters did not move and the gradients are gone: call "
                    "opt.zero_grad() BEFORE loss.backward(); zeroing between backward() and "
                    "opt.step() wipes the gradients, so the step changes nothing and nothing "
                    "is learned")
        return ("the parameters did not move although the gradients are there: call "
                "opt.step() after loss.backward()")
    if k == 1 and _same(after, _params(wrong[("backward", "step")])):  # zero_grad late or never
        return ("the model arrived with gradients in .grad (left by earlier work), and your "
                "step added this batch's to them: call opt.zero_grad() BEFORE loss.backward(), "
                "since backward() adds to .grad rather than replacing it")
    return ("one call must do exactly: opt.zero_grad(), loss.backward(), opt.step(), once each, "
            "with the optimizer you are given (do not build a new one inside the function)")


# ---------------------------------------------------------------------------
# sample_batch(ids, batch_size, block_size, generator) -> (inputs, targets)
# ---------------------------------------------------------------------------

_FIRST_ID = 40  # the test corpora are ids 40, 41, 42, ...: an id tells where in the text it sat

_WINDOW_HINT = ("every start s from 0 to len(ids) - block_size - 1 must be possible: that last "
                "start's window ids[s : s + block_size + 1] ends at the last id, and "
                "torch.randint never returns its `high`, so high is one past the last start")


def _pair_of_tensors(c, result, case):
    __tracebackhide__ = True
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        c.fail("expected a pair (inputs, targets)", case=case, got=type(result).__name__,
               hint="end with `return inputs, targets`")
    for name, value in zip(("inputs", "targets"), result):
        if not isinstance(value, torch.Tensor):
            c.fail(f"{name} should be a torch tensor", case=case, got=type(value).__name__,
                   hint="index the ids tensor (ids[s : s + block_size + 1]) and torch.stack "
                        "the rows")
    c.ok()
    return result


def _first_row(result):
    """The first input row of a sample_batch result, as a tuple (None if it is not a pair of
    tensors: the calls before have said so already)."""
    ok = isinstance(result, (tuple, list)) and len(result) == 2 and isinstance(result[0], torch.Tensor)
    return tuple(result[0][0].tolist()) if ok and result[0].ndim == 2 and len(result[0]) else None


def _check_windows(c, inputs, targets, B, T, N, case, place=None):
    """Shape, dtype, rows of consecutive ids, targets one id later; returns the starts.
    `place[id - _FIRST_ID]` is where an id sat in the text (None: the ids are in order)."""
    __tracebackhide__ = True
    for name, value in (("inputs", inputs), ("targets", targets)):
        if tuple(value.shape) == (T, B) and B != T:
            c.fail(f"{name} has its axes in the wrong order", case=case, expected=(B, T),
                   got=tuple(value.shape),
                   hint="one row per window: (batch_size, block_size), B rows of T ids; "
                        "do not transpose")
        if tuple(value.shape) == (B, T + 1):
            c.fail(f"{name} holds whole windows of block_size + 1 ids", case=case,
                   expected=(B, T), got=tuple(value.shape),
                   hint="cut each window in two: inputs = window[:, :-1] (all but the last id) "
                        "and targets = window[:, 1:] (all but the first)")
        c.shape(value, (B, T), name, case,
                hint="(batch_size, block_size): one row per window, one column per position")
        if value.dtype != torch.long:
            c.fail(f"{name} has the wrong dtype", case=case, expected="torch.int64 (long)",
                   got=str(value.dtype),
                   hint="keep the ids' integer dtype: slice ids rather than filling "
                        "torch.zeros(...) (float), and never convert ids to float; "
                        "cross_entropy and the embedding need integer (long) ids")
    c.ok()
    where_in = inputs - _FIRST_ID                                        # (B, T) positions
    if bool((where_in < 0).any()) or bool((where_in >= N).any()):
        c.fail("inputs hold values that are not ids of the text", case=case, got=inputs,
               hint="return ids from the text (ids[s : s + block_size]), not positions or starts")
    if place is not None:
        where_in = place[where_in]
    if not bool((where_in[:, 1:] == where_in[:, :-1] + 1).all()):
        c.fail("a row of inputs is not consecutive ids of the text", case=case, got=inputs,
               hint="each row is one window of consecutive ids, ids[s : s + block_size] for "
                    "its own start s; one random start per row, not one per id")
    c.ok()
    if place is not None:   # a shuffled text: the shift is told by where each id sat
        later = targets - _FIRST_ID
        if bool((later < 0).any()) or bool((later >= N).any()):
            c.fail("targets hold values that are not ids of the text", case=case, got=targets,
                   hint="targets are ids of the text too: targets = window[:, 1:]")
        shift = place[later] - where_in
    else:
        shift = targets - inputs
    if bool((shift != 1).any()):
        if bool((shift == 0).all()):
            hint = ("targets equal the inputs (the off-by-one pitfall): targets[b, t] is the id "
                    "that follows inputs[b, t], so targets = window[:, 1:]")
        elif bool((shift == -1).all()):
            hint = ("the targets are the previous ids: inputs = window[:, :-1] and "
                    "targets = window[:, 1:], not the other way round")
        else:
            hint = ("targets[b, t] is the id right after inputs[b, t]: cut one window of "
                    "block_size + 1 ids, inputs = window[:, :-1], targets = window[:, 1:]")
        c.fail("targets are not the inputs shifted by one", case=case,
               expected=inputs + 1 if place is None else "the id after each input in the text",
               got=targets, hint=hint)
    c.ok()
    return where_in[:, 0]


def _check_independent(c, starts, n_starts, case):
    """Fail unless the B starts look like independent uniform draws: every start about as
    often as the others, and each start unrelated to the one before it."""
    __tracebackhide__ = True
    B = len(starts)
    counts = torch.bincount(starts, minlength=n_starts).tolist()
    steps = torch.bincount((starts[1:] - starts[:-1]) % n_starts, minlength=n_starts).tolist()
    expected = B / n_starts
    # 1.5 times the expected count or 2/3 of it: about 8 standard deviations for the named
    # case's 2,000 windows over 8 starts, and a last start drawn twice as often is past it
    if max(steps) > 1.5 * expected or min(steps) < expected / 1.5 \
            or max(counts) > 1.5 * expected or min(counts) < expected / 1.5:
        c.fail(f"the {B} starts are not independent draws", case=case,
               expected=f"each start, and each step from one row's start to the next row's, "
                        f"about {expected:.0f} times",
               got=f"starts {counts}, steps between rows {steps}",
               hint="draw every row's start on its own, B independent draws from the "
                    "generator (one call can draw them all): not consecutive starts, not "
                    "sorted, not one start shifted row by row")
    c.ok()


@own_messages("sample_batch")
def check_sample_batch(fn):
    """Check sample_batch(ids, batch_size, block_size, generator) -> (inputs, targets), each (B, T)."""
    __tracebackhide__ = True
    c = Checker("sample_batch", fn)
    for k, (N, B, T) in enumerate(((30, 3, 5), (9, 1, 4), (12, 2000, 4))):
        first, second = seed(2 * k), seed(2 * k + 1)
        _batch_one(c, (N, B, T, first, second), _batch_case(N, B, T, first))
    # any length of text, batch and block size (past 128 to 1,024), windows up to the last id
    each(c, _draw_batch, _batch_one, n=20, stream=62)
    c.done()


_ONE_ROW_SEEDS = (11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22)   # a batch of one, drawn again


def _batch_case(N, B, T, first, mix=None):
    text = (f"ids = torch.arange({_FIRST_ID}, {_FIRST_ID + N}) (N = {N})" if mix is None else
            f"ids = {_FIRST_ID} + torch.randperm({N}, generator=torch.Generator().manual_seed({mix})) "
            f"(N = {N}: the ids {_FIRST_ID} to {_FIRST_ID + N - 1} in a shuffled order)")
    return f"{text}, batch_size={B}, block_size={T}, generator=torch.Generator().manual_seed({first})"


def _draw_batch(d):
    T = d.length()
    N = T + 1 + d.size(0, 5_000, small=4)
    B, first, second = d.size(1, 64, small=4), d.seed(), d.seed()
    mix = d.seed() if d.boolean() else None   # a text whose next id is not the id plus 1
    return (N, B, T, first, second, mix), _batch_case(N, B, T, first, mix)


def _text(N, mix):
    """The test corpus of N ids, and where each id sat in it (by id - _FIRST_ID)."""
    if mix is None:
        return torch.arange(_FIRST_ID, _FIRST_ID + N), torch.arange(N)
    order = torch.randperm(N, generator=torch.Generator().manual_seed(mix))
    place = torch.empty(N, dtype=torch.long)
    place[order] = torch.arange(N)
    return _FIRST_ID + order, place


def _batch_one(c, args, case):
    """Check sample_batch on one (N, batch_size, block_size) with two seeds."""
    __tracebackhide__ = True
    N, B, T, first, second, mix = args if len(args) == 6 else (*args, None)
    ids, place = _text(N, mix)
    crash = "a window ids[s : s + block_size + 1] needs s + block_size + 1 <= len(ids); "
    generator = torch.Generator().manual_seed(first)
    result, seen = call_inside(c, ids, B, T, generator,
                               own=_OWN_BATCH, case=case,
                               crash_hint=crash + _WINDOW_HINT,
                               none_hint="end with `return inputs, targets`")
    _no_own_answer(c, seen["own"], "the sampling", case)
    inputs, targets = _pair_of_tensors(c, result, case)
    if torch.equal(generator.get_state(), torch.Generator().manual_seed(first).get_state()):
        c.fail("the generator you are given did not move on", case=case,
               hint="draw the starts from the generator you are given, torch.randint(..., "
                    "generator=generator): each draw moves it on, so the next step of a training "
                    "loop gets other windows; drawing from a copy of it (or a new one) gives "
                    "every step the same batch")
    starts = _check_windows(c, inputs, targets, B, T, N, case, place)
    if B >= 1000:  # enough windows that every start appears
        seen, last = set(starts.tolist()), N - T - 1
        if len(seen) == 1:
            c.fail(f"all {B} windows start at the same place", case=case,
                   got=starts[:8].tolist(),
                   hint="draw one start per row, batch_size of them, not one start "
                        "for the whole batch")
        if last not in seen:
            c.fail(f"the last window (start {last}, ending at the last id) never appears "
                   f"in {B} windows", case=case, expected=list(range(last + 1)),
                   got=sorted(seen), hint=_WINDOW_HINT)
        if 0 not in seen or len(seen) < last + 1:
            c.fail(f"some starts never appear in {B} windows", case=case,
                   expected=list(range(last + 1)), got=sorted(seen),
                   hint=_WINDOW_HINT)
        c.ok()
        _check_independent(c, starts, N - T, case)
    again = c.call(ids, B, T, torch.Generator().manual_seed(first), case=case,
                   crash_hint=crash + _WINDOW_HINT)
    other = c.call(ids, B, T, torch.Generator().manual_seed(second),
                   case=case.replace(f"manual_seed({first})", f"manual_seed({second})"),
                   crash_hint=crash + _WINDOW_HINT)
    same = all(torch.equal(a, b) for a, b in zip(result, _pair_of_tensors(c, again, case)))
    # another seed must give other windows, where two seeds could hardly draw the same B
    # starts by chance (fewer than one in 10^12)
    moved = B <= 1 or not torch.equal(result[0], _pair_of_tensors(c, other, case)[0])
    if B == 1 and (N - T) ** len(_ONE_ROW_SEEDS) > 10**6:   # a batch of one: does its start move?
        rows = {_first_row(c.call(ids, 1, T, torch.Generator().manual_seed(s), case=case,
                                  crash_hint=crash + _WINDOW_HINT)) for s in _ONE_ROW_SEEDS}
        moved = len(rows) > 1
        if not moved:
            c.fail(f"a batch of one window starts at the same place under {len(_ONE_ROW_SEEDS)} "
                   f"seeds", case=case, got=list(rows)[0],
                   hint="draw the start with torch.randint(..., (batch_size,), generator=generator) "
                        "for every batch size, one too: a fixed window is not a random one")
    if not same or (not moved and (N - T) ** B > 10**12):
        c.fail("the windows do not follow the generator you are given", case=case,
               hint="draw the starts with the generator you are given, "
                    "torch.randint(..., generator=generator), so that a seeded generator "
                    "gives the same batch every time")
    c.ok()


# ---------------------------------------------------------------------------
# cross_entropy(logits, targets) -> scalar tensor
# ---------------------------------------------------------------------------

_CE_FORMULA = ("the loss is the mean over all B*T positions of logsumexp(z) - z[target], with "
               "z = logits[b, t] (V numbers) and logsumexp(z) = m + log(sum(exp(z - m))), "
               "m = max(z)")


def _ce_variants(logits, targets):
    """The usual wrong losses, computed stably in float64: {hint: value}."""
    z = logits.detach().double()
    B, T, V = z.shape
    lse = torch.logsumexp(z, dim=-1)                                      # (B, T)
    picked = z.gather(-1, targets[..., None])[..., 0]                     # (B, T)
    nll = lse - picked                                                    # (B, T)
    out = {
        "take the mean over all B*T positions, not the sum": nll.sum(),
        "the loss is -log p(target), a positive number: you forgot the minus sign": -nll.mean(),
        "average over the B*T positions only, not over the V vocabulary entries as well":
            nll.sum() / (B * T * V),
        "average over every position of every row (B*T of them): you averaged over T and then "
        "summed over B": nll.mean(dim=1).sum(),
        "each position is scored on its own target: pair logits[b, t] with targets[b, t] "
        "(flattening the targets transposed pairs them with another position's)":
            (lse.reshape(-1) - z.reshape(-1, V).gather(
                -1, targets.T.reshape(-1, 1).clamp(max=V - 1))[:, 0]).mean() if B != T else None,
        "the softmax runs over the last axis, the V vocabulary entries; yours ran over another "
        "axis": -(z - torch.logsumexp(z, dim=1, keepdim=True)).gather(
            -1, targets[..., None]).mean(),
        "log-sum-exp is m + log(sum(exp(z - m))): after subtracting the maximum m, add it back":
            (lse - z.amax(-1) - picked).mean() if torch.isfinite(z.amax(-1)).all() else None,
    }
    return {hint: value for hint, value in out.items() if value is not None}


def _ce_cases(gen):
    """(case text, logits, targets) from easy to hard."""
    cases = []
    logits = torch.randn(2, 3, 5, generator=gen)
    targets = torch.tensor([[0, 4, 2], [3, 3, 1]])
    cases.append(("logits (B=2, T=3, V=5) float32 from randn, targets [[0, 4, 2], [3, 3, 1]]",
                  logits, targets))
    logits = 3 * torch.randn(1, 4, 7, generator=gen, dtype=torch.float64)
    targets = torch.tensor([[6, 0, 2, 2]])
    cases.append(("logits (B=1, T=4, V=7) float64, targets [[6, 0, 2, 2]]", logits, targets))
    logits = 1000 * torch.randn(3, 2, 6, generator=gen)
    targets = torch.tensor([[1, 5], [0, 2], [4, 4]])
    cases.append(("large logits (B=3, T=2, V=6) float32, entries of about +-3000 (a confident "
                  "model), targets [[1, 5], [0, 2], [4, 4]]", logits, targets))
    logits = torch.randn(2, 3, 4, generator=gen)
    targets = torch.tensor([[1, 2, 3], [3, 1, 2]])
    logits[..., 0] = -torch.inf
    cases.append(("logits (B=2, T=3, V=4) float32 with -inf in column 0 everywhere (a byte the "
                  "model rules out; never a target), targets [[1, 2, 3], [3, 1, 2]]",
                  logits, targets))
    return cases


@learner_side
class _Forbidden(TorchCalls):
    """The torch functions the exercise forbids, noted at torch's dispatch however reached."""
    FORBIDDEN = {"cross_entropy": "F.cross_entropy", "cross_entropy_loss": "F.cross_entropy",
                 "log_softmax": "log_softmax", "special_log_softmax": "torch.special.log_softmax"}


def _ce_call(c, fn, logits, targets, case, **kwargs):
    """The learner's cross_entropy(logits, targets), failing if it used a forbidden function."""
    __tracebackhide__ = True
    got, seen = call_inside(c, logits, targets, own=_OWN_LOSS, around=_Forbidden, case=case, **kwargs)
    if seen["own"]:
        c.fail("your function calls course_lib's own next_token_loss", case=case,
               hint="write the loss yourself with log-sum-exp: next_token_loss is the answer "
                    "key and earns no credit")
    if seen["around"]:
        c.fail(f"your function calls {', '.join(seen['around'])}, which the exercise asks "
               f"you not to use", case=case,
               hint="compute logsumexp(z) - z[target] yourself: subtract each row's maximum "
                    "before exponentiating and add it back after the log, and pick the "
                    "target's logit by its index")
    return got


@own_messages("cross_entropy")
def check_cross_entropy(fn):
    """Check cross_entropy(logits, targets): the mean next-token loss, stable, with gradients."""
    __tracebackhide__ = True
    c = Checker("cross_entropy", fn)
    gen = torch.Generator().manual_seed(seed(6))
    for case, logits, targets in _ce_cases(gen):
        _ce_one(c, (logits, targets), case)
    # any batch, length and vocabulary, both dtypes, logits up to +-1e4 and -inf off the targets
    each(c, _draw_ce, _ce_one, n=25, stream=61)
    _check_ce_gradient(c, fn, gen)
    c.done()


def _draw_ce(d):
    B, T, V = d.integer(1, 3), d.size(1, 64, small=6), d.size(1, 300, small=8)
    dtype, scale = d.choice((torch.float32, torch.float64)), d.choice((1.0, 10.0, 1e3, 1e4))
    g = torch.Generator().manual_seed(d.seed())
    logits = (torch.randn(B, T, V, generator=g, dtype=torch.float64) * scale).to(dtype)
    targets = torch.randint(V, (B, T), generator=g)
    if V > 1 and d.boolean(0.3):   # ruled-out bytes: -inf, never a target
        hidden = torch.rand(B, T, V, generator=g) < 0.4
        hidden.scatter_(-1, targets[..., None], False)
        logits = logits.masked_fill(hidden, -torch.inf)
    ruled = " with some -inf logits (never at a target)" if torch.isinf(logits).any() else ""
    return (logits, targets), (f"random logits (B={B}, T={T}, V={V}) "
                               f"{str(dtype).replace('torch.', '')} of scale {scale:g}{ruled}, "
                               f"random targets")


def _ce_one(c, args, case):
    """Check cross_entropy on one (logits, targets)."""
    __tracebackhide__ = True
    logits, targets = args
    fn = c.fn
    V = logits.shape[-1]
    want = F.cross_entropy(logits.double().reshape(-1, V), targets.reshape(-1))
    got = _ce_call(c, fn, logits, targets, case=case,
                 crash_hint="logits are (B, T, V) and targets (B, T) integers: pick each "
                            "position's target logit with logits.gather(-1, targets[..., "
                            "None]) or by flattening both to (B*T, V) and (B*T,)",
                 none_hint="end with `return loss`, a tensor of shape ()")
    if isinstance(got, numbers.Real) and not isinstance(got, bool):
        c.fail("expected a tensor, got a Python number", case=case, got=got,
               hint="return the loss tensor itself, not loss.item(): training calls "
                    "loss.backward() on it")
    if not isinstance(got, torch.Tensor):
        c.fail("expected a tensor", case=case, got=type(got).__name__,
               hint="return the loss as a torch tensor of shape ()")
    if got.shape != ():
        hint = ("return one number, the mean over all B*T positions (.mean() of the (B, T) "
                "losses)")
        if got.shape == logits.shape[:2] or got.numel() == logits.shape[0] * logits.shape[1]:
            hint = "you returned one loss per position: " + hint
        c.fail("the loss is not a single number", case=case, expected="shape ()",
               got=f"shape {tuple(got.shape)}", hint=hint)
    if got.dtype != logits.dtype:
        c.fail("the loss has the wrong dtype", case=case, expected=str(logits.dtype),
               got=str(got.dtype),
               hint="compute in the logits' dtype; do not convert to another one")
    c.ok()
    value = got.detach().double()
    if not bool(torch.isfinite(value)):
        if bool(torch.isnan(value)) and "-inf" in case:
            hint = ("0 * -inf is NaN: pick the target's log-probability with gather or "
                    "indexing rather than multiplying the log-probabilities by a one-hot")
        elif _overflows(c, case):
            hint = ("exp of a large logit overflows (exp(89) is already inf in float32): "
                    "subtract each position's maximum logit before exp, the log-sum-exp "
                    "trick")
        else:
            hint = ("the target's probability underflowed to 0 and log(0) = -inf: never take "
                    "the log of a softmax; use log p(target) = z[target] - logsumexp(z)")
        c.fail("the loss is inf or NaN", case=case, expected=round(want.item(), 4),
               got=value.item(), hint=hint)
    c.ok()
    atol, rtol = (1e-5, 1e-5) if logits.dtype == torch.float32 else (1e-9, 1e-9)
    if not torch.isclose(value, want, atol=atol, rtol=rtol):
        hint = next((h for h, v in _ce_variants(logits, targets).items()
                     if torch.isclose(value, v, atol=atol, rtol=rtol)), _CE_FORMULA)
        c.fail("the loss is not right", case=case, expected=round(want.item(), 6),
               got=round(value.item(), 6), hint=hint)
    c.ok()


def _overflows(c, case):
    """Whether the learner's loss is inf or NaN where the target has the largest logit, 100."""
    __tracebackhide__ = True
    confident = torch.tensor([[[100.0, 0.0, 0.0]]])      # the right loss is about 7e-44
    value = _ce_call(c, c.fn, confident, torch.tensor([[0]]), case)
    return not (isinstance(value, torch.Tensor) and bool(torch.isfinite(value).all()))


def _check_ce_gradient(c, fn, gen):
    """The gradient with respect to the logits must equal cross_entropy's: softmax - one-hot, / BT."""
    __tracebackhide__ = True
    logits = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64)
    targets = torch.tensor([[1, 0, 4], [2, 2, 3]])
    case = "logits (B=2, T=3, V=5) float64 with requires_grad=True, targets [[1, 0, 4], [2, 2, 3]]"
    mine = logits.clone().requires_grad_(True)
    loss = _ce_call(c, fn, mine, targets, case)
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        c.fail("no gradient flows through your loss", case=case,
               hint="use torch operations on the logits only: .detach(), .item(), NumPy or "
                    "torch.no_grad() cut the graph, and the model could not learn from the loss")
    seen = c.follow(backward, inputs=[0])
    if "raised" in seen:
        c.fail(f"the backward pass through your loss failed: {seen['raised']}", case=case,
               hint="your function edits in place (x -= ..., x[...] = ..., x.exp_()) a tensor "
                    "that autograd still needs to compute the gradient: build a new tensor "
                    "instead (x = x - ...)")
    grad = seen["grads"][0]
    ref = logits.clone().requires_grad_(True)
    F.cross_entropy(ref.reshape(-1, 5), targets.reshape(-1)).backward()
    if not (isinstance(grad, torch.Tensor) and grad.shape == ref.grad.shape
            and grad.dtype == ref.grad.dtype
            and torch.allclose(grad, ref.grad, atol=1e-9, rtol=1e-7)):
        c.fail("the gradient with respect to the logits is not right", case=case,
               expected=ref.grad[0], got=grad[0] if isinstance(grad, torch.Tensor) else grad,
               hint="the value is right, so something on the way is not an ordinary torch "
                    "operation on the logits (a constant taken out of the graph changes "
                    "nothing, but an in-place edit or a detach does)")
    c.ok()


# ---------------------------------------------------------------------------
# lr_schedule(step, max_lr, warmup_steps, total_steps, min_lr_ratio) -> float
# ---------------------------------------------------------------------------

_LR_FORMULA = ("follow the two pieces the exercise states: the warm-up line for the steps below "
               "warmup_steps, then half a cosine from max_lr at step warmup_steps down to the "
               "floor (the fraction min_lr_ratio of max_lr) at step total_steps - 1, with the "
               "progress capped at 1 after it; compare your rate with the expected one at the "
               "step shown")


def _lr_curve(steps, max_lr, warmup, total, ratio, mistake=None):
    """The schedule, right or with one usual mistake, at each step."""
    out = []
    for s in steps:
        floor = ratio if mistake == "absolute floor" else max_lr * ratio
        if mistake == "no floor":
            floor = 0.0
        if s < warmup:
            rise = s if mistake == "starts at 0" else s + 1
            out.append(max_lr * rise / warmup)
            continue
        span = total - 1 - warmup
        if mistake == "ends one late":
            span = total - warmup
        elif mistake == "cosine from 0":
            span = total - 1
        p = (s - warmup) / max(1, span)
        if mistake == "cosine from 0":
            p = s / max(1, span)
        if mistake != "no cap":
            p = min(1.0, p)
        if mistake == "linear":
            out.append(floor + (max_lr - floor) * (1 - p))
        elif mistake == "full cosine":
            out.append(floor + (max_lr - floor) * math.cos(math.pi * p))
        else:
            out.append(floor + (max_lr - floor) * 0.5 * (1 + math.cos(math.pi * p)))
    return out


_LR_CRASH = ("the arguments are plain Python numbers: use math.cos and math.pi; with "
             "warmup_steps=0 there is no warm-up, so never divide by warmup_steps outside the "
             "`if step < warmup_steps:` branch")

_LR_MISTAKES = {
    "starts at 0": "at step 0 the rate is 0, so the first update does nothing: warm up with "
                   "max_lr * (step + 1) / warmup_steps, which reaches max_lr at step "
                   "warmup_steps - 1",
    "ends one late": "the floor is reached one step too late: the last update is step "
                     "total_steps - 1, so progress is (step - warmup_steps) / "
                     "(total_steps - 1 - warmup_steps)",
    "no floor": "the schedule decays to max_lr * min_lr_ratio, not to 0",
    "absolute floor": "the floor is max_lr * min_lr_ratio: min_lr_ratio is a fraction of the "
                      "peak, not a learning rate",
    "no cap": "past the last step (step >= total_steps) keep the floor: cap the progress at 1, "
              "or the cosine climbs back up",
    "cosine from 0": "the cosine starts at the end of the warm-up: progress is "
                     "(step - warmup_steps) / (total_steps - 1 - warmup_steps), 0 at step "
                     "warmup_steps",
    "linear": "the decay is a half cosine, 0.5 * (1 + cos(pi * p)), not a straight line",
    "full cosine": "use 0.5 * (1 + cos(pi * p)), which goes from 1 to 0 as p goes from 0 to 1; "
                   "cos(pi * p) alone goes down to -1",
}


@own_messages("lr_schedule")
def check_lr_schedule(fn):
    """Check lr_schedule(step, max_lr, warmup_steps, total_steps, min_lr_ratio) -> float."""
    __tracebackhide__ = True
    c = Checker("lr_schedule", fn)
    for max_lr, warmup, total, ratio in ((1e-3, 4, 15, 0.1), (2e-3, 20, 100, 0.25),
                                         (0.5, 0, 9, 0.0), (3e-4, 100, 2000, 0.1)):
        steps = sorted(set(range(0, min(total, 40))) | {warmup - 1, warmup, warmup + 1,
                       total // 2, total - 2, total - 1, total, total + 5} - {-1})
        _lr_one(c, (max_lr, warmup, total, ratio, steps))
    # any peak, warm-up (0 too), length and floor; both ends, the floor and steps past the end
    each(c, _draw_schedule, lambda c, args, case: _lr_one(c, args), n=25, stream=60)
    c.done()


def _draw_schedule(d):
    """A schedule with at least two updates after the warm-up, so that the peak (step
    warmup_steps) and the floor (step total_steps - 1) are different steps."""
    max_lr = d.choice((3e-4, 1e-3, 0.5, 1.0, 6e-5)) * d.integer(1, 9)
    total = d.size(2, 100_000, small=50)
    warmup = d.choice((0, d.integer(0, total - 2), min(total - 2, d.integer(1, 10))))
    ratio = d.choice((0.1, 0.0, 0.25, 1.0, d.integer(1, 99) / 100))
    inside = [d.integer(0, total + 50) for _ in range(4)]
    steps = sorted({0, max(warmup - 1, 0), warmup, total - 1, total, total + 5, *inside})
    return (max_lr, warmup, total, ratio, steps), None


def _lr_one(c, args):
    """Check lr_schedule at some steps of one schedule."""
    __tracebackhide__ = True
    max_lr, warmup, total, ratio, steps = args
    config = dict(max_lr=max_lr, warmup_steps=warmup, total_steps=total, min_lr_ratio=ratio)
    setting = ", ".join(f"{k}={v}" for k, v in config.items())
    reference = TrainConfig(steps=total, lr=max_lr, warmup_steps=warmup, min_lr_ratio=ratio)
    want = [lr_at(s, reference) for s in steps]
    got = []
    for s in steps:
        case = f"lr_schedule(step={s}, {setting})"
        value, seen = call_inside(c, s, own=_OWN_SCHEDULE, case=case,
                                  crash_hint=_LR_CRASH, none_hint="end with `return` and "
                                  "the learning rate, a float", **config)
        _no_own_answer(c, seen["own"], "the schedule", case)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            c.fail("expected a Python float, got a tensor", case=case, got=value,
                   hint="use the math module (math.cos, math.pi) on plain numbers, or "
                        "return float(...)")
        if isinstance(value, np.generic):
            c.fail("expected a Python float, got a NumPy number", case=case,
                   got=f"{value!r} ({type(value).__name__})",
                   hint="use the math module (math.cos, math.pi) rather than NumPy's, or "
                        "return float(...): a NumPy scalar is not a Python float")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            c.fail("expected the learning rate as a float", case=case,
                   got=type(value).__name__, hint="return a single number")
        if not isinstance(value, float):
            c.fail("expected the learning rate as a Python float", case=case,
                   got=f"{value!r} ({type(value).__name__})",
                   hint="a learning rate is a float even where it comes out whole: "
                        "return float(...), and use / rather than //")
        if not math.isfinite(value):
            c.fail("the learning rate is inf or NaN", case=case, got=value,
                   hint="with no warm-up (warmup_steps=0) never divide by warmup_steps: "
                        "the schedule starts straight at the cosine; " + _LR_FORMULA)
        got.append(float(value))
    c.ok()
    for s, g, w in zip(steps, got, want):
        if not math.isclose(g, w, rel_tol=1e-6, abs_tol=1e-12):
            hint = next((h for m, h in _LR_MISTAKES.items()
                         if all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12) for a, b in
                                zip(got, _lr_curve(steps, max_lr, warmup, total, ratio, m)))),
                        _LR_FORMULA)
            c.fail("the learning rate is not right", case=f"lr_schedule(step={s}, {setting})",
                   expected=w, got=g, hint=hint)
    c.ok()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "sample_batch": (
        "Draw B random start positions with the generator, cut a window of T + 1 ids at each, and "
        "split every window into inputs (all but the last) and targets (all but the first).",
        "The highest start is len(ids) - T - 1, and torch.randint never returns its `high`: pick "
        "high so that the last window can be drawn. Draw all B starts independently, with the "
        "generator you are given (not the global one).",
        "Indexing ids with starts[:, None] + an arange of T + 1 builds all the windows at once, "
        "(B, T + 1); keep the ids' integer dtype.",
    ),
    "cross_entropy": (
        "At each position the loss is logsumexp(z) - z_y; compute logsumexp stably by taking "
        "the maximum out first, then average over every position.",
        "`torch.log(torch.softmax(z))` and the forbidden built-ins are not allowed; exponentiate "
        "z minus its maximum so nothing overflows, and keep the result a tensor in the logits' "
        "dtype so backward() works.",
        "The maximum along the vocabulary axis with keepdim, a log of the sum of exponentials, "
        "`gather` to pick z_y (targets need a trailing axis of size 1), then one mean.",
    ),
    "train_step": (
        "Five moves in order: cut the batch into inputs and targets, run the model, compute the "
        "cross-entropy, then clear the old gradients, back-propagate and step.",
        "Clearing the gradients must come before back-propagating, never between backward and "
        "step: backward adds to each .grad rather than replacing it. And the targets are the "
        "batch shifted by one against the inputs.",
        "Flatten the logits to (B*T, V) and the targets to (B*T,) with reshape (view fails on the "
        "sliced targets), and hand back the loss as a Python float, not a tensor.",
    ),
    "lr_schedule": (
        "Two pieces: a straight line up during warm-up, then half a cosine from max_lr down to "
        "the floor max_lr * min_lr_ratio, which stays after the last step.",
        "Warm-up starts at max_lr / warmup_steps at step 0, not at 0; the cosine's progress runs "
        "from step warmup_steps to step total_steps - 1 and is capped at 1; warmup_steps may be 0.",
        "An `if` for the warm-up; after it, the floor, then the progress p with `min` for the cap, "
        "then the statement's cosine formula with `math.cos` and `math.pi`, returning a Python "
        "float.",
    ),
}


# Questions on this lesson's ideas: `answer("06-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "06-ids": Number(
        prompt="Section 7's CPU run takes batches of 16 windows with `block_size` 128 and "
               "scores 2,048 target tokens per step. How many ids does each batch of windows "
               "hold before it is cut into inputs and targets?",
        after="## 3. A batch: windows, inputs and shifted targets",
        value=2_064, tolerance=0,
        why="each window holds T + 1 = 129 ids, so that its T inputs and T targets overlap "
            "shifted by one: 16 × 129 = 2,064.",
        wrong=((2_048, 2_048, "that is the number of targets (or inputs); a window holds more "
                              "ids than the targets it gives: count what T inputs and T "
                              "targets shifted by one need."),
               (4_096, 4_096, "inputs and targets are not stored separately: they are two "
                              "overlapping slices of the same window."),
               (2_032, 2_032, "a window is longer than the targets it gives, not shorter.")),
        otherwise="count the ids of one window of T + 1, then of the batch."),
    "06-83": Number(
        prompt="Only 83 of the 256 byte values occur in the corpus. A model that spreads its "
               "bets evenly over exactly those 83 bytes (and gives the others nothing): what "
               "is its loss, in nats per byte, on text that uses only them?",
        after="distinct bytes used",
        value=4.419, tolerance=0.005, unit="nats",
        why="every byte that occurs gets p = 1/83, and −ln(1/83) = ln 83 ≈ 4.419: better than "
            "ln 256 = 5.545, worse than the byte frequencies' 3.34, which also know that a "
            "space is far likelier than a 'z'.",
        wrong=((5.5, 5.6, "ln 256 spreads the bets over all 256 bytes; this model gives the "
                          "173 unused ones nothing."),
               (3.3, 3.35, "that is the byte-frequency baseline, which gives each byte its own "
                           "frequency; an even spread over 83 bytes does not know the "
                           "frequencies."),
               (6.3, 6.4, "that is the logarithm base 2, bits; the lesson measures in nats, "
                          "with the natural logarithm.")),
        otherwise="every position gets the same probability; take −ln of it."),
    "06-offbyone": Choice(
        prompt="Trained with unshifted targets (the inputs themselves), the model's training "
               "loss fell below 0.2, and its next-byte validation loss ended above ln 256 = "
               "5.545, worse than guessing evenly (the lesson asserts both). Why worse than "
               "guessing?",
        after="## 6. The off-by-one pitfall",
        choices={
            "a": ("it overfitted the training text, so it fails on the validation text",
                  "its loss was near 0 on a copying task, which is as easy on validation text "
                  "as on training text; what it learned is the wrong task, not the training "
                  "text."),
            "b": ("it confidently predicts that the byte it sees comes again, so the real next "
                  "byte gets a tiny probability",
                  "a model that puts almost all its probability on one wrong byte is punished "
                  "by −ln p far more than one that spreads it evenly; its samples repeated one "
                  "byte."),
            "c": ("the validation text uses bytes the training text never does",
                  "only 2 validation bytes never occur in the training text, and the shifted "
                  "model's validation loss on the same text was below ln 256."),
            "d": ("`evaluate` shifts the targets, which makes every model's loss higher",
                  "evaluate shifts them correctly: that is the task that matters, and the "
                  "shifted model scored below ln 256 on it."),
        },
        right="b"),
    "06-warmup": Number(
        prompt="Section 7's CPU schedule: `max_lr` = 2e-3, 20 warm-up steps, 160 steps in "
               "all, `min_lr_ratio` = 0.1; step 0 got 1.00e-04 and step 19 got 2.00e-03. What "
               "learning rate does step 9 get?",
        after="### Exercise 4: the learning-rate schedule",
        value=1e-3, tolerance=1e-6,
        why="the warm-up rises linearly from lr / warmup at step 0 to lr at step 19: "
            "lr · (step + 1) / warmup = 2e-3 × 10 / 20 = 1e-3.",
        wrong=((8.9e-4, 9.1e-4, "that is lr · step / warmup; the warm-up starts at "
                                "lr / warmup on step 0, not at 0, so step s gets "
                                "(s + 1) / warmup of the peak."),
               (1.9e-3, 2.1e-3, "the peak is reached at the end of the warm-up, step 19; "
                                "step 9 is still on the way up."),
               (1.9e-4, 2.1e-4, "that is the floor, lr × min_lr_ratio, reached at the last "
                                "step of the cosine decay.")),
        otherwise="step 9 is inside the warm-up; the linear rise runs from step 0's value to "
                  "step 19's."),
}
