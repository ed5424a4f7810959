"""Grade a class and write its gradebook: gradebook.csv, summary.csv, grading.log, feedback pages.

The gradebook is the grader's alone: the learners' notebooks run in sandboxes that do not
see it, and each file is written whole to a temporary name and then renamed into place.
A run is given two objects: the term's options (term.Given: the roster and the rules, each
kept in the out folder until changed) and how this run grades (Run: whom, how many at once,
the limits). It grades the whole class, some learners of it (`chosen`, merged into the
gradebook there) or one shard of it (`shard`); the term, settled once (term.settle,
term.with_class), is the one object every stage after it reads, and its rules apply to every
row the run writes.
"""
import contextlib
import datetime
import functools
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, fields
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT
from course_lib.grading.book import (FORMULA, GRADEBOOK, STATUSES, TERM, group, inert, ordered, plain,
                                     read_rows, write_csv, write_outputs, write_summary)
from course_lib.grading.feedback import write_page
from course_lib.grading.graded_copy import changed, tree_hash
from course_lib.grading.lateness import submitted_at
from course_lib.grading.lessons import LESSONS, _lesson_index, _stamp, lesson_exercises
from course_lib.grading.partial import cases_text, counted, partial_exercises, stored_counts
from course_lib.grading.help_taken import charge_solutions, help_columns, help_current
from course_lib.grading.questions import lesson_questions
from course_lib.grading.run import Graded, grade, use_sandbox
from course_lib.grading.export import write_export
from course_lib.grading.report import write_report
from course_lib.grading.session import ForkedSandbox
from course_lib.grading.session import available as session_unavailable
from course_lib.grading.sandbox import (CELL_TIMEOUT, MEMORY_GIB, NOTEBOOK_TIMEOUT, SANDBOXED, STARTUP_TIMEOUT,
                                        UNSANDBOXED, exposed, printable)
from course_lib.grading.shards import shard_of, write_shard
from course_lib.grading.similarity import write_similarity
from course_lib.grading.submissions import _learner_units, submission_hash
from course_lib.grading.term import Given, finish, keep, settle, submitted_text, unmatched, with_class
from course_lib.grading.verdicts import _points

# the gradebook's files (course_lib.grading.book), by the names the grader's tests know them by
_write_csv, _plain, _group, _write_summary = write_csv, plain, group, write_summary
GRADER_FAILED = "the grader failed"   # the start of a row's feedback when our own code raised


@dataclass(frozen=True)
class Run:
    """How one run grades, and whom: nothing here changes a row's points (that is the Term's)."""
    jobs: object = None                     # notebooks graded at once (None: the cores)
    chosen: object = None                   # --learner: only these, every other row kept
    force: bool = False                     # grade again what has not changed
    shard: object = None                    # (k, n): only the k-th of n parts
    html: bool = True                       # write the feedback pages
    sandbox: bool = True                    # False: --no-sandbox
    forked: object = "auto"                 # a job's sandbox forked per notebook, where allowed
    cell_timeout: float = CELL_TIMEOUT
    notebook_timeout: float = NOTEBOOK_TIMEOUT
    memory_gib: float = MEMORY_GIB
    startup_timeout: float = STARTUP_TIMEOUT
    same_seed: bool = False                 # a regraded notebook draws its checks' inputs from its kept seed


def options(given=None, run=None, **named):
    """(Given, Run) from keywords naming their fields (`grade_class(folder, out, roster=..., jobs=2)`).

    TypeError names a keyword that is neither's.
    """
    known = {f.name: cls for cls in (Given, Run) for f in fields(cls)}
    unknown = sorted(set(named) - set(known))
    if unknown:
        raise TypeError(f"grade_class: no option {', '.join(unknown)}; the term's: "
                        f"{', '.join(f.name for f in fields(Given))}; the run's: {', '.join(f.name for f in fields(Run))}")
    given = Given(**{k: v for k, v in named.items() if known[k] is Given}) if given is None else given
    run = Run(**{k: v for k, v in named.items() if known[k] is Run}) if run is None else run
    return given, run


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
                 seed="" if getattr(graded, "seed", None) is None else str(graded.seed),
                 stopped=getattr(graded, "stopped", "") or "", **help_columns(graded, r.exercise))
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


def cores():
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1



def grade_class(folder, out, given=None, run=None, *, lessons=LESSONS, log=print, root=ROOT, **named):
    """Grade every learner's notebooks into out/gradebook.csv, out/summary.csv and out/feedback/.

    given: the term's options as this run gave them (term.Given: the roster, partial credit, due
    times, penalty, zone, overrides, solution costs, exports, lessons expected), each None for
    the one kept in `out`; run: how and whom this run grades (Run: jobs, chosen learners, force,
    shard, limits, sandbox). Keywords naming their fields build them (`options`). The term is
    settled once (term.settle, term.with_class) and that one object is handed to each stage.
    Besides the gradebook: out/report.html, out/similarity.csv, and for each LMS the term
    exports to ("canvas", "moodle") out/<lms>.csv with the learners' ids from the roster.

    Returns (rows, failures): failures counts what the grader could not grade through its own
    failure (an error of ours while grading a notebook, the instructor's files changed); a
    missing learner, a failed exercise or an unreadable notebook is a row, not a failure.
    Raises FileNotFoundError with a plain message when the class folder is missing or holds
    nothing to grade, ValueError for a bad rule, roster, override or learner name.
    Every notebook's exercises are checked in this process, by the grader's own checkers, calling
    the learner's functions in the notebook's server (course_lib.grading.remote). run.forked: "auto" grades each job's notebooks in one sandbox of the job's
    whose libraries are imported once (`session.ForkedSandbox`) where this machine allows it,
    False gives each notebook a sandbox of its own.
    """
    given, run = options(given, run, **named)
    log = _escaping(log)
    folder, out = Path(folder), Path(out)
    if not folder.is_dir():
        raise FileNotFoundError(f"there is no class folder at {folder}: make one with a folder per "
                                f"learner holding their notebooks, e.g. {folder}/ada/00_start_here.ipynb")
    index = _lesson_index(lessons)
    stems = [Path(name).stem for name in index]
    term = settle(out, given, stems)   # a bad roster or rule stops here, before anything is graded
    learners, units, loose, warnings = _learner_units(folder)
    names = term.names
    if not learners and not loose and not names:
        raise FileNotFoundError(f"the class folder {folder} is empty: it needs a folder per learner "
                                f"holding their notebooks, e.g. {folder}/ada/00_start_here.ipynb")
    chosen = run.chosen
    unknown = sorted(set(chosen or []) - set(learners) - set(names))
    if unknown:
        known = sorted(set(learners) | set(names))
        raise ValueError(f"--learner: {', '.join(unknown)} has no folder in {folder} and is not on the "
                         f"roster; learners: {', '.join(known[:20])}" + (", ..." if len(known) > 20 else ""))
    jobs = run.jobs or cores()
    mode = SANDBOXED if use_sandbox(run.sandbox) else UNSANDBOXED  # SandboxUnavailable: nothing graded
    for what, path in (("class folder", folder), ("--out folder", out)):
        seen = exposed(path) if mode == SANDBOXED else None
        if seen is not None:
            raise FileNotFoundError(f"the {what} {path} is inside {seen}, which every sandbox sees "
                                    f"(read-only): move it elsewhere, e.g. under your home folder")
    book = out / "gradebook.csv"
    flat = read_rows(book) or []
    # the lessons expected of everyone, from the whole class: one learner's or one shard's run
    # gives the rows the whole class's run would
    expected = set(term.only or []) or {path.stem for _, path in units if path.name in index}
    handed_in = expected | {path.stem for _, path in units if path.name in index} | {
        r["lesson"] for r in flat if f"{r['lesson']}.ipynb" in index}
    facts = {stem: lesson_facts(index[f"{stem}.ipynb"], root) for stem in sorted(handed_in)
             if f"{stem}.ipynb" in index}

    def maxima():  # every lesson's, for the overrides' checks
        return {stem: lesson_facts(index[f"{stem}.ipynb"], root)[2] for stem in stems}

    term = with_class(term, out, given, set(learners) | {r["learner"] for r in flat}, maxima,
                      {s: f[1] for s, f in facts.items()})

    def mine(name):  # whether this run grades the learner `name`
        return (chosen is None or name in chosen) and (run.shard is None or shard_of(name, run.shard[1]) == run.shard[0])

    units = [(learner, path) for learner, path in units if mine(learner)]
    loose = [(learner, name, problem) for learner, name, problem in loose if mine(learner or name)]
    learners, names = [n for n in learners if mine(n)], [n for n in names if mine(n)]
    out.mkdir(parents=True, exist_ok=True)
    keep(out, term)
    write_shard(out, run.shard, sorted(s for s in expected if s in facts))
    others = [r for r in flat if chosen is not None and r["learner"] not in chosen]  # kept as they are
    old = group(r for r in flat if chosen is None or r["learner"] in chosen)
    watched = tree_hash(root)
    write_csv(book, GRADEBOOK, [finish(r, term) for r in flat])  # there from the start
    for warning in warnings:
        log(f"WARNING: {warning}")
    final, failures, seen = {}, 0, set()

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
            continue
        seen.add(key)
        previous = old.get((learner, path.stem)) if lesson_path is not None else None
        sha = None
        if lesson_path is not None:
            try:
                sha = submission_hash(path, lesson_path, root)
            except (OSError, ValueError):  # refused or unreadable: grade() says why
                sha = None
            if sha and previous and not run.force and all(r["sha256"] == sha and r["sandbox"] == mode
                                                          and r["status"] != "not run" for r in previous) \
                    and help_current(previous, term.solution_costs):
                final[key] = [dict(r, submitted=submitted) for r in previous]
                log(f"{learner}/{path.name}: unchanged since it was graded, kept")
                continue
        # --same-seed: a notebook graded again unchanged draws its checks' inputs from its kept
        # seed, so its page is the one it had; a changed notebook always gets a fresh seed
        seed = (next((r["seed"] for r in previous if r.get("seed")), None)
                if run.same_seed and previous and sha and all(r["sha256"] == sha for r in previous) else None)
        todo.append((learner, path, key, submitted, seed))
    done = 0
    forking = mode == SANDBOXED and run.forked and session_unavailable() is None
    idle, made = [], []  # the jobs' sandboxes, each used by one notebook at a time

    def graded(path, seed):
        session = None
        if forking:
            if idle:
                session = idle.pop()
            else:
                session = ForkedSandbox(root, call_timeout=run.cell_timeout)
                made.append(session)
        try:
            return grade(path, lessons=lessons, cell_timeout=run.cell_timeout,
                         notebook_timeout=run.notebook_timeout, memory_gib=run.memory_gib, root=root,
                         startup_timeout=run.startup_timeout, sandbox=mode == SANDBOXED,
                         session=session, **({"seed": int(seed)} if seed else {}))
        finally:
            if session is not None:
                idle.append(session)

    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=jobs) as pool:
        stack.callback(lambda: [session.close() for session in made])
        futures = {pool.submit(graded, path, seed):
                   (learner, path, key, submitted) for learner, path, key, submitted, seed in todo}
        for future in as_completed(futures):
            learner, path, key, submitted = futures[future]
            done += 1
            try:
                graded_ = future.result()
            except Exception as e:  # a bug of ours must not stop the class
                graded_ = Graded(path, None, problem=f"{GRADER_FAILED}: {type(e).__name__}: {e}")
                failures += 1
            totals = facts[graded_.lesson][0] if graded_.lesson in facts else {}
            rows = [finish(r, term) for r in _rows(learner, charge_solutions(graded_, term.solution_costs),
                                                   totals, submitted)]
            final[key] = rows
            # the whole gradebook, rewritten and renamed into place: a grader killed now leaves
            # this complete one (earlier runs' rows for what is still to grade included)
            write_csv(book, GRADEBOOK, book_rows())
            if graded_.retried or any(r["status"] == "not run" for r in rows):
                _append_log(out / "grading.log", learner, path, graded_, rows)
            if run.html and graded_.lesson is not None:
                target = out / "feedback" / learner / f"{graded_.lesson}.html"
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    write_page(graded_, target, learner)   # whole, never half-written
                except Exception as e:  # nbconvert on an odd notebook: the grades still stand
                    log(f"{learner}/{path.name}: no feedback file ({type(e).__name__}: {e})")
            earned = sum(float(r["points"]) for r in rows)
            total = sum(float(r["max_points"]) for r in rows)
            log(f"[{done}/{len(todo)}] {learner}/{path.name}: "
                + (graded_.problem if graded_.problem and graded_.lesson is None else
                   f"{_points(earned)}/{_points(total)} points") + f" ({graded_.seconds:.0f} s)"
                + (f"; {graded_.retried}" if graded_.retried else ""))
    for learner, name, problem in loose:
        final[(learner, f"? {name}")] = [dict(learner=learner, lesson=Path(name).stem, exercise="",
                                              points=0, max_points=0, status="not run",
                                              feedback=problem, sha256="")]
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
        for stem, found in maxima_of.items():
            if stem not in have:
                final[(learner, stem)] = [dict(learner=learner, lesson=stem, exercise=name, points=0,
                                               max_points=_points(points), status="missing",
                                               feedback=why.replace("this lesson", f"{stem}.ipynb"),
                                               sha256="") for name, points in found]
    old = {}  # what was still to grade is graded now: earlier rows of this run's learners go
    rows = write_outputs(out, book_rows(), sorted(maxima_of))
    for o in unmatched(rows, term):
        if mine(o.learner):
            log(f"WARNING: override line {o.line} ({o.learner}, {o.lesson}, {o.exercise}) matched no row")
    write_similarity(rows, out, folder, lessons=lessons, root=root)  # issue 20: what leaves the grader
    write_report(rows, out)
    for lms in term.export:
        write_export(rows, out, lms, term.roster, lessons=lessons, log=log)
    touched = changed(watched, tree_hash(root))
    if touched:
        log(f"WARNING: the instructor's files changed while grading: {', '.join(touched)}")
        failures += 1
    else:
        log(f"checked: course_lib, notebooks/ and data/ are unchanged ({len(watched)} files)")
    return rows, failures


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


def _escaping(log):
    """`log`, given each line with its control characters escaped (a learner's names are in it)."""
    def escaped(line):
        log(printable(line))
    return escaped


def _append_log(path, learner, notebook, graded, rows):
    """Add why a notebook did not fully run to the class's grading.log; earlier runs' entries stay.

    Names, feedback and the run's output are the learner's to write: their control characters
    are escaped (a line of their own is one line of the log)."""
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    head = f"### {stamp} {printable(learner)}/{printable(Path(notebook).name)}"
    body = [printable(f"{r['exercise'] or '(notebook)'}: {r['status']}: {r['feedback']}") for r in rows]
    if graded.retried:
        body.insert(0, printable(graded.retried))
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n".join([head, *body, printable(graded.log, lines=True), ""]) + "\n")


def _read_gradebook(path):
    """{(learner, lesson): rows} from an earlier run, the latest rows of each winning; None if none."""
    rows = read_rows(path)
    return None if rows is None else _group(rows)
