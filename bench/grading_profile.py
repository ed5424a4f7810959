"""Where a graded notebook's CPU goes: each fixed cost measured alone, beside one notebook graded whole.

    OMP_NUM_THREADS=1 .venv/bin/python bench/grading_profile.py [--lesson 00] [--repeat 3]

Each part runs in a fresh process (as grading runs it) and is timed by the CPU its process
used (user + system, from getrusage of the finished child), the median of --repeat runs:
Python itself, the kernel's imports (torch, numpy, matplotlib), the checkers' import and then
the graded kernel's protections installed on it (`kernel.install`: the difference is theirs),
pytest with nbval and its imports, a Jupyter kernel started and stopped, and then one notebook
of the lesson graded whole (its solution), without and with the sandbox: its pytest and kernel,
and the grader's checks calling its server. Prints the machine and its load, since a busy
machine's CPU seconds run higher (caches, frequency).
"""
import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from course_lib.grading import run, sandbox  # noqa: E402
from course_lib.grading.questions import is_question  # noqa: E402
from grading import solved  # noqa: E402

KERNEL = """\
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="python3")
kc.execute_interactive("1 + 1", timeout=120)
kc.stop_channels()
km.shutdown_kernel(now=False)
"""

PARTS = {
    "python, nothing imported": "pass",
    "import torch": "import torch",
    "import numpy, matplotlib.pyplot": "import numpy, matplotlib; matplotlib.use('agg'); import matplotlib.pyplot",
    "import course_lib.checks.lesson01 (torch and lesson 01's checkers)": "import course_lib.checks.lesson01",
    "the same, then the graded kernel's protections installed for them (kernel.install)": (
        "import course_lib.checks.lesson01\nfrom course_lib.grading import kernel\n"
        "kernel.install({'fds': None, 'checks': ['course_lib.checks.lesson01']})"),
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
    lesson = next((ROOT / "notebooks").glob(f"{args.lesson}_*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="grading-profile-") as tmp:
        path = Path(tmp) / lesson.name
        nb = nbformat.read(ROOT / "exercises" / lesson.name, as_version=4)
        nbformat.write(solved(nb, nbformat.read(lesson, as_version=4)), path)
        modes = [False] + ([True] if sandbox.unavailable() is None else [])
        for sandboxed in modes:
            cpu, checked, wall = [], [], []
            for _ in range(args.repeat):
                start = time.monotonic()
                graded = run.grade(path, sandbox=sandboxed)
                wall.append(time.monotonic() - start)
                checks = [x for x in graded.results if not is_question(x.exercise)]
                assert all(x.status == "passed" for x in checks), checks
                cpu.append(graded.cpu_seconds)
                checked.append(graded.check_cpu_seconds)
            how = "in a sandbox of its own" if sandboxed else "without the sandbox"
            print(f"{statistics.median(cpu):6.2f} s  one notebook of lesson {args.lesson} graded "
                  f"{how}: pytest and its kernel (wall {statistics.median(wall):.1f} s), plus "
                  f"{statistics.median(checked):.3f} s of the grader's checks calling its server")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
