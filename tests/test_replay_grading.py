"""The grader's replay stage without a kernel: records forged, linked, huge or malformed get no credit.

A record is what the notebook's check cell saved in the sandbox: anything in it may have been
written by the learner's code. The grader copies it out (`replay.collect`) and replays the
lesson's checker on it in a worker of its own (`replay.Replayer`); these tests hand that
stage records made here, honest and forged, and read its verdicts.
"""
import json
import os
import time

import pytest

from course_lib import checks
from course_lib.checks import record
from course_lib.grading import replay
from course_lib.grading.lessons import Exercise

from answers import REFERENCE, WRONG
from notebook_tools import function_from

EXERCISE, MODULE, PASS = "next_token_targets", "course_lib.checks.lesson00", "next_token_targets: 6 checks passed"
UNSHIFTED = next(w for w in WRONG if w.exercise == EXERCISE and w.inject)
SEED = 123_456_789


@pytest.fixture(scope="module")
def replayer():
    with replay.Replayer() as r:
        yield r


def recorded(body, folder, name=EXERCISE, seed=SEED, edit=None):
    """Record check_<name> on the answer `body` into folder/records/<name>; edit(recording) first if given."""
    with record.recording(seed) as rec:
        try:
            getattr(checks, f"check_{name}")(function_from(name, body))
        except (AssertionError, NotImplementedError):
            pass
    if edit:
        edit(rec)
    (folder / "records").mkdir(parents=True, exist_ok=True)
    rec.save(folder / "records" / name)
    return folder


def verdict(folder, replayer, name=EXERCISE, seed=SEED, pass_line=PASS):
    """(status, feedback, cases passed, cases total) for the record in folder/records/."""
    scratch = folder / "scratch"
    scratch.mkdir(exist_ok=True)
    got = replay.replay_records(folder, [Exercise(name, 1, [], MODULE)], seed, replayer, scratch)[name]
    if got is None:
        return None
    return replay.decide(name, got, pass_line)


def test_a_right_answers_record_passes_with_every_case_counted(tmp_path, replayer):
    assert verdict(recorded(REFERENCE[EXERCISE], tmp_path), replayer) == ("passed", PASS, 6, 6)


def test_a_wrong_answers_record_fails_with_its_hint_and_the_cases_it_passed(tmp_path, replayer):
    status, feedback, passed, total = verdict(recorded(UNSHIFTED.body, tmp_path), replayer)
    assert status == "failed" and UNSHIFTED.hint in feedback and feedback.startswith("AssertionError: ")
    assert (passed, total) == (1, 6)


def test_a_record_with_plausible_values_edited_in_fails(tmp_path, replayer):
    """The learner's code writes the right answer's record, every result shifted by one id."""
    def shift(rec):
        for key, t in rec.tensors.items():
            rec.tensors[key] = t + 1
    status, feedback, _, _ = verdict(recorded(REFERENCE[EXERCISE], tmp_path, edit=shift), replayer)
    assert status == "failed" and "Exercise 'next_token_targets'" in feedback and "Hint:" in feedback


def test_a_record_with_results_the_check_never_asked_for_fails(tmp_path, replayer):
    def extra(rec):
        rec.observations.append({"label": "something else", "value": None})
    status, feedback, _, _ = verdict(recorded(REFERENCE[EXERCISE], tmp_path, edit=extra), replayer)
    assert status == "failed" and "results the check never asked for" in feedback


def test_a_record_cut_short_fails_as_unfinished(tmp_path, replayer):
    """SystemExit with the pass text inside the function: the record ends at the call."""
    def cut(rec):
        del rec.observations[2:]
    status, feedback, _, _ = verdict(recorded(REFERENCE[EXERCISE], tmp_path, edit=cut), replayer)
    assert status == "failed" and "the check stopped in your notebook before it reached" in feedback


def test_a_recorded_exception_named_after_the_pass_line_fails(tmp_path, replayer):
    body = 'raise type("next_token_targets", (NotImplementedError,), {})("6 checks passed")'
    status, feedback, _, _ = verdict(recorded(body, tmp_path), replayer)
    assert status == "failed" and feedback != PASS and feedback.startswith("AssertionError: ")


def test_a_carriage_return_in_the_feedback_is_shown_not_obeyed(tmp_path, replayer):
    body = f'raise NotImplementedError("\\r{PASS}")'
    assert verdict(recorded(body, tmp_path), replayer)[:2] == ("failed", f"NotImplementedError: \\r{PASS}")


def test_a_record_of_the_same_check_under_another_seed_is_replayed_under_this_gradings(tmp_path, replayer):
    """The seed is the grader's: a record made under another is replayed with this grading's inputs
    (lesson 00's checks draw none, so it still passes; a seeded check's labels would not match)."""
    folder = recorded(REFERENCE[EXERCISE], tmp_path, seed=1)
    assert verdict(folder, replayer, seed=SEED)[0] == "passed"
    obs = json.loads((folder / "records" / f"{EXERCISE}.json").read_text())["observations"]
    assert obs[0]["label"] == "what was checked"


@pytest.mark.parametrize("make, why", [
    (lambda p: (p.unlink(), p.symlink_to("/etc/passwd")), "symbolic link"),
    (lambda p: (p.unlink(), os.mkfifo(p)), "not a regular file"),
    (lambda p: os.truncate(p, 100 * 2 ** 20), "over the 64 MB limit"),
])
def test_a_record_that_is_a_link_a_fifo_or_huge_is_refused_unopened(tmp_path, replayer, make, why):
    folder = recorded(REFERENCE[EXERCISE], tmp_path)
    make(folder / "records" / f"{EXERCISE}.safetensors")
    start = time.monotonic()
    status, feedback, passed, total = verdict(folder, replayer)
    assert status == "failed" and feedback.startswith("the record of this check could not be used: ")
    assert why in feedback and (passed, total) == (None, 6)
    assert time.monotonic() - start < 60  # a FIFO never blocks it


def test_a_records_folder_that_is_a_link_gives_no_records(tmp_path, replayer):
    honest = recorded(REFERENCE[EXERCISE], tmp_path / "honest")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "records").symlink_to(honest / "records")
    status, feedback, _, _ = verdict(tmp_path / "copy", replayer)
    assert status == "failed" and "records folder was replaced" in feedback


@pytest.mark.parametrize("text", ['{"format": 1, "observations": [{"label": 3}]}', "{ not json",
                                  '{"format": 1, "observations": [{"label": "a", "value": {"pickle": "x"}}]}'])
def test_a_malformed_record_is_refused(tmp_path, replayer, text):
    folder = recorded(REFERENCE[EXERCISE], tmp_path)
    (folder / "records" / f"{EXERCISE}.json").write_text(text)
    status, feedback, _, _ = verdict(folder, replayer)
    assert status == "failed" and feedback.startswith("the record of this check could not be used: ")


def test_no_record_is_no_verdict_of_the_replays(tmp_path, replayer):
    (tmp_path / "records").mkdir()
    assert verdict(tmp_path, replayer) is None


def test_the_worker_runs_under_a_memory_limit_and_loads_only_the_graders_course_lib(replayer, tmp_path):
    recorded(REFERENCE[EXERCISE], tmp_path)
    verdict(tmp_path, replayer)  # the worker is running
    limits = open(f"/proc/{replayer.proc.pid}/limits").read()
    line = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert str(int(replay.REPLAY_MEMORY_GIB * 2 ** 30)) in line
    assert os.readlink(f"/proc/{replayer.proc.pid}/cwd") == str(replay.ROOT)  # never a graded copy


# A worker that never answers, and one that dies: the replay's time limit and a fresh worker.
STALLS = "import sys, time\nprint('{\"ready\": true, \"cpu\": 0}', flush=True)\nsys.stdin.readline()\ntime.sleep(600)\n"
DIES = "import os, sys\nprint('{\"ready\": true, \"cpu\": 0}', flush=True)\nsys.stdin.readline()\nos._exit(9)\n"


@pytest.mark.parametrize("boot, why", [(STALLS, "took more than 2 s, so it was stopped"),
                                       (DIES, "the replay worker ended (status 9)")])
def test_a_replay_that_stalls_or_kills_its_worker_fails_that_exercise_and_the_next_gets_a_fresh_one(boot, why):
    with replay.Replayer(timeout=2, boot=boot) as r:
        first = r.replay("x", EXERCISE, MODULE, 0)
        pid = None if r.proc is None else r.proc.pid
        assert first["kind"] == "error" and why in first["text"] and pid is None
        assert replay.decide(EXERCISE, first, PASS)[0] == "failed"
        assert r.replay("x", EXERCISE, MODULE, 0)["kind"] == "error" and r.starts == 2


def test_only_the_lessons_checkers_are_replayed():
    assert replay.replay_one("x", "system", "os", 0)["kind"] == "error"
    assert replay.replay_one("x", "a; b", "course_lib.checks.lesson00", 0)["kind"] == "error"


def test_the_pass_line_must_be_the_lessons_exactly():
    honest = {"kind": "passed", "text": PASS, "finished": True, "cases_passed": 6}
    assert replay.decide(EXERCISE, honest, PASS)[0] == "passed"
    assert replay.decide(EXERCISE, dict(honest, text=PASS + " "), PASS)[0] == "failed"
    assert replay.decide(EXERCISE, dict(honest, finished=False), PASS)[0] == "failed"
    assert replay.decide(EXERCISE, dict(honest, kind="failed"), PASS)[0] == "failed"
    assert replay.decide(EXERCISE, honest, "next_token_targets: 7 checks passed")[0] == "failed"


def test_a_huge_replay_allocation_is_a_failed_exercise_not_a_dead_grader():
    boot = replay.BOOT.replace("import course_lib.grading.replay as replay\n",
                               "import course_lib.grading.replay as replay\n"
                               "replay.replay_one = lambda *a: bytearray(8 * 2 ** 30)\n")
    with replay.Replayer(boot=boot) as r:
        got = r.replay("x", EXERCISE, MODULE, 0)
    assert got["kind"] == "error" and "more memory than the grader allows" in got["text"]
