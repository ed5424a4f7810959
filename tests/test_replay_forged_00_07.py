"""A forged record cannot pass the checks of lessons 00 to 05 and 07.

The grader replays a check with no learner code, on inputs it draws from its own seed for this
grading; the record says only what the learner's function returned for them (and what the
probes saw of it). So a record that is plausible but not this grading's must fail, with
feedback: a record of the reference answer made on another grading's inputs (copied from a
classmate, or kept from an earlier grading), and a record whose results were edited.
"""
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib import checks
from course_lib.checks.record import Replayed, load, recording, replaying

from answers import ALTERNATIVES, REFERENCE, WRONG
from notebook_tools import function_from
from replay_tools import BASE_SEED, outcome, replayed

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

LESSONS = {
    "00": ["text_to_ids", "next_token_targets", "next_byte_loss"],
    "01": ["attention_steps", "softmax", "attention"],
    "02": ["causal_mask", "masked_attention", "future_leak"],
    "03": ["split_heads", "merge_heads", "multi_head_attention"],
    "04": ["layer_norm", "block_forward", "count_params"],
    "05": ["sinusoidal_positions", "apply_rope", "rope_scores"],
    "07": ["cached_attention_step", "greedy_decode", "kv_bytes_per_token"],
}
EXERCISES = [name for names in LESSONS.values() for name in names]

# Checks whose inputs are drawn at random: another grading's record is of other inputs.
# (The rest check literal inputs, or, as future_leak, an answer that no input changes.)
SEEDED = ["next_byte_loss", "attention_steps", "attention", "masked_attention", "merge_heads",
          "multi_head_attention", "layer_norm", "block_forward", "apply_rope", "rope_scores",
          "cached_attention_step", "greedy_decode"]

MISMATCH = "do not match the check"   # a replay's feedback when the probes do not line up

# On a wrong result these call the function once more to diagnose it (multi_head_attention:
# does changing the last position change earlier outputs?), a call that the record of a right
# answer does not hold: the replay fails there, on the probe it lacks.
PROBES_FURTHER = {"multi_head_attention"}


def failed_on_its_values(name, status, message):
    """Whether a replay failed with feedback, and (unless it probes further) on the values."""
    return (status == "failed" and message.startswith(f"Exercise '{name}': ")
            and "\nHint: " in message and (name in PROBES_FURTHER or MISMATCH not in message))


def record_of(name, fn, base_seed):
    """The observations of check_<name>(fn) recorded at `base_seed`, saved and loaded back."""
    check = getattr(checks, f"check_{name}")
    with recording(base_seed) as record:
        recorded = outcome(check, fn)
    with tempfile.TemporaryDirectory() as folder:
        record.save(Path(folder) / name)
        return recorded, load(Path(folder) / name)


def replay(name, observations, base_seed):
    """The outcome of check_<name> replayed from `observations` at `base_seed`."""
    check = getattr(checks, f"check_{name}")
    with replaying(observations, base_seed, name):
        return outcome(check, Replayed(name))


def edited(value):
    """`value` with every number in it changed: a result a little off, as a forger would make it."""
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool:
            return ~value
        if value.is_floating_point():
            return (value.detach() * 1.01 + 0.01).requires_grad_(value.requires_grad)
        return value + 1
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return ~value
        return value * 1.01 + 0.01 if np.issubdtype(value.dtype, np.floating) else value + 1
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, (list, tuple)):
        return type(value)(edited(v) for v in value)
    if isinstance(value, dict):
        return {k: edited(v) for k, v in value.items()}
    return value


def learners_result(seen):
    """The learner's own result inside a call probe's value: c.call's, or observed_call's within it."""
    result = seen["value"]["result"]
    if isinstance(result, dict) and set(result) == {"result", "raised", "called", "observed"}:
        return result, "result"
    return seen["value"], "result"


@pytest.mark.parametrize("name", SEEDED)
def test_the_references_record_from_another_grading_fails(name):
    fn = function_from(name, REFERENCE[name])
    recorded, observations = record_of(name, fn, base_seed=BASE_SEED + 1000)
    assert recorded[0] == "passed", recorded
    status, message = replay(name, observations, base_seed=BASE_SEED)
    assert failed_on_its_values(name, status, message), (status, message)


@pytest.mark.parametrize("name", EXERCISES)
def test_a_record_whose_results_were_edited_fails(name):
    fn = function_from(name, REFERENCE[name])
    recorded, observations = record_of(name, fn, base_seed=BASE_SEED)
    assert recorded[0] == "passed", recorded
    assert replay(name, observations, BASE_SEED) == recorded     # as recorded, it passes
    calls = [seen for seen in observations if seen["label"].startswith("the call ")]
    assert calls, f"check_{name} recorded no call"
    for seen in calls:
        holder, key = learners_result(seen)
        holder[key] = edited(holder[key])
    status, message = replay(name, observations, BASE_SEED)
    assert failed_on_its_values(name, status, message), (status, message)


# Each grading draws its own inputs: right answers must pass, and wrong answers fail with their
# hint, whatever the seed (tests/test_checks.py runs every answer at replay_tools.BASE_SEED).
OTHER_SEEDS = [1, 2**63 - 5]


# Where the cases were built so that no seed makes a mistake look right (see their checkers).
SEED_SENSITIVE = ["greedy_decode", "future_leak"]


def _answers():
    """Every right answer of these lessons, and the wrong answers of SEED_SENSITIVE."""
    found = [(name, "reference", REFERENCE[name], None) for name in EXERCISES]
    found += [(name, style, body, None) for name, style, body in ALTERNATIVES if name in EXERCISES]
    found += [(w.exercise, w.name, w.body, w.hint) for w in WRONG if w.exercise in SEED_SENSITIVE]
    return [pytest.param(*answer, id=f"{answer[0]}-{answer[1]}") for answer in found]


@pytest.mark.parametrize("base_seed", OTHER_SEEDS)
@pytest.mark.parametrize("name, style, body, hint", _answers())
def test_answers_get_their_verdict_whatever_the_grading_seed(name, style, body, hint, base_seed):
    status, message = replayed(name, function_from(name, body), base_seed=base_seed)
    if hint is None:
        assert status == "passed", (style, message)
    else:
        assert status == "failed" and hint in message, (style, message)
