"""The exercise notebooks: generated from the lessons, failing when blank, passing when answered.

These are COURSE.md's grader tests 2-4; test 1 is nbval on notebooks/ itself. A lesson's blank,
answered and wrong-answer variants are not a run of their own: in make test they run inside
nbval's run of the lesson (tests/nbval_fold.py), and their tests here (marked `folded`) move
into the lesson's nbval file, after its last cell. notebook_tools.LessonFold says what runs
where; the toy lesson at the end proves that it finds the first error a fresh kernel per
variant of the learner's copy would find, and leaves what the lesson's cells print as it is.
"""
import copy
import functools
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from course_lib.exercises import exercises, stale, tags

from answers import REFERENCE, WRONG
from notebook_tools import FOLDED, LESSONS, ROOT, injected_wrong, read, run_folded

NAMES = [path.name for path in LESSONS]


def exercise_notebook(name):
    return read(ROOT / "exercises" / name)


def test_there_are_lessons_and_exercises():
    assert NAMES[:3] == ["00_start_here.ipynb", "01_attention_by_hand.ipynb",
                         "02_causal_masking.ipynb"]
    assert sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb")) == NAMES


def test_exercises_are_what_the_generator_makes_today():
    assert stale() == [], "run `python -m course_lib.exercises` (or `make exercises`)"


@pytest.mark.parametrize("name", NAMES)
def test_lessons_are_saved_from_one_top_to_bottom_run(name):
    cells = [c for c in read(ROOT / "notebooks" / name).cells if c.cell_type == "code"]
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    assert not any(o.output_type == "error" for c in cells for o in c.outputs)


@pytest.mark.parametrize("name", NAMES)
def test_exercise_and_check_cells_hold_no_magics(name):
    for cell in read(ROOT / "notebooks" / name).cells:
        if {"exercise", "check"} & set(tags(cell)):
            assert not re.search(r"^\s*[%!]", cell.source, re.MULTILINE), cell.source


INJECTED = [w for w in WRONG if w.inject]


@functools.cache
def exercise_names(name):
    """The exercises of lesson `name`'s exercise notebook, read once (collection asks often)."""
    return tuple(e for e, _, _ in exercises(exercise_notebook(name)))


def lesson_of(exercise):
    """The lesson whose exercise notebook holds `exercise`."""
    return next(n for n in NAMES if exercise in exercise_names(n))


_RUNS = {}


def variant(name, key):
    """The first error of one variant of lesson `name`'s exercise notebook: "blank", "reference"
    (answered with the reference answers) or (exercise, wrong answer's name); None if it ran to
    the end. In make test they come from nbval's run of notebooks/<name>, into which
    tests/nbval_fold.py folds the variants, and these tests run in that lesson's nbval file,
    after its last cell. Run alone, without the lesson under nbval, the lesson runs once here
    with the variants folded in the same way (notebook_tools.run_folded)."""
    fold = FOLDED.get(name)
    if fold is not None:
        results, why = fold.results(), fold.stopped or "its nbval run has not reached it"
    else:
        if name not in _RUNS:
            try:
                _RUNS[name] = run_folded(read(ROOT / "notebooks" / name), exercise_notebook(name),
                                         REFERENCE, injected_wrong(exercise_notebook(name)))
            except Exception as exc:  # every test of the lesson reports it, none reruns it
                _RUNS[name] = exc
        if isinstance(_RUNS[name], Exception):
            raise _RUNS[name]
        results, why = _RUNS[name], f"the lesson's own cell failed: {_RUNS[name]['lesson']}"
    assert key in results, f"{name}: the variant {key!r} was not run, since {why}"
    return results[key]


def folded(name):
    """The mark by which tests/nbval_fold.py moves a test into lesson `name`'s nbval run."""
    return pytest.mark.folded(name)


@pytest.mark.parametrize("name", [pytest.param(n, marks=folded(n)) for n in NAMES])
def test_blank_notebook_fails_first_at_its_first_check(name):
    found = exercises(exercise_notebook(name))
    assert found, f"{name} has no exercises"
    first_name, _, first_check = found[0]
    index, ename, evalue = variant(name, "blank")
    assert (index, ename) == (first_check, "NotImplementedError")
    assert f"Exercise '{first_name}'" in evalue


@pytest.mark.parametrize("name", [pytest.param(n, marks=folded(n)) for n in NAMES])
def test_notebook_passes_with_the_reference_answers(name):
    assert variant(name, "reference") is None


@pytest.mark.parametrize("wrong", [pytest.param(w, marks=folded(lesson_of(w.exercise)),
                                                id=f"{w.exercise}-{w.name}") for w in INJECTED])
def test_injected_wrong_answer_fails_at_its_check_with_its_hint(wrong):
    nb = exercise_notebook(lesson_of(wrong.exercise))
    check = next(j for e, _, j in exercises(nb) if e == wrong.exercise)
    index, ename, evalue = variant(lesson_of(wrong.exercise), (wrong.exercise, wrong.name))
    assert (index, ename) == (check, "AssertionError")
    assert wrong.hint in evalue


LESSON_NUMBERS = {name[:2] for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_every_lesson_a_notebook_mentions_exists(name):
    """'lesson 08' or 'lessons 04-07' in a lesson's text points at lessons that are there."""
    text = "\n".join(cell.source for cell in read(ROOT / "notebooks" / name).cells)
    for match in re.finditer(r"(?i)\blessons? (\d{2})(?:\s*[-–]\s*(\d{2}))?", text):
        first, last = match.group(1), match.group(2) or match.group(1)
        missing = [f"{n:02d}" for n in range(int(first), int(last) + 1)
                   if f"{n:02d}" not in LESSON_NUMBERS]
        assert not missing, f"{name} mentions {match.group(0)!r}, but lesson {missing} does not exist"


@pytest.mark.parametrize("name", NAMES)
def test_checkers_are_imported_the_same_way_in_every_lesson(name):
    text = "\n".join(cell.source for cell in read(ROOT / "notebooks" / name).cells)
    assert "from course_lib.checks import" in text
    assert not re.search(r"from course_lib\.checks\.\w+ import", text)


@pytest.mark.parametrize("name", NAMES)
def test_code_fits_a_laptop_window(name):
    """JupyterLab at 1,400 px shows about 100 characters of code; longer lines are cut off."""
    long = [(number, line) for number, cell in enumerate(read(ROOT / "notebooks" / name).cells)
            if cell.cell_type == "code" for line in cell.source.splitlines() if len(line) > 100]
    assert not long, f"{name}: code lines over 100 characters (cell, line): {long[:3]}"


def _toy_lesson():
    """A solved lesson of two exercises with their checks, a cell between them that uses the
    first answer, a question, and a last cell that a wrong first answer would break and that
    prints what the random generators draw."""
    import nbformat

    def code(source, *tag):
        return nbformat.v4.new_code_cell(source, metadata={"tags": list(tag)})

    def solved(signature, body):
        return f"def {signature}:\n    ### BEGIN SOLUTION\n    {body}\n    ### END SOLUTION"
    checks = ("import random\nimport numpy as np\nimport torch\n"
              "random.seed(0); np.random.seed(0); torch.manual_seed(0)\n"
              "from course_lib.checks import answer\n"
              "def check_double(f):\n"
              "    assert f(2) == 4, 'double: multiply by 2'\n"
              "def check_halve(f):\n"
              "    assert f(4) == 2, 'halve: divide by 2'\n"
              "LOG = []\n")
    cells = [nbformat.v4.new_markdown_cell("# A toy lesson"), code(checks),
             code(solved("double(x)", "return 2 * x"), "exercise"),
             code("check_double(double)", "check"),
             code("LOG.append(double(5))"),
             code('answer("00-bytes", 12)', "question"),
             code(solved("halve(x)", "return x // 2"), "exercise"),
             code("check_halve(halve)", "check"),
             code("assert LOG == [10], LOG\n"
                  "print(torch.rand(2).tolist(), np.random.rand(), random.random())")]
    return nbformat.v4.new_notebook(cells=cells)


def test_one_kernel_run_finds_the_first_errors_of_separate_runs(tmp_path):
    """run_folded (the solved lesson run once, the learner's copy's variants folded in, as the
    nbval run of make test does it) against a fresh kernel per variant of the learner's copy
    (notebook_tools.first_error): the blank, the reference, a wrong answer at each exercise,
    one that fails in its own cell, one that draws random numbers, and one that reaches its
    check only after the reference run has stopped. The lesson's own cells print what they
    print without the variants. (The nine runs, each in a fresh kernel, go two at a time.)"""
    from course_lib.exercises import working_copy
    from notebook_tools import fill, first_error
    lesson = _toy_lesson()
    learner = working_copy(lesson, "toy.ipynb")       # what python -m course_lib.exercises makes
    reference = {"double": "return x + x", "halve": "return x // 2"}
    wrong = {("double", "adds"): "return x + 3",             # fails its check
             ("double", "broken"): "return undefined_name",  # fails in the check's call
             ("halve", "keeps"): "torch.rand(9); np.random.rand(); random.random()\nreturn x",
             ("halve", "syntax"): "return (x"}
    # a reference answer that breaks: the variants after it never reach their checks
    breaks = ({**reference, "double": "return 2 * x + 1"}, {("halve", "keeps"): "return x"})
    # Nine fresh kernels, each with notebooks of its own (nbclient runs a notebook in place),
    # two at a time: none shares anything with another but the folder, which none writes to.
    runs = {"shared": lambda: run_folded(copy.deepcopy(lesson), copy.deepcopy(learner), reference, wrong,
                                         cwd=tmp_path, timeout=60),
            "broken": lambda: run_folded(copy.deepcopy(lesson), copy.deepcopy(learner), *breaks,
                                         cwd=tmp_path, timeout=60),
            "plain": lambda: _plain_outputs(lesson, tmp_path)}
    separate = {"blank": copy.deepcopy(learner), "reference": fill(learner, reference)}
    for (exercise, name), body in wrong.items():
        separate[(exercise, name)] = fill(learner, {**reference, exercise: body})
    for key, nb in separate.items():
        runs[key] = lambda nb=nb: first_error(nb, cwd=tmp_path, timeout=60)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(run) for key, run in runs.items()}
    got = {key: future.result() for key, future in futures.items()}
    shared, broken, plain = got.pop("shared"), got.pop("broken"), got.pop("plain")
    separate = got
    assert shared.pop("lesson") is None
    assert shared.pop("outputs") == plain
    assert shared == separate
    assert shared["reference"] is None
    assert shared["blank"][:2] == (3, "NotImplementedError")
    assert shared[("double", "adds")][:2] == (3, "AssertionError")
    assert shared[("double", "broken")][:2] == (3, "NameError")
    assert shared[("halve", "keeps")][:2] == (7, "AssertionError")
    assert shared[("halve", "syntax")][:2] == (6, "SyntaxError")
    assert broken["reference"][:2] == (3, "AssertionError")
    assert broken[("halve", "keeps")] == broken["reference"]
    assert broken["lesson"] is None


def _plain_outputs(lesson, cwd):
    """What each code cell of `lesson` prints, run alone in a fresh kernel (printed_text)."""
    import copy

    from notebook_tools import NotebookClient, printed_text
    nb = copy.deepcopy(lesson)
    NotebookClient(nb, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return printed_text(nb)


def test_a_variant_the_run_did_not_reach_fails_its_test(monkeypatch):
    """A variant test whose lesson's run stopped before the variant (a lesson cell failed) fails
    and says why; it is never skipped, and never passes on a result it does not have."""
    from course_lib.exercises import working_copy
    from notebook_tools import LessonFold
    lesson = _toy_lesson()
    fold = LessonFold(lesson, working_copy(lesson, "toy.ipynb"), {}, {("halve", "keeps"): "return x"})
    fold.after(1, run=None, failed=True)          # the lesson's first code cell failed
    monkeypatch.setitem(FOLDED, "toy.ipynb", fold)
    with pytest.raises(AssertionError, match="the lesson's own cell 1 failed"):
        variant("toy.ipynb", ("halve", "keeps"))
    with pytest.raises(AssertionError, match="was not run"):
        variant("toy.ipynb", "reference")
