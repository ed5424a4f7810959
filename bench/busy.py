"""How busy the machine's cores were while a command ran: wall time, and the core-seconds spent
busy, idle and stolen (by the hypervisor) over that time, read from /proc/stat (Linux).

    .venv/bin/python bench/busy.py -- make test
    .venv/bin/python bench/busy.py -- make test-browser

The command's own output goes by as usual; the figures come last, with the machine and the load
average before and after, and the command's exit status is busy.py's. Idle core-seconds say
whether a run could go faster by waiting less (sandboxes starting, time limits, polling) or only
by computing less: when idle is near zero, every core was working the whole time, and cutting
a wait only hands its core to other work. Busy, idle and stolen count every process on the
machine, not only the command's; the command's own CPU time comes on a line of its own, and does
not depend on what else ran. The kernel counts in it only the processes that were waited for:
a daemon the command started (Slurm's, in the Slurm test), or a process whose parent did not wait
for it, is left out. So on an otherwise quiet machine the own time can be the lower figure:
139 core-seconds of the machine's 277 for

    OMP_NUM_THREADS=1 .venv/bin/python bench/busy.py -- .venv/bin/python -m pytest -q -n 2 tests/test_grading.py

on a quiet 2-core EPYC (2026-12-03); about half of the rest, 73 core-seconds, was in the forks
of the grader's sandbox zygotes (by an ad hoc sampler of /proc/PID/stat).
"""
import argparse
import os
import platform
import resource
import subprocess
import sys
import time

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times(stat="/proc/stat"):
    """The machine's CPU time so far, in seconds, by kind: {'busy': s, 'idle': s, 'steal': s}."""
    with open(stat, encoding="ascii") as f:
        line = f.readline().split()
    if not line or line[0] != "cpu":
        raise ValueError(f"{stat} does not start with the machine's 'cpu' line")
    ticks = dict(zip(FIELDS, map(int, line[1:1 + len(FIELDS)])))
    hz = os.sysconf("SC_CLK_TCK")
    return {"busy": (ticks["user"] + ticks["nice"] + ticks["system"] + ticks["irq"] + ticks["softirq"]) / hz,
            "idle": (ticks["idle"] + ticks["iowait"]) / hz,
            "steal": ticks.get("steal", 0) / hz}


def children_cpu():
    """CPU seconds, user and system, of the child processes waited for so far (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report(wall, before, after, load_before, load_after, own):
    """The figures' lines; `own` is the command's own CPU seconds."""
    spent = {k: after[k] - before[k] for k in before}
    cores = os.cpu_count() or 1
    return [f"busy: {platform.machine()}, {cores} logical CPUs; load average (1 min) "
            f"{load_before:.1f} before, {load_after:.1f} after",
            f"busy: wall {wall:.0f} s; core-seconds busy {spent['busy']:.0f}, idle {spent['idle']:.0f}, "
            f"stolen {spent['steal']:.0f} (of {cores * wall:.0f}: {cores} cores x the wall time)",
            f"busy: the command's own CPU time {own:.1f} core-seconds"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     usage="busy.py [-h] -- COMMAND [ARGS...]")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --, e.g. busy.py -- make test")
    try:
        before = cpu_times()
    except (OSError, ValueError) as e:
        print(f"busy: cannot read the machine's CPU times ({e}); this needs Linux's /proc/stat",
              file=sys.stderr)
        return 2
    load_before, own_before, start = os.getloadavg()[0], children_cpu(), time.perf_counter()
    try:
        status = subprocess.call(command)
    except OSError as e:
        print(f"busy: cannot run {command[0]}: {e}", file=sys.stderr)
        return 127
    wall, after = time.perf_counter() - start, cpu_times()
    own = children_cpu() - own_before
    print("\n".join(report(wall, before, after, load_before, os.getloadavg()[0], own)), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
