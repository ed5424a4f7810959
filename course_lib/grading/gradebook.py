"""Grade a class and write its gradebook: gradebook.csv, summary.csv, grading.log, feedback pages.

The gradebook is the grader's alone: the learners' notebooks run in sandboxes that do not
see it, and each file is written whole to a temporary name and then renamed into place.
"""
import contextlib
import csv
import datetime
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT
from course_lib.grading.feedback import feedback_html
from course_lib.grading.graded_copy import changed, tree_hash
from course_lib.grading.lessons import LESSONS, _lesson_index, lesson_exercises
from course_lib.grading.replay import Replayer
from course_lib.grading.run import Graded, grade, use_sandbox
from course_lib.grading.sandbox import (CELL_TIMEOUT, MEMORY_GIB, NOTEBOOK_TIMEOUT, SANDBOXED, STARTUP_TIMEOUT,
                                        UNSANDBOXED, exposed)
from course_lib.grading.submissions import _learner_units, read_roster, submission_hash
from course_lib.grading.verdicts import _points

STATUSES = ("passed", "failed", "not run", "missing")
# `sandbox`: how the row's notebook ran: "bubblewrap", "none" (--no-sandbox, or a machine without
# one), or empty when it never ran (missing, unreadable, misnamed).
# `cpu_seconds`: the CPU that grading the row's notebook took, its pytest and kernel together
# (the same on each of its rows; empty when nothing ran or it was not measured).
GRADEBOOK = ["learner", "lesson", "exercise", "points", "max_points", "status", "feedback", "sha256",
             "sandbox", "cpu_seconds"]


def _rows(learner, graded):
    if graded.lesson is None:
        return [dict(learner=learner, lesson=graded.path.stem, exercise="", points=0, max_points=0,
                     status="not run", feedback=graded.problem, sha256="")]
    return [dict(learner=learner, lesson=graded.lesson, exercise=r.exercise, points=_points(r.points),
                 max_points=_points(r.max_points), status=r.status, feedback=r.feedback,
                 sha256=graded.sha256, sandbox=graded.sandbox,
                 cpu_seconds="" if graded.cpu_seconds is None else f"{graded.cpu_seconds:g}")
            for r in graded.results]


def cores():
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1



def grade_class(folder, out, *, jobs=None, roster=None, lessons=LESSONS, only=None,
                cell_timeout=CELL_TIMEOUT, notebook_timeout=NOTEBOOK_TIMEOUT,
                memory_gib=MEMORY_GIB, html=True, log=print, root=ROOT,
                startup_timeout=STARTUP_TIMEOUT, sandbox=True, replayer=None):
    """Grade every learner's notebooks into out/gradebook.csv, out/summary.csv and out/feedback/.

    Returns (rows, problems): problems counts notebooks that could not be graded and
    learners with no submission. Raises FileNotFoundError with a plain message when the
    class folder is missing or holds nothing to grade. Every notebook's checks are replayed
    by one worker of the grader's (`replayer`, started here when None).
    """
    folder, out = Path(folder), Path(out)
    if not folder.is_dir():
        raise FileNotFoundError(f"there is no class folder at {folder}: make one with a folder per "
                                f"learner holding their notebooks, e.g. {folder}/ada/00_start_here.ipynb")
    learners, units, loose, warnings = _learner_units(folder)
    names = read_roster(roster) if roster else []
    if not learners and not loose and not names:
        raise FileNotFoundError(f"the class folder {folder} is empty: it needs a folder per learner "
                                f"holding their notebooks, e.g. {folder}/ada/00_start_here.ipynb")
    jobs = jobs or cores()
    mode = SANDBOXED if use_sandbox(sandbox) else UNSANDBOXED  # SandboxUnavailable: nothing graded
    for what, path in (("class folder", folder), ("--out folder", out)):
        seen = exposed(path) if mode == SANDBOXED else None
        if seen is not None:
            raise FileNotFoundError(f"the {what} {path} is inside {seen}, which every sandbox sees "
                                    f"(read-only): move it elsewhere, e.g. under your home folder")
    out.mkdir(parents=True, exist_ok=True)
    book = out / "gradebook.csv"
    old = _read_gradebook(book) or {}
    index = _lesson_index(lessons)
    watched = tree_hash(root)
    _write_csv(book, GRADEBOOK, [r for k in sorted(old) for r in old[k]])  # there from the start
    for warning in warnings:
        log(f"WARNING: {warning}")
    final, problems, seen = {}, 0, set()
    todo = []
    for learner, path in units:
        lesson_path = index.get(path.name)
        key = (learner, path.stem if lesson_path else f"? {path.name}")
        if key in seen:
            final[(learner, f"! {path}")] = [dict(
                learner=learner, lesson=path.stem, exercise="", points=0, max_points=0,
                status="not run", sha256="", feedback=f"another notebook of lesson {path.stem} "
                f"for {learner} was graded; only one per lesson counts ({path.relative_to(folder)})")]
            problems += 1
            continue
        seen.add(key)
        if lesson_path is not None:
            try:
                sha = submission_hash(path, lesson_path, root)
            except (OSError, ValueError):  # refused or unreadable: grade() says why
                sha = None
            previous = old.get((learner, path.stem))
            if sha and previous and all(r["sha256"] == sha and r["sandbox"] == mode
                                        for r in previous):
                final[key] = previous
                log(f"{learner}/{path.name}: unchanged since it was graded, kept")
                continue
        todo.append((learner, path, key))
    done = 0
    own_replayer = replayer is None
    replayer = Replayer(root) if own_replayer else replayer
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=jobs) as pool:
        if own_replayer:
            stack.callback(replayer.close)
        futures = {pool.submit(grade, path, lessons=lessons, cell_timeout=cell_timeout,
                               notebook_timeout=notebook_timeout, memory_gib=memory_gib,
                               root=root, startup_timeout=startup_timeout,
                               sandbox=mode == SANDBOXED, replayer=replayer):
                   (learner, path, key) for learner, path, key in todo}
        for future in as_completed(futures):
            learner, path, key = futures[future]
            done += 1
            try:
                graded = future.result()
            except Exception as e:  # a bug of ours must not stop the class
                graded = Graded(path, None, problem=f"the grader failed: {type(e).__name__}: {e}")
            rows = _rows(learner, graded)
            final[key] = rows
            # the whole gradebook, rewritten and renamed into place: a grader killed now leaves
            # this complete one (earlier runs' rows for what is still to grade included)
            _write_csv(book, GRADEBOOK, [r for k in sorted(old.keys() - final.keys()) for r in old[k]]
                       + [r for k in sorted(final) for r in final[k]])
            if graded.retried or any(r["status"] == "not run" for r in rows):
                _append_log(out / "grading.log", learner, path, graded, rows)
            problems += graded.problem is not None
            if html and graded.lesson is not None:
                target = out / "feedback" / learner / f"{graded.lesson}.html"
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    target.write_text(feedback_html(graded, learner), encoding="utf-8")
                except Exception as e:  # nbconvert on an odd notebook: the grades still stand
                    log(f"{learner}/{path.name}: no feedback file ({type(e).__name__}: {e})")
            earned = sum(float(r["points"]) for r in rows)
            total = sum(float(r["max_points"]) for r in rows)
            log(f"[{done}/{len(todo)}] {learner}/{path.name}: "
                + (graded.problem if graded.problem and graded.lesson is None else
                   f"{_points(earned)}/{_points(total)} points") + f" ({graded.seconds:.0f} s)"
                + (f"; {graded.retried}" if graded.retried else ""))
    for learner, name, problem in loose:
        final[(learner, f"? {name}")] = [dict(learner=learner, lesson=Path(name).stem, exercise="",
                                              points=0, max_points=0, status="not run",
                                              feedback=problem, sha256="")]
        problems += 1
    expected = set(only or []) or {k[1] for k in final if not k[1].startswith(("?", "!"))}
    maxima = {}
    for stem in sorted(expected):
        if f"{stem}.ipynb" in index:
            lesson_nb = nbformat.read(index[f"{stem}.ipynb"], as_version=4)
            maxima[stem] = [(e.name, e.points) for e in lesson_exercises(lesson_nb, root)]
    for learner in sorted(set(learners) | set(names)):
        have = {k[1] for k in final if k[0] == learner}
        why = (f"{learner} has no folder in {folder}" if learner not in learners
               else f"the folder {learner}/ holds no notebook of this lesson")
        if learner in learners and not any(u[0] == learner for u in units):
            why = f"the folder {learner}/ is empty: no notebooks were handed in"
        if not maxima and not have:
            final[(learner, "")] = [dict(learner=learner, lesson="", exercise="", points=0, max_points=0,
                                         status="missing", feedback=why, sha256="")]
            problems += 1
        for stem, found in maxima.items():
            if stem not in have:
                final[(learner, stem)] = [dict(learner=learner, lesson=stem, exercise=name, points=0,
                                               max_points=_points(points), status="missing",
                                               feedback=why.replace("this lesson", f"{stem}.ipynb"),
                                               sha256="") for name, points in found]
                problems += 1
    rows = [row for key in sorted(final) for row in final[key]]
    _write_csv(book, GRADEBOOK, rows)
    _write_summary(out / "summary.csv", rows, sorted(maxima))
    touched = changed(watched, tree_hash(root))
    if touched:
        log(f"WARNING: the instructor's files changed while grading: {', '.join(touched)}")
        problems += 1
    else:
        log(f"checked: course_lib, notebooks/ and data/ are unchanged ({len(watched)} files)")
    return rows, problems


def _append_log(path, learner, notebook, graded, rows):
    """Add why a notebook did not fully run to the class's grading.log; earlier runs' entries stay."""
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    head = f"### {stamp} {learner}/{Path(notebook).name}"
    body = [f"{r['exercise'] or '(notebook)'}: {r['status']}: {r['feedback']}" for r in rows]
    if graded.retried:
        body.insert(0, graded.retried)
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n".join([head, *body, graded.log, ""]) + "\n")


def _read_gradebook(path):
    """{(learner, lesson): rows} from an earlier run, the latest rows of each winning; None if none."""
    if not path.exists():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != GRADEBOOK:
            return None
        runs = {}
        for row in reader:
            row = {k: _plain(v or "") for k, v in row.items()}
            key = (row["learner"], row["lesson"])
            rows = runs.setdefault(key, [])
            if rows and (rows[-1]["sha256"] != row["sha256"]
                         or any(r["exercise"] == row["exercise"] for r in rows)):
                rows.clear()
            rows.append(row)
    return runs


def _write_csv(path, fields, rows):
    """Write a CSV whole to a temporary file beside `path`, then rename it into place (atomic)."""
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({k: inert(v) for k, v in row.items()} for row in rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# A spreadsheet reads a cell that starts with one of these as a formula (=HYPERLINK(...), +1+1,
# -2+3, @SUM(...)) or a control; such text gets a leading ' that makes it plain text there.
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def inert(value):
    """Text a spreadsheet shows as text: a leading ' before a formula sign (and before a leading ')."""
    if isinstance(value, str) and value[:1] in (*FORMULA, "'"):
        return "'" + value
    return value


def _plain(value):
    """inert, undone: the text as the grader wrote it."""
    return value[1:] if value[:1] == "'" and value[1:2] in (*FORMULA, "'") else value


def _write_summary(path, rows, lessons):
    learners = sorted({r["learner"] for r in rows})
    table = []
    for learner in learners:
        mine = [r for r in rows if r["learner"] == learner]
        line = {"learner": learner}
        for stem in lessons:
            line[stem] = _points(sum(float(r["points"]) for r in mine if r["lesson"] == stem))
        line["total"] = _points(sum(float(r["points"]) for r in mine))
        line["max_total"] = _points(sum(float(r["max_points"]) for r in mine))
        table.append(line)
    _write_csv(path, ["learner", *lessons, "total", "max_total"], table)

