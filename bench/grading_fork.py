"""What the forked, pre-imported design would cost per notebook: measured, beside today's grading.

    OMP_NUM_THREADS=1 .venv/bin/python bench/grading_fork.py [--lessons 00,01] [--repeat 3]

Not a grader, and no sandbox: it measures the design that docs/maintainers.md describes ("The
design that would reach 2 s a notebook") and does not build. One parent process imports torch,
numpy, matplotlib (agg), IPython and course_lib.checks once. For each lesson's solved notebook
it makes the graded copy as the grader does (`graded_copy`), then forks a child that runs the
copy's code cells in an in-process IPython shell (no pytest, no Jupyter kernel) and exits; the
grader's probe of the notebook's definitions (`probe`, a process of its own, not counted in the
child's CPU) records each check and the replay worker replays it: every check must pass, as in
grading. It prints the CPU of each child (user +
system, from getrusage of the finished child), the parent's imports once, and the same notebook
graded today (`run.grade`, without the sandbox: pytest and its kernel, as pytest measured them),
with the machine and its load. On Linux it also says whether a child forked from the parent
can make namespaces of its own (`unshare`), which the design's sandbox would need.
"""
import argparse
import json
import os
import platform
import resource
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]
os.environ.setdefault("MPLBACKEND", "agg")

import nbformat  # noqa: E402

from course_lib.grading import graded_copy, lessons, probe, replay, run  # noqa: E402
from course_lib.grading.questions import is_question  # noqa: E402
from grading import solved  # noqa: E402


def children_cpu():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_forked(copy_root, nb):
    """Fork; the child runs nb's code cells in an IPython shell, in copy_root/notebooks. Its CPU seconds."""
    before = children_cpu()
    pid = os.fork()
    if pid == 0:  # the child: what one learner's notebook would run in
        status = 1
        try:
            from IPython.core.interactiveshell import InteractiveShell
            from traitlets.config import Config
            quiet = os.open(os.devnull, os.O_WRONLY)  # what the cells print is not the bench's
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            os.chdir(copy_root / "notebooks")
            os.environ["IPYTHONDIR"] = str(copy_root / ".ipython")
            sys.path.insert(0, str(copy_root))
            config = Config()
            config.HistoryManager.hist_file = ":memory:"
            shell = InteractiveShell.instance(config=config)
            for cell in nb.cells:
                if cell.cell_type == "code":
                    shell.run_cell(cell.source, store_history=False, silent=True)
            status = 0
        finally:
            os._exit(status)
    _, code = os.waitpid(pid, 0)
    if code != 0:
        raise RuntimeError(f"the forked child ended with status {code}")
    return children_cpu() - before


CLONE = {"mount": 0x20000, "user": 0x10000000, "PID": 0x20000000, "network": 0x40000000,
         "IPC": 0x08000000, "UTS": 0x04000000}


def namespaces_in_a_fork():
    """Whether a child forked from this (pre-imported) process can make namespaces of its own: a line.

    unshare() refuses a process with more than one thread (for a user namespace), so this says
    how many threads the parent and the child have, whether the child's unshare of new mount, PID,
    IPC, network and UTS namespaces (and a user namespace, when not root) worked, and whether
    torch still computes in a grandchild, the first process of the new PID namespace.
    """
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    names = [n for n in CLONE if n != "user" or os.geteuid() != 0]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        said = f"the child has {len(os.listdir('/proc/self/task'))} thread(s); "
        if libc.unshare(sum(CLONE[n] for n in names)) != 0:
            said += f"unshare failed: {os.strerror(ctypes.get_errno())}"
        else:
            inner = os.fork()
            if inner == 0:
                import torch
                ok = float((torch.ones(8, 8) @ torch.ones(8, 8)).sum()) == 512.0
                os._exit(0 if ok and os.getpid() == 1 else 1)
            _, code = os.waitpid(inner, 0)
            said += (f"unshare of new {', '.join(names)} namespaces worked, and torch computed in "
                     f"the first process of the new PID namespace: {'yes' if code == 0 else 'no'}")
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as f:
        said = f.read().decode()
    return f"the parent has {len(os.listdir('/proc/self/task'))} thread(s); " + said


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", default="00,01", help="comma-separated lesson numbers")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average before: {os.getloadavg()[0]:.1f}")
    sys.modules.setdefault("rfc3987_syntax", None)
    import matplotlib.pyplot  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401

    import course_lib.checks  # noqa: F401
    print(f"{time.process_time():6.2f} s  the parent's start, once per grading job (Python, torch, numpy, "
          f"matplotlib, IPython, course_lib.checks and the grader)")
    if sys.platform.startswith("linux"):
        print(f"namespaces in a forked child: {namespaces_in_a_fork()}")
    wanted = args.lessons.split(",")
    with tempfile.TemporaryDirectory(prefix="grading-fork-") as tmp, replay.Replayer() as replayer:
        for lesson_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
            if lesson_path.name[:2] not in wanted:
                continue
            lesson = nbformat.read(lesson_path, as_version=4)
            found = lessons.lesson_exercises(lesson)
            submission = solved(nbformat.read(ROOT / "exercises" / lesson_path.name, as_version=4), lesson)
            path = Path(tmp) / lesson_path.name
            nbformat.write(submission, path)
            forked, today = [], []
            for i in range(args.repeat):
                copy_root = (Path(tmp) / f"copy-{lesson_path.stem}-{i}").resolve()
                copy_root.mkdir()
                seed = secrets.randbelow(2 ** 62)
                nb, placements = graded_copy.graded_copy(submission, lesson, found, copy_root)
                graded_copy.write_copy(copy_root, nb, lesson_path.name, placements, 120, 0, 600)
                forked.append(run_forked(copy_root, nb))
                scratch = replay.scratch_folder()
                try:
                    # the copy's check cells record nothing: the grader's probe of the definitions does
                    replayed, _, _ = probe.probe_notebook(submission, lesson, found, seed, scratch, replayer,
                                                          timeout=120)
                finally:
                    replay.remove(scratch)
                lines = {e.name: "".join(o["text"] for o in e.pass_output).strip() for e in found}
                verdicts = {name: replay.decide(name, got, lines[name])[0] if got else "no record"
                            for name, got in replayed.items()}
                assert set(verdicts.values()) == {"passed"}, json.dumps(verdicts)
                shutil.rmtree(copy_root)
                graded = run.grade(path, sandbox=False, replayer=replayer)
                assert all(r.status == "passed" for r in graded.results if not is_question(r.exercise))
                today.append(graded.cpu_seconds)
            print(f"{statistics.median(forked):6.2f} s  lesson {lesson_path.stem}, forked from the parent "
                  f"and run in an IPython shell (every check replayed: passed); graded today, "
                  f"without the sandbox: {statistics.median(today):.2f} s (pytest and its kernel)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
