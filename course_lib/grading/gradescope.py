"""Gradescope: an autograder zip that grades one lesson's notebook with the course's own grader.

    python -m course_lib.grading gradescope --lesson 00 --out autograder.zip [--late-penalty 10%/day]

The zip holds Gradescope's two scripts and the course: `setup.sh` (run once, as root, when
Gradescope builds the image: Python, the locked packages, bubblewrap) and `run_autograder`
(run for each submission), which calls `python -m course_lib.grading.gradescope run`. That
lays the learner's notebook out as a class of one (`CLASS/submission/<lesson>/<notebook>`, with
a `timestamp.txt` holding the submission's `created_at`), grades it with the same command as
`--class` (so the points are those `--class` gives: partial credit, solution costs and the late
penalty included), and writes `results/results.json` under the autograder root
(`$AUTOGRADER_ROOT`, default /autograder): a test per exercise and per question, each with
`name`, `score`, `max_score`, `status`, `output` (the check's feedback) and `visibility`, and the
total as the top-level `score`.

Due times come from Gradescope's `submission_metadata.json`: `assignment.due_date` (or a
learner's own extension, `users[].assignment.due_date`); a notebook handed in after it, in the
late period up to `late_due_date`, loses what the term's `--late-penalty` rule takes.

The sandbox: each notebook runs in bubblewrap where the container allows it. Where it does not
(Gradescope's Docker containers usually forbid the namespaces bubblewrap needs), it is graded
without one, as a user id of its own, never as root, and the results' `output` says so; where
Python cannot be run by another user, nothing is run and the output says why.
"""
import argparse
import csv
import datetime
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT
from course_lib.grading.lateness import lesson_stem, parse_penalty
from course_lib.grading.lessons import LESSONS, lesson_exercises
from course_lib.grading.questions import is_question, lesson_questions
from course_lib.grading.sandbox import unavailable, unprivileged_python
from course_lib.grading.submissions import read_submission

CONFIG = "gradescope.json"   # in the zip: the lesson and the term's rules
LEARNER = "submission"       # the one learner of the class the runner grades
# What of the course the zip carries: the grader, the lessons (the checks and their points), the
# exercise notebooks (the blanks), the data the lessons read, and what installs the packages.
PARTS = ("course_lib", "notebooks", "exercises", "data")
FILES = ("pyproject.toml", "requirements.txt", "requirements-lock.txt")
SKIPPED = ("__pycache__", ".ipynb_checkpoints")

SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu): Python,
# bubblewrap (the grader's sandbox, used where the container allows it) and the course's packages,
# in a virtual environment of their own, /opt/course-venv: outside /autograder, so that a notebook
# run without a sandbox, as a user other than root, can run Python whatever /autograder's mode.
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap
python3 -m venv /opt/course-venv
pip="/opt/course-venv/bin/python -m pip install --quiet"
# The CPU build of torch first (the lock's version where this Python can take it), so that no
# CUDA build is fetched; then requirements.txt within the lock's versions, as `make setup` does.
# The lock is for Python 3.11.5 and newer: on an older one (Ubuntu 22.04's 3.10), the newest
# versions requirements.txt allows are installed instead, and the build's output says so.
torch=$(sed -n 's/^torch==\\([^ ;]*\\).*/\\1/p' requirements-lock.txt 2>/dev/null || true)
$pip --index-url https://download.pytorch.org/whl/cpu "torch${torch:+==$torch}" ||
    $pip --index-url https://download.pytorch.org/whl/cpu torch
if ! $pip -r requirements.txt -c requirements-lock.txt; then
    echo "setup.sh: the locked versions do not install on $(python3 --version); the newest that"
    echo "requirements.txt allows are installed instead (no test has run them)"
    $pip -r requirements.txt
fi
# the course imports; where the container allows no sandbox, a notebook runs as a user of its own,
# who must be able to run this Python
/opt/course-venv/bin/python -c 'from course_lib.grading.sandbox import unprivileged_python as why; print("setup.sh:", why() or "a user other than root can run this Python")'
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this, as root, for each submission: grade the notebook in submission/ with the
# course's grader and write results/results.json (python -m course_lib.grading.gradescope run).
root=${AUTOGRADER_ROOT:-/autograder}
cd "$root/source" || exit 1
export AUTOGRADER_ROOT=$root
exec "${COURSE_PYTHON:-/opt/course-venv/bin/python}" -m course_lib.grading.gradescope run
"""


# ---------------------------------------------------------------- the zip

def _term_rules(folder):
    """The rules kept in a term's out folder (term.json) that a Gradescope grading uses."""
    path = Path(folder) / "term.json"
    if not path.is_file():
        raise ValueError(f"--term {folder}: there is no term.json in it; give the out folder of a "
                         f"class graded with --class, or the rules themselves (--late-penalty ...)")
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise ValueError(f"{path} is not JSON") from None
    return {k: kept.get(k) for k in ("late_penalty", "partial", "solution_costs")}


def build(lesson, out, *, late_penalty=None, partial=None, solution_costs=None, term=None, root=ROOT):
    """Write the autograder zip for `lesson` (a number or a name) to `out`; returns its config.

    The rules given override those kept in the term's out folder `term` (when given).
    ValueError says what is wrong.
    """
    root = Path(root)
    stems = [p.stem for p in sorted((root / "notebooks").glob("*.ipynb"))]
    stem = lesson_stem(str(lesson), stems, "--lesson")
    rules = _term_rules(term) if term else {}
    given = {"late_penalty": late_penalty, "partial": partial, "solution_costs": solution_costs}
    rules.update({k: v for k, v in given.items() if v is not None})
    if rules.get("late_penalty"):
        parse_penalty(rules["late_penalty"])  # ValueError now, not on Gradescope
    config = {"lesson": stem, "late_penalty": rules.get("late_penalty") or None,
              "partial": bool(rules.get("partial")), "solution_costs": rules.get("solution_costs")}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial_out = out.with_name(out.name + ".part")
    with zipfile.ZipFile(partial_out, "w", zipfile.ZIP_DEFLATED) as z:
        _add(z, "setup.sh", SETUP, 0o755)
        _add(z, "run_autograder", RUN_AUTOGRADER, 0o755)
        _add(z, CONFIG, json.dumps(config, indent=1) + "\n", 0o644)
        for name in FILES:
            if (root / name).is_file():
                z.write(root / name, name)
        for part in PARTS:
            for path in sorted((root / part).rglob("*")):
                if path.is_file() and not path.is_symlink() and not any(s in path.parts for s in SKIPPED) \
                        and path.suffix != ".pyc":
                    z.write(path, path.relative_to(root).as_posix())
    os.replace(partial_out, out)
    return config


def _add(z, name, text, mode):
    info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, text)


def main(argv=None):
    """`python -m course_lib.grading gradescope --lesson NN --out autograder.zip`."""
    parser = argparse.ArgumentParser(
        prog="python -m course_lib.grading gradescope",
        description="Make a Gradescope autograder zip that grades one lesson's notebook with the "
                    "course's grader (the same points as --class).")
    parser.add_argument("--lesson", required=True, help="the lesson: its number (00) or its name")
    parser.add_argument("--out", default="autograder.zip", help="the zip to write (default: autograder.zip)")
    parser.add_argument("--term", metavar="OUT", help="take the rules kept in this out folder of a "
                                                      "--class grading (late penalty, partial, solution costs)")
    parser.add_argument("--late-penalty", metavar="RULE", help="e.g. 10%%/day or 10%%/day,max=50%%, from "
                                                               "Gradescope's due date")
    parser.add_argument("--partial", action=argparse.BooleanOptionalAction, default=None,
                        help="give every exercise the passed share of its points")
    parser.add_argument("--solution-costs", type=float, default=None, metavar="POINTS",
                        help="points taken off each exercise whose solution the notebook asked for")
    args = parser.parse_args(argv)
    if args.solution_costs is not None and not 0 <= args.solution_costs < float("inf"):
        parser.error(f"--solution-costs {args.solution_costs:g}: give a number of points of 0 or more")
    try:
        config = build(args.lesson, args.out, late_penalty=args.late_penalty, partial=args.partial,
                       solution_costs=args.solution_costs, term=args.term)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rules = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in config.items() if k != "lesson" and v) or "no term rules"
    print(f"wrote {args.out}: the autograder of {config['lesson']} ({rules}); upload it in the "
          f"assignment's Configure Autograder page (Zip file upload)")
    return 0


# ---------------------------------------------------------------- in Gradescope's container

def _time(text, what):
    """An aware datetime from Gradescope's ISO 8601 text (None stays None)."""
    if text is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"submission_metadata.json: {what} {text!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        raise ValueError(f"submission_metadata.json: {what} {text!r} has no zone")
    return when


def read_metadata(path):
    """(created_at, due, late_due) from submission_metadata.json; a learner's extension is their due."""
    meta = json.loads(Path(path).read_text(encoding="utf-8"))
    assignment = meta.get("assignment") or {}
    due = _time(assignment.get("due_date"), "assignment.due_date")
    late_due = _time(assignment.get("late_due_date"), "assignment.late_due_date")
    for user in meta.get("users") or []:
        own = (user or {}).get("assignment") or {}
        if own.get("due_date"):
            mine = _time(own["due_date"], "users[].assignment.due_date")
            due = mine if due is None else max(due, mine)
        if own.get("late_due_date"):
            mine = _time(own["late_due_date"], "users[].assignment.late_due_date")
            late_due = mine if late_due is None else max(late_due, mine)
    return _time(meta.get("created_at"), "created_at"), due, late_due


def find_notebook(folder, name):
    """(the submission's notebook, None) or (None, why there is none to grade).

    The file named as the lesson, anywhere in the submission; else its only notebook. Links
    are never followed.
    """
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__MACOSX")
        found += [Path(top) / f for f in sorted(files) if f.endswith(".ipynb")]
    named = [p for p in found if p.name == name]
    if len(named) == 1 or (not named and len(found) == 1):
        return (named or found)[0], None
    if not found:
        return None, f"no notebook was handed in: upload your {name}"
    return None, (f"{len(named or found)} notebooks were handed in "
                  f"({', '.join(str(p.relative_to(folder)) for p in (named or found))}): upload only {name}")


def _grade_command(config, class_folder, out, due, sandboxed):
    stem = config["lesson"]
    command = [sys.executable, "-m", "course_lib.grading", "--class", str(class_folder), "--out", str(out),
               "--lessons", stem, "--jobs", "1", "--no-html"]
    if due is not None:
        command += ["--due", f"{stem}={due.isoformat()}"]
        if config.get("late_penalty"):
            command += ["--late-penalty", config["late_penalty"]]
    if config.get("partial"):
        command.append("--partial")
    if config.get("solution_costs") is not None:
        command += ["--solution-costs", f"{config['solution_costs']:g}"]
    return command + ([] if sandboxed else ["--no-sandbox"])


def _test(row, number):
    """One of results.json's tests from a gradebook row."""
    question = is_question(row["exercise"])
    lines = [row["feedback"]]
    if row["status"] == "failed" and "/" in row.get("cases", "") and not question:
        lines.append(f"cases passed: {row['cases']}")
    if row.get("penalty") and row["penalty"] != "0%" and float(row["points_before_penalty"] or 0) > 0:
        lines.append(f"late by {row['lateness']}: {row['penalty']} off {row['points_before_penalty']} points")
    if row.get("solution", "").startswith("yes, costs"):
        lines.append(f"the solution was shown: {row['solution']}")
    if row.get("override"):
        lines.append(f"set by your instructor: {row['comment']}")
    return {"name": f"{'Question' if question else 'Exercise'} {row['exercise']}", "number": str(number),
            "score": float(row["points"]), "max_score": float(row["max_points"]),
            "status": "passed" if row["status"] == "passed" else "failed",
            "output": "\n".join(line for line in lines if line), "visibility": "visible",
            "extra_data": {"status": row["status"], "sandbox": row.get("sandbox", "")}}


def _blank_tests(stem, why):
    """A failed test per exercise and question of the lesson, each saying `why` nothing was graded."""
    lesson = nbformat.read(LESSONS / f"{stem}.ipynb", as_version=4)
    items = [("Exercise", e.name, e.points) for e in lesson_exercises(lesson)]
    items += [("Question", qid, points) for qid, points in lesson_questions(lesson)]
    return [{"name": f"{kind} {name}", "number": str(i), "score": 0.0, "max_score": float(points),
             "status": "failed", "output": why, "visibility": "visible"} for i, (kind, name, points)
            in enumerate(items, 1)]


def _sandbox_note():
    """(sandboxed, a line for the output, or why nothing may run)."""
    why = unavailable()
    if why is None:
        return True, "Graded in a bubblewrap sandbox (no network, nothing of the autograder in reach).", None
    note = (f"Graded WITHOUT a sandbox: {why}. The notebook ran as a user of its own (not root), "
            f"with the grader's limits, but without the sandbox's isolation.")
    if os.geteuid() == 0 and unprivileged_python() is not None:
        return False, note, (f"Not graded: this container has no sandbox ({why}), and the grader "
                             f"never runs a notebook as root, but no other user can run its Python "
                             f"({unprivileged_python()}): install the course's Python where every "
                             f"user can read it (setup.sh does)")
    return False, note, None


def _write(results_folder, results):
    """results.json, whole: a temporary file renamed into place."""
    results_folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chmod(results_folder, 0o755)  # nothing a notebook's user could write into
    fd, temp = tempfile.mkstemp(dir=results_folder, prefix=".results-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    os.chmod(temp, 0o644)
    os.replace(temp, results_folder / "results.json")


def run_autograder(root=None):
    """Grade the submission under the autograder root and write results/results.json; exit status."""
    root = Path(root or os.environ.get("AUTOGRADER_ROOT") or "/autograder")
    began = time.monotonic()
    config = json.loads((ROOT / CONFIG).read_text(encoding="utf-8"))
    stem = config["lesson"]
    notes, status = [], 0
    try:
        created, due, late_due = read_metadata(root / "submission_metadata.json")
    except (OSError, ValueError) as e:
        created = due = late_due = None
        notes.append(f"The submission's time is unknown ({e}), so no late penalty applies.")
    sandboxed, note, refused = _sandbox_note()
    notebook, missing = find_notebook(root / "submission", f"{stem}.ipynb")
    if refused or missing:
        tests = _blank_tests(stem, refused or missing)
        notes.append(refused or missing)
        status = 1 if refused else 0
    else:
        tests, problem = _grade(config, notebook, created, due, sandboxed)
        notes.append(note)
        if problem:
            notes.append(problem)
            status = 1
    if created is not None and due is not None and created > due:
        late = f"Handed in {created - due} after the due date ({due.isoformat()})"
        if late_due is not None:
            late += f", in the late period (until {late_due.isoformat()})"
        rule = config.get("late_penalty")
        notes.append(late + (f": the late penalty is {rule}, taken off each exercise and question."
                             if rule else "; there is no late penalty."))
    score = round(sum(t["score"] for t in tests), 3)
    most = round(sum(t["max_score"] for t in tests), 3)
    _write(root / "results", {
        "score": score, "execution_time": round(time.monotonic() - began),
        "output": "\n\n".join([f"{stem}: {score:g} of {most:g} points."] + notes),
        "visibility": "visible", "stdout_visibility": "hidden", "tests": tests})
    print(f"{stem}: {score:g} of {most:g} points; results in {root / 'results' / 'results.json'}")
    return status


def _grade(config, notebook, created, due, sandboxed):
    """(tests, a problem to report or None): the notebook graded as a class of one by `--class`."""
    stem = config["lesson"]
    with tempfile.TemporaryDirectory(prefix="gradescope-") as work:
        work = Path(work)
        folder = work / "class" / LEARNER / stem
        folder.mkdir(parents=True)
        try:
            data = read_submission(notebook)
        except ValueError as e:
            return _blank_tests(stem, f"{notebook.name} was refused: {e}"), None
        (folder / f"{stem}.ipynb").write_bytes(data)
        if created is not None:
            (folder / "timestamp.txt").write_text(created.isoformat() + "\n", encoding="utf-8")
        command = _grade_command(config, work / "class", work / "out", due, sandboxed)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        print(done.stdout + done.stderr)  # Gradescope shows this to the instructor only
        book = work / "out" / "gradebook.csv"
        rows = []
        if book.is_file():
            with book.open(newline="", encoding="utf-8") as f:
                rows = [r for r in csv.DictReader(f) if r["learner"] == LEARNER and r["exercise"]]
        if not rows:
            why = (f"the grader could not grade this notebook (exit status {done.returncode}); "
                   f"your instructor can see why in the autograder's output")
            return _blank_tests(stem, why), why
        log = work / "out" / "grading.log"
        if any(r["status"] == "not run" for r in rows) and log.is_file():
            print(log.read_text(encoding="utf-8", errors="replace")[-4000:])
        return [_test(r, i) for i, r in enumerate(rows, 1)], None


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        sys.exit(run_autograder())
    sys.exit(main(sys.argv[1:]))
