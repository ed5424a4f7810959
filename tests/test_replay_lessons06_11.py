"""Lessons 06 and 08-11 graded by replay: a record that does not belong to the grading cannot pass.

A record is written where the learner's code runs, so it is hostile input. Each test here
records a right answer, then replays a record that is plausible but wrong for the grading:
recorded under another base seed (the inputs of another grading), or with one recorded
result edited. The replayed check must fail, with the exercise's own feedback.
"""
import copy
import tempfile
from pathlib import Path

import pytest
import torch

from course_lib import checks
from course_lib.checks.record import Replayed, load, recording, replaying

from answers import REFERENCE
from notebook_tools import function_from
from replay_tools import BASE_SEED, outcome, replayed

OTHER_SEED = 1_234_567   # another grading's seed


def record(name, base_seed=BASE_SEED):
    """The reference answer's outcome under `base_seed`, and its record as the grader reads it."""
    check = getattr(checks, f"check_{name}")
    with recording(base_seed) as rec:
        result = outcome(check, function_from(name, REFERENCE[name]))
    with tempfile.TemporaryDirectory() as folder:
        rec.save(Path(folder) / name)
        return result, load(Path(folder) / name)


def replay(name, observations, base_seed=BASE_SEED):
    with replaying(observations, base_seed, name):
        return outcome(getattr(checks, f"check_{name}"), Replayed(name))


def edited(observations, label, change):
    """A copy of the observations with the value of the first probe whose label starts with
    `label` replaced by change(a copy of it)."""
    out = copy.deepcopy(observations)
    seen = next(o for o in out if o["label"].startswith(label) and "value" in o)
    seen["value"] = change(seen["value"])
    return out


def assert_fails(result, *fragments, name):
    status, message = result
    assert status == "failed", f"a forged record passed: {result}"
    assert message.startswith(f"Exercise '{name}': ") and "\nHint: " in message, message
    for fragment in fragments:
        assert fragment in message, f"expected {fragment!r} in:\n{message}"


# Exercises whose inputs come from the grading's seed: a record of another grading's inputs
# lines up probe by probe (or not at all, where the case text names the seed) and fails.
ANOTHER_GRADING = [
    ("train_step", "the loss is not right"),
    ("sample_batch", "do not match the check"),       # its case text names the generator's seed
    ("cross_entropy", "the loss is not right"),
    ("rms_norm", "the result is not right"),
    ("swiglu", "the result is not right"),
    ("grouped_query_attention", "the result is not right"),
    ("tiled_attention", "do not match the check"),    # a wrong output makes it call again
    ("gpt2_to_tinylm", "the given state dict was changed"),  # the record's dict is another one
    ("previous_token_scores", "the scores are not right"),
]


@pytest.mark.parametrize("name, fragment", ANOTHER_GRADING, ids=[n for n, _ in ANOTHER_GRADING])
def test_a_record_of_another_gradings_inputs_fails(name, fragment):
    result, observations = record(name, OTHER_SEED)
    assert result[0] == "passed", result
    assert replay(name, observations, OTHER_SEED) == result      # its own grading: it passes
    assert_fails(replay(name, observations, BASE_SEED), fragment, name=name)


@pytest.mark.parametrize("name", [n for n, _ in ANOTHER_GRADING])
def test_the_reference_passes_with_the_same_line_whatever_the_seed(name):
    lines = {replayed(name, function_from(name, REFERENCE[name]), base_seed=s)
             for s in (1, 99_999_989, 2**62 + 12_345)}
    assert len(lines) == 1 and next(iter(lines))[0] == "passed", lines


def _set_call_result(new):
    def change(value):
        if isinstance(value["result"], dict) and "seen" in value["result"]:
            value["result"]["result"] = new(value["result"]["result"])
        else:
            value["result"] = new(value["result"])
        return value
    return change


def _set_seen(key, new):
    def change(value):
        value["result"]["seen"][key] = new
        return value
    return change


def _set_key(key, new):
    def change(value):
        value[key] = new
        return value
    return change


def _shift_params(value):
    value["params"] = [p + 1e-3 for p in value["params"]]
    return value


def _append(item):
    def change(args):
        args = list(args)
        args[0] = type(args[0])(args[0]) if not isinstance(args[0], dict) else dict(args[0])
        if isinstance(args[0], dict):
            args[0][(999, 999)] = 1
        else:
            args[0].append(item)
        return tuple(args)
    return change


EDITS = [
    # (exercise, probe label prefix, change, feedback fragments)
    ("train_step", "the call", _set_call_result(lambda loss: loss + 0.01), ["the loss is not right"]),
    ("train_step", "the model after", _set_key("training", False), ["left the model in eval mode"]),
    ("train_step", "the model after", _shift_params, ["the parameters after the step are not right"]),
    ("train_step", "the model after", lambda v: _set_key("params", v["params"][:-1])(v),
     ["changed their number, shape or dtype"]),
    ("train_step", "the call", _set_seen("own", ["train_step"]), ["calls course_lib's own train_step"]),
    ("sample_batch", "the call", _set_call_result(lambda pair: (pair[0], pair[0])),
     ["targets are not the inputs shifted by one"]),
    ("cross_entropy", "the call", _set_seen("forbidden", ["F.cross_entropy"]), ["calls F.cross_entropy"]),
    ("cross_entropy", "the call", _set_call_result(lambda loss: loss * 1.01), ["the loss is not right"]),
    ("cross_entropy", "the backward pass", lambda v: {"grads": [v["grads"][0] * 2]},
     ["the gradient with respect to the logits is not right"]),
    ("cross_entropy", "the backward pass", lambda v: {"raised": "RuntimeError: in-place"},
     ["the backward pass through your loss failed"]),
    ("lr_schedule", "the call", _set_call_result(lambda lr: lr * 1.001), ["the learning rate is not right"]),
    ("rms_norm", "the call", _set_call_result(lambda out: out * 1.01), ["the result is not right"]),
    ("rms_norm", "the backward pass", lambda v: {"grads": [v["grads"][0], None]},
     ["no gradient flows back to weight"]),
    ("swiglu", "the call", _set_call_result(lambda out: out + 0.01), ["the result is not right"]),
    ("grouped_query_attention", "the call", _set_call_result(lambda out: out.flip(-1)),
     ["the result is not right"]),
    ("params_from_config", "the call", _set_call_result(lambda n: n + 1), ["the count is off by +1"]),
    ("params_from_config", "the config after", lambda fields: dict(fields, vocab_size=1),
     ["the config dict was changed"]),
    ("attention_flops", "the call", _set_call_result(lambda n: n * 2), ["the count is off by"]),
    ("tiled_attention", "the call float32", _set_call_result(lambda out: out * 1.01),
     ["the output differs from causal attention for float32 inputs"]),
    ("tiled_attention", "the call T=128", _set_seen("largest", 128 * 128), ["a tensor of T x T size"]),
    ("gpt2_to_tinylm", "the call", _set_call_result(lambda sd: {k: v * 2 for k, v in sd.items()}),
     ["are not right"]),
    ("gpt2_to_tinylm", "the given state dict after",
     lambda sd: {k: (v.T if v.ndim == 2 else v) for k, v in sd.items()}, ["the given state dict was changed"]),
    ("previous_token_scores", "the call", _set_call_result(lambda out: out + 0.05), ["the scores are not right"]),
    ("prefix_lm_mask", "the call", _set_call_result(lambda m: m.T.copy()), ["the mask"]),
    ("count_pairs", "the call", _set_call_result(lambda d: {**d, (1, 1): 5}), ["the counts are not right"]),
    ("count_pairs", "the arguments after", _append(None), ["changed its argument 1 in place"]),
    ("best_pair", "the call", _set_call_result(lambda p: (p[1], p[0])), ["the pair to merge is not right"]),
    ("merge_pair", "the call", _set_call_result(lambda ids: ids + [0]), ["the merged ids are not right"]),
    ("merge_pair", "the arguments after", _append(7), ["changed its argument 1 in place"]),
    ("encode_piece", "the call", _set_call_result(lambda ids: ids + [0]), ["the encoded ids are not right"]),
    ("encode_piece", "the arguments after", _append(7), ["changed its argument 1 in place"]),
    ("decode_tokens", "the call", _set_call_result(lambda text: text + "!"), ["the text is not right"]),
]


@pytest.mark.parametrize("name, label, change, fragments", EDITS,
                         ids=[f"{e[0]}-{e[1]}-{i}" for i, e in enumerate(EDITS)])
def test_a_record_with_one_result_edited_fails(name, label, change, fragments):
    result, observations = record(name)
    assert result[0] == "passed", result
    assert replay(name, observations) == result
    assert_fails(replay(name, edited(observations, label, change)), *fragments, name=name)


def test_the_edits_leave_the_original_record_alone():
    _, observations = record("merge_pair")
    before = copy.deepcopy(observations)
    edited(observations, "the call", _set_call_result(lambda ids: ids + [0]))
    assert observations == before


def test_train_step_replays_the_models_state_call_by_call():
    """In replay the checker's model takes the recorded parameters after each call, so the
    next call's losses start where the learner's step left them: a record whose second step
    is shifted fails on that call, not on the first."""
    result, observations = record("train_step")
    afters = [i for i, o in enumerate(observations) if o["label"].startswith("the model after")]
    forged = copy.deepcopy(observations)
    second = forged[afters[1]]["value"]
    second["params"] = [p + torch.full_like(p, 1e-3) for p in second["params"]]
    status, message = replay("train_step", forged)
    assert status == "failed" and "call 2 of 3" in message, message
