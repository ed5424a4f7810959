"""Grading speed: a generated class graded by `course_lib.grading`, in notebooks per minute.

    OMP_NUM_THREADS=1 .venv/bin/python bench/grading.py                   # 30 learners x every lesson
    OMP_NUM_THREADS=1 .venv/bin/python bench/grading.py --learners 4 --lessons 00,01 --jobs 2

Learner i answers every exercise as the lesson's solution does (i % 3 == 0), with a known-wrong answer
from tests/answers.py (i % 3 == 1), or leaves the stubs blank (i % 3 == 2). The class is
graded into a temporary folder, and the script prints notebooks per minute, the time
and CPU seconds per notebook, the verdicts, and the machine it ran on (with its load,
since a shared machine grades more slowly). With `--sandbox both` (the default where
bubblewrap works) it grades the class twice, without the sandbox (a fresh pytest and kernel
for each notebook) and then as `make grade`'s class mode does (each grading job's notebooks in
one sandbox, forked from a process that imported the libraries once, where the grader is root:
course_lib.grading.session); `--sandbox all` adds a sandbox of its own for each notebook, as
before that. Compare figures measured in one run rather than absolute times from a busy
machine. Each way it also prints what the checks cost in the grader's own process (each
exercise's checker, run there on the learner's function in the notebook's server:
course_lib.grading.remote), per notebook.
"""
import argparse
import os
import platform
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from course_lib.grading import gradebook, sandbox, session  # noqa: E402
from course_lib.exercises import exercises  # noqa: E402

from answers import WRONG  # noqa: E402
from notebook_tools import fill  # noqa: E402


def solved(nb, lesson):
    """The exercise notebook with each exercise cell as the lesson writes it out, solution included.

    (tests/answers.py's REFERENCE calls course_lib's own implementation, which the grader
    gives no credit.)
    """
    nb = nbformat.from_dict(nb)
    written = {name: lesson.cells[i].source for name, i, _ in exercises(lesson)}
    for name, i, _ in exercises(nb):
        nb.cells[i].source = written[name]
    return nb


def make_class(folder, learners, lessons):
    """A class folder: learner_NN/<lesson>.ipynb, a third each correct, wrong and blank."""
    wrong = {}
    for w in WRONG:
        wrong.setdefault(w.exercise, w.body)
    for i in range(learners):
        learner = Path(folder) / f"learner_{i:02d}"
        learner.mkdir(parents=True)
        for lesson in lessons:
            nb = nbformat.read(ROOT / "exercises" / lesson.name, as_version=4)
            names = [name for name, _, _ in exercises(nb)]
            if i % 3 == 0:
                nb = solved(nb, nbformat.read(lesson, as_version=4))
            answers = [{}, wrong, {}][i % 3]
            nbformat.write(fill(nb, {n: answers[n] for n in names if n in answers}), learner / lesson.name)


def machine():
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    import torch
    return (f"{platform.machine()}, {gradebook.cores()} cores available to this process, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
            f"torch {torch.__version__}; load average before: {load[0]:.1f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--lessons", help="comma-separated lesson numbers, e.g. 00,01 (default: all)")
    parser.add_argument("--jobs", type=int, default=None, help="default: the number of cores")
    parser.add_argument("--sandbox", choices=("both", "on", "off", "all"), default="both",
                        help="grade without the sandbox and in it (both), one way only, or also "
                             "with a sandbox of its own for each notebook (all)")
    args = parser.parse_args(argv)
    lessons = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if args.lessons:
        wanted = args.lessons.split(",")
        lessons = [p for p in lessons if p.name[:2] in wanted]
    jobs = args.jobs or gradebook.cores()
    off, each, job = ("no sandbox", False, False), ("a sandbox per notebook", True, False), \
        ("sandbox", True, "auto")
    modes = {"both": [off, job], "on": [job], "off": [off], "all": [off, each, job]}[args.sandbox]
    if any(m[1] for m in modes) and sandbox.unavailable() is not None:
        print(f"no sandbox here ({sandbox.unavailable()}): grading without it only")
        modes = [off]
    elif job in modes and session.available() is not None:
        print(f"each notebook gets a sandbox of its own here: {session.available()}")
    print(f"machine: {machine()}")
    n = args.learners * len(lessons)
    print(f"class: {args.learners} learners x {len(lessons)} lessons "
          f"({', '.join(p.stem for p in lessons)}) = {n} notebooks, --jobs {jobs}")
    measured = {}
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        make_class(Path(tmp) / "class", args.learners, lessons)
        for name, sandboxed, forked in modes:
            measured[name] = grade_once(Path(tmp), n, jobs, sandboxed, name, forked)
    for other in ("no sandbox", "a sandbox per notebook"):
        if other in measured and "sandbox" in measured:
            (wall0, cpu0), (wall1, cpu1) = measured[other], measured["sandbox"]
            print(f"the class mode's sandbox against {other}, per notebook: {cpu1 - cpu0:+.2f} s of CPU "
                  f"({cpu1 / cpu0:.2f}x), {wall1 - wall0:+.2f} s of a job's wall time ({wall1 / wall0:.2f}x), "
                  f"measured in one run")


def grade_once(tmp, n, jobs, sandboxed, name, forked):
    """Grade the class once; (seconds of a job per notebook, CPU seconds per notebook)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    start, cpu = time.monotonic(), os.times()
    log = []
    rows, problems = gradebook.grade_class(
        tmp / "class", tmp / f"grades-{name.replace(' ', '-')}", jobs=jobs, html=True,
        log=log.append, sandbox=sandboxed, forked=forked)
    warnings = [line for line in log if line.startswith("WARNING")]
    seconds = time.monotonic() - start
    after = os.times()
    used = sum(after[:4]) - sum(cpu[:4])  # this process and its children: the grader, pytest, kernels
    inside = 0.0
    if sandboxed:  # a sandbox's processes are not the grader's children: add what pytest measured
        per_notebook = {(r["learner"], r["lesson"]): r["cpu_seconds"] for r in rows}
        inside = sum(float(v) for v in per_notebook.values() if v)
        used += inside
    print(f"--- {name} (load average before: {load:.1f}, after: {os.getloadavg()[0]:.1f})")
    print(f"verdicts: {dict(Counter(r['status'] for r in rows))}; graded in: "
          f"{dict(Counter(r['sandbox'] for r in rows))}")
    for line in warnings + [f"{r['learner']}/{r['lesson']}: {r['feedback']}" for r in rows
                            if r["status"] in ("not run", "missing")]:
        print(f"  problem: {line}")
    print(f"graded in {seconds:.0f} s: {60 * n / seconds:.1f} notebooks per minute, "
          f"{seconds * jobs / n:.1f} s of a job per notebook; at this rate 30 learners x 8 "
          f"lessons take {240 * seconds / n / 60:.1f} min")
    print(f"CPU time: {used / n:.2f} s per notebook (grader, pytest and kernel together); "
          f"on {jobs} otherwise idle cores 240 notebooks would need about "
          f"{240 * used / n / jobs / 60:.1f} min (CPU time per notebook x 240 / {jobs} cores); "
          f"the target is 1 s per notebook (issue 40)")
    if sandboxed:
        parts = "pytest, kernels and the jobs' zygotes" if forked else "pytest and kernels"
        print(f"  of which in the sandboxes ({parts}): {inside / n:.2f} s, "
              f"the grader's own processes: {(used - inside) / n:.2f} s per notebook")
    checks = [float(m) for line in log for m in re.findall(r"the grader's checks took ([0-9.]+) s of CPU", line)]
    if checks:
        print(f"checks: {sum(checks) / n:.3f} s of CPU per notebook in the grader's own process (its "
              f"checkers calling the notebooks' servers; included in the CPU time above)")
    retried = sum("graded on a second try" in line for line in log)
    if retried:
        print(f"  {retried} notebook(s) graded on a second try, their first kernel not started in time")
    return seconds * jobs / n, used / n


if __name__ == "__main__":
    main()
