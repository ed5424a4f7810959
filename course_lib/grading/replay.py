"""Decide each verdict where no learner code runs: the instructor's checker, replayed on the record.

The grader's probe (`probe`), a process that holds only the learner's definitions, runs each
checker in record mode and sends what the learner's function did (`course_lib.checks.record`)
back on a pipe; the grader writes each record into a folder of its own. Then it:

1. reads each record as hostile data (JSON and safetensors, size-capped, never pickle; `collect`
   copies records out of a folder: regular files only, never through a link);
2. replays the lesson's checker from the grader's own course_lib (not the copy's, which the
   notebook could have reached) in a worker process that loads only data (`Replayer`):
   one per grading job, under a memory limit and a time limit per exercise, so a hostile
   record can cost one exercise its verdict but never stall the class;
3. passes an exercise only when the replay printed exactly the lesson's stored pass line
   and used every recorded probe (`decide`). Nothing printed in the notebook counts.
"""
import contextlib
import importlib
import io
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from course_lib.exercises import ROOT

RECORDS = "records"          # a folder's records, for `collect` and `replay_records`
REPLAY_TIMEOUT = 120         # seconds one exercise's replay may take
REPLAY_MEMORY_GIB = 4.0      # address space of the replay worker
FEEDBACK_LIMIT = 20_000      # characters of replayed feedback kept


# ---------------------------------------------------------------- in the worker (or any process)

def outcome(check, fn):
    """(kind, text): ("passed", the last line printed), ("failed", feedback) or ("unfinished", message)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            check(fn)
    except NotImplementedError as e:
        return "unfinished", str(e)
    except AssertionError as e:
        return "failed", str(e)
    except MemoryError:
        return "error", "replaying the record needed more memory than the grader allows"
    except RecursionError:
        return "error", "replaying the record went too deep (a RecursionError)"
    except Exception as e:  # a checker bug: never a pass
        return "error", f"the replay stopped with {type(e).__name__}: {e}"
    lines = out.getvalue().strip().splitlines()
    return "passed", lines[-1] if lines else ""


def replay_one(stem, exercise, module, base_seed):
    """Replay check_<exercise> of `module` on the record at `stem`; a dict of plain data.

    {"kind": passed / failed / unfinished / error / unreadable, "text", "finished",
    "cases_passed"}: "unreadable" when the record is missing, malformed or refused.
    """
    from course_lib.checks import record
    if not (re.fullmatch(r"course_lib\.checks\.lesson\d+", str(module)) and str(exercise).isidentifier()):
        return {"kind": "error", "text": f"no such check: {module}.check_{exercise}",
                "finished": False, "cases_passed": None}
    try:
        observations = record.load(stem)
    except record.RecordError as e:
        return {"kind": "unreadable", "text": str(e), "finished": False, "cases_passed": None}
    check = getattr(importlib.import_module(module), f"check_{exercise}")
    with record.replaying(observations, base_seed, exercise) as replay:
        kind, text = outcome(check, record.Replayed(exercise))
    passed = sum(c.passed for c in replay.checkers) if replay.checkers else None
    return {"kind": kind, "text": text[:FEEDBACK_LIMIT], "finished": replay.finished(),
            "cases_passed": passed}


def serve(requests=sys.stdin, replies=None):
    """The worker's loop: one JSON request a line in, one JSON reply a line out."""
    replies = replies or sys.stdout
    import course_lib.checks
    course_lib.checks.load_checkers()  # every lesson's checkers, imported once, before the first replay
    replies.write(json.dumps({"ready": True, "cpu": time.process_time()}) + "\n")
    replies.flush()
    for line in requests:
        try:
            r = json.loads(line)
            reply = replay_one(r["stem"], r["exercise"], r["module"], int(r["base_seed"]))
        except MemoryError:
            reply = {"kind": "error", "text": "replaying the record needed more memory than the "
                     "grader allows", "finished": False, "cases_passed": None}
        except Exception as e:  # a malformed request: the grader's bug
            reply = {"kind": "error", "text": f"{type(e).__name__}: {e}", "finished": False,
                     "cases_passed": None}
        reply["cpu"] = time.process_time()
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


# The worker's first lines: the memory limit before anything is imported, then the grader's
# own course_lib (from the root named on the command line, never a graded copy), and the
# protocol on a stdout of its own, so nothing a checker prints can reach it.
BOOT = """\
import os, sys
limit = float(sys.argv[2])
if limit > 0:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (int(limit * 2 ** 30),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
sys.modules["rfc3987_syntax"] = None  # jsonschema's URL grammar, ~2 s of CPU, never used here
sys.path.insert(0, sys.argv[1])
replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr
import course_lib.grading.replay as replay
replay.serve(sys.stdin, replies)
"""


class Replayer:
    """A worker process of the grader's that replays checks, started once and shared (thread-safe).

    Each exercise's replay has `timeout` seconds; a worker that overruns it, or dies, is killed
    and that exercise fails with the reason; the next replay starts a fresh worker.
    """

    def __init__(self, root=ROOT, timeout=REPLAY_TIMEOUT, memory_gib=REPLAY_MEMORY_GIB, boot=BOOT):
        self.root, self.timeout, self.memory_gib, self.boot = Path(root), timeout, memory_gib, boot
        self.lock = threading.Lock()
        self.proc, self.cpu = None, 0.0
        self.starts, self.start_cpu = 0, 0.0   # workers started, and their CPU before the first replay
        self.replays, self.replay_cpu = 0, 0.0  # exercises replayed, and the CPU they took

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        with self.lock:
            self._stop()

    def _stop(self):
        if self.proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def _start(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.boot, str(self.root), str(self.memory_gib)],
            cwd=self.root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True)
        self.buffer = b""
        ready = self._reply(max(self.timeout, 300))   # its start: torch and the checkers imported
        if not (isinstance(ready, dict) and ready.get("ready")):
            self._stop()
            raise RuntimeError(f"the replay worker did not start ({ready})")
        self.starts += 1
        self.start_cpu += ready["cpu"]
        self.cpu = ready["cpu"]

    def _reply(self, timeout):
        """The worker's next line as JSON, or a string saying why there is none."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return f"the replay of this check took more than {timeout:g} s, so it was stopped"
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:   # its output closed: it is ending, so its status comes soon
                    try:
                        code = self.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        return "the replay worker closed its output while it replayed this check"
                    return f"the replay worker ended (status {code}) while it replayed this check"
                self.buffer += chunk
                if len(self.buffer) > 4 * FEEDBACK_LIMIT + 2 ** 16:
                    return "the replay worker's reply was too long"
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            return "the replay worker's reply could not be read"

    def replay(self, stem, exercise, module, base_seed):
        """replay_one's dict, from the worker; with "cpu": the CPU seconds it took."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = None
                self._start()
            request = {"stem": str(stem), "exercise": exercise, "module": module,
                       "base_seed": int(base_seed)}
            try:
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
                self.proc.stdin.flush()
            except OSError:
                pass  # it died: the reply says so
            reply = self._reply(self.timeout)
            if not isinstance(reply, dict):
                self._stop()
                return {"kind": "error", "text": reply, "finished": False, "cases_passed": None,
                        "cpu": None}
            used, self.cpu = reply["cpu"] - self.cpu, reply["cpu"]
            reply["cpu"] = round(used, 3)
            self.replays += 1
            self.replay_cpu += used
            return reply


# ---------------------------------------------------------------- in the grader

def collect(copy_root, exercises, into):
    """Copy each exercise's record out of the graded copy into `into`; {exercise: why not, or None}.

    Only regular files, opened without following a link, each under record.MAX_BYTES; a
    records folder that is a link or not a folder yields no records at all.
    """
    from course_lib.checks.record import MAX_BYTES
    from course_lib.grading.graded_copy import read_regular
    folder, into = Path(copy_root) / RECORDS, Path(into)
    problems = {}
    if os.path.islink(folder) or not folder.is_dir():
        why = "the graded copy's records folder was replaced (by a link, or a file)"
        return {name: why for name in exercises}
    for name in exercises:
        problems[name] = None
        for suffix in (".json", ".safetensors"):
            path = folder / f"{name}{suffix}"
            if not os.path.lexists(path):
                problems[name] = "no record"
                break
            try:
                data = read_regular(path, MAX_BYTES)
            except ValueError as e:
                problems[name] = f"its file {path.name} was refused: {e}"
                break
            (into / path.name).write_bytes(data)
    return problems


def pass_count(pass_line):
    """N of a pass line 'name: N checks passed', or None."""
    match = re.fullmatch(r"\S+: (\d+) checks passed", pass_line.strip())
    return int(match.group(1)) if match else None


def _shown(text):
    """Text with each control character shown as its escape, never obeyed (no \\r over a line)."""
    return "".join(c if c == "\n" or (c >= " " and c != "\x7f") else repr(c)[1:-1] for c in str(text))


def decide(exercise, replayed, pass_line):
    """(status, feedback, cases_passed, cases_total) from a replay: passed only on the exact pass line."""
    total = pass_count(pass_line)
    kind, text = replayed["kind"], _shown(replayed["text"])
    if kind == "passed" and text == pass_line.strip() and replayed["finished"]:
        return "passed", text, total, total
    done = replayed.get("cases_passed")
    if kind == "passed" and not replayed["finished"]:
        feedback = ("the record holds results the check never asked for, so it is not the record "
                    "of this check (was it written by something other than the check cell?)")
    elif kind == "passed":
        feedback = (f"the replayed check printed {text!r}, not the lesson's pass line "
                    f"{pass_line.strip()!r} (the lesson and its checker disagree: tell the instructor)")
    elif kind == "failed":
        feedback = f"AssertionError: {text}"
    elif kind == "unfinished":
        feedback = f"NotImplementedError: {text}"
    elif kind == "unreadable":
        feedback = f"the record of this check could not be used: {text}"
        done = None
    else:
        feedback = text
    return "failed", feedback, done, total


def replay_records(copy_root, found, base_seed, replayer, scratch):
    """{exercise: replay_one's dict}, records copied to `scratch` first; a missing record: None."""
    problems = collect(copy_root, [e.name for e in found], scratch)
    out = {}
    for ex in found:
        why = problems[ex.name]
        if why == "no record":
            out[ex.name] = None
        elif why:
            out[ex.name] = {"kind": "unreadable", "text": why, "finished": False,
                            "cases_passed": None, "cpu": 0.0}
        else:
            out[ex.name] = replayer.replay(Path(scratch) / ex.name, ex.name, ex.module, base_seed)
    return out


class InProcess:
    """A Replayer that replays in this process: for a graded copy rerun by hand (`--keep`)."""

    def replay(self, stem, exercise, module, base_seed):
        return dict(replay_one(stem, exercise, module, base_seed), cpu=None)


def scratch_folder():
    import tempfile
    return Path(tempfile.mkdtemp(prefix="grading-replay-"))


def remove(folder):
    shutil.rmtree(folder, ignore_errors=True)
