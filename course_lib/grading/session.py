"""One sandbox per grading job, its libraries imported once: the grader's side of `forked`.

`grade_class` gives each job a ForkedSandbox, whose zygote (`forked.serve`) forks a runner and
a kernel per notebook. The grader's part of keeping notebooks apart (the rest: `forked`):

- each notebook gets a user id of its own (`sandbox.sandbox_uid`), owning its copy and records
  folder alone, under folders it can pass through but not list; both are deleted once read;
- the key that signs its records goes to its runner alone (fd 3), after its kernel was forked;
- the server's five pipes (`kernel`) are the job's: once the zygote says the notebook's server
  is the only process of it left (`serving`), the grader's checks call it (`remote`), then `stop`.

It needs a grader running as root on Linux with bubblewrap (`available()` says why not); the
grader otherwise gives each notebook a sandbox of its own (`run._run_copy`).
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
from course_lib.grading.graded_copy import (COPIED, NOT_COPIED, _add_bytecode,
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

    def __init__(self, root=ROOT, call_timeout=60):
        self.root, self.proc, self.runs = Path(root), None, 0
        self.call_timeout = call_timeout   # seconds each call of a learner's function may take
        self.folder = Path(tempfile.mkdtemp(prefix="grading-job-"))
        self.lib, self.work = self.folder / "lib", self.folder / "work"
        self.records, self.home = self.folder / "records", self.folder / "zygote"
        for part in COPIED:
            shutil.copytree(self.root / part, self.lib / part,
                            ignore=NOT_COPIED)
        _add_bytecode(self.lib, self.root)
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
        from course_lib.grading.remote import server_pipes   # wire imports torch: the grader's start stays light
        theirs, self.server = server_pipes()
        self.log = open(self.folder / "zygote.log", "wb")
        # the runners' keys, the zygote's reports and the servers' pipes (bwrap passes them on)
        self.proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     pass_fds=(keys_read, status_write, *theirs))
        for fd in (keys_read, status_write, *theirs):
            os.close(fd)
        self.buffer, self.start_cpu = b"", None
        self._send({"python_path": [str(self.lib)],
                    "keys": keys_read, "status": status_write, "server": list(theirs),
                    "keep": str(self.folder)})

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
            for fd in (self.keys, self.status, *self.server):
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

    def run(self, copy, lesson_name, notebook_timeout, startup_timeout, limits, uid, kernel, serve):
        """Grade the copy at `copy` (made by new_copy) as user `uid`; (a run.Run, serve's result).

        `kernel` is the graded kernel's config (`kernel.run_kernel`); `serve(served, why)` is called once the run has
        ended: with a remote.Served (and why None) while the notebook's server is the only
        process of it left, or with None and why there is no server.
        """
        from course_lib.grading.remote import Served
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
                 "scratch": str(self.work / f".scratch-{self.runs}"), "kernel": kernel}
        began, ready, stopped, start_failure, status, zygote_cpu = time.monotonic(), None, None, None, None, 0.0
        left, served = [], None
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
                if report and report[0] in ("serving", "unserved"):
                    if ready is None:   # the kernel started (the records say so), or never did
                        ready, _, _ = watch(record, key, began, ready, startup_timeout, notebook_timeout)
                    deadline = (ready or time.monotonic()) + notebook_timeout
                    server, why = None, " ".join(report[1:]) if report[0] == "unserved" else stopped
                    if report[0] == "serving" and stopped is None:
                        server = Served(*self.server, deadline=deadline, call_timeout=self.call_timeout)
                    served = serve(server, None if server else why)
                    self._send({"stop": True})
                    stopping = time.monotonic()
                    stopped = stopped or "stopping"
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
        if stopped == "stopping":
            stopped = None
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
        return run, served
