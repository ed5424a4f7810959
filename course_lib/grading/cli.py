"""The command: `python -m course_lib.grading NOTEBOOK` or `--class FOLDER --out OUT`."""
import argparse
import sys
from pathlib import Path

from course_lib.exercises import ROOT
from course_lib.grading.export import LMSES, check_export
from course_lib.grading.gradebook import grade_class
from course_lib.grading.graded_copy import changed, tree_hash
from course_lib.grading.lessons import LESSONS
from course_lib.grading.sandbox import (CELL_TIMEOUT, MEMORY_GIB, NOTEBOOK_TIMEOUT, SANDBOXED, STARTUP_TIMEOUT,
                                        unavailable)
from course_lib.grading.run import SandboxUnavailable, grade
from course_lib.grading.verdicts import _points

# ---------------------------------------------------------------- command line

def _lesson_names(text, lessons=LESSONS):
    """Lesson stems from '00,01_attention_by_hand,...': a number or a name each."""
    if not text:
        return None
    stems = [p.stem for p in sorted(Path(lessons).glob("*.ipynb"))]
    found = []
    for part in filter(None, (t.strip() for t in text.split(","))):
        match = [s for s in stems if s == part or s.split("_")[0] == part]
        if len(match) != 1:
            raise SystemExit(f"error: --lessons: no single lesson is {part!r}; lessons: {', '.join(stems)}")
        found.append(match[0])
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description="Grade exercise notebooks with nbval against the "
                                                 "lessons' checks.")
    parser.add_argument("path", help="a notebook, or with --class a folder with a folder per learner")
    parser.add_argument("--class", dest="folder", action="store_true",
                        help="grade every learner's notebooks under the folder PATH")
    parser.add_argument("--out", default="grades", help="where the gradebook, summary and feedback go "
                                                        "(class mode; default: grades/)")
    parser.add_argument("--roster", help="a file with one learner per line, or a CSV with the columns "
                                         "learner,lms_id,email; those with no submission get "
                                         "'missing' rows")
    parser.add_argument("--export", action="append", default=[], choices=LMSES,
                        help="class mode: also write OUT/canvas.csv or OUT/moodle.csv, the CSV "
                             "that LMS's grade import takes (repeatable; ids from --roster)")
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
    args = parser.parse_args(argv)
    limits = dict(cell_timeout=args.timeout, notebook_timeout=args.notebook_timeout,
                  memory_gib=args.memory, startup_timeout=args.startup_timeout)
    if args.folder:
        try:
            check_export(args.export, args.roster)  # a bad roster stops here, before any grading
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        try:
            rows, problems = grade_class(args.path, args.out, jobs=args.jobs, roster=args.roster,
                                         only=_lesson_names(args.lessons), export=args.export,
                                         html=not args.no_html, sandbox=not args.no_sandbox, **limits)
        except FileNotFoundError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except SandboxUnavailable as e:
            print(f"error: {e}. Class mode runs each notebook in a bubblewrap sandbox, so that no "
                  f"learner's code can reach the others', the gradebook or this machine; install "
                  f"bubblewrap (apt-get install bubblewrap), or pass --no-sandbox to grade with "
                  f"the learners' code running as you", file=sys.stderr)
            return 2
        passed = sum(r["status"] == "passed" for r in rows)
        out = Path(args.out)
        print(f"{passed} of {len(rows)} exercise rows passed; gradebook: {out / 'gradebook.csv'}, "
              f"summary: {out / 'summary.csv'}, feedback: {out / 'feedback'}/, report: "
              f"{out / 'report.html'}, similar submissions: {out / 'similarity.csv'}"
              + "".join(f", {lms}: {out / (lms + '.csv')}" for lms in args.export))
        if problems:
            print(f"{problems} notebook(s) or learner(s) could not be graded or are missing: see the "
                  f"rows whose status is 'not run' or 'missing'")
        return 1 if problems else 0
    if not Path(args.path).is_file():
        print(f"error: there is no notebook at {args.path}", file=sys.stderr)
        return 2
    watched = tree_hash(ROOT)
    if not args.no_sandbox and unavailable() is not None:
        print(f"notice: no sandbox here ({unavailable()}): your notebook runs as you, as it does in Jupyter")
    graded = grade(args.path, keep=args.keep, sandbox=False if args.no_sandbox else "auto", **limits)
    if graded.lesson is None:
        print(graded.problem)
        return 1
    if graded.retried:
        print(graded.retried)
    for r in graded.results:
        print(f"{r.exercise}: {r.status} ({_points(r.points)}/{_points(r.max_points)})  {r.feedback}")
    if any(r.status == "not run" for r in graded.results):
        print("what the grader saw:\n" + graded.log)
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
    return 0 if graded.problem is None and earned == total else 1


if __name__ == "__main__":
    sys.exit(main())
