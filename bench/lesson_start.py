"""What a lesson costs before its first idea: the CPU of its first code cell (its imports).

    OMP_NUM_THREADS=1 .venv/bin/python bench/lesson_start.py [--repeat 3] [NN_topic.ipynb ...]

Each lesson's first code cell runs in a fresh Python process (as a fresh kernel would run it,
without the kernel itself), timed by the CPU that process used (user + system, from getrusage
of the finished child), the median of --repeat runs. The first run of each lesson comes after
one untimed run of all of them, so no figure includes compiling bytecode. Prints the machine and
its load, since a busy machine's CPU seconds run higher.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_CELL = """\
import json, sys
cells = json.load(open(sys.argv[1], encoding="utf-8"))["cells"]
first = next(c for c in cells if c["cell_type"] == "code")
exec(compile("".join(first["source"]), sys.argv[1], "exec"), {"__name__": "__main__"})
"""


def first_cell_cpu(lesson):
    """CPU seconds of one fresh process that runs the lesson's first code cell."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", RUN_CELL, str(lesson)], cwd=lesson.parent, check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "MPLBACKEND": "agg"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", help="lesson files in notebooks/ (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per lesson (default 3)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    lessons = ([ROOT / "notebooks" / name for name in args.lessons] if args.lessons
               else sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    missing = [str(p) for p in lessons if not p.is_file()]
    if missing:
        parser.error(f"no such lesson: {', '.join(missing)} (give names like 05_positions.ipynb)")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, "
          f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the start")
    for lesson in lessons:  # untimed: bytecode compiled, files in the page cache
        first_cell_cpu(lesson)
    for lesson in lessons:
        runs = [first_cell_cpu(lesson) for _ in range(args.repeat)]
        print(f"{lesson.name:32} first code cell: {statistics.median(runs):.2f} s of CPU "
              f"(median of {len(runs)}: {', '.join(f'{r:.2f}' for r in runs)})", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end, {time.strftime('%Y-%m-%d %H:%M')}")


if __name__ == "__main__":
    main()
