"""Answers to lesson 06's exercise (training), for testing the grader."""
from answers import Wrong

REFERENCE = {
    "train_step": """\
from course_lib.training import train_step as reference
return reference(model, opt, batch)""",
}


def _step(inputs="batch[:, :-1]", targets="batch[:, 1:]", loss="F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))",
          order="opt.zero_grad()\nloss.backward()\nopt.step()", result="loss.item()"):
    """A train_step body with one piece swapped for a mistake."""
    return f"""\
import torch.nn.functional as F
inputs, targets = {inputs}, {targets}
logits = model(inputs)
V = logits.shape[-1]
loss = {loss}
{order}
return {result}"""


WRONG = [
    Wrong("train_step", "unshifted targets", _step(targets="batch[:, :-1]"),
          "the targets are not shifted", inject=True),
    Wrong("train_step", "whole batch as inputs and targets", _step(inputs="batch", targets="batch"),
          "the targets are not shifted"),
    Wrong("train_step", "shifted the wrong way", _step(inputs="batch[:, 1:]", targets="batch[:, :-1]"),
          "shifted the wrong way"),
    Wrong("train_step", "targets flattened transposed",
          _step(loss="F.cross_entropy(logits.view(-1, V), targets.T.reshape(-1))"),
          "flattened in different orders"),
    Wrong("train_step", "logits flattened transposed",
          _step(loss="F.cross_entropy(logits.transpose(0, 1).reshape(-1, V), targets.reshape(-1))"),
          "flattened in different orders"),
    Wrong("train_step", "summed loss",
          _step(loss="F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction='sum')"),
          "take the mean"),
    Wrong("train_step", "no zero_grad", _step(order="loss.backward()\nopt.step()"),
          "backward() adds to .grad rather than replacing it"),
    Wrong("train_step", "zero_grad after backward", _step(order="loss.backward()\nopt.zero_grad()\nopt.step()"),
          "call opt.zero_grad() BEFORE loss.backward()"),
    Wrong("train_step", "no optimizer step", _step(order="opt.zero_grad()\nloss.backward()"),
          "call opt.step() after loss.backward()"),
    Wrong("train_step", "returns the tensor", _step(result="loss"),
          "returned a tensor, not a float"),
    Wrong("train_step", "view on the sliced targets",
          _step(loss="F.cross_entropy(logits.view(-1, V), targets.view(-1))"),
          "use reshape, not view"),
    Wrong("train_step", "3-D logits straight into cross_entropy",
          _step(loss="F.cross_entropy(logits, targets)"),
          "cross_entropy wants them flat"),
    Wrong("train_step", "own optimizer", _step(order="""\
own = torch.optim.AdamW(model.parameters(), lr=1e-3)
own.zero_grad()
loss.backward()
own.step()"""),
          "with the optimizer you are given"),
]

WRONG += [
    Wrong("train_step", "zero_grad after the step", _step(order="loss.backward()\nopt.step()\nopt.zero_grad()"),
          "the model arrived with gradients in .grad"),
    Wrong("train_step", "leaves the model in eval mode",
          "model.eval()\n" + _step(),
          "left the model in eval mode"),
    Wrong("train_step", "forgets to return", _step().replace("return loss.item()", "loss = loss.item()"),
          "end with `return loss.item()`"),
    Wrong("train_step", "returns the loss tensor", _step(result="loss"),
          "returned a tensor, not a float"),
]
