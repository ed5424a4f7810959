"""Grade a class and write its gradebook: gradebook.csv, summary.csv, grading.log, feedback pages.

The gradebook is the grader's alone: the learners' notebooks run in sandboxes that do not
see it, and each file is written whole to a temporary name and then renamed into place.
A run grades the whole class, some learners of it (`chosen`, merged into the gradebook
there) or one shard of it (`shard`); the term's rules (partial credit, due times,
penalties, overrides: course_lib.grading.term) apply to every row it writes.
"""
import contextlib
import csv
import datetime
import functools
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT
from course_lib.grading.feedback import feedback_html, note_feedback
from course_lib.grading.graded_copy import changed, tree_hash
from course_lib.grading.lateness import submitted_at
from course_lib.grading.lessons import LESSONS, _lesson_index, _stamp, lesson_exercises
from course_lib.grading.partial import cases_text, counted, partial_exercises, stored_counts
from course_lib.grading.help_taken import charge_solutions, help_columns, help_current
from course_lib.grading.questions import lesson_questions, question_totals
from course_lib.grading.replay import Replayer
from course_lib.grading.run import Graded, grade, use_sandbox
from course_lib.grading.export import write_export
from course_lib.grading.report import write_report
from course_lib.grading.session import ForkedSandbox
from course_lib.grading.session import available as session_unavailable
from course_lib.grading.sandbox import (CELL_TIMEOUT, MEMORY_GIB, NOTEBOOK_TIMEOUT, SANDBOXED, STARTUP_TIMEOUT,
                                        UNSANDBOXED, exposed)
from course_lib.grading.shards import shard_of, write_shard
from course_lib.grading.similarity import write_similarity
from course_lib.grading.submissions import _learner_units, read_roster, submission_hash
from course_lib.grading.term import finish, keep, resolve, submitted_text, unmatched
from course_lib.grading.verdicts import _points

STATUSES = ("passed", "failed", "not run", "missing", "not answered")
# `sandbox`: how the row's notebook ran: "bubblewrap", "none" (--no-sandbox, or a machine without
# one), or empty when it never ran (missing, unreadable, misnamed).
# `cpu_seconds`: the CPU that grading the row's notebook took, its pytest and kernel together
# (the same on each of its rows; empty when nothing ran or it was not measured).
# The term's columns (course_lib.grading.term): `cases` passed/total of the check ("12/26");
# `points_before_penalty` what the checks gave (all or nothing, or the passed share);
# `submitted` when it was handed in (ISO 8601 with offset); `lateness` how long after the due
# time ("1 day, 2:05:00", "0:00:00" on time, empty with no due time); `penalty` the share taken
# off ("20%"); `auto_points` the points after it; `override` "yes" where points were set by
# hand, with the `comment` that says why. `points` is always what counts.
TERM = ["cases", "points_before_penalty", "submitted", "lateness", "penalty", "auto_points",
        "override", "comment"]
# `hints`, `solution`: the help an exercise's notebook asked for (course_lib.grading.help_taken);
# empty on a question's row (its `exercise` is the question id, "00-bytes") and where none was read.
GRADEBOOK = ["learner", "lesson", "exercise", "points", "max_points", "status", "feedback", "sha256",
             "sandbox", "cpu_seconds", *TERM, "hints", "solution"]


def _rows(learner, graded, totals=None, submitted=""):
    """The gradebook rows of one graded notebook (before the term's rules)."""
    if graded.lesson is None:
        return [dict(learner=learner, lesson=graded.path.stem, exercise="", points=0, max_points=0,
                     status="not run", feedback=graded.problem, sha256="", submitted=submitted)]
    results = [counted(r, (totals or {}).get(r.exercise)) for r in graded.results]
    return [dict(learner=learner, lesson=graded.lesson, exercise=r.exercise, points=_points(r.points),
                 max_points=_points(r.max_points), status=r.status, feedback=r.feedback,
                 sha256=graded.sha256, sandbox=graded.sandbox,
                 cpu_seconds="" if graded.cpu_seconds is None else f"{graded.cpu_seconds:g}",
                 cases=cases_text(r.cases_passed, r.cases_total), submitted=submitted,
                 **help_columns(graded, r.exercise))
            for r in results]


@functools.lru_cache(maxsize=64)
def _lesson_facts(stamp, root):
    """(stored case counts, partial exercises, {exercise or question id: points}) of a lesson file,
    read once while unchanged."""
    lesson = nbformat.read(stamp[0], as_version=4)
    return (stored_counts(lesson), frozenset(partial_exercises(lesson)),
            {**{e.name: e.points for e in lesson_exercises(lesson, root)},
             **dict(lesson_questions(lesson))})


def lesson_facts(path, root=ROOT):
    return _lesson_facts(_stamp(path), str(root))


def ordered(rows):
    """The rows in the gradebook's order: by learner, then lesson; a notebook's rows in exercise order."""
    return sorted(rows, key=lambda r: (r["learner"], r["lesson"]))


def write_outputs(out, rows, lessons):
    """Write what a class's grading ends with: gradebook.csv, summary.csv, the feedback pages' notes.

    grade_class and `merge` both end here. Returns the rows in the gradebook's order, each
    with every column, as text.
    """
    out = Path(out)
    rows = [{k: "" if row.get(k) is None else str(row.get(k, "")) for k in GRADEBOOK} for row in ordered(rows)]
    _write_csv(out / "gradebook.csv", GRADEBOOK, rows)
    _write_summary(out / "summary.csv", rows, lessons)
    note_feedback(out / "feedback", rows)
    return rows


def cores():
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1



def grade_class(folder, out, *, jobs=None, roster=None, lessons=LESSONS, only=None,
                cell_timeout=CELL_TIMEOUT, notebook_timeout=NOTEBOOK_TIMEOUT,
                memory_gib=MEMORY_GIB, html=True, log=print, root=ROOT,
                startup_timeout=STARTUP_TIMEOUT, sandbox=True, chosen=None, force=False, shard=None,
                partial=None, due=None, late_penalty=None, timezone=None, overrides=None,
                solution_costs=None, export=(), replayer=None, forked="auto"):
    """Grade every learner's notebooks into out/gradebook.csv, out/summary.csv and out/feedback/.

    chosen: grade only these learners, and keep every other row of the gradebook in `out`;
    force: grade again what has not changed since it was graded; shard: (k, n), grade only
    the learners in the k-th of n parts (shards.shard_of). partial, due, late_penalty,
    timezone, overrides: the term's rules (term.resolve), each None for the one kept in `out`.
    solution_costs: points taken off each exercise whose solution the notebook asked for
    (help_taken.charge_solutions; term.finish does the arithmetic); None takes none.
    Besides the gradebook: out/report.html, out/similarity.csv, and for each LMS in `export`
    ("canvas", "moodle") out/<lms>.csv with the learners' ids from the roster.

    Returns (rows, problems): problems counts notebooks that could not be graded and
    learners with no submission. Raises FileNotFoundError with a plain message when the
    class folder is missing or holds nothing to grade, ValueError for a bad rule, override
    or learner name.
    Every notebook's checks are replayed by one worker of the grader's (`replayer`, started
    here when None). forked: "auto" grades each job's notebooks in one sandbox of the job's
    whose libraries are imported once (`session.ForkedSandbox`) where this machine allows it,
    False gives each notebook a sandbox of its own.
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
    unknown = sorted(set(chosen or []) - set(learners) - set(names))
    if unknown:
        known = sorted(set(learners) | set(names))
        raise ValueError(f"--learner: {', '.join(unknown)} has no folder in {folder} and is not on the "
                         f"roster; learners: {', '.join(known[:20])}" + (", ..." if len(known) > 20 else ""))
    jobs = jobs or cores()
    mode = SANDBOXED if use_sandbox(sandbox) else UNSANDBOXED  # SandboxUnavailable: nothing graded
    for what, path in (("class folder", folder), ("--out folder", out)):
        seen = exposed(path) if mode == SANDBOXED else None
        if seen is not None:
            raise FileNotFoundError(f"the {what} {path} is inside {seen}, which every sandbox sees "
                                    f"(read-only): move it elsewhere, e.g. under your home folder")
    index = _lesson_index(lessons)
    stems = [Path(name).stem for name in index]
    book = out / "gradebook.csv"
    flat = read_rows(book) or []
    # the lessons expected of everyone, from the whole class: one learner's or one shard's run
    # gives the rows the whole class's run would
    expected = set(only or []) or {path.stem for _, path in units if path.name in index}
    handed_in = expected | {path.stem for _, path in units if path.name in index} | {
        r["lesson"] for r in flat if f"{r['lesson']}.ipynb" in index}
    facts = {stem: lesson_facts(index[f"{stem}.ipynb"], root) for stem in sorted(handed_in)
             if f"{stem}.ipynb" in index}

    def maxima():  # every lesson's, for the overrides' checks
        return {stem: lesson_facts(index[f"{stem}.ipynb"], root)[2] for stem in stems}

    everyone = set(learners) | set(names) | {r["learner"] for r in flat}
    term, settings = resolve(out, stems, everyone, maxima, {s: f[1] for s, f in facts.items()},
                             partial=partial, due=due, late_penalty=late_penalty, timezone=timezone,
                             overrides=overrides)

    def mine(name):  # whether this run grades the learner `name`
        return (chosen is None or name in chosen) and (shard is None or shard_of(name, shard[1]) == shard[0])

    units = [(learner, path) for learner, path in units if mine(learner)]
    loose = [(learner, name, problem) for learner, name, problem in loose if mine(learner or name)]
    learners, names = [n for n in learners if mine(n)], [n for n in names if mine(n)]
    out.mkdir(parents=True, exist_ok=True)
    keep(out, settings, term)
    write_shard(out, shard, sorted(s for s in expected if s in facts))
    others = [r for r in flat if chosen is not None and r["learner"] not in chosen]  # kept as they are
    old = _group(r for r in flat if chosen is None or r["learner"] in chosen)
    watched = tree_hash(root)
    _write_csv(book, GRADEBOOK, [finish(r, term) for r in flat])  # there from the start
    for warning in warnings:
        log(f"WARNING: {warning}")
    final, problems, seen = {}, 0, set()

    def book_rows():  # the whole gradebook as it stands: earlier runs' rows for what is still to grade
        rows = others + [r for k in sorted(old.keys() - final.keys()) for r in old[k]]
        return ordered([finish(r, term) for r in rows + [r for k in sorted(final) for r in final[k]]])

    todo = []
    for learner, path in units:
        lesson_path = index.get(path.name)
        key = (learner, path.stem if lesson_path else f"? {path.name}")
        submitted = _submitted(path, folder / learner, term, log)
        if key in seen:
            final[(learner, f"! {path}")] = [dict(
                learner=learner, lesson=path.stem, exercise="", points=0, max_points=0,
                status="not run", sha256="", submitted=submitted, feedback=f"another notebook of "
                f"lesson {path.stem} for {learner} was graded; only one per lesson counts "
                f"({path.relative_to(folder)})")]
            problems += 1
            continue
        seen.add(key)
        if lesson_path is not None:
            try:
                sha = submission_hash(path, lesson_path, root)
            except (OSError, ValueError):  # refused or unreadable: grade() says why
                sha = None
            previous = old.get((learner, path.stem))
            if sha and previous and not force and all(r["sha256"] == sha and r["sandbox"] == mode
                                                      and r["status"] != "not run" for r in previous) \
                    and help_current(previous, solution_costs):
                final[key] = [dict(r, submitted=submitted) for r in previous]
                log(f"{learner}/{path.name}: unchanged since it was graded, kept")
                continue
        todo.append((learner, path, key, submitted))
    done = 0
    own_replayer = replayer is None
    replayer = Replayer(root) if own_replayer else replayer
    forking = mode == SANDBOXED and forked and session_unavailable() is None
    idle, made = [], []  # the jobs' sandboxes, each used by one notebook at a time

    def graded(path):
        session = None
        if forking:
            if idle:
                session = idle.pop()
            else:
                session = ForkedSandbox(root)
                made.append(session)
        try:
            return grade(path, lessons=lessons, cell_timeout=cell_timeout,
                         notebook_timeout=notebook_timeout, memory_gib=memory_gib, root=root,
                         startup_timeout=startup_timeout, sandbox=mode == SANDBOXED,
                         replayer=replayer, session=session)
        finally:
            if session is not None:
                idle.append(session)

    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=jobs) as pool:
        if own_replayer:
            stack.callback(replayer.close)
        stack.callback(lambda: [session.close() for session in made])
        futures = {pool.submit(graded, path):
                   (learner, path, key, submitted) for learner, path, key, submitted in todo}
        for future in as_completed(futures):
            learner, path, key, submitted = futures[future]
            done += 1
            try:
                graded = future.result()
            except Exception as e:  # a bug of ours must not stop the class
                graded = Graded(path, None, problem=f"the grader failed: {type(e).__name__}: {e}")
            totals = facts[graded.lesson][0] if graded.lesson in facts else {}
            rows = [finish(r, term) for r in _rows(learner, charge_solutions(graded, solution_costs), totals, submitted)]
            final[key] = rows
            # the whole gradebook, rewritten and renamed into place: a grader killed now leaves
            # this complete one (earlier runs' rows for what is still to grade included)
            _write_csv(book, GRADEBOOK, book_rows())
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
    maxima_of = {stem: list(facts[stem][2].items()) for stem in sorted(expected) if stem in facts}
    for learner in sorted(set(learners) | set(names)):
        have = {k[1] for k in final if k[0] == learner}
        why = (f"{learner} has no folder in {folder}" if learner not in learners
               else f"the folder {learner}/ holds no notebook of this lesson")
        if learner in learners and not any(u[0] == learner for u in units):
            why = f"the folder {learner}/ is empty: no notebooks were handed in"
        if not maxima_of and not have:
            final[(learner, "")] = [dict(learner=learner, lesson="", exercise="", points=0, max_points=0,
                                         status="missing", feedback=why, sha256="")]
            problems += 1
        for stem, found in maxima_of.items():
            if stem not in have:
                final[(learner, stem)] = [dict(learner=learner, lesson=stem, exercise=name, points=0,
                                               max_points=_points(points), status="missing",
                                               feedback=why.replace("this lesson", f"{stem}.ipynb"),
                                               sha256="") for name, points in found]
                problems += 1
    old = {}  # what was still to grade is graded now: earlier rows of this run's learners go
    rows = write_outputs(out, book_rows(), sorted(maxima_of))
    for o in unmatched(rows, term):
        if mine(o.learner):
            log(f"WARNING: override line {o.line} ({o.learner}, {o.lesson}, {o.exercise}) matched no row")
    write_similarity(rows, out, folder, lessons=lessons, root=root)  # issue 20: what leaves the grader
    write_report(rows, out)
    for lms in export:
        write_export(rows, out, lms, roster, lessons=lessons, log=log)
    touched = changed(watched, tree_hash(root))
    if touched:
        log(f"WARNING: the instructor's files changed while grading: {', '.join(touched)}")
        problems += 1
    else:
        log(f"checked: course_lib, notebooks/ and data/ are unchanged ({len(watched)} files)")
    return rows, problems


def _submitted(path, learner_folder, term, log):
    """When the notebook was handed in, as the gradebook writes it (a bad timestamp.txt: the file's time)."""
    try:
        when, _ = submitted_at(path, learner_folder, term.tz())
    except ValueError as e:
        log(f"WARNING: {e}; the notebook's file time is used instead")
        when = datetime.datetime.fromtimestamp(os.lstat(path).st_mtime, term.tz())
    except OSError:
        return ""
    return submitted_text(when, term)


def _append_log(path, learner, notebook, graded, rows):
    """Add why a notebook did not fully run to the class's grading.log; earlier runs' entries stay."""
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    head = f"### {stamp} {learner}/{Path(notebook).name}"
    body = [f"{r['exercise'] or '(notebook)'}: {r['status']}: {r['feedback']}" for r in rows]
    if graded.retried:
        body.insert(0, graded.retried)
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n".join([head, *body, graded.log, ""]) + "\n")


def read_rows(path):
    """The rows of an earlier run's gradebook, in order, as the grader wrote them; None if there is none.

    A gradebook of an older version (fewer columns) is read too, its new columns empty.
    """
    path = Path(path)
    if not path.exists():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not set(GRADEBOOK[:7]) <= set(reader.fieldnames or []):
            return None
        return [{k: _plain(row.get(k) or "") for k in GRADEBOOK} for row in reader]


def _group(rows):
    """{(learner, lesson): rows}, the latest rows of each winning."""
    runs = {}
    for row in rows:
        key = (row["learner"], row["lesson"])
        group = runs.setdefault(key, [])
        if group and (group[-1]["sha256"] != row["sha256"]
                      or any(r["exercise"] == row["exercise"] for r in group)):
            group.clear()
        group.append(row)
    return runs


def _read_gradebook(path):
    """{(learner, lesson): rows} from an earlier run, the latest rows of each winning; None if none."""
    rows = read_rows(path)
    return None if rows is None else _group(rows)


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
    """One line per learner: each lesson's points and `total` (exercises and questions together),
    `max_total`, then `questions` and `max_questions`, the part of those that questions earned."""
    learners = sorted({r["learner"] for r in rows})
    table = []
    for learner in learners:
        mine = [r for r in rows if r["learner"] == learner]
        line = {"learner": learner}
        for stem in lessons:
            line[stem] = _points(sum(float(r["points"]) for r in mine if r["lesson"] == stem))
        line["total"] = _points(sum(float(r["points"]) for r in mine))
        line["max_total"] = _points(sum(float(r["max_points"]) for r in mine))
        line.update(question_totals(mine))
        table.append(line)
    _write_csv(path, ["learner", *lessons, "total", "max_total", "questions", "max_questions"], table)

