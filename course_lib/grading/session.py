"""One sandbox per grading job, its libraries imported once: the grader's side of `forked`.

`grade_class` gives each of its jobs a ForkedSandbox: one bubblewrap sandbox whose zygote
(`forked.serve`) has imported torch, numpy, matplotlib, IPython, pytest and nbval, and forks
a runner and a kernel for each notebook. What keeps notebooks apart is in `forked`'s
docstring; here the grader's part of it:

- every notebook gets a user id of its own (`sandbox.sandbox_uid`), and its copy and its
  records folder belong to that id alone, under folders it can pass through but not list;
- the grader deletes a notebook's copy and records once it has read them, before the next
  notebook's run is ordered;
- the key that signs a notebook's records goes to its runner alone (fd 3), after its kernel
  was forked; the zygote never holds one.

It needs a grader running as root (only root can give each notebook a user id of its own)
on Linux with bubblewrap: `available()` says why not, and the grader then gives each
notebook a sandbox of its own (`run._run_copy`), as it does for a single notebook.
"""
import functools
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course_lib.exercises import ROOT
from course_lib.grading.graded_copy import (COPIED, KERNEL_PATH, NO_DEBUGGER, NOT_COPIED, _add_bytecode,
                                            _copy_font_cache)
from course_lib.grading.plugin import _read_records
from course_lib.grading.sandbox import (DISK_QUOTA, bwrap_command, mount_quota, printable, sandbox_env,
                                        unavailable, unmount)

# The zygote's capabilities: change user (each runner becomes its notebook's), kill what a
# notebook leaves running, empty /tmp of its files, and give each runner namespaces of its own
# (CAP_SYS_ADMIN: unshare and mount, `sandbox.seal`). Everything else is dropped, and a runner
# loses all of them when it becomes the notebook's user, before any of the notebook runs.
CAPABILITIES = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SYS_ADMIN")
ZYGOTE = "import course_lib.grading.forked as f; f.serve()"
THREADS = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                            "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")}
# Seconds the zygote may take to clear a notebook away after a stop before the sandbox is ended.
CLEAR_TIMEOUT = 30


def available():
    """Why one sandbox cannot serve many notebooks here, or None when it can."""
    if unavailable() is not None:
        return unavailable()
    if os.geteuid() != 0:
        return "only a grader running as root can give each notebook a user id of its own"
    return _no_quota()


@functools.lru_cache(maxsize=1)
def _no_quota():
    """Why the grader cannot mount a job's size-capped file system (the notebooks' quota), or None."""
    folder = tempfile.mkdtemp(prefix="grading-quota-test-")
    try:
        mount_quota(folder, 2 ** 20)
        unmount(folder)
    except OSError as e:
        return f"the grader cannot mount a size-capped file system for a job's notebooks ({e})"
    finally:
        os.rmdir(folder)
    return None


class ForkedSandbox:
    """A grading job's sandbox: `run` grades one copy in it at a time; `close` ends it."""

    def __init__(self, root=ROOT):
        self.root, self.proc, self.runs = Path(root), None, 0
        self.folder = Path(tempfile.mkdtemp(prefix="grading-job-"))
        self.lib, self.work = self.folder / "lib", self.folder / "work"
        self.records, self.home = self.folder / "records", self.folder / "zygote"
        for part in COPIED:
            shutil.copytree(self.root / part, self.lib / part,
                            ignore=NOT_COPIED)
        _add_bytecode(self.lib, self.root)
        (self.lib / KERNEL_PATH).mkdir()
        (self.lib / KERNEL_PATH / "debugpy.py").write_text(NO_DEBUGGER, encoding="utf-8")
        _copy_font_cache(self.home)
        for folder in (self.work, self.records):  # passed through by the notebooks, never listed
            folder.mkdir(mode=0o711)
            folder.chmod(0o711)
        # the copies, and each notebook's /tmp and /dev/shm, on a file system of DISK_QUOTA bytes:
        # one notebook at a time, so one quota for all that a notebook writes
        self.quota = DISK_QUOTA
        mount_quota(self.work, self.quota)
        self.mounted = True

    def new_copy(self):
        """An empty folder for a graded copy inside this sandbox."""
        folder = self.work / secrets.token_hex(8)
        folder.mkdir(mode=0o700)
        return folder

    # -------------------------------------------------------------- the sandbox

    def _start(self):
        env = sandbox_env(self.home, dict(THREADS, PYTHONPATH=str(self.lib), PYTHONDONTWRITEBYTECODE="1",
                                          MPLBACKEND="agg", MPLCONFIGDIR=str(self.home)))
        command = bwrap_command([sys.executable, "-c", ZYGOTE], self.work, [self.records, self.home],
                                root=self.root, readonly_parts=(), readonly=[self.lib],
                                capabilities=CAPABILITIES)
        keys_read, self.keys = os.pipe()
        self.status, status_write = os.pipe()
        seeds_read, self.seeds = os.pipe()        # a probe's seed, and its records (`probe`)
        self.replies, replies_write = os.pipe()
        self.log = open(self.folder / "zygote.log", "wb")
        # the runners' keys and the zygote's reports, on pipes of their own (bwrap passes them on)
        self.proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     pass_fds=(keys_read, status_write, seeds_read, replies_write))
        for fd in (keys_read, status_write, seeds_read, replies_write):
            os.close(fd)
        self.buffer, self.start_cpu = b"", None
        self._send({"python_path": [str(self.lib)], "no_debugger": str(self.lib / KERNEL_PATH),
                    "keys": keys_read, "status": status_write, "seeds": seeds_read,
                    "replies": replies_write, "keep": str(self.folder)})

    def _send(self, message, fd=None):
        data = (json.dumps(message) + "\n").encode()
        if fd is None:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        else:
            os.write(fd, data)

    def _report(self, timeout):
        """The zygote's next report line, split (None: none within timeout; [] when the sandbox has ended)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.status], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self.status, 4096)
            if not chunk:
                return []
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode().split()

    def _end(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait()
            for fd in (self.keys, self.status, self.seeds, self.replies):
                os.close(fd)
            self.proc.stdin.close()
            self.log.close()
            self.proc = None

    def close(self):
        self._end()
        if getattr(self, "mounted", False):
            unmount(self.work)
            self.mounted = False
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -------------------------------------------------------------- one notebook

    def run(self, copy, lesson_name, notebook_timeout, startup_timeout, limits, uid):
        """Grade the copy at `copy` (made by new_copy) as user `uid`; a run.Run."""
        from course_lib.grading.run import give_to, outcome, tail, watch
        if self.proc is None or self.proc.poll() is not None:
            self._end()
            self._start()
        self.runs += 1
        records = self.records / secrets.token_hex(8)
        records.mkdir(mode=0o700)
        give_to(copy, uid)
        give_to(records, uid)
        record, key, log = records / f"{secrets.token_hex(8)}.jsonl", secrets.token_hex(32), records / "pytest.log"
        extra = dict(THREADS, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
        order = {"id": self.runs, "folder": str(copy), "lesson": lesson_name, "uid": uid,
                 "limits": limits, "log": str(log), "env": sandbox_env(copy, extra),
                 "keep": str(self.folder), "lib": str(self.lib), "quota": self.quota,
                 "scratch": str(self.work / f".scratch-{self.runs}")}
        began, ready, stopped, start_failure, status, zygote_cpu = time.monotonic(), None, None, None, None, 0.0
        left = []
        try:
            self._send({"run": order})
            self._send({"id": self.runs, "record": [str(record), key]}, self.keys)
            while True:
                report = self._report(0.5)
                if report == []:
                    stopped = stopped or "the grading sandbox ended while this notebook ran"
                    start_failure = start_failure or (None if ready else stopped)
                    break
                if report and report[0] == "left":
                    left = json.loads(bytes.fromhex(report[1]))
                    continue
                if report and report[0] == "ready":
                    self.start_cpu = float(report[1])
                    continue
                if report and report[0] == "done":
                    status = None if report[1] == "None" else int(report[1])
                    zygote_cpu = float(report[2]) + (self.start_cpu or 0.0)
                    self.start_cpu = None
                    break
                if stopped is None:
                    ready, stopped, start_failure = watch(record, key, began, ready, startup_timeout,
                                                          notebook_timeout)
                    if stopped:
                        self._send({"stop": True})
                        stopping = time.monotonic()
                elif time.monotonic() - stopping > CLEAR_TIMEOUT:
                    self._end()  # the zygote did not clear it away in time: a new sandbox for the next
                    break
        except (BrokenPipeError, OSError) as e:
            stopped = start_failure = f"the grading sandbox could not be reached ({e})"
            self._end()
        entries, forged = _read_records(record, key)
        output = tail(log)
        if self.proc is None or self.proc.poll() is not None:  # what the sandbox said as it ended
            output += "\n(the job's sandbox ended; its own output:)\n" + tail(self.folder / "zygote.log")
        if left:
            output += ("\nthe job's sandbox was not empty after this notebook (it is ended, and the "
                       "next notebook gets a new one): " + printable(", ".join(left[:20])))
            self._end()
        shutil.rmtree(records, ignore_errors=True)
        run = outcome(entries, forged, output, stopped, start_failure, -9 if status is None else status)
        if run.cpu_seconds is not None:
            run.cpu_seconds = round(run.cpu_seconds + zygote_cpu, 2)
        return run

    # -------------------------------------------------------------- one notebook's probe

    def probe(self, statements, found, seed, scratch, *, timeout, limits):
        """Probe the definitions in a process the zygote forks; ({exercise: None or why}, problems, CPU seconds).

        The probe gets a user id and an empty folder of its own; the seed goes to it on its pipe
        once it says its definitions are loaded; its records come back on another (`probe`).
        """
        from course_lib.grading import probe
        from course_lib.grading.run import give_to
        from course_lib.grading.sandbox import sandbox_uid
        todo, recorded, problems, cpu = list(found), {}, [], 0.0
        while todo:
            if self.proc is None or self.proc.poll() is not None:
                self._end()
                self._start()
            self.runs += 1
            uid, folder, ident = sandbox_uid(), self.work / f"probe-{secrets.token_hex(8)}", self.runs
            folder.mkdir(mode=0o700)   # empty: nothing of the notebook's copy is in reach
            give_to(folder, uid)
            self._drain()
            order = dict(probe.order_for(statements, todo, uid, limits), id=ident, folder=str(folder),
                         env=sandbox_env(folder, dict(THREADS, MPLBACKEND="agg", PYTHONDONTWRITEBYTECODE="1")),
                         keep=str(self.folder), scratch=str(self.work / f".scratch-{ident}"), quota=self.quota)
            said = []
            try:
                self._send({"probe": order})
                got, said = probe.collect(probe.Replies(self.replies), todo, scratch, timeout,
                                          lambda: self._send({"id": ident, "seed": int(seed)}, self.seeds),
                                          lambda: self.proc.poll() is None)
                if any(got.values()) or len(got) < len(todo):
                    self._send({"stop": True})
                report = self._report(CLEAR_TIMEOUT)
                while report and report[0] != "probed":
                    report = self._report(CLEAR_TIMEOUT)
                if report:
                    cpu += float(report[2])
                else:
                    self._end()
            except (BrokenPipeError, OSError) as e:
                got = {other.name: f"the grading sandbox could not be reached ({e})" for other in todo}
                self._end()
            shutil.rmtree(folder, ignore_errors=True)
            problems = problems or said
            recorded.update(got)
            todo = [e for e in todo if e.name not in recorded]
        return recorded, problems, round(cpu, 3)

    def _drain(self):
        """Empty the replies pipe of what a killed probe left half-written (its writers are all gone)."""
        while select.select([self.replies], [], [], 0)[0]:
            if not os.read(self.replies, 1 << 20):
                break
