"""Run a check as the grader does: recorded where the learner's code runs, replayed without it.

`graded(name, fn)` runs check_<name>(fn) in record mode, saves the record to files and reads
it back (JSON and safetensors, as the grader does), then replays the check with no learner
function at all, and returns both outcomes. The grader's verdict is the replayed one; the
two must agree for every answer the tests know, right or wrong.
"""
import contextlib
import io
import tempfile
from pathlib import Path

from course_lib import checks
from course_lib.checks.record import Replayed, load, recording, replaying

BASE_SEED = 7_654_321   # not 0: the inputs a grading draws differ from the learner's own check's


def outcome(check, fn):
    """("passed", last line printed), ("failed", feedback) or ("unfinished", message)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            check(fn)
    except NotImplementedError as e:
        return ("unfinished", str(e))
    except AssertionError as e:
        return ("failed", str(e))
    lines = out.getvalue().strip().splitlines()
    return ("passed", lines[-1] if lines else "")


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
