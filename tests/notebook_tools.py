"""Helpers for tests that open, fill in and run the course's notebooks."""
import contextlib
import copy
import math
from pathlib import Path

import nbformat
import numpy as np
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from course_lib import attention
from course_lib.exercises import exercises, replace_solution, stub

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))

def injected_wrong(learner):
    """{(exercise, wrong answer's name): body} of the wrong answers (tests/answers_NN.py) marked
    to be injected into the exercises of the exercise notebook `learner`."""
    from answers import WRONG
    names = {name for name, _, _ in exercises(learner)}
    return {(w.exercise, w.name): w.body for w in WRONG if w.inject and w.exercise in names}


# {lesson file name: LessonFold} of the lessons whose nbval run in this session runs their
# exercise variants (filled in by tests/nbval_fold.py at collection).
FOLDED = {}


def read(path):
    return nbformat.read(path, as_version=4)


def exercise_cells(name):
    """(lesson path, exercise cell source) of the exercise called `name`."""
    for path in LESSONS:
        nb = read(path)
        for found, i, _ in exercises(nb):
            if found == name:
                return path, nb.cells[i].source
    raise KeyError(f"no lesson has an exercise named {name!r}")


def pass_line(name):
    """The pass line the check cell of exercise `name` printed in its lesson's saved run
    ("softmax: 64 checks passed"): what a forgery must print, and what a pass shows."""
    for path in LESSONS:
        nb = read(path)
        for found, _, j in exercises(nb):
            if found == name:
                return "".join(o["text"] for o in nb.cells[j].outputs if o.get("output_type") == "stream").strip()
    raise KeyError(f"no lesson has an exercise named {name!r}")


def function_from(name, body):
    """The exercise's function, defined from its lesson's cell with `body` as the solution."""
    _, source = exercise_cells(name)
    namespace = {"np": np, "math": math, "torch": torch, "ref": attention,
                 "causal_mask": attention.causal_mask}
    exec(replace_solution(source, body), namespace)
    return namespace[name]


def replace_stub(source, name, body):
    """An exercise cell's source with its stub line replaced by `body`, indented to match."""
    lines = source.splitlines()
    at = [i for i, line in enumerate(lines) if line.strip() == stub(name)]
    assert len(at) == 1, f"exercise {name!r} should hold its stub exactly once:\n{source}"
    indent = lines[at[0]][: len(lines[at[0]]) - len(lines[at[0]].lstrip())]
    return "\n".join(lines[: at[0]] + [indent + line for line in body.splitlines()] + lines[at[0] + 1:])


def fill(nb, bodies):
    """A copy of an exercise notebook with the stubs named in `bodies` replaced by those bodies."""
    nb = copy.deepcopy(nb)
    for name, i, _ in exercises(nb):
        if name in bodies:
            nb.cells[i].source = replace_stub(nb.cells[i].source, name, bodies[name])
    return nb


def first_error(nb, cwd=ROOT / "notebooks", timeout=300):
    """Run a notebook top to bottom in a fresh kernel; (cell index, ename, evalue) of the first error, or None."""
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except CellExecutionError:
        for i, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                if out.output_type == "error":
                    return i, out.ename, out.evalue
        raise
    return None


RUN_TIME = r"\*\*Run time:\*\* about (\d+(?:\.\d+)?) (s|min)\b"


def stated_run_time(path):
    """The seconds a lesson states at its top: "**Run time:** about 40 s" or "about 2 min"."""
    import re
    for cell in read(path).cells[:4]:
        if cell.cell_type == "markdown":
            found = re.search(RUN_TIME, cell.source)
            if found:
                return float(found.group(1)) * (60 if found.group(2) == "min" else 1)
    raise ValueError(f"{Path(path).name} states no run time near its top in the form "
                     f"'**Run time:** about 40 s' (or 'about 2 min')")


def _error(exc, index):
    """(cell index, ename, evalue) of a cell that raised, from nbclient's CellExecutionError."""
    return index, exc.ename, exc.evalue


# What a lesson's own run leaves to its later cells must not depend on the variants tried in
# between: these two snippets, run in the kernel around the variants, put back the random
# number generators that are loaded (Python's, NumPy's, torch's, CUDA's once it has started).
# Each defines one function and deletes it, so the learner's namespace is as it was.
SAVE_STATE = """\
def _course_fold_save():
    import sys
    state = {}
    if "random" in sys.modules:
        state["random"] = sys.modules["random"].getstate()
    if "numpy" in sys.modules:
        state["numpy"] = sys.modules["numpy"].random.get_state()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        state["torch"] = torch.random.get_rng_state()
        if torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
    sys._course_fold_state = state
_course_fold_save()
del _course_fold_save
"""
RESTORE_STATE = """\
def _course_fold_restore():
    import sys
    state = sys.__dict__.pop("_course_fold_state")
    if "random" in state:
        sys.modules["random"].setstate(state["random"])
    if "numpy" in state:
        sys.modules["numpy"].random.set_state(state["numpy"])
    if "torch" in state:
        sys.modules["torch"].random.set_rng_state(state["torch"])
    if "cuda" in state:
        sys.modules["torch"].cuda.set_rng_state_all(state["cuda"])
_course_fold_restore()
del _course_fold_restore
"""


@contextlib.contextmanager
def state_kept(run):
    """`run` as it is, but the first call saves the random generators' state, put back at the end."""
    saved = []

    def quiet(source):
        error = run(source, -1)
        if error is not None:
            raise RuntimeError(f"saving or restoring the kernel's random state failed: {error}")

    def guarded(source, index):
        if not saved:
            quiet(SAVE_STATE)
            saved.append(True)
        return run(source, index)
    try:
        yield guarded
    finally:
        if saved:
            quiet(RESTORE_STATE)


class LessonFold:
    """The learner's copy's variants, run inside one run of the solved lesson's own cells.

    `lesson` is notebooks/NN (solutions in, what nbval runs and compares), `learner` its
    exercises/NN (generated from it: the same cells but for the exercise cells, which hold the
    stub, and the question cells, whose answers are blank). A driver runs the lesson's code
    cells in order in one kernel and calls `before(index, run)` before each and `after(index,
    run, failed)` after it; `run(source, index)` runs a source in that kernel and returns its
    error as (index, ename, evalue), or None. In between, the fold runs what a separate run of
    the learner's copy would have run differently, so that `results()` gives, for each variant,
    the first error a fresh kernel of its own would have (tests/test_exercise_notebooks.py
    proves it on a toy lesson):

    - "blank": the learner's copy as it is; before the first exercise cell, its stub then its
      check (a blank copy stops at its first check, so nothing later is ever reached);
    - each wrong answer of `wrong`, {(exercise, name): body}: before its exercise's cell, the
      stub replaced by the body, then the check: the first error of a copy filled in with
      {**reference, exercise: body}, the earlier exercises holding the lesson's own answers
      (right answers both, which the checks of the earlier exercises have passed);
    - "reference": the copy with every stub replaced by its answer in `reference` (the stub
      where it has none): before each exercise's cell, after its wrong answers, its reference
      answer then the check; and before each other cell that differs in the learner's copy (a
      question whose answer is blank), that cell. The lesson's own cell then runs, so the
      lesson's later cells use the lesson's answer, whose outputs nbval compares: a reference
      answer may print differently (lesson 04's layer_norm prints -0. where the lesson's prints
      0.), so it is proven by its check, and the cells after it by the lesson's answer.

    The random number generators are put back after every such run, so the lesson's later
    cells draw what they would have without them. Once a lesson cell fails (`failed`), the fold
    stops: what is still pending is unknown, and results() leaves it out.
    """

    def __init__(self, lesson, learner, reference, wrong):
        if len(lesson.cells) != len(learner.cells):
            raise ValueError(f"the learner's copy has {len(learner.cells)} cells and the lesson "
                             f"{len(lesson.cells)}: regenerate exercises/ "
                             f"(python -m course_lib.exercises)")
        self.lesson, self.learner = lesson, learner
        self.reference, self.wrong = reference, dict(wrong)
        found = exercises(learner)
        self.exercise_at = {i: (name, check) for name, i, check in found}
        self.first_error = {}
        self.pending = {"reference", "blank", *self.wrong} if found else {"reference"}
        self.stopped = None          # why the fold stopped before the lesson's end

    def _branch(self, key, source, index, run):
        """Run one variant's exercise cell then its check; its first error, or None."""
        name, check = self.exercise_at[index]
        self.first_error[key] = run(source, index) or run(self.learner.cells[check].source, check)
        self.pending.discard(key)

    def _reference_stops(self, error):
        """The reference run stopped at `error`: so would every variant still pending."""
        for key in self.pending:
            self.first_error[key] = error
        self.pending.clear()
        self.stopped = f"the run with the reference answers stopped at cell {error[0]}"

    def before(self, index, run):
        """Before the lesson's code cell `index` runs: what branches off the run there."""
        if self.stopped or not self.pending:
            return
        learner = self.learner.cells[index]
        if index in self.exercise_at:
            name, _ = self.exercise_at[index]
            if "blank" in self.pending:
                self._branch("blank", learner.source, index, run)
            for key, body in self.wrong.items():
                if key[0] == name and key in self.pending:
                    self._branch(key, replace_stub(learner.source, name, body), index, run)
            if "reference" in self.pending:
                source = learner.source
                if name in self.reference:
                    source = replace_stub(source, name, self.reference[name])
                _, check = self.exercise_at[index]
                error = run(source, index) or run(self.learner.cells[check].source, check)
                if error is not None:
                    self._reference_stops(error)
        elif learner.source != self.lesson.cells[index].source:
            error = run(learner.source, index)
            if error is not None:
                self._reference_stops(error)

    def after(self, index, run, failed=False):
        """After the lesson's code cell `index` ran (`failed`: it raised, or nbval failed it).
        Nothing is run there today; `run` is kept so that a driver need not know."""
        if self.stopped or not self.pending:
            return
        if failed:
            self.stopped = f"the lesson's own cell {index} failed"

    def finish(self):
        """The lesson's last cell has run: the reference answers ran to the end."""
        if not self.stopped and "reference" in self.pending:
            self.first_error["reference"] = None
            self.pending.discard("reference")

    def results(self):
        """{variant: first error} for each variant known: "reference", "blank", (exercise, name)."""
        return dict(self.first_error)


def run_folded(lesson, learner, reference, wrong, cwd=ROOT / "notebooks", timeout=300):
    """LessonFold driven by nbclient: the lesson's code cells in one fresh kernel, the learner's
    copy's variants folded in; their results (LessonFold.results), with "lesson": the lesson's
    own first error or None, and "outputs": what its cells printed (printed_text). What make
    test's nbval run does (tests/nbval_fold.py), without nbval."""
    fold = LessonFold(lesson, learner, reference, wrong)
    nb = copy.deepcopy(lesson)
    # Every cell is sent as nbval sends it, with stop_on_error off: otherwise the kernel drops
    # the requests that follow an error for a moment, and the next cell's "aborted" would read
    # as a pass. The tag does that, and makes nbclient hand the error to on_cell_error instead
    # of raising it.
    allowed = {"tags": ["raises-exception"]}
    for cell in nb.cells:
        cell.metadata = {**cell.metadata, **allowed}
    errors = []
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}},
                            on_cell_error=lambda cell, cell_index, execute_reply:
                            errors.append((cell_index, execute_reply["content"]["ename"],
                                           execute_reply["content"]["evalue"])))
    count = 0

    def execute(cell, index):
        """Run a cell as cell `index`; its error as (index, ename, evalue), or None."""
        nonlocal count
        count += 1
        errors.clear()
        client.execute_cell(cell, index, execution_count=count)
        return errors[0] if errors else None

    def run(source, index):
        kept = nb.cells[index]           # nbclient stores an executed cell at its index
        try:
            return execute(nbformat.v4.new_code_cell(source, metadata=allowed), index)
        finally:
            nb.cells[index] = kept

    lesson_error = None
    client.reset_execution_trackers()
    with client.setup_kernel():
        for index, cell in enumerate(lesson.cells):
            if cell.cell_type != "code":
                continue
            with state_kept(run) as guarded:
                fold.before(index, guarded)
            lesson_error = execute(nb.cells[index], index)
            with state_kept(run) as guarded:
                fold.after(index, guarded, failed=lesson_error is not None)
            if lesson_error is not None:
                break
        else:
            fold.finish()
    return {**fold.results(), "lesson": lesson_error, "outputs": printed_text(nb)}


def printed_text(nb):
    """For each code cell of an executed notebook, the text of its outputs, streams joined."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            streams = "".join(o.text for o in cell.outputs if o.output_type == "stream")
            rest = [o.get("data", {}).get("text/plain", o.get("ename")) for o in cell.outputs
                    if o.output_type != "stream"]
            found.append((streams, rest))
    return found
