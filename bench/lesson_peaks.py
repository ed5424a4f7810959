"""Each lesson's peak memory and CPU time, for sizing a JupyterHub (docs/hub.md).

    .venv/bin/python bench/lesson_peaks.py            # every lesson, one after another
    .venv/bin/python bench/lesson_peaks.py 00 11      # some of them (the others keep their figures)

Each lesson runs top to bottom in a fresh kernel with the lessons' own settings (one torch
thread; COURSE_DEVICE as in the environment), as a learner's "Restart Kernel and Run All
Cells" runs it. Measured:

- the kernel's peak memory: the resident memory (RSS) of the kernel and every process under it,
  summed, sampled every 20 ms, or the kernel's own high-water mark (VmHWM) when that is higher;
- a learner's server: the RSS of an idle JupyterLab server, measured once, added to each
  lesson's kernel peak as "peak" (a hub's memory limit covers the server and its kernels);
- CPU seconds: user + system time of the kernel and its children, from /proc at the lesson's end;
- the most processes the kernel had under it at once (a lesson that starts workers needs more
  shared memory, /dev/shm, than a container's default 64 MB).

Prints a table with the machine and its load, and writes the figures to
course_lib/lesson_peaks.json, which the lessons read on a hub (course_lib/hub.py) and
docs/hub.md quotes. Linux only (it reads /proc).
"""
import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "course_lib" / "lesson_peaks.json"
COMMAND = "python bench/lesson_peaks.py"
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    """(ppid, utime + stime seconds, cutime + cstime seconds, rss bytes) of a process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()   # after the command's name, which may hold spaces
    ppid, utime, stime, cutime, cstime = (int(fields[i]) for i in (1, 11, 12, 13, 14))
    return ppid, (utime + stime) / TICK, (cutime + cstime) / TICK, int(fields[21]) * PAGE


def tree(root):
    """{pid: stat} of `root` and every process under it."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found:
                stats[int(entry.name)] = found
    found, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        if pid in stats and pid not in found:
            found[pid] = stats[pid]
            frontier.extend(child for child, st in stats.items() if st[0] == pid)
    return found


def high_water(pid):
    """The process's own peak RSS in bytes (VmHWM), or 0."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """Samples the summed RSS of a process tree until stopped."""

    def __init__(self, pid, every=0.02):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.peak, self.children = 0, 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            procs = tree(self.pid)
            self.peak = max(self.peak, sum(st[3] for st in procs.values()))
            self.children = max(self.children, len(procs) - 1)
            self.done.wait(self.every)

    def stop(self):
        self.done.set()
        self.join()


def kernel_pid(client):
    provisioner = client.km.provisioner
    return getattr(provisioner, "pid", None) or provisioner.process.pid


def measure(lesson):
    """{kernel_peak_bytes, cpu_seconds, wall_seconds, children} of one lesson run in a fresh kernel."""
    nb = nbformat.read(lesson, as_version=4)
    client = NotebookClient(nb, timeout=1800, iopub_timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(lesson.parent)}})
    start = time.monotonic()
    with client.setup_kernel():
        pid = kernel_pid(client)
        sampler = Sampler(pid)
        sampler.start()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        sampler.stop()
        procs = tree(pid)
        wall = time.monotonic() - start
        cpu = sum(st[1] for st in procs.values()) + procs[pid][2]
        peak = max(sampler.peak, high_water(pid))
    return {"kernel_peak_bytes": peak, "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1),
            "children": sampler.children}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_rss():
    """The RSS in bytes of an idle JupyterLab server (the server half of a learner's memory),
    once it has served JupyterLab's page."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as root:
        args = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                "--IdentityProvider.token=bench", f"--ServerApp.root_dir={root}"]
        if os.geteuid() == 0:
            args.append("--allow-root")
        server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 180
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=bench", timeout=30).read()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("JupyterLab did not start")
                    time.sleep(0.5)
            time.sleep(2)
            return sum(st[3] for st in tree(server.pid).values())
        finally:
            server.terminate()
            server.wait()


def machine():
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    import torch
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "system": f"{platform.system()} {platform.release()}"}


def mib(n):
    return f"{n / 2**20:,.0f} MiB"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers, e.g. 00 11 (default: every lesson)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the figures' file (default: {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    out = args.out
    lessons = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.lessons:
        lessons = [p for p in lessons if p.name[:2] in args.lessons]
    os.environ.setdefault("MPLBACKEND", "agg")
    found = json.loads(out.read_text()) if out.is_file() else {"lessons": {}}
    found["command"] = COMMAND
    found["machine"] = machine()
    found["date"] = datetime.date.today().isoformat()
    print(f"{found['machine']['cpu']}, {found['machine']['cores']} cores, Python {found['machine']['python']}, "
          f"torch {found['machine']['torch']}; load average before: {os.getloadavg()[0]:.2f}")
    server = server_rss()
    found["server_bytes"] = server
    print(f"an idle JupyterLab server: {mib(server)}")
    print(f"{'lesson':34} {'kernel peak':>12} {'with server':>12} {'CPU s':>7} {'wall s':>7} {'load':>5}")
    for lesson in lessons:
        figures = measure(lesson)
        figures["peak_bytes"] = figures["kernel_peak_bytes"] + server
        figures["load"] = round(os.getloadavg()[0], 2)
        found["lessons"][lesson.name] = figures
        print(f"{lesson.name:34} {mib(figures['kernel_peak_bytes']):>12} {mib(figures['peak_bytes']):>12} "
              f"{figures['cpu_seconds']:>7.1f} {figures['wall_seconds']:>7.1f} {figures['load']:>5.2f}"
              + (f"  ({figures['children']} processes under the kernel)" if figures["children"] else ""),
              flush=True)
    for figures in found["lessons"].values():    # lessons measured before: this server's figure
        figures["peak_bytes"] = figures["kernel_peak_bytes"] + server
    found["lessons"] = dict(sorted(found["lessons"].items()))
    out.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
