"""Grade a lesson's questions from the notebook's source: one Result per question, with points.

The questions and their points come from the lesson in notebooks/ (the cells tagged
`question`; a cell's metadata may give `points`, 1 if it does not). The learner's answer is
read from the learner's code cells as data (course_lib.grading.calls): the last call
`answer("<id>", <answer>)` in the notebook whose answer is not the blank `...` counts. It
must be written out, a letter in quotes, a number or arithmetic on numbers (`1256 - 256`,
read as a syntax tree by course_lib.checks.questions.written_answer, as `answer()` reads it
in the notebook); anything else (a name, a call) fails with the reason, and is never run.
A number split by a comma, `answer("<id>", 1,731)`, fails with a word on the comma. The judge is course_lib.checks'
own, in the grader's process: a right answer passes with its explanation, a wrong one
fails with the explanation of that choice, and the blank is "not answered".
"""
import ast
import re

from course_lib.checks.questions import NotWritten as NotReadable
from course_lib.checks.questions import all_questions, answer_in, judge, written_answer
from course_lib.exercises import tags
from course_lib.grading.calls import NotWritten, TooLong, course_calls, shown, written
from course_lib.grading.verdicts import Result

QUESTION_ID = re.compile(r"\d\d-[\w-]+")


def is_question(name):
    """Whether a gradebook row's `exercise` is a question id ("01-scale") rather than an exercise."""
    return isinstance(name, str) and QUESTION_ID.fullmatch(name) is not None


def lesson_questions(lesson):
    """[(question id, points)] of a lesson notebook's question cells, in order (points default 1)."""
    known, found = all_questions(), []
    for cell in lesson.cells:
        if cell.get("cell_type") != "code" or "question" not in tags(cell):
            continue
        qid, _ = answer_in(cell.source)
        points = cell.get("metadata", {}).get("points", 1)
        if isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0:
            raise ValueError(f"the question cell of '{qid}' has points={points!r} in its metadata; "
                             f"it must be a number of 0 or more")
        if qid not in known:
            raise ValueError(f"the lesson asks question {qid!r}, which no QUESTIONS dict in "
                             f"course_lib/checks defines")
        found.append((qid, points))
    return found


def _answer_calls(nb):
    """(question id, answer node, cell index) of each answer("<id>", x) call, in order."""
    for call in course_calls(nb):
        if call.function != "answer" or len(call.args) < 2 or call.keywords:
            continue
        try:
            qid = written(call.args[0])
        except NotWritten:
            continue
        if isinstance(qid, str):   # answer("id", 1,731): the answers after the id, as a tuple
            given = call.args[1] if len(call.args) == 2 else ast.Tuple(list(call.args[1:]))
            yield qid, given, call.cell


def _blank(node):
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def answers(nb):
    """{question id: [answer node, ...]} of the notebook's answer("<id>", x) calls, in order."""
    found = {}
    for qid, node, _ in _answer_calls(nb):
        found.setdefault(qid, []).append(node)
    return found


def grade_answer(qid, nodes, points):
    """The Result of question `qid` from the answer nodes the notebook holds for it."""
    given = None
    for node in reversed(nodes):  # the last answer that is not the blank
        if not _blank(node):
            given = node
            break
    if given is None:
        how = judge(qid, ...)[1]
        where = ("the answer is still the blank ..." if nodes else
                 f"the notebook has no answer(\"{qid}\", ...) call (was its cell deleted?)")
        return Result(qid, "not answered", f"not answered: {where}; {how}", 0, points)
    if isinstance(given, ast.Tuple):
        return Result(qid, "failed", f"answer(\"{qid}\", ...) was given {len(given.elts)} "
                                     f"answers after the id: a comma inside a number splits it "
                                     f"in two (1,731 is read as 1 and 731); write 1.731 with a "
                                     f"point for a decimal, or 1731 without the comma", 0, points)
    try:
        value = written(given)
    except TooLong as e:
        return Result(qid, "failed", f"the answer is {e}, too long to be one: an answer is a "
                                     f"letter in quotes or a number", 0, points)
    except NotWritten:
        try:   # arithmetic on numbers, read as answer() reads it in the notebook
            value = written_answer(given)
        except NotReadable as e:
            return Result(qid, "failed", f"the answer must be written out, a letter in quotes, "
                                         f"a number or arithmetic on numbers; this one is {e}, "
                                         f"which the grader does not run", 0, points)
    try:
        right, why = judge(qid, value)
    except ValueError as e:
        return Result(qid, "failed", str(e)[:300], 0, points)
    except Exception as e:  # a number too large for a float, ...: a reason, never a crash
        return Result(qid, "failed", f"the answer {shown(value)} could not be judged "
                                     f"({type(e).__name__})", 0, points)
    if right:
        return Result(qid, "passed", f"right: {why}", points, points)
    return Result(qid, "failed", f"answered {shown(value)}, not quite: {why}", 0, points)


def grade_questions(submission, lesson):
    """One Result per question of the lesson, read from the submission's source."""
    found = answers(submission)
    return [grade_answer(qid, found.get(qid, []), points) for qid, points in lesson_questions(lesson)]


def questions_not_graded(lesson, reason):
    """One "not run" Result per question, for a notebook that could not be read as this lesson."""
    return [Result(qid, "not run", reason, 0, points) for qid, points in lesson_questions(lesson)]


def question_totals(rows):
    """{"questions": points, "max_questions": points} of the question rows among gradebook rows."""
    mine = [r for r in rows if is_question(r["exercise"])]
    return {"questions": f"{sum(float(r['points']) for r in mine):g}",
            "max_questions": f"{sum(float(r['max_points']) for r in mine):g}"}


def answer_cells(nb):
    """{question id: the index of the cell whose answer counts (the last blank one if none does)}."""
    found, blank = {}, {}
    for qid, node, cell in _answer_calls(nb):
        (blank if _blank(node) else found)[qid] = cell
    return {**blank, **found}


def question_cells(r):
    """The feedback page's cells for a question's Result: its verdict, points and explanation."""
    import nbformat
    head = nbformat.v4.new_markdown_cell(f"**Question `{r.exercise}`: {r.status}**, "
                                         f"{r.points:g} of {r.max_points:g} points")
    said = nbformat.v4.new_code_cell(f'# answer("{r.exercise}", ...)')
    said.outputs = [nbformat.v4.new_output("stream", name="stdout", text=r.feedback + "\n")]
    return [head, said]
