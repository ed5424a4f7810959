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
def test_the_lesson_shows_the_prompt_the_grader_judges(qid):
    """The question's markdown cell in the solved lesson and in the working copy is the
    question's own markdown: the learner reads the question whose answers are judged."""
    for folder in ("notebooks", "exercises"):
        nb = read(ROOT / folder / LESSON_OF[qid[:2]].name)
        shown = [c.source for c in nb.cells
                 if "question-prompt" in c.metadata.get("tags", [])
                 and c.source.startswith(f"**{qid}.**")]
        assert shown == [QUESTIONS[qid].markdown(qid)], f"{folder}: {qid}"


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


def _words(text):
    import re
    return re.findall(r"[\w']+", text.lower())


@pytest.mark.parametrize("qid", CHOICES)
def test_no_wrong_choice_is_explained_with_the_right_ones_words(qid):
    """A wrong choice's explanation shares no run of three words with the right choice's text."""
    question = QUESTIONS[qid]
    right = _words(question.choices[question.right][0])
    runs = {tuple(right[i:i + 3]) for i in range(len(right) - 2)}
    for letter, (_, why) in question.choices.items():
        if letter != question.right:
            said_ = _words(why)
            shared = runs & {tuple(said_[i:i + 3]) for i in range(len(said_) - 2)}
            assert not shared, f"{qid} ({letter}) repeats the right answer's words {shared}"


_NUMBER_WORDS = dict(zip("zero one two three four five six seven eight nine ten eleven "
                         "twelve".split(), range(13)))


def _numbers_in(text):
    """The numbers an explanation writes, in digits ("1,255", "0.5") or in words ("two")."""
    import re
    found = [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\.?\d*", text)
             if n.replace(",", "").replace(".", "").isdigit() and n.count(".") <= 1]
    found += [float(n) / 100 for n in re.findall(r"(\d+\.?\d*)\s*%", text)]   # 15% = 0.15
    return found + [float(_NUMBER_WORDS[w]) for w in _words(text) if w in _NUMBER_WORDS]


@pytest.mark.parametrize("qid", NUMBERS)
def test_no_wrong_number_is_explained_with_the_right_value(qid):
    """No explanation of a wrong number (nor `otherwise`) holds the right value, nor, for a
    value of three digits or more, two numbers whose sum, difference, product or quotient
    (give or take one, as in "from 256 to 1,255 inclusive") is the right value."""
    question = QUESTIONS[qid]
    value, tol = question.value, max(question.tolerance, abs(question.value) * 1e-9)
    for low, high, why in [*question.wrong, (None, None, question.otherwise)]:
        numbers = _numbers_in(why)
        assert all(abs(n - value) > tol for n in numbers), (qid, why)
        if len(f"{abs(value):g}".replace(".", "").lstrip("0")) >= 3:
            for a in numbers:
                for b in numbers:
                    results = [a + b, a - b, a - b + 1, a * b] + ([a / b] if b else [])
                    assert all(abs(r - value) > tol for r in results), (qid, a, b, why)


# The notebook and the grader read an answer the same way: as written in the cell.
AGREEMENT = [   # (cell, what answer() says in the notebook, the grader's status, its words)
    ('answer("11-merges", 1000)', "right", "passed", "right"),
    ('answer("11-merges", 1256 - 256)', "right", "passed", "right"),
    ('answer("11-merges", -(256 - 1256))', "right", "passed", "right"),
    ('answer("11-merges", 1256 + 256)', "not quite", "failed", "not quite"),
    ('answer("11-bits-per-byte", 3.0 / 0.6931 / 2.5)', "right", "passed", "right"),
    ('answer("11-bits-per-byte", 1.731)', "right", "passed", "right"),
    ('x = 1000\nanswer("11-merges", x)', "not judged", "failed", "this one is a name"),
    ('answer("11-merges", len("a" * 1000))', "not judged", "failed", "this one is a call"),
    ('answer("11-merges", 1256 - len("a" * 256))', "not judged", "failed", "a computation on"),
    ('answer("11-bits-per-byte", "1,731")', "not quite", "failed", "was read as 1731"),
    ('answer("11-merges", "1,000")', "right", "passed", "right"),
    ('answer("11-bits-per-byte", "1,7")', "holds a comma", "failed", "holds a comma"),
    ('answer("11-bits-per-byte", 1,731)', "a comma inside a number splits it", "failed",
     "a comma inside a number splits it"),
    ('%time answer("11-merges", 1000)', "not judged", "not answered", "no answer"),
]


@pytest.mark.parametrize("cell, notebook, status, words", AGREEMENT, ids=[a[0] for a in AGREEMENT])
def test_the_notebook_and_the_grader_agree_on_an_answer(cell, notebook, status, words, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    from course_lib.grading.questions import answers, grade_answer
    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from course_lib.checks import answer")
        capsys.readouterr()
        shell.run_cell(cell)
        said_ = capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()
    qid = cell.split('answer("', 1)[1].split('"', 1)[0]
    assert notebook in said_, said_
    if notebook in ("right", "not quite"):
        assert said_.startswith(f"Question '{qid}': {notebook}.")
    nb = {"cells": [{"cell_type": "code", "source": cell}]}
    result = grade_answer(qid, answers(nb).get(qid, []), 1)
    assert result.status == status and words in result.feedback, result


def test_arithmetic_is_read_as_a_tree_never_run():
    import ast as ast_
    read = q_.written_answer
    assert read(ast_.parse("1256 - 256", mode="eval").body) == 1000
    assert read(ast_.parse("2 ** 10 // 3 % 7", mode="eval").body) == 2 ** 10 // 3 % 7
    for source, message in (("2 ** 10_000", "a power too large"), ("1 / 0", "division by 0"),
                            ("1e300 * 1e300", "no finite number"),
                            ("'b' * 3", "something other than written-out numbers"),
                            ("x + 1", "something other than"), ("f()", "a call"),
                            ("-" * 50 + "1", "too deep"), ("1j * 2", "something other than")):
        with pytest.raises(q_.NotWritten, match=message):
            read(ast_.parse(source, mode="eval").body)
    assert q_.answer_in('answer("11-merges", 1256 - 256)') == ("11-merges", 1000)


def test_numbers_are_read_as_people_write_them():
    """Issue 44: '1,000' and '2,064' are the numbers they look like; a comma that separates no
    group of three digits is refused with a word on it, and a wrong answer with a comma says
    how it was read."""
    assert said_number("1,048,576") == 1_048_576
    assert said_number("1,000") == 1_000 and said_number(" 2,064 ") == 2_064
    assert said_number("-12,345.5") == -12_345.5
    for text in ("1,7", "3,0", "1,0000", "12,34,567", ",500"):
        with pytest.raises(ValueError, match="holds a comma that does not separate groups"):
            answer("11-bits-per-byte", text)
    right, why = q_.judge("11-merges", "1,000")
    assert right
    right, why = q_.judge("11-bits-per-byte", "1,731")
    assert not right and "was read as 1731" in why and "a decimal takes a point" in why
    with pytest.raises(ValueError, match=r"1,731 is read as 1 and 731"):
        answer("11-bits-per-byte", 1, 731)


def said_number(text):
    return q_._as_number("11-merges", text)
