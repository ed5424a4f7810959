"""The probe: a fresh process of the grader's that holds only the learner's definitions, and checks them.

After a notebook's nbval run (which shows the learner their outputs and decides nothing), the
grader starts, for each notebook, a probe: a new process, sandboxed as the notebook was, that
no cell of the notebook ever ran in. Into it go the lesson's setup (the instructor's imports
and constants) and the learner's definitions (`definitions`: def, class, import and constants,
read from the notebook's source and never run as cells). Once they are loaded, and only then,
the grader sends the grading's seed on a pipe; the probe runs each exercise's checker in record
mode with it and sends each record back on a pipe of its own (never a file a notebook could
write). The grader replays the records with its own checkers (`replay`): that decides verdicts.

Protocol (one JSON line each way, a record's bytes after its line):
  grader -> probe: {"statements", "exercises": [[name, module], ...], "limits", "uid"}; later {"seed": n}
  probe -> grader: {"loaded": [problems]}; per exercise {"exercise", "json": n, "tensors": m} + bytes;
                   {"done": true}
An exercise whose check hangs past its limit, or kills the probe, fails with the reason, and a
new probe checks the exercises after it.
"""
import functools
import io
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from course_lib.exercises import ROOT

STDERR = subprocess.DEVNULL
LOAD_TIMEOUT = 300     # seconds to load the definitions (imports of a busy machine included)


# ---------------------------------------------------------------- in the probe

def load(statements):
    """(namespace, problems): each statement run in a fresh module namespace, one at a time."""
    import linecache

    from course_lib.grading.definitions import compile_statement
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    problems = []
    for s in statements:
        try:
            code = compile_statement(s)
            lines = s["source"].splitlines(keepends=True)
            linecache.cache[code.co_filename] = (len(s["source"]), None, lines, code.co_filename)
            exec(code, namespace)
        except Exception as e:  # an import the probe cannot make: the check says what is missing
            problems.append(f"{s['where']}: {type(e).__name__}: {e}"[:500])
    return namespace, problems


def _write(out, header, payload=b""):
    data = (json.dumps(header) + "\n").encode() + payload
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


def _record_bytes(recorded):
    from safetensors.torch import save
    tensors = save(recorded.tensors) if recorded.tensors else save({})
    return json.dumps({"format": 1, "observations": recorded.observations}).encode(), tensors


def check_all(namespace, exercises, seed, out):
    """Run each exercise's checker in record mode on the namespace's function; send each record to fd out."""
    import contextlib
    import importlib

    from course_lib.checks import record
    for name, module in exercises:
        check = getattr(importlib.import_module(module), f"check_{name}")
        with record.recording(seed) as recorded:
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    if name not in namespace:
                        raise NameError(f"name '{name}' is not defined")
                    check(namespace[name])
            except BaseException:  # the record holds what happened; the replay decides
                pass
        document, tensors = _record_bytes(recorded)
        _write(out, {"exercise": name, "json": len(document), "tensors": len(tensors)}, document + tensors)
    _write(out, {"done": True})


def serve(order, read_seed, out):
    """The probe's work: load, say so, wait for the seed, check, send. `read_seed()` -> int."""
    namespace, problems = load(order["statements"])
    _write(out, {"loaded": problems})
    seed = read_seed()
    check_all(namespace, order["exercises"], seed, out)


def drop_to(uid, limits):
    """Set hard limits, become `uid` (when given) and undumpable: before any learner code runs."""
    import resource
    for name, value in (limits or {}).items():
        if value is not None and hasattr(resource, name):
            soft, hard = value if isinstance(value, list) else (value, value)
            resource.setrlimit(getattr(resource, name), (soft, hard))
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    if sys.platform.startswith("linux"):
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


# A probe of its own (a single notebook): `python -I`, so no folder the notebook could write is on
# its path; the order on stdin, the replies on a copy of stdout, which then goes to stderr.
BOOT = """\
import json, os, sys
sys.path.insert(0, sys.argv[1])
sys.modules["rfc3987_syntax"] = None
replies = os.dup(1)
os.dup2(2, 1)
order = json.loads(sys.stdin.readline())
import course_lib.grading.probe as p
p.drop_to(order.get("uid"), order.get("limits"))
import course_lib.checks
p.serve(order, lambda: int(json.loads(sys.stdin.readline())["seed"]), replies)
"""


# ---------------------------------------------------------------- in the grader

class Replies:
    """The probe's replies on one fd: JSON lines, a record's bytes after its line."""

    def __init__(self, fd):
        self.fd, self.buffer = fd, b""

    def _fill(self, deadline, want=None):
        while (b"\n" not in self.buffer) if want is None else len(self.buffer) < want:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    return "ended"
                self.buffer += chunk
                if want is None and len(self.buffer) > 2 ** 16 and b"\n" not in self.buffer:
                    return "malformed"
        return None

    def next(self, deadline, max_bytes):
        """(header dict, payload bytes), or (None, why: "timeout", "ended", "malformed")."""
        why = self._fill(deadline)
        if why:
            return None, why
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            header = json.loads(line)
            size = int(header.get("json", 0)) + int(header.get("tensors", 0))
        except (ValueError, TypeError, AttributeError):
            return None, "malformed"
        if not 0 <= size <= max_bytes:
            return None, "malformed"
        why = self._fill(deadline, size)
        if why:
            return None, why
        payload, self.buffer = self.buffer[:size], self.buffer[size:]
        return header, payload


def order_for(statements, found, uid=None, limits=None):
    return {"statements": statements, "exercises": [[e.name, e.module] for e in found],
            "uid": uid, "limits": limits or {}}


def collect(replies, found, scratch, timeout, send_seed, alive):
    """Read a probe's replies into scratch/<exercise>.json|.safetensors; {exercise: None or why it has no record}.

    Exercises after one that ran past `timeout` or ended the probe are left out (not in the dict).
    """
    from course_lib.checks.record import MAX_BYTES
    header, _ = replies.next(time.monotonic() + LOAD_TIMEOUT, MAX_BYTES)
    if header is None or "loaded" not in header:
        why = ("the grader's probe of your definitions did not start"
               + ("" if alive() else " (its process ended while it loaded them: a crash?)"))
        return {e.name: why for e in found}, []
    problems = [str(p)[:500] for p in header["loaded"]][:20] if isinstance(header["loaded"], list) else []
    send_seed()
    out = {}
    for ex in found:
        header, payload = replies.next(time.monotonic() + timeout, MAX_BYTES)
        if header is None:
            out[ex.name] = {"timeout": f"the grader's check of your function ran past the {timeout:g} s time "
                                       f"limit (an endless loop, or far too slow?)",
                            "ended": "the grader's check of your function ended its process (a crash, "
                                     "os._exit or exit() inside it, or it ran out of memory)",
                            "malformed": "the grader's check of your function wrote something that is not a "
                                         "record (did your function write to the grader's pipe?)"}[payload]
            return out, problems
        if header.get("exercise") != ex.name:
            out[ex.name] = "the grader's probe sent a record out of order (did your function write to its pipe?)"
            return out, problems
        n = int(header["json"])
        (Path(scratch) / f"{ex.name}.json").write_bytes(payload[:n])
        (Path(scratch) / f"{ex.name}.safetensors").write_bytes(payload[n:])
        out[ex.name] = None
    return out, problems


def replay_all(found, recorded, scratch, seed, replayer):
    """{exercise: replay dict}: each record replayed by the grader's own checker; a why as an error."""
    out = {}
    for ex in found:
        why = recorded.get(ex.name, "not checked: the grader's probe stopped before it")
        if why:
            out[ex.name] = {"kind": "error", "text": why, "finished": False, "cases_passed": None, "cpu": 0.0}
        else:
            out[ex.name] = replayer.replay(Path(scratch) / ex.name, ex.name, ex.module, seed)
    return out


def run_subprocess(statements, found, seed, scratch, *, timeout, root=ROOT, sandboxed=False, limits=None):
    """Probe in a process of its own (bwrap'd when `sandboxed`); ({exercise: None or why}, problems, CPU seconds)."""
    import shutil
    import tempfile

    from course_lib.grading.graded_copy import compiled_tree
    from course_lib.grading.sandbox import bwrap_command, give_to, learner_uid, sandbox_env
    lib = compiled_tree(root)
    todo, recorded, problems, cpu = list(found), {}, [], 0.0
    while todo:
        home = Path(tempfile.mkdtemp(prefix="grading-probe-"))
        uid = learner_uid(sandboxed)   # as the notebook's own run has (`run`)
        command = [sys.executable, "-I", "-c", BOOT, str(lib)]
        env = sandbox_env(home, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "agg",
                                 "PYTHONDONTWRITEBYTECODE": "1"})
        if uid is not None:
            give_to(home, uid)
        if sandboxed:
            os.chmod(home, 0o755)
            command = bwrap_command(command, home, [], root=root, readonly_parts=(), readonly=[lib])
        proc = subprocess.Popen(command, cwd=home, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=STDERR, start_new_session=True)
        try:
            proc.stdin.write((json.dumps(order_for(statements, todo, uid, limits)) + "\n").encode())
            proc.stdin.flush()
        except OSError:
            pass

        def send_seed():
            try:
                proc.stdin.write((json.dumps({"seed": int(seed)}) + "\n").encode())
                proc.stdin.close()
            except OSError:
                pass

        got, said = collect(Replies(proc.stdout.fileno()), todo, scratch, timeout, send_seed,
                            lambda: _alive(proc.pid))
        problems = problems or said
        cpu += _end(proc, wait=10 if len(got) == len(todo) and not any(got.values()) else 0)
        proc.stdout.close()
        shutil.rmtree(home, ignore_errors=True)
        recorded.update(got)
        todo = [e for e in todo if e.name not in recorded]
        if todo and not got:
            break
    return recorded, problems, round(cpu, 3)


def _end(proc, wait):
    """End a probe's process (after `wait` seconds for it to end by itself); its CPU seconds, as the kernel counted them."""
    deadline = time.monotonic() + wait
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped already: its CPU is unknown
            return 0.0
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() >= deadline:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def _alive(pid):
    """Whether a child process runs still, without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


@functools.lru_cache(maxsize=32)
def _setup(sources):
    """The Definitions of a lesson's own code cells (read once per lesson and grading process)."""
    from course_lib.grading import definitions
    return definitions.read_sources(list(sources))


def probe_notebook(submission, lesson, found, seed, scratch, replayer, *, timeout, root=ROOT,
                   sandboxed=False, limits=None, session=None):
    """({exercise: replay dict}, Definitions of the submission, CPU seconds of the probe) for one notebook.

    session: the job's ForkedSandbox, whose zygote forks the probe; else a process of its own.
    """
    from course_lib.exercises import tags
    from course_lib.grading import definitions
    learner = definitions.read_notebook(submission, skip=lambda c: "check" in tags(c))
    names = [e.name for e in found]
    setup = _setup(tuple(c.get("source", "") for c in lesson.get("cells", []) if c.get("cell_type") == "code"
                         and not {"exercise", "check", "question"} & set(tags(c)))).without(names)
    statements = definitions.needed(setup.statements + learner.statements)
    if session is not None:
        recorded, problems, cpu = session.probe(statements, found, seed, scratch, timeout=timeout, limits=limits)
    else:
        recorded, problems, cpu = run_subprocess(statements, found, seed, scratch, timeout=timeout, root=root,
                                                 sandboxed=sandboxed, limits=limits)
    learner.probe_problems = problems   # an import it lacks, say
    return replay_all(found, recorded, scratch, seed, replayer), learner, cpu
