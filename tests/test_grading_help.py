"""The grader's questions and the help it reports, read from a notebook's source and never run.

Most tests read notebooks built in memory with nbformat (no kernel); two grade lesson 00
end to end, a class of two learners graded twice (the second time with --solution-costs).
"""
import copy
import csv

import nbformat
import pytest

from course_lib.checks.hints import all_hints
from course_lib.checks.questions import Choice, all_questions, answer_in
from course_lib.exercises import exercises, tags
from course_lib.grading import cli, feedback, gradebook, run, sandbox
from course_lib.grading.calls import CELL_LIMIT
from course_lib.grading.help_taken import (Help, charge_solutions, help_columns, help_current,
                                           help_taken)
from course_lib.grading.questions import (answer_cells, grade_questions, is_question, lesson_questions,
                                          question_totals)
from course_lib.grading.verdicts import Result

from answers import REFERENCE
from notebook_tools import LESSONS, ROOT, fill, read

LESSON = "00_start_here.ipynb"
QUESTIONS = all_questions()
HINTS = all_hints()


def code(*sources, run=True):
    """A notebook of code cells, each with an execution count unless run=False."""
    nb = nbformat.v4.new_notebook()
    for i, source in enumerate(sources):
        cell = nbformat.v4.new_code_cell(source)
        cell.execution_count = i + 1 if run else None
        nb.cells.append(cell)
    return nb


def lesson(name=LESSON):
    return read(ROOT / "notebooks" / name)


def graded(nb, name=LESSON):
    """{question id: Result} for nb graded against the lesson `name`."""
    return {r.exercise: r for r in grade_questions(nb, lesson(name))}


def with_answer(nb, qid, text):
    """A copy of nb whose question cell for `qid` reads answer("qid", <text>)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if "question" in tags(cell) and answer_in(cell.source)[0] == qid:
            cell.source = f'answer("{qid}", {text})'
            return nb
    raise KeyError(qid)


# ---------------------------------------------------------------- questions

@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_reference_notebooks_questions_all_pass_with_their_points(path):
    results = graded(read(path), path.name)
    assert len(results) >= 3
    for qid, r in results.items():
        question = QUESTIONS[qid]
        why = question.choices[question.right][1] if isinstance(question, Choice) else question.why
        assert (r.status, r.points, r.max_points) == ("passed", 1, 1), r
        assert r.feedback == f"right: {why}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_blank_copy_in_exercises_is_not_answered(path):
    blank = read(ROOT / "exercises" / path.name)
    cells = [c for c in blank.cells if "question" in tags(c)]
    assert len(cells) == len(lesson_questions(read(path))) >= 3
    assert all(answer_in(c.source)[1] is Ellipsis for c in cells)  # every question cell blank
    for r in graded(blank, path.name).values():
        assert (r.status, r.points, r.max_points) == ("not answered", 0, 1)
        assert r.feedback.startswith("not answered: the answer is still the blank ...; replace ...")


def _inside(low, high):
    return low if low == high else low + (high - low) / 3


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_wrong_answer_fails_with_its_own_explanation(path):
    reference = read(path)
    for qid, _ in lesson_questions(reference):
        question = QUESTIONS[qid]
        if isinstance(question, Choice):
            wrong = [(repr(letter), why) for letter, (_, why) in question.choices.items()
                     if letter != question.right]
        else:
            wrong = [(repr(_inside(low, high)), why) for low, high, why in question.wrong]
            wrong.append((repr(question.value + 1000 * question.tolerance + 1e6), question.otherwise))
        for text, why in wrong:
            r = graded(with_answer(reference, qid, text), path.name)[qid]
            assert r.status == "failed" and r.points == 0 and r.max_points == 1, (qid, text, r)
            assert r.feedback.endswith(f"not quite: {why}"), (qid, text, r.feedback)


def test_the_last_written_answer_counts_wherever_it_is_and_under_an_alias():
    first = graded(code('answer("00-shape", "a")', 'answer("00-shape", "b")'))["00-shape"]
    assert first.status == "passed"
    last = graded(code('answer("00-shape", "b")', 'answer("00-shape", "a")'))["00-shape"]
    assert last.status == "failed" and last.feedback.startswith("answered 'a', not quite: 64 is")
    then_blank = graded(code('answer("00-shape", "b")', 'answer("00-shape", ...)'))["00-shape"]
    assert then_blank.status == "passed"  # the blank is no answer: the one before it counts
    aliased = graded(code("from course_lib.checks import answer as a\na('00-targets', ' (C) ')",
                          "import course_lib.checks as c\nc.answer('00-bytes', '12')"))
    assert aliased["00-targets"].status == aliased["00-bytes"].status == "passed"
    none = graded(code("x = 1"))["00-bytes"]
    assert none.status == "not answered" and "has no answer(\"00-bytes\", ...) call" in none.feedback


def test_question_points_come_from_the_lessons_metadata_not_the_learners(tmp_path):
    ref = lesson()
    assert [p for _, p in lesson_questions(ref)] == [1] * 4
    cell = next(c for c in ref.cells if "question" in tags(c))
    cell.metadata["points"] = 2.5
    assert [p for _, p in lesson_questions(ref)] == [2.5, 1, 1, 1]
    assert grade_questions(lesson(), ref)[0].points == 2.5
    mine = lesson()
    next(c for c in mine.cells if "question" in tags(c)).metadata["points"] = 100
    assert [r.max_points for r in grade_questions(mine, lesson())] == [1] * 4
    cell.metadata["points"] = "two"
    with pytest.raises(ValueError, match="points='two'"):
        lesson_questions(ref)


MARKER = "course-grader-ran-this"


@pytest.mark.parametrize("source, status, said", [
    (f'answer("00-bytes", __import__("os").system("touch {MARKER}"))', "failed", "this one is a call"),
    ('answer("00-bytes", twelve)', "failed", "this one is a name"),
    ('answer("00-bytes", 6 + 6)', "passed", "right"),    # arithmetic on numbers, as answer() reads it
    ('answer("00-bytes", 24 / 2 - 0.0)', "passed", "right"),
    ('answer("00-bytes", 6 + twelve)', "failed", "this one is a computation on something other"),
    ('answer("00-bytes", 2 ** 100000)', "failed", "a power too large"),
    ('answer("00-bytes", 1 / 0)', "failed", "a division by 0"),
    ('answer("00-bytes", f"{12}")', "failed", "this one is an f-string"),
    ('answer("00-shape", "b" * 3)', "failed", "this one is a computation"),
    ('answer("00-shape", "' + "b" * 5000 + '")', "failed", "a text of 5,000 characters"),
    ('answer("00-bytes", ' + "9" * 4000 + ")", "failed", "a 4000-digit number could not be judged"),
    ('answer("00-bytes", 1e999)', "failed", "finite number"),
    ('answer("00-bytes", True)', "failed", "an int or a float"),
    ('answer("00-shape", "z")', "failed", "one letter among"),
    ('answer("00-bytes", ' + "(" * 300 + "12" + ")" * 300 + ")", "not answered", "no answer"),
    ('answer("00-bytes", 12\n', "not answered", "no answer"),                      # does not parse
    ('answer("00-bytes", 12)  # ' + "x" * CELL_LIMIT, "not answered", "no answer"),  # too long to read
    ('qid = "00-bytes"\nanswer(qid, 12)', "not answered", "no answer"),
    ('answer("00-bytes", 1,731)', "failed", "a comma inside a number splits it"),
    ('answer("00-bytes", "1,731")', "failed", "was read as 1731, a comma before three digits"),   # read as a number
])
def test_a_hostile_answer_is_read_as_data_and_never_run(source, status, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = graded(code(source))["00-bytes" if "00-bytes" in source else "00-shape"]
    assert r.status == status and (r.points == 0) == (status != "passed") and said in r.feedback, r
    assert len(r.feedback) < 400
    assert not (tmp_path / MARKER).exists()


def test_ipython_syntax_in_a_cell_does_not_hide_its_answer():
    r = graded(code('%time x = 1\n!echo hi\nanswer("00-bytes", 12)'))["00-bytes"]
    assert r.status == "passed"


def test_unreadable_notebooks_give_not_run_questions_and_no_help(tmp_path):
    path = tmp_path / LESSON
    path.write_text("{ not json")
    g = run.grade(path)
    questions = [r for r in g.results if is_question(r.exercise)]
    assert [r.exercise for r in questions] == [q for q, _ in lesson_questions(lesson())]
    assert all(r.status == "not run" and r.feedback.startswith("the notebook could not be read")
               for r in questions)
    assert g.help == {} and help_columns(g, "text_to_ids") == {"hints": "", "solution": ""}


# ---------------------------------------------------------------- help taken

EXERCISES = [name for name, _, _ in exercises(lesson())]
X = EXERCISES[0]


@pytest.mark.parametrize("sources, hints, solution", [
    ([], 0, False),
    ([f'hint("{X}")'], 1, False),
    ([f'hint("{X}")', f'hint("{X}")'], 2, False),
    ([f'hint("{X}")\nhint("{X}")'], 2, False),
    ([f'hint("{X}", 2)'], 2, False),
    ([f'hint("{X}", k=3)', f'hint("{X}")'], 3, False),
    ([f'hint("{X}")'] * 7, len(HINTS[X]), False),                      # never past the last
    ([f'hint("{X}", 9)'], 0, False),                                   # raised: showed nothing
    ([f'solution("{X}")'], 0, True),
    ([f'hint("{X}")', f'hint("{X}")', f'solution("{X}")'], 2, True),
    ([f"from course_lib.checks.hints import hint as h, solution as s\nh('{X}')\ns('{X}')"], 1, True),
    ([f"import course_lib.checks as checks\nchecks.hint('{X}')"], 1, False),
    ([f'# hint("{X}") in a comment, as the stub says'], 0, False),    # the stub's own comment
    ([f'print("hint(\'{X}\')")'], 0, False),                          # a string is not a call
    (['hint("no_such_exercise")', 'solution("softmax")'], 0, False),  # not this lesson's
    ([f'name = "{X}"\nhint(name)'], 0, False),                        # a variable: cannot be read
])
def test_hints_and_solutions_are_counted_from_the_source(sources, hints, solution):
    taken = help_taken(code(*sources), EXERCISES)
    assert taken[X] == Help(hints, len(HINTS[X]), solution)
    assert all(taken[e] == Help(0, len(HINTS[e]), False) for e in EXERCISES[1:])


def test_a_cell_never_run_still_counts():
    """Clearing outputs clears execution counts too, so a call counts whether or not it ran."""
    nb = code(f'hint("{X}")', f'solution("{X}")', run=False)
    assert all(c.execution_count is None for c in nb.cells)
    assert help_taken(nb, EXERCISES)[X] == Help(1, len(HINTS[X]), True)


def test_stored_outputs_are_not_read():
    """An output saying a hint or a right answer was shown changes nothing: only source counts."""
    nb = code("x = 1")
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=(
        f"Hint 1 of 3 for '{X}': ...\nQuestion '00-bytes': right. 6 bytes\n"))]
    assert help_taken(nb, EXERCISES)[X].hints == 0
    assert graded(nb)["00-bytes"].status == "not answered"


def _graded_notebook(statuses, solution_for=(), hints_for=()):
    results = [Result(e, s, "fb", 1 if s == "passed" else 0, 1) for e, s in zip(EXERCISES, statuses)]
    results.append(Result("00-bytes", "passed", "right: ...", 1, 1))
    g = run.Graded(ROOT / LESSON, "00_start_here", results)
    g.help = {e: Help(2 if e in hints_for else 0, 3, e in solution_for) for e in EXERCISES}
    return g


def test_solution_costs_change_points_only_when_given():
    g = _graded_notebook(["passed", "passed", "failed"], solution_for=EXERCISES)
    before = [(r.points, r.feedback) for r in g.results]
    assert [(r.points, r.feedback) for r in charge_solutions(g, None).results] == before
    assert [help_columns(g, e)["solution"] for e in EXERCISES] == ["yes"] * 3
    charge_solutions(g, 0.5)
    assert [r.points for r in g.results] == [0.5, 0.5, 0, 1]  # the question keeps its point
    assert "0.5 point(s) taken off (--solution-costs 0.5)" in g.results[0].feedback
    assert g.results[2].feedback.endswith("took nothing off, since this exercise earned no points]")
    assert help_columns(g, EXERCISES[0]) == {"hints": "0", "solution": "yes, costs 0.5"}
    g = _graded_notebook(["passed", "passed", "passed"], solution_for=EXERCISES[:1])
    charge_solutions(g, 5)  # never below 0; the others untouched
    assert [r.points for r in g.results] == [0, 1, 1, 1]
    assert help_columns(g, EXERCISES[1]) == {"hints": "0", "solution": "no"}
    assert help_columns(g, "00-bytes") == {"hints": "", "solution": ""}


def test_rows_priced_under_other_solution_costs_are_graded_again():
    rows = [{"solution": "no"}, {"solution": ""}]
    assert help_current(rows, None) and help_current(rows, 1)
    assert help_current(rows + [{"solution": "yes"}], None)
    assert not help_current(rows + [{"solution": "yes"}], 1)
    assert help_current(rows + [{"solution": "yes, costs 1"}], 1)
    assert not help_current(rows + [{"solution": "yes, costs 1"}], 0.5)
    assert not help_current(rows + [{"solution": "yes, costs 1"}], None)


@pytest.mark.parametrize("costs", [-1, "1", float("nan"), True])
def test_charge_solutions_refuses_costs_that_are_not_points(costs):
    with pytest.raises(ValueError, match="a number of points of 0 or more"):
        charge_solutions(_graded_notebook(["passed"] * 3), costs)


@pytest.mark.parametrize("text", ["-1", "two", "nan", "inf"])
def test_solution_costs_must_be_a_number_of_points(text, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["x.ipynb", "--solution-costs", text])
    assert stop.value.code == 2
    assert "is not a number of points of 0 or more" in capsys.readouterr().err


def test_one_notebook_prints_the_help_beside_each_check_and_charges_only_when_asked(
        tmp_path, monkeypatch, capsys):
    path = tmp_path / LESSON
    path.write_text("{}")
    made = []
    monkeypatch.setattr(cli, "grade", lambda *a, **k: made.append(_graded_notebook(
        ["passed"] * 3, solution_for=EXERCISES[:1], hints_for=EXERCISES[:1])) or made[-1])
    assert cli.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert (f"{X}: passed (1/1)  fb  [hints asked for: up to hint 2 of 3; the solution was shown]"
            in out.splitlines())
    assert "00-bytes: passed (1/1)  right: ..." in out and "4 of 4 points" in out
    assert cli.main([str(path), "--solution-costs", "1"]) == 0   # graded, whatever the score
    out = capsys.readouterr().out
    assert f"{X}: passed (0/1)  fb [the solution was shown: 1 point(s) taken off" in out
    assert "3 of 4 points" in out


def test_the_gradebook_gets_help_columns_at_its_end_and_question_rows():
    assert gradebook.GRADEBOOK[-2:] == ["hints", "solution"]
    g = _graded_notebook(["passed", "failed", "passed"], hints_for=EXERCISES[:1],
                         solution_for=EXERCISES[1:2])
    g.sha256, g.sandbox = "abc", "none"
    rows = gradebook._rows("ada", g)
    assert [(r["exercise"], r["hints"], r["solution"]) for r in rows] == [
        (EXERCISES[0], "2", "no"), (EXERCISES[1], "0", "yes"), (EXERCISES[2], "0", "no"),
        ("00-bytes", "", "")]
    assert question_totals(rows) == {"questions": "1", "max_questions": "1"}


def test_the_summary_says_which_part_of_the_total_is_questions(tmp_path):
    rows = [dict(learner="ada", lesson="00_start_here", exercise=e, points=p, max_points=1)
            for e, p in [("text_to_ids", 1), ("next_token_targets", 0), ("00-bytes", 1),
                         ("00-shape", 0)]]
    gradebook._write_summary(tmp_path / "summary.csv", rows, ["00_start_here"])
    line = next(csv.DictReader((tmp_path / "summary.csv").open()))
    assert line == {"learner": "ada", "00_start_here": "2", "total": "2", "max_total": "4",
                    "questions": "1", "max_questions": "2"}


def test_the_feedback_page_shows_each_questions_verdict_after_its_cell_and_the_help():
    nb = with_answer(lesson(), "00-shape", '"a"')
    nb.cells.append(nbformat.v4.new_code_cell(f'hint("{X}")'))
    g = run.Graded(ROOT / LESSON, "00_start_here", [Result(X, "passed", f"{X}: 9 checks passed", 1, 1)]
                   + grade_questions(nb, lesson()), submission=nb)
    g.help = help_taken(nb, EXERCISES)
    html = feedback.feedback_html(g, "ada")
    assert "Question <code>00-shape</code>: failed</strong>, 0 of 1 points" in html
    assert "Question <code>00-bytes</code>: passed</strong>, 1 of 1 points" in html
    assert "64 is the width C of the stream" in html
    assert f"(hints asked for: up to hint 1 of {len(HINTS[X])})" in html
    # the verdict follows the question cell: after 00-shape's answer and before 00-targets'
    call = 'answer(<span class="s">"{}"'   # the page colours the string, not the name or the bracket
    assert html.index(call.format("00-shape")) < html.index("Question <code>00-shape</code>") \
        < html.index(call.format("00-targets"))
    assert answer_cells(nb)["00-shape"] == next(
        i for i, c in enumerate(nb.cells) if "question" in tags(c) and "00-shape" in c.source)


# ---------------------------------------------------------------- end to end, lesson 00

SANDBOXED = sandbox.unavailable() is None


def _helped():
    """Lesson 00 solved, with two hints and the solution of X, one question wrong, one blank."""
    nb = fill(read(ROOT / "exercises" / LESSON), REFERENCE)
    for qid, _ in lesson_questions(lesson()):
        question = QUESTIONS[qid]
        right = question.right if isinstance(question, Choice) else question.value
        nb = with_answer(nb, qid, repr(right))
    nb = with_answer(nb, "00-shape", '"d"')
    nb = with_answer(nb, "00-uniform", "...")
    nb.cells.insert(3, nbformat.v4.new_code_cell(
        f'from course_lib.checks import hint, solution\nhint("{X}")\nhint("{X}")\nsolution("{X}")'))
    return nb


def test_a_class_graded_end_to_end_reports_questions_and_help(tmp_path):
    folder, out = tmp_path / "class", tmp_path / "grades"
    for learner, nb in (("ada", _helped()), ("bo", read(ROOT / "exercises" / LESSON))):
        (folder / learner).mkdir(parents=True)
        nbformat.write(nb, folder / learner / LESSON)
    limits = dict(jobs=2, cell_timeout=120, notebook_timeout=300, memory_gib=3, html=True,
                  sandbox=SANDBOXED, log=lambda line: None)
    rows, problems = gradebook.grade_class(folder, out, **limits)
    assert problems == 0
    book = {(r["learner"], r["exercise"]): r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert list(next(iter(book.values())))[-2:] == ["hints", "solution"]
    ada = {e: book["ada", e] for e in EXERCISES + [q for q, _ in lesson_questions(lesson())]}
    assert [(r["status"], r["points"]) for r in ada.values()] == [("passed", "1")] * 3 + [
        ("passed", "1"), ("failed", "0"), ("passed", "1"), ("not answered", "0")]
    assert "not quite: the batch axis stays" in ada["00-shape"]["feedback"]
    assert (ada[X]["hints"], ada[X]["solution"]) == ("2", "yes")
    assert all((ada[e]["hints"], ada[e]["solution"]) == ("0", "no") for e in EXERCISES[1:])
    assert all(book["bo", q]["status"] == "not answered" for q, _ in lesson_questions(lesson()))
    summary = {r["learner"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert (summary["ada"]["total"], summary["ada"]["max_total"]) == ("5", "7")
    assert (summary["ada"]["questions"], summary["ada"]["max_questions"]) == ("2", "4")
    assert (summary["bo"]["total"], summary["bo"]["questions"]) == ("0", "0")
    page = (out / "feedback" / "ada" / "00_start_here.html").read_text()
    assert "the solution was shown" in page and "Question <code>00-shape</code>: failed" in page

    # again with --solution-costs 1: only ada's notebook, whose solution was shown, is graded again
    log = []
    rows, problems = gradebook.grade_class(folder, out, **{**limits, "log": log.append},
                                           solution_costs=1)
    assert [line.split(":")[0] for line in log if line.startswith("[")] == ["[1/1] ada/00_start_here.ipynb"]
    book = {(r["learner"], r["exercise"]): r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert (book["ada", X]["points"], book["ada", X]["solution"]) == ("0", "yes, costs 1")
    assert "1 point(s) taken off (--solution-costs 1)" in book["ada", X]["feedback"]
    assert book["ada", EXERCISES[1]]["points"] == "1"
    summary = {r["learner"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert summary["ada"]["total"] == "4"
