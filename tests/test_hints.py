"""Hints and solutions on request: every exercise has them, and no hint gives the answer away."""
import re

import pytest

from course_lib.checks import hints as help_
from course_lib.checks import hint, solution
from course_lib.exercises import BEGIN, END, exercises

from answers import _squeeze, gives_away, module_texts, reference_statements
from notebook_tools import LESSONS, read

EXERCISES = [(path.name, name, nb.cells[i].source)
             for path in LESSONS for nb in [read(path)] for name, i, _ in exercises(nb)]
NAMES = [name for _, name, _ in EXERCISES]


def solution_body(source):
    """The lines between the solution markers: the answer a hint must never contain."""
    inside = source.split(BEGIN, 1)[1].split(END, 1)[0]
    return [line.split("#", 1)[0].strip() for line in inside.splitlines()]


@pytest.fixture(autouse=True)
def fresh_kernel(monkeypatch, tmp_path):
    monkeypatch.setattr(help_, "_shown", {})
    monkeypatch.setattr(help_, "_solutions_shown", set())
    monkeypatch.setattr(help_, "_unsaved", [])
    monkeypatch.setenv("COURSE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)


def test_the_hints_shown_survive_a_restart(monkeypatch, capsys, tmp_path):
    """Issue 44: a hint() after a restart shows the next hint, not hint 1 again, so the feedback
    page's "hint 2" (the second hint() call of the notebook) is the hint the learner read."""
    hint("softmax")
    assert capsys.readouterr().out.startswith("Hint 1 of ")
    monkeypatch.setattr(help_, "_shown", {})       # a restart: the kernel's memory is gone
    hint("softmax")
    assert capsys.readouterr().out.startswith("Hint 2 of ")
    hint("causal_mask", 2)                          # a chosen hint counts too
    monkeypatch.setattr(help_, "_shown", {})
    hint("causal_mask")
    assert capsys.readouterr().out.splitlines()[-2].startswith("Hint 3 of ")
    other = tmp_path / "another_copy"               # another copy of the course starts afresh
    other.mkdir()
    monkeypatch.chdir(other)
    monkeypatch.setattr(help_, "_shown", {})
    hint("softmax")
    assert capsys.readouterr().out.startswith("Hint 1 of ")


def test_hints_still_come_when_they_cannot_be_saved(monkeypatch, capsys, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the state folder would go")
    monkeypatch.setenv("COURSE_STATE_DIR", str(blocked / "state"))
    hint("softmax")
    hint("softmax")
    out = capsys.readouterr().out
    assert "Hint 1 of " in out and "Hint 2 of " in out
    assert out.count("could not be saved") == 1 and "starts again at hint 1" in out


def test_a_damaged_state_file_is_read_as_empty(capsys, tmp_path):
    help_.state_file().parent.mkdir(parents=True)
    help_.state_file().write_text('{"shown": {"x": [1, 2]}, "format": "?"}')
    hint("softmax")
    assert capsys.readouterr().out.startswith("Hint 1 of ")


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


LESSON_MODULES = sorted({path.name[:2] for path in LESSONS})


@pytest.mark.parametrize("lesson", LESSON_MODULES)
def test_no_hint_or_message_holds_a_statement_of_the_answer(lesson):
    """Every string of a lesson's checks module (its HINTS, every failure message and hint a
    check can show, its questions) against every statement of the lesson's reference answers
    (issue 44: `weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)` as a fallback hint,
    both lines of block_forward, the storing lines of cached_attention_step). A statement the
    exercise's own text spells out may be repeated."""
    from course_lib.checks import tables
    names = [name for lesson_name, name, _ in EXERCISES if lesson_name[:2] == lesson]
    texts = [(line, _squeeze(text)) for line, text in
             module_texts(tables.HERE / f"lesson{lesson}.py")]
    found = [(name, line, statement) for name in names for statement in reference_statements(name)
             for line, text in texts if statement in text]
    assert not found, "\n".join(f"lesson{lesson}.py line {line} holds {name}'s statement "
                                 f"{statement!r}" for name, line, statement in found)


def test_the_statement_test_finds_a_full_statement():
    """The test above finds what issue 44 found: the solution's own line inside a hint."""
    statements = reference_statements("previous_token_scores")
    hint = _squeeze("the weights below the diagonal: weights.diagonal(offset=-1, dim1=-2, "
                    "dim2=-1).mean(-1), averaged")
    assert any(s in hint for s in statements)
    assert any(s in _squeeze("x = x + block.attn(block.norm1(x))")
               for s in reference_statements("block_forward"))


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
    assert f"lesson {lesson}'s solved copy" in out and "The check still runs" in out
    shown = out.split("\n", 1)[1]
    for line in source.splitlines():
        if line.strip() not in (BEGIN, END):
            assert line in shown
    assert BEGIN not in shown and END not in shown
    assert name in help_._solutions_shown


def test_solution_without_its_file_says_where_it_lives(tmp_path):
    with pytest.raises(ValueError, match="solutions.json, which is missing or unreadable"):
        help_.solution_source("softmax", path=tmp_path / "solutions.json")
