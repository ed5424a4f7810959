"""Where a graded notebook's CPU goes: each fixed cost measured alone, beside one notebook graded whole.

    OMP_NUM_THREADS=1 .venv/bin/python bench/grading_profile.py [--lesson 00] [--repeat 3]

Each part runs in a fresh process (as grading runs it) and is timed by the CPU its process
used (user + system, from getrusage of the finished child), the median of --repeat runs:
Python itself, the kernel's imports (torch, numpy, matplotlib), pytest with nbval and its
imports, a Jupyter kernel started and stopped, a check cell's fresh import of the checkers
(from source, and from the bytecode the grader gives each copy), the replay worker's start, and then one
notebook of the lesson graded whole (its solution), without and with the sandbox. Prints the
machine and its load, since a busy machine's CPU seconds run higher (caches, frequency).
"""
import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from course_lib.grading import graded_copy, replay, run, sandbox  # noqa: E402
from course_lib.grading.questions import is_question  # noqa: E402
from grading import solved  # noqa: E402

KERNEL = """\
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="python3")
kc.execute_interactive("1 + 1", timeout=120)
kc.stop_channels()
km.shutdown_kernel(now=False)
"""

# A check cell's import of the checkers, five times over, each after the kernel's course_lib
# modules are set aside as the check cell does: the CPU seconds of each import.
RECHECK = """\
import sys, time
sys.modules["rfc3987_syntax"] = None
import course_lib.checks
assert course_lib.__file__.startswith(sys.argv[1]), course_lib.__file__
for _ in range(5):
    kept = {k: sys.modules.pop(k) for k in list(sys.modules) if k.split(".")[0] == "course_lib"}
    start = time.process_time()
    import course_lib.checks
    print(round(time.process_time() - start, 4))
    sys.modules.update(kept)
"""

PARTS = {
    "python, nothing imported": "pass",
    "import torch": "import torch",
    "import numpy, matplotlib.pyplot": "import numpy, matplotlib; matplotlib.use('agg'); import matplotlib.pyplot",
    "import course_lib.checks (torch and every checker)": "import course_lib.checks",
    "pytest + nbval + nbformat + jupyter_client imported": (
        "import sys; sys.modules['rfc3987_syntax'] = None\n"
        "import pytest, nbval.plugin, nbformat, jupyter_client"),
    "a Jupyter kernel started, one cell, stopped (client and kernel)": KERNEL,
}


def child_cpu(command, env=None):
    """CPU seconds (user + system) of a child process and its own children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", default="00")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), MPLBACKEND="agg")
    load = os.getloadavg()[0]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average before: {load:.1f}")
    for name, code in PARTS.items():
        runs = [child_cpu([sys.executable, "-c", code], env) for _ in range(args.repeat)]
        print(f"{statistics.median(runs):6.2f} s  {name}")
    # What one check cell's fresh import of the checkers costs: each check cell drops the
    # kernel's course_lib modules and imports course_lib.checks afresh from the graded copy,
    # after the learner's cells imported it once. Timed inside the process (CPU of that import
    # alone), from a copy without bytecode (as every check cell did) and with the bytecode the
    # grader now puts in each copy.
    with tempfile.TemporaryDirectory(prefix="grading-profile-copy-") as tmp:
        source, compiled = Path(tmp) / "source", Path(tmp) / "compiled"
        for folder in (source, compiled):
            shutil.copytree(ROOT / "course_lib", folder / "course_lib",
                            ignore=shutil.ignore_patterns("__pycache__"))
        graded_copy._add_bytecode(compiled, ROOT)
        for name, where in (("from source (as every check cell did)", source),
                            ("from the copy's bytecode (as now)", compiled)):
            runs = []
            for _ in range(args.repeat):
                done = subprocess.run([sys.executable, "-c", RECHECK, str(where)], check=True, capture_output=True,
                                      text=True, cwd=tmp, env={**env, "PYTHONDONTWRITEBYTECODE": "1",
                                                               "PYTHONPATH": str(where)})
                runs.append(statistics.median(map(float, done.stdout.split())))
            print(f"{statistics.median(runs):6.2f} s  a check cell's fresh import of course_lib.checks, {name}")
    starts = []
    for _ in range(args.repeat):
        with replay.Replayer() as r:
            r._start()
            starts.append(r.start_cpu)
    print(f"{statistics.median(starts):6.2f} s  the replay worker's start (once per grading job)")
    lesson = next((ROOT / "notebooks").glob(f"{args.lesson}_*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="grading-profile-") as tmp:
        path = Path(tmp) / lesson.name
        nb = nbformat.read(ROOT / "exercises" / lesson.name, as_version=4)
        nbformat.write(solved(nb, nbformat.read(lesson, as_version=4)), path)
        modes = [False] + ([True] if sandbox.unavailable() is None else [])
        with replay.Replayer() as r:
            r._start()
            for sandboxed in modes:
                cpu, replays, wall = [], [], []
                for _ in range(args.repeat):
                    start = time.monotonic()
                    graded = run.grade(path, sandbox=sandboxed, replayer=r)
                    wall.append(time.monotonic() - start)
                    checks = [x for x in graded.results if not is_question(x.exercise)]
                    assert all(x.status == "passed" for x in checks), checks
                    cpu.append(graded.cpu_seconds)
                    replays.append(graded.replay_cpu_seconds)
                how = "in the sandbox" if sandboxed else "without the sandbox"
                print(f"{statistics.median(cpu):6.2f} s  one notebook of lesson {args.lesson} graded "
                      f"{how}: pytest and its kernel (wall {statistics.median(wall):.1f} s), plus "
                      f"{statistics.median(replays):.3f} s replaying its checks")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
