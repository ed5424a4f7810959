"""Helpers for tests that open, fill in and run the course's notebooks."""
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


def run_exercise_variants(nb, reference, wrong, cwd=ROOT / "notebooks", timeout=300):
    """Run an exercise notebook's answered, blank and wrong variants in one kernel, top to bottom.

    What three kinds of run of the notebook would show, each in its own fresh kernel, for one
    kernel start and one pass over the lesson's cells: the cells run in order, each exercise
    answered by `reference` (a stub where it has none); at each exercise cell, before its
    answer runs, the variants that differ from that run first at that cell are tried in turn,
    each as its exercise cell then its check cell:

    - the blank notebook (nothing filled in), at the first exercise only: a blank notebook
      stops at its first check, so nothing after it is ever reached;
    - each wrong answer of `wrong`, {(exercise, name): body}, filled in where the reference
      would go; the cells before it ran with the reference answers, as in a notebook filled
      with {**reference, exercise: body}, which stops at the wrong answer's check.

    A cell before the first exercise runs identically in every variant, so an error there is
    every variant's first error. Returns {"reference": first error, "blank": ..., (exercise,
    name): ...} for each variant, where a first error is (cell index, ename, evalue) or None.
    """
    found = {index: (name, check) for name, index, check in exercises(nb)}
    results = {}
    pending = {"blank", *wrong}          # variants not yet run to their first error

    client = NotebookClient(copy.deepcopy(nb), timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    count = 0

    def run(source, index):
        """Run `source` as cell `index`; its error as (index, ename, evalue), or None."""
        nonlocal count
        count += 1
        cell = nbformat.v4.new_code_cell(source)
        try:
            client.execute_cell(cell, index, execution_count=count)
        except CellExecutionError as exc:
            return _error(exc, index)
        return None

    client.reset_execution_trackers()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if index in found:
                name, check = found[index]
                variants = {key: body for key, body in wrong.items() if key[0] == name}
                if "blank" in pending:
                    variants = {"blank": None, **variants}
                for key, body in variants.items():
                    source = cell.source if body is None else replace_stub(cell.source, name, body)
                    results[key] = run(source, index) or run(nb.cells[check].source, check)
                    pending.discard(key)
                source = (replace_stub(cell.source, name, reference[name]) if name in reference
                          else cell.source)
            else:
                source = cell.source
            error = run(source, index)
            if error is not None:
                results["reference"] = error
                break
        else:
            results["reference"] = None
    for key in pending:  # not reached: the reference run stopped first, so would they
        results[key] = results["reference"]
    return results
