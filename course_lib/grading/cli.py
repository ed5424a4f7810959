"""The command: `python -m course_lib.grading NOTEBOOK` or `--class FOLDER --out OUT`, and its tools.

    python -m course_lib.grading collect download.zip --into submissions/      # the LMS's download
    python -m course_lib.grading exercises/01_attention_by_hand.ipynb         # one notebook
    python -m course_lib.grading --class submissions/ --out grades/            # a class
    python -m course_lib.grading --show-term --out grades/                     # the term kept there
    python -m course_lib.grading merge grades-1/ grades-2/ --out grades/       # shards joined
    python -m course_lib.grading return grades/ --into back/ [--lms moodle]    # the feedback, handed back
    python -m course_lib.grading gradescope --lesson 00 --out autograder.zip  # Gradescope's autograder

Class mode's options for a term (--roster, --export, --lessons, --solution-costs and those
below): each one given is kept in OUT (term.json, with copies of the roster and the
overrides), and a later run that does not give it uses the kept one; "none" drops it
(--no-partial for --partial). The exit status is 0 when every learner got their rows,
whatever they say; 1 when the grader itself failed on a notebook or the instructor's files
changed; 2 for a usage error.

--partial / --no-partial
    Every exercise earns points x cases passed / cases total (rounded to 3 decimals) where
    its check's counts are known; without it only exercises whose check cell's metadata says
    `"partial": true` do. The gradebook's `cases` column shows "12/26"; where partial credit
    applies and the counts are unknown it says so, and gives no partial points. A passed
    exercise always earns its full points.
--overrides FILE
    A CSV `learner,lesson,exercise,points,comment` (lesson: 01 or 01_attention_by_hand):
    `points` in the gradebook is the override's, `auto_points` what the checks (and the late
    penalty) gave, `override` says "yes" and `comment` why; the comment is shown on the
    learner's feedback page. A bad line stops the run with its line number.
--due 01=2026-12-08T17:00,02=2026-12-15T17:00   or   --due FILE
    Each lesson's due time (a file: one `lesson=time` a line). The gradebook shows
    `submitted` (from timestamp.txt in the notebook's folder or a folder above it up to the
    learner's, nbgrader's convention, e.g. `2026-12-08 17:04:31.123456 UTC`; else the
    notebook file's modification time), `lateness` and `penalty`.
--late-penalty 10%/day[,max=50%]   (or N%/hour)
    Each started day (hour) late takes N% of the points the checks gave, at most max
    (default 100%): 26 hours late under 10%/day is 2 days, 20% off. On the due time itself is
    on time. `points_before_penalty` keeps the points before it.
--timezone ZONE
    The zone (IANA name, default UTC) of a time written without one, in --due and in
    timestamp.txt; never the machine's own zone.
--learner NAME (repeatable)
    Grade only these learners and merge their rows into the gradebook and summary in OUT;
    every other learner's rows stay as they were.
--force
    Grade again even the notebooks that have not changed since they were graded. (A notebook
    with a "not run" row is always graded again.)
--shard K/N
    Grade only the K-th of N parts of the class (K from 1; a learner's part is a hash of the
    name, so it does not change as learners join) into OUT; then `merge` joins the parts'
    out folders into the gradebook, summary and feedback pages one run would give, and
    refuses parts that overlap, miss one, or were graded with other rules.

Besides each exercise's check, the grader reports two things it reads from the notebook's
source, as data, in its own process (never run, and never from the stored outputs):

- the lesson's questions, a row each (`exercise` is the question id, e.g. "00-bytes"):
  `passed`, `failed` (with the explanation of the choice made) or `not answered` (still the
  blank `...`, or no answer call), worth the `points` in the question cell's metadata in
  notebooks/ (1 if none). The last `answer("<id>", x)` in the notebook that is not the blank
  counts; x must be written out (a letter in quotes or a number).
- the help asked for, per exercise: `hints` (the highest hint its `hint("x")` /
  `hint("x", k)` calls reach) and `solution` (`yes` when it calls `solution("x")`). It
  changes no points unless `--solution-costs POINTS` is given: then each exercise whose
  solution was shown loses POINTS, never going below 0 (an exercise that failed anyway loses
  nothing more, and its feedback says so), and `solution` reads `yes, costs POINTS`.
"""
import argparse
import sys
from pathlib import Path

from course_lib.exercises import ROOT
from course_lib.grading.feedback import page_beside, write_page
from course_lib.grading.gradebook import Run, grade_class
from course_lib.grading.shards import merge, parse_shard
from course_lib.grading.graded_copy import changed, tree_hash
from course_lib.grading.help_taken import charge_solutions, help_line
from course_lib.grading.lessons import LESSONS
from course_lib.grading.questions import is_question
from course_lib.grading.sandbox import (CELL_TIMEOUT, MEMORY_GIB, NOTEBOOK_TIMEOUT, SANDBOXED, STARTUP_TIMEOUT,
                                        printable, unavailable)
from course_lib.grading.run import SandboxUnavailable, grade
from course_lib.grading.term import LMSES, NONE, Given, read_settings, show
from course_lib.grading.verdicts import _points

# ---------------------------------------------------------------- command line

def _lesson_names(text, lessons=LESSONS):
    """Lesson stems from '00,01_attention_by_hand,...': a number or a name each."""
    if not text:
        return None
    if text.strip().lower() == NONE:
        return NONE
    stems = [p.stem for p in sorted(Path(lessons).glob("*.ipynb"))]
    found = []
    for part in filter(None, (t.strip() for t in text.split(","))):
        match = [s for s in stems if s == part or s.split("_")[0] == part]
        if len(match) != 1:
            raise SystemExit(f"error: --lessons: no single lesson is {part!r}; lessons: {', '.join(stems)}")
        found.append(match[0])
    return found


def merge_main(argv):
    """`python -m course_lib.grading merge OUT... --out OUT`."""
    parser = argparse.ArgumentParser(prog="python -m course_lib.grading merge",
                                     description="Join the out folders of a class graded with --shard "
                                                 "K/N into one gradebook, summary and feedback.")
    parser.add_argument("parts", nargs="+", help="the shards' out folders")
    parser.add_argument("--out", required=True, help="where the joined gradebook goes")
    args = parser.parse_args(argv)
    try:
        merge(args.parts, args.out)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _cost(text):
    """--solution-costs: a number of points, 0 or more (or "none", which drops the kept one)."""
    if text.strip().lower() == NONE:
        return NONE
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of points of 0 or more; e.g. "
                                         f"--solution-costs 0.5 takes half a point off an "
                                         f"exercise whose solution was shown")
    return value


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    if argv[:1] == ["collect"]:
        from course_lib.grading.collect import main as collect_main
        return collect_main(argv[1:])
    if argv[:1] == ["return"]:
        from course_lib.grading.returns import main as return_main
        return return_main(argv[1:])
    if argv[:1] == ["gradescope"]:
        from course_lib.grading.gradescope import main as gradescope_main
        return gradescope_main(argv[1:])
    parser = argparse.ArgumentParser(description="Grade exercise notebooks with nbval against the "
                                                 "lessons' checks.")
    parser.add_argument("path", nargs="?", help="a notebook, or with --class a folder with a folder per learner")
    parser.add_argument("--class", dest="folder", action="store_true",
                        help="grade every learner's notebooks under the folder PATH")
    parser.add_argument("--out", default="grades", help="where the gradebook, summary and feedback go "
                                                        "(class mode; default: grades/)")
    parser.add_argument("--roster", help="a file with one learner per line, or a CSV with the columns "
                                         "learner,lms_id,email; those with no submission get "
                                         "'missing' rows")
    parser.add_argument("--export", action="append", default=None, choices=[*LMSES, NONE],
                        help="class mode: also write OUT/canvas.csv or OUT/moodle.csv, the CSV "
                             "that LMS's grade import takes (repeatable; ids from --roster; "
                             "kept in the term; 'none' drops it)")
    parser.add_argument("--show-term", action="store_true",
                        help="print the term kept in --out (its roster and rules) and stop")
    parser.add_argument("--same-seed", action="store_true",
                        help="class mode: a notebook graded again unchanged (--force) draws its "
                             "checks' inputs from the seed its gradebook rows keep, so its feedback "
                             "page is the one it had")
    parser.add_argument("--lessons", help="comma-separated lesson names expected of everyone, e.g. "
                                          "00_start_here,01_attention_by_hand (default: every "
                                          "lesson anyone handed in)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="notebooks graded at once (default: the number of cores)")
    parser.add_argument("--timeout", type=float, default=CELL_TIMEOUT, help="seconds allowed per cell")
    parser.add_argument("--notebook-timeout", type=float, default=NOTEBOOK_TIMEOUT,
                        help="seconds allowed per notebook")
    parser.add_argument("--startup-timeout", type=float, default=STARTUP_TIMEOUT,
                        help="seconds a kernel may take to start, before the first cell (a busy "
                             "machine's start-up is retried once)")
    parser.add_argument("--memory", type=float, default=MEMORY_GIB,
                        help="GiB of address space per kernel (0: no limit)")
    parser.add_argument("--keep", help="one notebook: leave the graded copy in this folder, to rerun "
                                       "it with `python -m pytest KEEP/notebooks/`")
    parser.add_argument("--no-html", action="store_true", help="class mode: skip the feedback files")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run the notebooks without the bubblewrap sandbox (class mode refuses "
                             "to grade unsandboxed without this; one notebook falls back by itself "
                             "where there is no sandbox, and says so)")
    parser.add_argument("--solution-costs", type=_cost, default=None, metavar="POINTS",
                        help="points taken off each exercise whose solution the notebook asked for "
                             "(never below 0; default: none, the help is only reported)")
    term = parser.add_argument_group("a term's grading (class mode; see the module's docstring)")
    term.add_argument("--partial", action=argparse.BooleanOptionalAction, default=None,
                      help="give every exercise the passed share of its points (default: only "
                           "those whose check cell's metadata says partial)")
    term.add_argument("--overrides", metavar="FILE", help="a CSV learner,lesson,exercise,points,comment "
                                                          "of points set by hand ('none': drop them)")
    term.add_argument("--due", help="due times: 01=2026-12-08T17:00,02=... or a file of lesson=time lines")
    term.add_argument("--late-penalty", metavar="RULE", help="e.g. 10%%/day or 10%%/day,max=50%% (each "
                                                             "started day counts)")
    term.add_argument("--timezone", metavar="ZONE", help="the zone of times written without one "
                                                          "(default UTC)")
    term.add_argument("--learner", action="append", metavar="NAME",
                      help="grade only this learner (repeatable), keeping every other row")
    term.add_argument("--force", action="store_true", help="grade again what has not changed")
    term.add_argument("--shard", metavar="K/N", help="grade only the K-th of N parts of the class")
    args = parser.parse_args(argv)
    if args.show_term:
        if not (Path(args.out) / "term.json").exists():
            print(f"error: {args.out} keeps no term (no term.json): grade a class into it first", file=sys.stderr)
            return 2
        print(show(args.out))
        return 0
    if args.path is None:
        parser.error("give a notebook, or --class and a class folder")
    limits = dict(cell_timeout=args.timeout, notebook_timeout=args.notebook_timeout,
                  memory_gib=args.memory, startup_timeout=args.startup_timeout)
    if args.folder:
        export = None if args.export is None else NONE if NONE in args.export else list(dict.fromkeys(args.export))
        try:
            given = Given(roster=args.roster, partial=args.partial, due=args.due,
                          late_penalty=args.late_penalty, timezone=args.timezone,
                          overrides=args.overrides, solution_costs=args.solution_costs,
                          export=export, only=_lesson_names(args.lessons))
            run = Run(jobs=args.jobs, chosen=args.learner, force=args.force,
                      shard=parse_shard(args.shard) if args.shard else None, html=not args.no_html,
                      sandbox=not args.no_sandbox, same_seed=args.same_seed, **limits)
            rows, failures = grade_class(args.path, args.out, given, run)
        except (FileNotFoundError, ValueError) as e:  # may name a learner's folder: escaped
            print(f"error: {printable(e)}", file=sys.stderr)
            return 2
        except SandboxUnavailable as e:
            print(f"error: {e}. Class mode runs each notebook in a bubblewrap sandbox, so that no "
                  f"learner's code can reach the others', the gradebook or this machine; install "
                  f"bubblewrap (apt-get install bubblewrap), or pass --no-sandbox to grade with "
                  f"the learners' code running as you", file=sys.stderr)
            return 2
        asked = [r for r in rows if is_question(r["exercise"])]
        passed = sum(r["status"] == "passed" for r in rows)
        right = sum(r["status"] == "passed" for r in asked)
        out = Path(args.out)
        exports = [lms for lms in LMSES if (out / f"{lms}.csv").exists() and lms in
                   (read_settings(out).get("export") or ())]
        print(f"{passed - right} of {len(rows) - len(asked)} exercise rows and {right} of "
              f"{len(asked)} question rows passed; gradebook: {out / 'gradebook.csv'}, "
              f"summary: {out / 'summary.csv'}, feedback: {out / 'feedback'}/, report: "
              f"{out / 'report.html'}, similar submissions: {out / 'similarity.csv'}"
              + "".join(f", {lms}: {out / (lms + '.csv')}" for lms in exports))
        missing = len({(r["learner"], r["lesson"]) for r in rows if r["status"] == "missing"})
        not_run = len({(r["learner"], r["lesson"]) for r in rows if r["status"] == "not run"})
        if missing or not_run:
            print(f"{missing} lesson(s) missing and {not_run} notebook(s) not run: each has its rows "
                  f"(status 'missing' or 'not run') with the reason")
        if failures:
            print(f"error: the grader itself failed {failures} time(s) (rows whose feedback starts "
                  f"'the grader failed', or the instructor's files changed): see above", file=sys.stderr)
        return 1 if failures else 0
    given = [f"--{name.replace('_', '-')}" for name in ("partial", "overrides", "due", "late_penalty",
                                                        "timezone", "learner", "shard", "roster", "export")
             if getattr(args, name) is not None] + [f"--{flag}" for flag in ("force", "same-seed")
                                                     if getattr(args, flag.replace("-", "_"))]
    if given:
        print(f"error: {', '.join(given)} grade a class: add --class and --out", file=sys.stderr)
        return 2
    if not Path(args.path).is_file():
        print(f"error: there is no notebook at {args.path}", file=sys.stderr)
        return 2
    watched = tree_hash(ROOT)
    if not args.no_sandbox and unavailable() is not None:
        print(f"notice: no sandbox here ({unavailable()}): your notebook runs as you, as it does in Jupyter")
    costs = None if args.solution_costs == NONE else args.solution_costs
    graded = charge_solutions(grade(args.path, keep=args.keep, sandbox=False if args.no_sandbox else "auto",
                                    **limits), costs)
    # what follows quotes the notebook (its file name, its errors): control characters escaped
    if graded.lesson is None:
        print(printable(graded.problem))
        return 1
    if graded.retried:
        print(printable(graded.retried))
    for r in graded.results:
        taken = graded.help.get(r.exercise)
        helped = taken is not None and help_line(taken)
        print(printable(f"{r.exercise}: {r.status} ({_points(r.points)}/{_points(r.max_points)})  {r.feedback}"
                        + (f"  [{helped}]" if helped else ""), lines=True))
    if any(r.status == "not run" for r in graded.results):
        print("what the grader saw:\n" + printable(graded.log, lines=True))
    earned = sum(r.points for r in graded.results)
    total = sum(r.max_points for r in graded.results)
    print(f"{_points(earned)} of {_points(total)} points for {graded.lesson}")
    if graded.sandbox:
        print("graded in a bubblewrap sandbox" if graded.sandbox == SANDBOXED else "graded without a sandbox")
    if args.keep:
        print(f"the graded copy is in {args.keep}; `python -m pytest {args.keep}/notebooks/` reruns it")
    touched = changed(watched, tree_hash(ROOT))
    if touched:
        print(f"WARNING: the instructor's files changed while grading: {', '.join(touched)}")
        return 1
    print(f"checked: course_lib, notebooks/ and data/ are unchanged ({len(watched)} files)")
    # the learner's own page, whatever the score; exit 0 when the notebook was graded
    page = write_page(graded, page_beside(args.path))
    print(f"your feedback page: {page}")
    return 0 if graded.problem is None else 1


if __name__ == "__main__":
    sys.exit(main())
