"""Drawn inputs (course_lib.checks.domain): a function of the seed alone, shrunk to the smallest
that fails the same way, counted the same on every run."""
import subprocess
import sys

import numpy as np
import pytest

from course_lib.checks.core import Checker, Stopped, seeded
from course_lib.checks.domain import SHRINK_CALLS, Draw, each


def _draw_list(d):
    ids = d.many(lambda d: d.integer(0, 5_000), hi=40, average=8)
    return ids, f"f({ids})"


def _check_sum(fn):
    def one(c, ids, case):
        got = c.call(list(ids), case=case)
        if got != sum(ids):
            c.fail("the sum is not right", case=case, expected=sum(ids), got=got,
                   hint="add every id")
        c.ok()
    c = Checker("demo", fn)
    each(c, _draw_list, one, n=30, stream=5)
    return c


def test_the_same_seed_draws_the_same_inputs_and_another_seed_others():
    def inputs(base):
        seen = []
        with seeded(base):
            _check_sum(lambda ids: seen.append(list(ids)) or sum(ids))
        return seen
    assert inputs(7) == inputs(7)
    assert inputs(7) != inputs(8)
    assert len(inputs(7)) == 30


def test_draws_do_not_depend_on_the_modules_a_process_loaded(tmp_path):
    """What ruled Hypothesis out: its draws change with the constants of the modules loaded.
    Ours are the same in a process that imported a learner's module full of numbers."""
    (tmp_path / "helper.py").write_text("MAGIC = [987654, 4999, 31337]\n")
    script = ("import sys, numpy as np; sys.path.insert(0, sys.argv[1])\n"
              "if len(sys.argv) > 2: import helper\n"
              "from course_lib.checks.domain import Draw\n"
              "rng = np.random.default_rng(7)\n"
              "print([Draw(rng).many(lambda d: d.integer(0, 10**6), hi=20) for _ in range(50)])\n")
    runs = [subprocess.run([sys.executable, "-c", script, str(tmp_path), *extra],
                           capture_output=True, text=True, check=True).stdout
            for extra in ([], ["helper"])]
    assert runs[0] == runs[1] and runs[0].startswith("[[")


def test_a_passing_check_counts_each_drawn_input_once(capsys):
    c = _check_sum(sum)
    assert c.passed == 30


def test_a_failure_is_shrunk_to_the_smallest_input_that_fails_the_same_way():
    # wrong once a list holds more than five ids, or an id past 999
    def wrong(ids):
        return sum(i for i in ids[:5] if i < 1000)
    with pytest.raises(AssertionError) as failure:
        _check_sum(wrong)
    message = str(failure.value)
    assert "drawn at random from the exercise's domain" in message
    shown = message.split("input:    f(", 1)[1].split(")", 1)[0]
    ids = eval(shown)
    assert ids in ([1000], [0, 0, 0, 0, 0, 1]), message


def test_shrinking_stops_after_its_budget_of_calls():
    calls = []

    def wrong(ids):
        calls.append(1)
        return -1 if ids else 0
    with pytest.raises(AssertionError):
        _check_sum(wrong)
    assert len(calls) <= 30 + SHRINK_CALLS + 1


def test_a_failing_check_counts_the_inputs_that_passed_before_it():
    seen = []

    def wrong(ids):
        seen.append(1)
        return sum(ids) + (len(seen) >= 4)
    c = Checker("demo", wrong)
    with pytest.raises(AssertionError):
        def one(c, ids, case):
            if c.call(list(ids), case=case) != sum(ids):
                c.fail("the sum is not right", case=case, hint="add every id")
            c.ok()
        each(c, _draw_list, one, n=30, stream=5)
    assert c.passed == 3


def test_the_graders_check_shrinks_across_the_wire_to_the_learners_input():
    """The grader checks through the wire (tests/loopback.py), shrinking included: the same
    feedback, smallest input and all, as a check run in the learner's process from that seed."""
    from loopback import Loopback

    from course_lib.grading import remote

    def check(fn):
        _check_sum(fn).done()
    wrong = lambda ids: sum(ids) - (len(ids) > 3)   # noqa: E731
    with seeded(11), pytest.raises(AssertionError) as direct:
        check(wrong)
    status, said, _ = remote.run_check(check, remote.Function("demo", Loopback(wrong)), 11)
    assert status == "failed" and said == f"AssertionError: {direct.value}"
    assert "input:    f([0, 0, 0, 0])" in said


def test_a_learner_process_that_ended_is_not_shrunk():
    """Once the learner's process has ended every later call would say so too: the first such
    feedback is shown, for the input that ended it, without trying smaller ones."""
    class Gone:
        kind, calls = None, 0

        def names(self, n):
            return [f"argument {i + 1}" for i in range(n)]

        def call(self, args, kwargs, **_):
            self.calls += 1
            return {"ended": "your function ended the grader's process", "after": list(args),
                    "labels": []}
    gone = Gone()
    fn = type("Function", (), {"remote": gone, "__call__": lambda self, *a: None})()
    with seeded(3), pytest.raises(Stopped, match="ended the grader's process"):
        _check_sum(fn)
    assert gone.calls == 1


def test_a_choice_read_back_is_clamped_to_its_range():
    d = Draw(prefix=[99, 7])
    assert d.integer(3, 5) == 5 and d.boolean() is True and d.integer(0, 9) == 0
    assert d.choices == [2, 1, 0]


def test_sizes_reach_past_small_tables():
    rng = np.random.default_rng(0)
    sizes = [Draw(rng).size(1, 1_100, small=8) for _ in range(200)]
    assert min(sizes) == 1 and max(sizes) > 1_024 and sum(s <= 8 for s in sizes) > 100
