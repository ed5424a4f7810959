"""Run a check as the grader does: recorded where the learner's code runs, replayed without it.

`graded(name, fn)` runs check_<name>(fn) in record mode, saves the record to files and reads
it back (JSON and safetensors, as the grader does), then replays the check with no learner
function at all, and returns both outcomes. The grader's verdict is the replayed one; the
two must agree for every answer the tests know, right or wrong.
"""
import tempfile
from pathlib import Path

from course_lib import checks
from course_lib.checks.record import Replayed, load, recording, replaying
from course_lib.grading.replay import outcome  # the grader's own reading of a check's end

BASE_SEED = 7_654_321   # not 0: the inputs a grading draws differ from the learner's own check's


def graded(name, fn, base_seed=BASE_SEED):
    """(recorded outcome, replayed outcome, whether the replay used every recorded probe)."""
    check = getattr(checks, f"check_{name}")
    with recording(base_seed) as record:
        recorded = outcome(check, fn)
    with tempfile.TemporaryDirectory() as folder:
        record.save(Path(folder) / name)
        observations = load(Path(folder) / name)
    with replaying(observations, base_seed, name) as replay:
        replayed = outcome(check, Replayed(name))
    return recorded, replayed, replay.finished()


def replayed(name, fn, base_seed=BASE_SEED):
    """The replayed outcome, after asserting that it equals the recorded one."""
    recorded, again, finished = graded(name, fn, base_seed)
    assert again == recorded, (f"the replay of check_{name} differs from its record:\n"
                               f"recorded: {recorded}\nreplayed: {again}")
    if recorded[0] == "passed":
        assert finished, f"the replay of check_{name} passed without using every recorded probe"
    return again
