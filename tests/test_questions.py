"""Questions that check understanding: every lesson has three or more, each answer is judged
with its own explanation, and a wrong answer is never told the right one."""
import importlib
import math

import numpy as np
import pytest
import torch

from course_lib.checks import answer
from course_lib.checks import questions as q_
from course_lib.checks.questions import Choice, Number

from notebook_tools import LESSONS, ROOT, read

QUESTIONS = q_.all_questions()
IDS = list(QUESTIONS)
CHOICES = [qid for qid in IDS if isinstance(QUESTIONS[qid], Choice)]
NUMBERS = [qid for qid in IDS if isinstance(QUESTIONS[qid], Number)]
LESSON_OF = {path.name[:2]: path for path in LESSONS}


@pytest.fixture(autouse=True)
def fresh_kernel(monkeypatch):
    monkeypatch.setattr(q_, "_given", {})


def said(capsys, qid, given):
    answer(qid, given)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return out.strip()


@pytest.mark.parametrize("lesson", sorted(LESSON_OF))
def test_every_lesson_has_three_questions_or_more(lesson):
    assert sum(qid.startswith(f"{lesson}-") for qid in IDS) >= 3


def test_ids_are_unique_and_named_for_their_lesson(monkeypatch, tmp_path):
    for qid, question in QUESTIONS.items():
        assert isinstance(question, (Choice, Number)), qid
        lesson, _, name = qid.partition("-")
        assert lesson in LESSON_OF and name and qid == qid.strip(), qid
        assert qid in importlib.import_module(f"course_lib.checks.lesson{lesson}").QUESTIONS
    # the tables are read from the modules' source: a second module defining 00-bytes again
    again = tmp_path / "lesson01.py"
    again.write_text('QUESTIONS = {"00-bytes": Number(prompt="p", after="a", value=1, tolerance=0, why="w")}\n')
    modules = q_.lesson_modules()
    monkeypatch.setattr(q_, "lesson_modules", lambda: [*modules, again])
    with pytest.raises(ValueError, match="'00-bytes' is defined twice"):
        q_.all_questions()


@pytest.mark.parametrize("qid", IDS)
def test_each_question_belongs_after_one_cell_of_its_lesson(qid):
    question = QUESTIONS[qid]
    assert len(question.prompt) > 40 and question.after.strip(), qid
    nb = read(LESSON_OF[qid[:2]])
    inserted = {"question", "question-prompt", "questions"}
    lesson_cells = [c for c in nb.cells if not inserted & set(c.metadata.get("tags", []))]
    hits = [c for c in lesson_cells if question.after in c.source]
    assert len(hits) == 1, (f"{qid}: {question.after!r} is in {len(hits)} cells of "
                            f"{LESSON_OF[qid[:2]].name}")


@pytest.mark.parametrize("qid", IDS)
def test_the_right_answer_passes_and_is_recorded(qid, capsys):
    question = QUESTIONS[qid]
    right = question.right if isinstance(question, Choice) else question.value
    out = said(capsys, qid, right)
    explanation = question.choices[right][1] if isinstance(question, Choice) else question.why
    assert out.startswith(f"Question '{qid}': right. ")
    assert out.endswith(explanation[1:]), out
    assert q_._given[qid] == [(right, True)]


@pytest.mark.parametrize("qid", CHOICES)
def test_each_wrong_choice_fails_with_its_own_explanation(qid, capsys):
    question = QUESTIONS[qid]
    whys = [why for _, why in question.choices.values()]
    assert len(set(whys)) == len(whys), f"{qid}: two choices share an explanation"
    right_text = question.choices[question.right][0]
    for letter, (text, why) in question.choices.items():
        if letter == question.right:
            continue
        out = said(capsys, qid, letter)
        assert out.startswith(f"Question '{qid}': not quite. ") and out.endswith(why[1:]), out
        assert right_text not in out, f"{qid}: choice {letter!r} is told the right answer"
        assert f"({question.right})" not in out and f'"{question.right}"' not in out
    assert [r for _, r in q_._given[qid]] == [False] * (len(question.choices) - 1)


@pytest.mark.parametrize("qid", CHOICES)
def test_a_choice_written_differently_is_the_same_choice(qid, capsys):
    right = QUESTIONS[qid].right
    for written in (right.upper(), f" {right} ", f"({right})"):
        assert said(capsys, qid, written).startswith(f"Question '{qid}': right.")


def _inside(low, high):
    """A value inside [low, high], away from its ends where they are not the same."""
    return low if low == high else low + (high - low) / 3


@pytest.mark.parametrize("qid", NUMBERS)
def test_usual_wrong_numbers_fail_with_their_own_explanation(qid, capsys):
    question = QUESTIONS[qid]
    assert len(question.wrong) >= 2, f"{qid}: name at least two usual wrong reasonings"
    shown = _shown_forms(question.value)
    for low, high, why in question.wrong:
        out = said(capsys, qid, _inside(low, high))
        assert out.startswith(f"Question '{qid}': not quite. ") and out.endswith(why[1:]), out
        for form in shown:
            assert form not in out, f"{qid}: the wrong answer {low} is told {form}"
    far = question.value * 1000 + 12345.678
    out = said(capsys, qid, far)
    assert out.endswith(question.otherwise[1:]) and "not quite" in out
    for form in shown:
        assert form not in out


def _shown_forms(value):
    """How the right value would be written in an explanation, where that is distinctive."""
    forms = {f"{value:,.0f}" if float(value).is_integer() else f"{value:g}", f"{value:g}"}
    return {f for f in forms if len(f.replace(",", "").replace(".", "")) >= 3}


@pytest.mark.parametrize("qid", NUMBERS)
def test_the_tolerance_is_the_edge_of_right(qid, capsys):
    question = QUESTIONS[qid]
    edge = question.tolerance
    assert said(capsys, qid, question.value + edge).startswith(f"Question '{qid}': right.")
    assert said(capsys, qid, question.value - edge).startswith(f"Question '{qid}': right.")
    step = max(edge, 1e-12) * 1.5 + abs(question.value) * 1e-6
    assert "not quite" in said(capsys, qid, question.value + step)


def test_numbers_written_differently_pass(capsys):
    for given in (12, 12.0, "12", " 1_2 ", np.int64(12), np.float32(12), torch.tensor(12.0)):
        assert said(capsys, "00-bytes", given).startswith("Question '00-bytes': right."), given
    assert said(capsys, "03-params", "1,048,576").startswith("Question '03-params': right.")


@pytest.mark.parametrize("qid", IDS)
def test_the_blank_says_not_answered_and_how(qid, capsys):
    out = said(capsys, qid, ...)
    assert out.startswith(f"Question '{qid}': not answered yet; replace ... with ")
    assert qid not in q_._given
    question = QUESTIONS[qid]
    if isinstance(question, Choice):
        assert all(f'"{letter}"' in out for letter in question.choices)


def test_malformed_answers_are_refused_with_what_to_give():
    with pytest.raises(ValueError, match=r"no question is called '01-scal'; the questions are: "
                                         r"01-longer, 01-saturate, 01-scale, 01-stable"):
        answer("01-scal", 1)
    with pytest.raises(ValueError, match=r"no question is called 'scale'.*00-bytes"):
        answer("scale", 1)
    with pytest.raises(ValueError, match="no question is called 1"):
        answer(1, 1)
    with pytest.raises(ValueError, match=r"one letter among 'a', 'b', 'c', 'd'; got 'e'"):
        answer("02-diagonal", "e")
    with pytest.raises(ValueError, match=r"one letter among .*; got 2"):
        answer("02-diagonal", 2)
    for bad, message in (("twelve", "the text 'twelve', which is not one"),
                         (True, "an int or a float"), (None, "an int or a float"),
                         ([12], "an int or a float"), (math.nan, "a finite number"),
                         (math.inf, "a finite number"),
                         (torch.tensor([12.0, 1.0]), "one number"),
                         (np.array([12.0, 1.0]), "one number")):
        with pytest.raises(ValueError, match=message):
            answer("00-bytes", bad)
    assert q_._given == {}


def test_questions_are_built_whole():
    why = "because of the reason the choice gives"
    with pytest.raises(ValueError, match="letters a, b, c"):
        Choice("p", "x", {"a": ("1", why), "c": ("2", why), "d": ("3", why)}, "a")
    with pytest.raises(ValueError, match="right choice 'e'"):
        Choice("p", "x", {"a": ("1", why), "b": ("2", why), "c": ("3", why)}, "e")
    with pytest.raises(ValueError, match=r"choice 'b' must be \(text, why\)"):
        Choice("p", "x", {"a": ("1", why), "b": ("2", ""), "c": ("3", why)}, "a")
    with pytest.raises(ValueError, match="overlaps the right answer"):
        Number("p", "x", 1.0, 0.1, why, wrong=((1.05, 2.0, why),))
    with pytest.raises(ValueError, match="overlap"):
        Number("p", "x", 1.0, 0.1, why, wrong=((2.0, 3.0, why), (2.5, 4.0, why)))
    with pytest.raises(ValueError, match="tolerance"):
        Number("p", "x", 1.0, -0.1, why)


@pytest.mark.parametrize("qid", IDS)
def test_the_markdown_shows_every_choice_and_never_the_answer(qid):
    question = QUESTIONS[qid]
    text = question.markdown(qid)
    assert text.startswith(f"**{qid}.** {question.prompt}")
    if isinstance(question, Choice):
        assert all(f"**({letter})** {choice}" in text
                   for letter, (choice, _) in question.choices.items())
    else:
        assert "Answer with a number" in text or "Answer with the exact number" in text


@pytest.mark.parametrize("qid", IDS)
def test_the_answer_written_into_the_notebook_is_right(qid, capsys):
    """What the insertion puts into the lesson's question cell, as code, passes."""
    written = QUESTIONS[qid].expected()
    assert said(capsys, qid, eval(written)).startswith(f"Question '{qid}': right.")


def _question_cells(nb):
    return [c for c in nb.cells
            if c.cell_type == "code" and "question" in c.metadata.get("tags", [])]


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_a_lessons_question_cells_hold_its_questions_answered_right(path):
    """Once inserted (insert_questions.py), each lesson asks exactly its questions, in order."""
    cells = _question_cells(read(path))
    mine = [qid for qid in IDS if qid[:2] == path.name[:2]]
    if not cells:
        pytest.skip(f"{path.name} has no question cells yet")
    assert len(cells) == len(mine), path.name
    assert cells[0].source.startswith("from course_lib.checks import answer\n")
    for qid, cell in zip(mine, cells):
        assert cell.source.splitlines()[-1] == f'answer("{qid}", {QUESTIONS[qid].expected()})'
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert text.startswith(f"Question '{qid}': right. "), (qid, text)


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_the_exercise_copy_leaves_every_question_not_answered(path, capsys):
    nb = read(ROOT / "exercises" / path.name)
    cells = _question_cells(nb)
    if not cells:
        pytest.skip(f"exercises/{path.name} has no question cells yet")
    namespace = {}
    for cell in cells:
        exec(cell.source, namespace)
        assert not cell.outputs and cell.execution_count is None
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(cells) and all(": not answered yet; " in line for line in out), out


def test_a_grader_reads_the_answer_without_running_the_cell():
    assert q_.answer_in('from course_lib.checks import answer\n\nanswer("00-bytes", 12)') == \
        ("00-bytes", 12)
    assert q_.answer_in('answer("02-diagonal", "B")  # my guess') == ("02-diagonal", "B")
    assert q_.answer_in('answer("04-block", 197_760)') == ("04-block", 197760)
    assert q_.answer_in('answer("04-block", ...)') == ("04-block", ...)
    for source, message in (('answer("00-bytes", len("naïve café".encode()))', "not computed"),
                            ('answer("00-bytes", __import__("os").getpid())', "not computed"),
                            ('print(12)', "found 0 calls"),
                            ('answer("00-bytes", 12)\nanswer("00-bytes", 13)', "found 2 calls"),
                            ('answer("00-bytes", given=12)', "exactly once"),
                            ('answer("00-bytes", 12', "does not")):
        with pytest.raises(ValueError, match=message):
            q_.answer_in(source)


def test_judge_says_the_verdict_without_printing_or_recording(capsys):
    assert q_.judge("00-bytes", 12) == (True, QUESTIONS["00-bytes"].why)
    assert q_.judge("00-bytes", 10)[0] is False
    assert q_.judge("00-bytes", ...) == (None, QUESTIONS["00-bytes"].how("00-bytes"))
    assert capsys.readouterr().out == "" and q_._given == {}
