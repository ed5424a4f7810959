"""How long each exercise's check takes on the lesson's own answer, in the notebook and graded.

    OMP_NUM_THREADS=1 .venv/bin/python bench/check_times.py              # every exercise
    OMP_NUM_THREADS=1 .venv/bin/python bench/check_times.py --only softmax,best_pair --repeat 5

For each exercise, the tests' reference answer (tests/answers_NN.py's REFERENCE) is
checked `--repeat` times in direct mode, as a learner's check cell runs it, and once as the
grader runs it (the checker on one side, the answer behind the wire format: tests/loopback.py). The script
prints, per exercise, the median wall time and CPU time of a direct check and the wall time
of the graded one, then the machine and its load: every check cell runs under nbval, in the
browser test and in every grading test, so these times add up across the suite. On a busy
machine read the CPU column, which other processes slow down less than the wall clock.
"""
import argparse
import io
import os
import platform
import statistics
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from course_lib import checks  # noqa: E402
from course_lib.checks import load_checkers  # noqa: E402
from course_lib.exercises import exercises  # noqa: E402

from answers import REFERENCE  # noqa: E402
from notebook_tools import LESSONS, function_from, read  # noqa: E402
from loopback import graded  # noqa: E402


def timed(check, fn):
    out = io.StringIO()
    wall, cpu = time.perf_counter(), time.process_time()
    with redirect_stdout(out):
        check(fn)
    return time.perf_counter() - wall, time.process_time() - cpu, out.getvalue().strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated exercise names (default: every exercise)")
    parser.add_argument("--repeat", type=int, default=3, help="direct checks per exercise (median)")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    load_checkers()
    only = set(args.only.split(",")) if args.only else None
    load = os.getloadavg()
    rows = []
    for path in LESSONS:
        nb = read(path)
        for name, i, _ in exercises(nb):
            if only and name not in only:
                continue
            fn = function_from(name, REFERENCE[name])
            check = getattr(checks, f"check_{name}")
            timed(check, fn)   # warm: first imports and caches
            runs = [timed(check, fn) for _ in range(args.repeat)]
            start = time.perf_counter()
            verdict, _ = graded(name, fn)
            graded_wall = time.perf_counter() - start
            line = runs[0][2]
            rows.append((path.name[:2], name, statistics.median(r[0] for r in runs),
                         statistics.median(r[1] for r in runs), graded_wall, line,
                         verdict))
    print(f"{'lesson':6} {'exercise':28} {'direct s':>9} {'cpu s':>7} {'graded s':>9}  pass line")
    for lesson, name, wall, cpu, g, line, verdict in rows:
        print(f"{lesson:6} {name:28} {wall:9.3f} {cpu:7.3f} {g:9.3f}  {line} [{verdict}]")
    print(f"{'total':35} {sum(r[2] for r in rows):9.3f} {sum(r[3] for r in rows):7.3f} "
          f"{sum(r[4] for r in rows):9.3f}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{_cpu_name()}; torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")


def _cpu_name():
    try:
        for line in open("/proc/cpuinfo", encoding="ascii", errors="replace"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.platform()


if __name__ == "__main__":
    main()
