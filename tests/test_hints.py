"""Hints and solutions on request: every exercise has them, and no hint gives the answer away."""
import re

import pytest

from course_lib.checks import hints as help_
from course_lib.checks import hint, solution
from course_lib.exercises import BEGIN, END, exercises

from answers import gives_away
from notebook_tools import LESSONS, read

EXERCISES = [(path.name, name, nb.cells[i].source)
             for path in LESSONS for nb in [read(path)] for name, i, _ in exercises(nb)]
NAMES = [name for _, name, _ in EXERCISES]


def solution_body(source):
    """The lines between the solution markers: the answer a hint must never contain."""
    inside = source.split(BEGIN, 1)[1].split(END, 1)[0]
    return [line.split("#", 1)[0].strip() for line in inside.splitlines()]


@pytest.fixture(autouse=True)
def fresh_kernel(monkeypatch):
    monkeypatch.setattr(help_, "_shown", {})
    monkeypatch.setattr(help_, "_solutions_shown", set())


def test_every_exercise_has_two_hints_or_more_and_no_stray_ones():
    found = help_.all_hints()
    assert sorted(found) == sorted(NAMES)
    for name in NAMES:
        assert len(found[name]) >= 2, name
        assert all(isinstance(h, str) and len(h) > 40 for h in found[name]), name


@pytest.mark.parametrize("lesson, name, source", EXERCISES, ids=NAMES)
def test_no_hint_holds_a_line_of_the_answer(lesson, name, source):
    text = " ".join(help_.all_hints()[name])
    squeezed = re.sub(r"\s+", "", text)
    for line in solution_body(source):
        if len(line) >= 10:   # `return x` and the like say nothing a hint may not say
            assert re.sub(r"\s+", "", line) not in squeezed, (name, line)


@pytest.mark.parametrize("lesson, name, source", EXERCISES, ids=NAMES)
def test_no_hint_holds_a_call_of_the_answer(lesson, name, source):
    """Nor a call written inside a sentence: `a view(B, T, n_heads, C // n_heads)`, or the
    answer's `.max(axis=axis, keepdims=True)` handed over in words around it."""
    for text in help_.all_hints()[name]:
        assert gives_away(name, text) is None, (name, gives_away(name, text), text)


def test_hints_come_one_at_a_time_then_stay_at_the_last(capsys):
    n = len(help_.all_hints()["softmax"])
    shown = []
    for _ in range(n + 1):
        hint("softmax")
        shown.append(capsys.readouterr().out)
    assert [s.split(":", 1)[0] for s in shown] == [f"Hint {k} of {n} for 'softmax'"
                                                   for k in [*range(1, n + 1), n]]
    assert 'hint("softmax") again shows hint 2' in shown[0]
    assert 'solution("softmax") shows the reference answer' in shown[-1]


def test_a_chosen_hint_and_bad_requests(capsys):
    hint("causal_mask", 2)
    assert capsys.readouterr().out.startswith("Hint 2 of ")
    with pytest.raises(ValueError, match=r"'causal_mask' has hints 1 to \d; got k=9"):
        hint("causal_mask", 9)
    with pytest.raises(ValueError, match="no exercise is called 'sofmax'.*softmax"):
        hint("sofmax")
    with pytest.raises(ValueError, match="no exercise is called"):
        solution("sofmax")


@pytest.mark.parametrize("lesson, name, source", EXERCISES, ids=NAMES)
def test_solution_shows_the_lessons_own_answer(lesson, name, source, capsys):
    solution(name)
    out = capsys.readouterr().out
    assert f"from notebooks/{lesson}" in out and "The check still runs" in out
    shown = out.split("\n", 1)[1]
    for line in source.splitlines():
        if line.strip() not in (BEGIN, END):
            assert line in shown
    assert BEGIN not in shown and END not in shown
    assert name in help_._solutions_shown


def test_solution_without_its_file_says_where_it_lives(tmp_path):
    with pytest.raises(ValueError, match="solutions.json, which is missing or unreadable"):
        help_.solution_source("softmax", path=tmp_path / "solutions.json")
