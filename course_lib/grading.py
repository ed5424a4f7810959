"""Grade exercise notebooks: put the lesson's check cells back, run in a fresh kernel, report.

    python -m course_lib.grading exercises/01_attention_by_hand.ipynb     # one learner
    python -m course_lib.grading --class submissions/ [--csv grades.csv] # a folder of learners

Each notebook runs in its own kernel process with a time limit per cell. Before the
run, every check cell is replaced by the lesson's own (from notebooks/, matched by
file name), so an edited or deleted check cannot change the result. An exercise
passes when its check cell runs without error: "checks passed", no more than that.
"""
import argparse
import copy
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from course_lib.exercises import ROOT, exercise_name, exercises, tags


@dataclass
class Result:
    exercise: str
    status: str   # "passed", "failed" or "not run"
    message: str  # the check's feedback, or why it did not run


def reference_for(path, lessons=ROOT / "notebooks"):
    """The lesson a submission was made from, found by file name."""
    reference = Path(lessons) / Path(path).name
    if not reference.exists():
        known = ", ".join(p.name for p in sorted(Path(lessons).glob("*.ipynb")))
        raise FileNotFoundError(f"no lesson named {Path(path).name} in {lessons}; a submission "
                                f"keeps its lesson's file name, one of: {known}")
    return reference


def with_lesson_checks(submission, lesson):
    """The submission with every check cell replaced by, or restored from, the lesson's."""
    nb = copy.deepcopy(submission)
    nb.cells = [cell for cell in nb.cells if "check" not in tags(cell)]
    for name, _, j in exercises(lesson):
        check = copy.deepcopy(lesson.cells[j])
        check.outputs, check.execution_count = [], None
        where = next((i for i, cell in enumerate(nb.cells)
                      if cell.cell_type == "code" and "exercise" in tags(cell)
                      and _defines(cell.source, name)), None)
        if where is None:  # the exercise cell is gone: run the check at the end, where it fails
            nb.cells.append(check)
        else:
            nb.cells.insert(where + 1, check)
    return nb


def _defines(source, name):
    try:
        return exercise_name(source) == name
    except (ValueError, SyntaxError):
        return False


def _error_text(cell):
    for out in cell.get("outputs", []):
        if out.output_type == "error":
            return f"{out.ename}: {out.evalue}"
    return None


def run(nb, cwd, cell_timeout=120):
    """Execute a notebook in a fresh kernel, keeping going past errors; returns why it stopped early, or None."""
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except CellTimeoutError:
        return f"a cell ran longer than the {cell_timeout} s limit"
    except DeadKernelError:
        return "the kernel died (out of memory, or the code exited the interpreter)"
    return None


def grade(path, lesson=None, cell_timeout=120):
    """Results, one per exercise of the lesson, for the notebook at `path`."""
    lesson_path = Path(lesson) if lesson else reference_for(path)
    lesson_nb = nbformat.read(lesson_path, as_version=4)
    try:
        submission = nbformat.read(path, as_version=4)
    except Exception as e:
        return [Result(name, "not run", f"the notebook could not be read: {e}")
                for name, _, _ in exercises(lesson_nb)]
    nb = with_lesson_checks(submission, lesson_nb)
    stopped = run(nb, lesson_path.parent, cell_timeout)
    checks = {cell.source.strip(): cell for cell in nb.cells if "check" in tags(cell)}
    results = []
    for name, _, _ in exercises(lesson_nb):
        cell = checks[f"check_{name}({name})"]
        error = _error_text(cell)
        if cell.get("execution_count") is None and error is None:
            results.append(Result(name, "not run", stopped or "the check cell did not run"))
        elif error is None:
            results.append(Result(name, "passed", "checks passed"))
        else:
            results.append(Result(name, "failed", error))
    return results


def grade_class(folder, cell_timeout=120):
    """{student: results} for every notebook under `folder`; a student is the path without .ipynb."""
    folder = Path(folder)
    paths = sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if not paths:
        raise FileNotFoundError(f"no .ipynb files under {folder}")
    return {str(p.relative_to(folder).with_suffix("")): grade(p, cell_timeout=cell_timeout)
            for p in paths}


def table(graded):
    """A plain-text table: one row per student, one column per exercise."""
    names = sorted({r.exercise for results in graded.values() for r in results})
    rows = [["student", *names, "passed"]]
    for student, results in graded.items():
        status = {r.exercise: r.status for r in results}
        passed = sum(s == "passed" for s in status.values())
        rows.append([student, *(status.get(n, "-") for n in names), f"{passed}/{len(results)}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Grade exercise notebooks against the lessons' checks.")
    parser.add_argument("path", help="a notebook, or with --class a folder of notebooks")
    parser.add_argument("--class", dest="folder", action="store_true",
                        help="grade every notebook under the folder PATH")
    parser.add_argument("--csv", help="also write the class table to this CSV file")
    parser.add_argument("--timeout", type=int, default=120, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    if args.folder:
        graded = grade_class(args.path, cell_timeout=args.timeout)
        print(table(graded))
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["student", "exercise", "status", "message"])
                for student, results in graded.items():
                    writer.writerows([student, r.exercise, r.status, r.message] for r in results)
        return 0
    results = grade(args.path, cell_timeout=args.timeout)
    for r in results:
        print(f"{r.exercise}: {r.status}" + ("" if r.status == "passed" else f"\n  {r.message}"))
    passed = sum(r.status == "passed" for r in results)
    print(f"{passed} of {len(results)} exercises: checks passed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
