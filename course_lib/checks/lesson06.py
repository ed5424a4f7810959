"""Checkers for lesson 06, training: one optimisation step on shifted next-token targets."""
import copy
import math
import numbers

import torch
import torch.nn.functional as F

from course_lib.checks.core import Checker
from course_lib.model import ModelConfig, TinyLM
from course_lib.training import train_step as reference_step

_CRASH_HINT = ("batch is (B, T + 1): inputs = batch[:, :-1] and targets = batch[:, 1:] are each "
               "(B, T); model(inputs) gives logits (B, T, V); cross_entropy wants them flat, "
               "logits.reshape(-1, V) against targets.reshape(-1) (use reshape, not view: the "
               "sliced targets are not contiguous)")

_SHIFT_HINTS = {
    "unshifted": "the targets are not shifted: with targets equal to the inputs the model is "
                 "asked to copy the token it already sees (the off-by-one pitfall); use "
                 "inputs = batch[:, :-1] and targets = batch[:, 1:]",
    "backwards": "the targets are shifted the wrong way: position t must predict the NEXT "
                 "token, so inputs = batch[:, :-1] and targets = batch[:, 1:], not the other "
                 "way round (that teaches the model the previous token)",
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


def _setup(seed, B, T, V):
    """A float64 TinyLM with weights larger than the default, and three (B, T + 1) batches."""
    torch.manual_seed(seed)
    model = TinyLM(ModelConfig(vocab_size=V, max_len=T + 2, d_model=12, n_heads=2, n_layers=1)).double()
    gen = torch.Generator().manual_seed(100 + seed)
    with torch.no_grad():  # larger weights than the default init, so every mistake moves the loss
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    batches = [torch.randint(0, V, (B, T + 1), generator=gen) for _ in range(3)]
    return model, batches


def _stale_gradients(model, seed):
    """Leave gradients in .grad, as an earlier backward() would: a step must clear them first."""
    gen = torch.Generator().manual_seed(200 + seed)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)


def check_train_step(fn):
    """Check train_step(model, opt, batch) -> float, step by step against the reference."""
    __tracebackhide__ = True
    c = Checker("train_step", fn)
    cases = (
        (0, 3, 5, 11, "SGD(lr=0.5)", lambda ps: torch.optim.SGD(ps, lr=0.5)),
        (1, 2, 7, 13, "AdamW(lr=0.01, weight_decay=0.1)",
         lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1)),
    )
    for seed, B, T, V, opt_name, make_opt in cases:
        model, batches = _setup(seed, B, T, V)
        ref_model = copy.deepcopy(model)
        ref_opt = make_opt(ref_model.parameters())
        opt = make_opt(model.parameters())
        wrong = {order: copy.deepcopy(model) for order in (("backward", "step"),)}
        wrong_opts = {k: make_opt(m.parameters()) for k, m in wrong.items()}
        for m in (model, ref_model, *wrong.values()):
            _stale_gradients(m, seed)
        for k, batch in enumerate(batches, start=1):
            case = (f"a TinyLM(vocab_size={V}, d_model=12, n_layers=1) in float64, opt = "
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
            got = c.call(model, opt, batch, case=case, crash_hint=_CRASH_HINT,
                         none_hint="end with `return loss.item()`: the loss of this batch as a "
                                   "Python float")
            _check_loss(c, got, want_loss, variants, case)
            if not model.training:
                c.fail("your function left the model in eval mode", case=case,
                       hint="a training step trains: leave the model in train mode (if you "
                            "call model.eval() to look at something, call model.train() after)")
            c.ok()
            after = _params(model)
            if not _same(after, _params(ref_model)):
                c.fail("the parameters after the step are not right", case=case,
                       expected=_params(ref_model)[0][0, :4], got=after[0][0, :4],
                       hint=_param_hint(model, before, after, wrong, k)
                       + " (shown: the first 4 numbers of the token embedding's first row)")
            c.ok()
    c.done()


def _check_loss(c, got, want, variants, case):
    __tracebackhide__ = True
    if isinstance(got, torch.Tensor):
        c.fail("your function returned a tensor, not a float", case=case, expected="float",
               got=f"torch.Tensor of shape {tuple(got.shape)}",
               hint="return loss.item(): a Python float. Keeping the tensor also keeps its whole "
                    "autograd graph alive, and a training loop that stores every loss then runs "
                    "out of memory")
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        c.fail("expected the loss as a float", case=case, got=type(got).__name__,
               hint="return loss.item()")
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


def _param_hint(model, before, after, wrong, k):
    """Name the step mistake that explains the parameters, if one does."""
    if _same(after, before, exact=True):
        grads = [p.grad for p in model.parameters()]
        if all(g is None or not g.any() for g in grads):
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
