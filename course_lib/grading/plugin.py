"""The pytest plugin that runs inside a graded copy, beside nbval: per-cell records, signed.

It makes nbval's kernel patient with a busy machine and quick to notice a dead one, and
writes one record per cell, signed with a key that only the grader and this process know,
to the file the grader named on stdin. The grader decides verdicts from those records.
"""
import hashlib
import hmac
import json
import os
import re
import signal
import time
from pathlib import Path

from course_lib.grading.graded_copy import read_regular
from course_lib.grading.sandbox import STARTUP_TIMEOUT

# ---------------------------------------------------------------- the pytest plugin (in the copy)

class KernelDied(RuntimeError):
    pass


def death(code, who="the kernel"):
    """Why a process ended, in words, from its exit status (None: not known)."""
    if code is None:
        return f"{who} died"
    names = {signal.SIGKILL: "was killed (SIGKILL), which is what the out-of-memory killer does",
             signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)", signal.SIGABRT: "aborted (SIGABRT)",
             signal.SIGXCPU: "used more CPU time than the notebook is allowed (SIGXCPU)"}
    if isinstance(code, int) and code < 0:
        return f"{who} " + names.get(-code, f"was stopped by signal {-code}")
    return f"{who} exited with status {code} (os._exit, or exit() outside Python)"


def _schedstat(pid):
    """(CPU seconds, seconds spent waiting for a CPU) of a process so far; None off Linux."""
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
            ran, waited = f.read().split()[:2]
        return int(ran) / 1e9, int(waited) / 1e9
    except (OSError, ValueError):
        return None


def _patch_kernel(startup_timeout, patience):
    """Make nbval's kernel patient with a busy machine, and quick to notice a dead kernel.

    - A dead kernel: nbval waits out the whole cell time limit; poll it instead.
    - Start-up: nbval allows 10 s for the first kernel_info reply after the kernel is
      ready; allow the start-up limit.
    - Outputs: once a cell's reply has come, nbval waits only 5 s for each of its outputs
      and then stops the kernel for good, so on a busy machine a correct notebook came out
      "not run" ("the kernel had stopped"). A live kernel that has replied will send its
      outputs: wait up to the per-cell limit for them. The short wait stays for a kernel
      that was interrupted at the time limit (one that swallows the interrupt).
    """
    from queue import Empty

    from nbval.kernel import RunningKernel
    if getattr(RunningKernel, "_grading_patched", False):
        return
    original = {name: getattr(RunningKernel, name) for name in
                ("__init__", "get_message", "execute_cell_input", "interrupt")}

    def dead(self):
        provisioner = getattr(getattr(self, "km", None), "provisioner", None)
        return KernelDied(death(getattr(getattr(provisioner, "process", None), "returncode", None)))

    def await_reply(self, msg_id, timeout=None):
        if getattr(self, "_starting", False) and timeout is not None:
            timeout = max(timeout, startup_timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = 0.5 if deadline is None else max(0.01, min(0.5, deadline - time.monotonic()))
            try:
                msg = original["get_message"](self, stream="shell", timeout=wait)
            except Empty:
                if not self.is_alive():
                    raise dead(self)
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                if msg["content"]["status"] == "aborted":
                    raise RuntimeError("Kernel aborted execution request")
                return

    def get_message(self, stream, timeout=None):
        if stream != "iopub" or timeout is None or not getattr(self, "_cell", None):
            return original["get_message"](self, stream, timeout=timeout)
        patient = not self._cell["interrupted"]
        deadline = time.monotonic() + (max(timeout, patience) if patient else timeout)
        started = time.monotonic()
        while True:
            try:
                return original["get_message"](self, stream,
                                               timeout=max(0.01, min(0.5, deadline - time.monotonic())))
            except Empty:
                if not self.is_alive():
                    raise dead(self)
                if time.monotonic() >= deadline:
                    if patient:
                        self._cell["late"] = round(time.monotonic() - started, 1)
                    raise

    def execute_cell_input(self, cell_input, allow_stdin=None):
        self._cell = {"interrupted": False, "late": None, "start": time.monotonic(),
                      "sched": _schedstat(self.km.provisioner.pid)}
        return original["execute_cell_input"](self, cell_input, allow_stdin=allow_stdin)

    def interrupt(self):
        if getattr(self, "_cell", None):
            self._cell["interrupted"] = True
            self._cell["busy"] = _busy(self._cell, self.km.provisioner.pid)
        return original["interrupt"](self)

    def __init__(self, *args, **kwargs):
        self._starting, began = True, time.monotonic()
        try:
            original["__init__"](self, *args, **kwargs)
        except BaseException as e:
            _record({"kernel_failed": f"{type(e).__name__}: {e}".strip(),
                     "seconds": round(time.monotonic() - began, 1)})
            raise
        self._starting = False
        _record({"kernel_pid": self.km.provisioner.pid, "kernel_ready": True,
                 "seconds": round(time.monotonic() - began, 1)})

    RunningKernel.await_reply, RunningKernel.get_message = await_reply, get_message
    RunningKernel.execute_cell_input, RunningKernel.interrupt = execute_cell_input, interrupt
    RunningKernel.__init__ = __init__
    RunningKernel._grading_patched = True


def _busy(cell, pid):
    """How a cell that reached its time limit spent it: [seconds, CPU seconds, seconds waiting for a CPU]."""
    now = _schedstat(pid)
    if cell.get("sched") is None or now is None:
        return None
    return [round(time.monotonic() - cell["start"], 1), round(now[0] - cell["sched"][0], 1),
            round(now[1] - cell["sched"][1], 1)]


_RECORD = None  # [path, key] when the grader runs pytest
RECORD_LIMIT = 2 ** 29  # bytes of records the grader reads back


def _sign(key, text):
    return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()


def _record(entry):
    if _RECORD:
        path, key = _RECORD
        text = json.dumps(entry)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{_sign(key, text)} {text}\n")


def _read_records(path, key):
    """The entries the plugin wrote and signed; (entries, whether any line was forged)."""
    entries, forged = [], False
    if os.path.lexists(path):
        try:  # written in the sandbox: maybe replaced by a link, a FIFO, or made huge
            text = read_regular(path, RECORD_LIMIT).decode("utf-8", errors="replace")
        except ValueError:
            return [], True
        # a last line without its newline is still being written (or its writer was killed
        # at the time limit): not a forgery, and not yet a record
        for line in text.split("\n")[:-1]:
            mac, _, text = line.partition(" ")
            if hmac.compare_digest(mac, _sign(key, text)):
                entries.append(json.loads(text))
            else:
                forged = True
    return entries, forged


def pytest_configure(config):
    """Set the kernel's environment and limits from grading.json before nbval starts it."""
    folder = Path(config.rootpath)
    settings = json.loads((folder / "grading.json").read_text(encoding="utf-8"))
    config.option.nbval_cell_timeout = settings["cell_timeout"]
    threads = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")}
    path = [str(folder), os.environ.get("PYTHONPATH", "")]
    os.environ.update(threads, PYTHONPATH=os.pathsep.join(path), PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="agg")
    startup = settings.get("startup_timeout", STARTUP_TIMEOUT)
    config.option.nbval_kernel_startup_timeout = startup
    _patch_kernel(startup, settings["cell_timeout"])


def _cell_file(text):
    """IPython names a cell's code after a temporary file: say 'line N of the cell' instead."""
    return re.sub(r"\(\d+\.py, line (\d+)\)", r"(line \1 of the cell)", text or "")


def _cell_record(item, call, report):
    outputs = getattr(item, "test_outputs", None) or []
    error = next((o for o in outputs if o.get("output_type") == "error"), None)
    excinfo = call.excinfo
    kernel = getattr(item.parent, "kernel", None)
    cell = getattr(kernel, "_cell", None) or {}
    if call.when != "call":
        cell = {}
    return {"cell": item.cell_num, "when": call.when, "outcome": report.outcome,
            "late": cell.get("late"), "busy": cell.get("busy"),
            "xfail": hasattr(report, "wasxfail"),
            "message": None if excinfo is None else str(excinfo.value).strip(),
            "died": excinfo is not None and excinfo.errisinstance(KernelDied),
            "error": None if error is None else [error.get("ename"), _cell_file(error.get("evalue"))],
            "stdout": "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")}


try:
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        kernel = getattr(getattr(item, "parent", None), "kernel", None)
        if kernel is not None:  # what the kernel noticed belongs to the cell it is about to run
            kernel._cell = None
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        if hasattr(item, "cell_num") and (call.when == "call" or report.outcome != "passed"):
            entry = _cell_record(item, call, report)
            item.config._grading_cells = getattr(item.config, "_grading_cells", {})
            item.config._grading_cells[item.cell_num] = entry
            _record(entry)
except ImportError:  # pytest is only needed when grading
    def pytest_runtest_call(item):
        pass
