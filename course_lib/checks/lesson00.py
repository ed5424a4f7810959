"""Checkers for lesson 00, start here."""
import torch

from course_lib.checks.core import Checker, pair


def check_next_token_targets(fn):
    """Check next_token_targets(ids) -> (inputs, targets) with targets[t] == ids[t + 1]."""
    __tracebackhide__ = True
    c = Checker("next_token_targets", fn)
    for ids in (torch.arange(10, 16), torch.tensor([72, 105, 33]), torch.tensor([7, 7, 9, 7])):
        case = f"ids = {ids.tolist()}"
        inputs, targets = pair(c, c.call(ids, case=case), case, "inputs, targets")
        inputs, targets = torch.as_tensor(inputs), torch.as_tensor(targets)
        if inputs.is_floating_point() or targets.is_floating_point():
            c.fail("inputs and targets must hold integer token ids", case=case,
                   expected=str(ids.dtype), got=f"{inputs.dtype}, {targets.dtype}",
                   hint="slice the ids themselves (ids[:-1], ids[1:]); cross_entropy needs "
                        "integer targets, and an embedding cannot look up a float")
        T = len(ids) - 1
        if len(inputs) != T or len(targets) != T:
            c.fail("inputs and targets must each have len(ids) - 1 entries", case=case,
                   expected=(T, T), got=(len(inputs), len(targets)),
                   hint="the last id has no next token to predict and the first is never a "
                        "target, so drop one id from each end")
        if torch.equal(inputs, ids[1:]) and torch.equal(targets, ids[:-1]):
            c.fail("each position predicts the previous token", case=case,
                   expected=ids[1:].tolist(), got=targets.tolist(),
                   hint="position t sees ids[:t + 1] and predicts the next id, ids[t + 1]: "
                        "inputs come from the front of ids, targets from one step later")
        if torch.equal(inputs, targets):
            c.fail("targets equal inputs, so the model is asked to copy its input", case=case,
                   expected=ids[1:].tolist(), got=targets.tolist(),
                   hint="shift the targets by one: targets[t] = ids[t + 1] (the off-by-one "
                        "pitfall: unshifted targets make the loss collapse and teach nothing)")
        if not (torch.equal(inputs, ids[:-1]) and torch.equal(targets, ids[1:])):
            c.fail("inputs or targets hold the wrong ids", case=case,
                   expected=(ids[:-1].tolist(), ids[1:].tolist()),
                   got=(inputs.tolist(), targets.tolist()),
                   hint="inputs are every id but the last, targets every id but the first")
        c.ok()
    c.done()
