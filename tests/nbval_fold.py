"""pytest plugin: each lesson's exercise variants run inside nbval's own run of the lesson.

Without it, make test ran every lesson twice: once under nbval (notebooks/NN, outputs compared)
and once more as its exercise notebook (exercises/NN with the reference answers, the blank stub
and the injected wrong answers tried in the same kernel). With it, nbval's run of notebooks/NN
is the only run: just before nbval runs an exercise cell, the cells by which the learner's copy
differs there (its blank stub, each injected wrong answer, each with its check) run in nbval's
kernel; after the exercise's check, its reference answer and the check again
(notebook_tools.LessonFold says exactly what runs where, and tests/test_exercise_notebooks.py
proves that it finds the first errors that a fresh kernel per variant finds). What those cells
print goes nowhere: nbval reads only its own cells' messages, and compares every one of them.

The tests of tests/test_exercise_notebooks.py that read a lesson's variants (marked
`folded(lesson)`) move into that lesson's nbval file, after its last cell, under the same names:
`notebooks/NN.ipynb::test_blank_notebook_fails_first_at_its_first_check[NN.ipynb]`. So they
run in the process that ran the lesson (make test's --dist loadfile keeps a file on one
worker), after it, and a variant the run did not reach is a failure, never a skip. When the
lesson is not collected under nbval (`pytest tests/test_exercise_notebooks.py`), the tests stay
where they are and run the lesson themselves (notebook_tools.run_folded).
"""
from pathlib import Path
from queue import Empty

import pytest

import notebook_tools
from answers import REFERENCE
from notebook_tools import LessonFold, injected_wrong, read, state_kept

ROOT = Path(__file__).resolve().parent.parent
VARIANT_TESTS = ROOT / "tests" / "test_exercise_notebooks.py"
OUTPUT_TIMEOUT = 120   # seconds a busy kernel gets to send the end of a variant's outputs


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "folded(lesson): a test of the lesson's exercise variants; it runs after "
        "the lesson's nbval run, which runs the variants (tests/nbval_fold.py)")


class FoldedTest(pytest.Item):
    """A test of tests/test_exercise_notebooks.py, run in its lesson's nbval file after the
    lesson's last cell: the same function, with the same arguments, under the same name."""

    def __init__(self, *, test, **kwargs):
        super().__init__(**kwargs)
        self.test = test
        self.obj = test.obj          # what pytest's skipping and reporting look for
        self.own_markers.extend(test.own_markers)

    def runtest(self):
        self.test.obj(**self.test.callspec.params)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"


def lesson_file(item):
    """The nbval collector of notebooks/NN.ipynb that `item` is a cell of; None for any other item."""
    parent = getattr(item, "parent", None)
    if type(item).__name__ != "IPyNbCell" or parent is None:
        return None
    path = Path(str(parent.path)).resolve()
    return parent if path.parent == ROOT / "notebooks" else None


def fold_into_nbval(items):
    """Move each lesson's variant tests into its nbval file, after its last cell, and give the
    file the LessonFold its cells' hook runs; `items` is changed in place."""
    files = {}
    for item in items:
        found = lesson_file(item)
        if found is not None:
            files[Path(str(found.path)).name] = found
    moving = {}
    for item in items:
        mark = item.get_closest_marker("folded")
        if mark is not None and Path(str(item.path)).resolve() == VARIANT_TESTS \
                and mark.args[0] in files:
            moving.setdefault(mark.args[0], []).append(item)
    if not moving:
        return
    kept = [item for item in items if not any(item in tests for tests in moving.values())]
    for name, tests in moving.items():
        nbfile = files[name]
        learner = read(ROOT / "exercises" / name)
        fold = LessonFold(read(ROOT / "notebooks" / name), learner, REFERENCE,
                          injected_wrong(learner))
        nbfile.course_fold = fold
        notebook_tools.FOLDED[name] = fold
        cells = [i for i, item in enumerate(kept) if lesson_file(item) is nbfile]
        moved = [FoldedTest.from_parent(nbfile, name=test.name, test=test) for test in tests]
        kept[cells[-1] + 1:cells[-1] + 1] = moved
    items[:] = kept


def kernel_runner(kernel, timeout):
    """run(source, index) for a LessonFold, in nbval's kernel: the error of running `source`
    there as (index, ename, evalue), or None; its outputs are read to the end and dropped."""
    def run(source, index):
        msg_id = kernel.kc.execute(source, store_history=False, allow_stdin=False,
                                   stop_on_error=False)
        try:
            while True:
                msg = kernel.get_message("shell", timeout=timeout)
                if msg["parent_header"].get("msg_id") == msg_id:
                    break
            kernel.await_idle(msg_id, OUTPUT_TIMEOUT)
        except Empty:
            kernel.interrupt()
            raise RuntimeError(f"an exercise variant at cell {index} ran past {timeout} s "
                               f"in nbval's kernel:\n{source}") from None
        reply = msg["content"]
        if reply["status"] == "error":
            return index, reply["ename"], reply["evalue"]
        return None
    return run


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    nbfile = lesson_file(item)
    fold = getattr(nbfile, "course_fold", None) if nbfile is not None else None
    if fold is None:
        return (yield)
    index = next(i for i, cell in enumerate(nbfile.nb.cells) if cell is item.cell)
    run = kernel_runner(nbfile.kernel, item.config.option.nbval_cell_timeout)
    try:
        with state_kept(run) as guarded:
            fold.before(index, guarded)
    except Exception as exc:         # the lesson's cell still runs; the variants stop here
        fold.stopped = f"running the variants before cell {index} failed: {exc}"
    try:
        result = yield
    except BaseException:
        fold.after(index, None, failed=True)
        raise
    try:
        with state_kept(run) as guarded:
            fold.after(index, guarded)
    except Exception as exc:
        fold.stopped = f"running the variants after cell {index} failed: {exc}"
    if index == max(i for i, cell in enumerate(nbfile.nb.cells) if cell.cell_type == "code"):
        fold.finish()
    return result
