"""Where the test suite's time goes: a pytest plugin that records each test's wall and CPU time,
and a summary of what it recorded, by file and by test.

    SUITE_TIMES_OUT=/tmp/times.jsonl PYTHONPATH="$PWD/bench" OMP_NUM_THREADS=1 COURSE_DEVICE=cpu \\
        .venv/bin/python -m pytest -p suite_times -p no:cacheprovider -q -n 3 --dist loadfile \\
        --no-loadscope-reorder --nbval --nbval-current-env tests notebooks
    python bench/suite_times.py /tmp/times.jsonl [--top 20]

PYTHONPATH is absolute: a kernel started afresh reads a relative one from its notebook's folder,
while a kernel forked from the test process's zygote keeps the folder the run started in, and
tests/test_kernel_zygote.py (rightly) fails on that difference.

Each test process appends one JSON line per test: its id, the worker, the wall time from its
start to its end (setup and teardown included, so a module's fixture counts in its first test)
and the CPU time of the process and of the children it has waited for. A notebook's cells run in
a Jupyter kernel the process did not wait for, so their CPU time is not counted: for them, read
the wall time. The summary prints the machine it runs on (run it where the tests ran) and the
load while they ran, then the files and the tests that took longest, and each worker's total,
which shows how evenly the work was shared.
"""
import argparse
import collections
import json
import os
import platform
import resource
import sys
import time

_started = {}
_out = None  # the file this process appends to; None where it records nothing
_worker = "main"  # pytest-xdist's name for this process, or "main" without xdist


def _cpu_seconds():
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_configure(config):
    global _out, _worker
    out = os.environ.get("SUITE_TIMES_OUT")
    if not out:
        raise SystemExit("suite_times: set SUITE_TIMES_OUT to the file the times go to")
    # Record where tests run: not in pytest-xdist's controller, which sees every worker's again.
    if hasattr(config, "workerinput") or config.getoption("dist", "no") == "no":
        _out = out
    # From the config, not the environment: a pytest run inside a worker's test inherits that.
    _worker = getattr(config, "workerinput", {}).get("workerid", "main")


def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = (time.perf_counter(), _cpu_seconds())


def pytest_runtest_logfinish(nodeid, location):
    start = _started.pop(nodeid, None)
    if start is None or _out is None:
        return
    row = dict(id=nodeid, worker=_worker,
               wall=round(time.perf_counter() - start[0], 3), cpu=round(_cpu_seconds() - start[1], 3),
               end=round(time.time(), 1), load=os.getloadavg()[0])
    with open(_out, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def summary(rows, top=20):
    """The summary's lines: by file, by test, by worker."""
    if not rows:
        return ["no tests recorded"]
    files = collections.defaultdict(lambda: [0.0, 0.0, 0])
    workers = collections.defaultdict(float)
    for r in rows:
        f = files[r["id"].split("::")[0]]
        f[0] += r["wall"]
        f[1] += r["cpu"]
        f[2] += 1
        workers[r["worker"]] += r["wall"]
    loads = [r["load"] for r in rows]
    lines = [f"{platform.machine()}, {os.cpu_count()} logical CPUs; {len(rows)} tests; load average "
             f"(1 min) {min(loads):.1f} to {max(loads):.1f} while they ran",
             f"the files that took longest (of {len(files)}): wall s, CPU s (without kernels), tests"]
    for name, (wall, cpu, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"  {wall:7.1f} {cpu:7.1f} {n:5d}  {name}")
    lines.append("the tests that took longest: wall s, CPU s, worker")
    for r in sorted(rows, key=lambda r: -r["wall"])[:top]:
        lines.append(f"  {r['wall']:7.1f} {r['cpu']:7.1f} {r['worker']:>6}  {r['id']}")
    lines.append("each worker's tests, wall s: " + ", ".join(
        f"{w} {t:.0f}" for w, t in sorted(workers.items())))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("times", help="the JSON lines file SUITE_TIMES_OUT named")
    parser.add_argument("--top", type=int, default=20, help="how many files and tests to list")
    args = parser.parse_args(argv)
    try:
        with open(args.times, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        print(f"suite_times: cannot read {args.times}: {e}", file=sys.stderr)
        return 2
    print("\n".join(summary(rows, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
