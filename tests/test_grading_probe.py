"""The probe: verdicts from a process that holds only the learner's definitions, read as syntax trees.

A stub whose notebook writes a correct function's records by a hook, atexit, a thread or a
child process still fails; the graded copy holds no seed; a helper defined after the function,
%%time, nbformat 3, a never-run notebook and prints in the function pass; an exercise bound by
exec, globals(), a lambda or a top-level call fails with what to write instead, at check time too.
"""
import os
import tempfile
from pathlib import Path

import nbformat
import pytest

from course_lib.exercises import exercises
from course_lib.grading import definitions, lessons, probe, replay, run, sandbox

from answers import REFERENCE
from notebook_tools import fill
from test_grading import EXERCISE, HABITS, LESSON, blank, exercise_index, toy_lessons, with_cell

ROOT = Path(__file__).resolve().parent.parent


def read(*cells):
    return definitions.read_sources(list(cells))


def test_only_definitions_imports_and_constants_are_kept_from_every_cell():
    found = read("%matplotlib inline\nimport torch\nD = 4\nX = torch.zeros(D)\nprint(X)",
                 "%%time\ndef f(x: torch.Tensor, eps=1e-5, dtype=torch.float32) -> torch.Tensor:\n"
                 "    print(x)\n    return helper(x) * D",
                 "def helper(x):\n    return x\n\n@torch.no_grad()\ndef g(x):\n    return x\nhelper(1)")
    kept = [s["source"].splitlines()[0] for s in found.statements]
    assert kept == ["import torch", "D = 4", "def f(x: torch.Tensor, eps=1e-05, dtype=torch.float32) -> torch.Tensor:",
                    "def helper(x):", "@torch.no_grad()"]
    assert [found.unreadable(n) for n in ("f", "helper", "g", "D")] == [None] * 4
    assert "X = torch.zeros(D)" in found.why_missing("X")


def test_the_probe_loads_only_the_imports_its_definitions_read():
    found = read("import math\nimport ipywidgets as widgets\nfrom numpy import *\nimport torch",
                 "def f(x):\n    return math.sqrt(exp(x))")
    assert [s["source"] for s in definitions.needed(found.statements)] == [
        "import math", "from numpy import *", "def f(x):\n    return math.sqrt(exp(x))"]


@pytest.mark.parametrize("cells, name, words", [
    (["exec('def f(x):\\n    return x')"], "f", "through exec"),
    (["globals()['f'] = len"], "f", "through exec, eval, globals()"),
    (["f = lambda x: x"], "f", "bound to a lambda"),
    (["def g(x):\n    return x", "f = make(g)"], "f", "a statement the grader does not run"),
    (["def f(x):\n    return x", "f = wrap(f)"], "f", "last bound in cell 2"),
    (["import atexit\n@atexit.register\ndef f():\n    pass"], "f", "the decorator @atexit.register"),
    (["def mine(g):\n    return g\n@mine\ndef f(x):\n    return x"], "f", "the decorator @mine"),
    (["def h():\n    return 1\ndef f(x, t=h()):\n    return x"], "f", "the default value `h()`"),
    (["class f:\n    print('made')"], "f", "the class-body statement"),
    (["class f:\n    def __init_subclass__(cls):\n        pass"], "f", "__init_subclass__"),
])
def test_an_exercise_bound_where_the_grader_cannot_read_it_is_named_with_what_to_write(cells, name, words):
    why = read(*cells).unreadable(name)
    assert why is not None and words in why, why
    assert f"def {name}(" in why or "library's decorators" in why


def test_every_lesson_and_exercise_notebook_binds_its_exercises_readably():
    for folder in ("notebooks", "exercises"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            found = definitions.read_notebook(nb)
            for name, _, _ in exercises(nb):
                assert found.unreadable(name) is None, (path.name, name, found.unreadable(name))
                assert name in found.bindings and found.bindings[name].kind == "def", (path.name, name)


def _probe(nb, lesson_name=LESSON, **kwargs):
    lesson = nbformat.read(toy_lessons(Path(tempfile.mkdtemp()) / "lessons") / lesson_name, as_version=4)
    found = lessons.lesson_exercises(lesson)
    with replay.Replayer() as replayer, tempfile.TemporaryDirectory() as scratch:
        out, learner, _ = probe.probe_notebook(nb, lesson, found, 4242, scratch, replayer, timeout=60, **kwargs)
    return out[EXERCISE], learner


def _answer(body):
    return fill(blank(), {EXERCISE: body})


def test_the_probe_passes_honest_habits_and_a_helper_defined_after_the_function():
    nb = with_cell(_answer("return ids[:-1], _shift(ids)"), "def _shift(ids):\n    return ids[1:]",
                   at=exercise_index(blank()) + 2)
    nb.cells.insert(1, nbformat.v4.new_code_cell("%%time\nimport math"))
    got, learner = _probe(nb)
    assert got["kind"] == "passed" and got["finished"], got
    got, _ = _probe(_answer(HABITS))
    assert got["kind"] == "passed", got


def test_a_stub_stays_a_stub_whatever_the_notebook_ran_around_it():
    """The probe holds definitions only: a top-level call that rebinds the function in the kernel
    never runs there, and the stub's own NotImplementedError is the answer."""
    nb = with_cell(blank(), "next_token_targets.__code__ = (lambda ids: (ids[:-1], ids[1:])).__code__",
                   at=exercise_index(blank()) + 1)
    got, _ = _probe(nb)
    assert got["kind"] == "unfinished", got


# Everything a notebook can run besides its definitions, each writing a correct function's record
# where the old grader read records (the copy's records/ folder), and printing the pass line.
FORGE = """\
import json, os
def _seed():  # where the grader once kept its seed, if it is there
    try:
        return int(json.load(open("../grading.json"))["replay"]["base_seed"])
    except Exception:
        return 0
def _forge(*args, **kwargs):
    import course_lib.checks as c, course_lib.checks.record as r
    os.makedirs("../records", exist_ok=True)
    with r.recording(_seed()) as made:
        c.check_next_token_targets(lambda ids: (ids[:-1], ids[1:]))
    made.save("../records/next_token_targets")
"""
FORGER = f"""\
import atexit, subprocess, sys, threading
_FORGE = {FORGE!r}
exec(_FORGE)
ip = get_ipython()
ip.events.register("post_run_cell", _forge)
ip.events.register("pre_run_cell", _forge)
atexit.register(_forge)
threading.Thread(target=lambda: [_forge() for _ in range(20)], daemon=True).start()
subprocess.Popen([sys.executable, "-c", _FORGE + "\\nimport time\\nfor _ in range(20):\\n    time.sleep(0.25)\\n    _forge()"])"""


@pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}")
def test_records_written_by_hooks_atexit_threads_and_children_decide_nothing_and_no_seed_is_in_reach(tmp_path):
    notebook = tmp_path / LESSON
    nbformat.write(with_cell(blank(), FORGER, at=1), notebook)
    kept = tmp_path / "kept"
    graded = run.grade(notebook, lessons=toy_lessons(tmp_path / "lessons"), sandbox=False, keep=kept,
                       memory_gib=3)
    result = next(r for r in graded.results if r.exercise == EXERCISE)
    assert result.status in ("failed", "not answered"), result
    assert "NotImplementedError" in result.feedback, result.feedback
    assert (kept / "records" / "next_token_targets.json").is_file()  # the forgers ran, and decided nothing
    # the seed this grading drew is nowhere in the copy the notebook ran in
    assert graded.seed is not None
    for path in kept.rglob("*"):
        if path.is_file() and not path.is_symlink() and "course_lib" not in path.parts:
            assert str(graded.seed) not in path.read_text(errors="replace"), path


@pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}")
def test_exec_and_globals_bindings_fail_with_what_to_write_and_honest_notebooks_pass(tmp_path):
    lessons_folder = toy_lessons(tmp_path / "lessons")
    cases = {
        "exec": with_cell(blank(), "exec('def next_token_targets(ids):\\n    return ids[:-1], ids[1:]')",
                          at=exercise_index(blank()) + 1),
        "v3": None,
        "never_run": fill(blank(), REFERENCE),
    }
    outcome = {}
    for name, nb in cases.items():
        path = tmp_path / name / LESSON
        path.parent.mkdir()
        if name == "v3":
            path.write_text(nbformat.writes(nbformat.convert(fill(blank(), REFERENCE), 3), version=3))
        else:
            if name == "never_run":
                for cell in nb.cells:
                    if cell.cell_type == "code":
                        cell.outputs, cell.execution_count = [], None
            nbformat.write(nb, path)
        graded = run.grade(path, lessons=lessons_folder, sandbox=True, memory_gib=3)
        outcome[name] = next(r for r in graded.results if r.exercise == EXERCISE)
    assert outcome["exec"].status == "failed"
    assert "cannot read this answer" in outcome["exec"].feedback and "through exec" in outcome["exec"].feedback
    assert "write `def next_token_targets(...):`" in outcome["exec"].feedback
    for name in ("v3", "never_run"):
        assert outcome[name].status == "passed", (name, outcome[name].feedback)


def test_the_learners_own_check_says_when_the_grader_cannot_read_the_answer():
    """In the learner's kernel (IPython's history): an exec binding fails the check with the reason."""
    IPython = pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython
    shell = get_ipython()
    shell.run_cell("from course_lib.checks import check_next_token_targets", store_history=True)
    shell.run_cell("exec('def next_token_targets(ids):\\n    return ids[:-1], ids[1:]')", store_history=True)
    result = shell.run_cell("check_next_token_targets(next_token_targets)", store_history=True)
    assert isinstance(result.error_in_exec, AssertionError), result.error_in_exec
    assert "through exec" in str(result.error_in_exec)
    shell.run_cell("def next_token_targets(ids):\n    return ids[:-1], ids[1:]", store_history=True)
    result = shell.run_cell("check_next_token_targets(next_token_targets)", store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    assert IPython


def test_a_name_the_probe_lacks_is_explained_and_an_unreadable_exercise_loses_its_pass():
    from course_lib.grading.verdicts import Result
    learner = read("import torch\nSCALE = torch.ones(3)",
                   "def f(x):\n    return x * SCALE", "g = lambda x: x")
    missing = Result("f", "failed", "AssertionError: your function raised NameError: name 'SCALE' is not defined", 0, 1)
    lambda_pass = Result("g", "passed", "g: 3 checks passed", 1, 1, 3, 3)
    explained, lost = run.cannot_read([missing, lambda_pass], learner)
    assert "`SCALE` is bound in cell 1, line 2 by `SCALE = torch.ones(3)`" in explained.feedback
    assert (lost.status, lost.points) == ("failed", 0) and "bound to a lambda" in lost.feedback
