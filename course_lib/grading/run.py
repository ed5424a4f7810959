"""Grade one notebook: its graded copy run under nbval, then each exercise checked in its server.

`grade` lays out the graded copy (`graded_copy`), runs it (in the job's sandbox,
`session.ForkedSandbox`, or in a process of its own here, `_run_copy`: sandboxed where it can
be), and while the notebook's server (`kernel`) is the only process of it left, checks each
exercise with the grader's own checker (`remote`); `verdicts` turns that and the run's
per-cell records into results.

The notebook's time limit counts from when its kernel is ready, and covers its run and
every call of its functions: the kernel's start-up, with the libraries its lesson imports,
has a limit of its own, since a busy machine and not the learner decides how long that
takes. A kernel that did not start, or died before the first cell, is started again once,
and the result says so.
"""
import importlib
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT
from course_lib.grading.graded_copy import changed, graded_copy, tree_hash, write_copy
from course_lib.grading.help_taken import help_taken
from course_lib.grading.lessons import LESSONS, _lesson_index, lesson_exercises
from course_lib.grading.plugin import _read_records
from course_lib.grading.questions import grade_questions, questions_not_graded
from course_lib.grading.sandbox import (CELL_TIMEOUT, MEMORY_GIB, NOTEBOOK_TIMEOUT, SANDBOXED, STARTUP_TIMEOUT,
                                        UNSANDBOXED, bwrap_command, give_to, learner_uid, own_env, process_limit,
                                        sandbox_env, sandbox_uid, unavailable)
from course_lib.grading.submissions import identify, read_submission, submission_hash
from course_lib.grading.verdicts import Result, _cell_name, stopped_at, verdicts

# The first process of a graded copy (a sandbox of its own): it reads on stdin (never the
# environment or a file its kernel could read) the user id to drop to, the hard limits, the
# signed record's path and key, and the server's fds; becomes undumpable (its kernel cannot read
# the key) and the reaper of what the kernel leaves; runs pytest with nbval (its kernel the graded
# one, `kernel`, given the fds) and the grader's plugin only. Then it kills every process under
# it but the server (`kernel.keep_server`), records that, and waits for the grader to close its
# stdin, then ends them all and records the CPU of all.
LAUNCH = """\
import json, os, sys
setup = json.loads(sys.stdin.readline())
uid = setup.get("uid")
if uid is not None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
try:
    import resource
except ImportError:  # Windows: the time limits only
    resource = None
for name, value in setup["limits"].items():
    if resource is not None and value is not None and hasattr(resource, name):
        soft, hard = value if isinstance(value, list) else (value, value)
        resource.setrlimit(getattr(resource, name), (soft, hard))
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE, 0
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
sys.modules["rfc3987_syntax"] = None
import course_lib.grading.plugin as g
g._RECORD = setup["record"]
fds = setup["server"]
from jupyter_client.provisioning import local_provisioner
real = local_provisioner.launch_kernel
def launch_kernel(cmd, **kwargs):
    if list(cmd[1:3]) == ["-m", "ipykernel_launcher"]:
        cmd = [cmd[0], "-c", "from course_lib.grading.kernel import main; main()", os.path.abspath("grading.json"), *cmd[3:]]
        kwargs["pass_fds"] = tuple(kwargs.get("pass_fds", ())) + tuple(fds)
    return real(cmd, **kwargs)
local_provisioner.launch_kernel = launch_kernel
os.environ["COURSE_GRADING_SERVER"] = json.dumps(fds)
import pytest
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
status = pytest.main(["-p", "nbval.plugin", *sys.argv[1:]])
for fd in fds:
    os.close(fd)
from course_lib.grading.kernel import descendants, filters, keep_server
marked = None if filters() is None else filters() + 2    # the kernel's filter, then the server's mark
server, why = keep_server(descendants(os.getpid()), marked)
g._record({"finished": status, "server": server, "unserved": why})
sys.stdin.read()
keep_server(descendants(os.getpid()), -1)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
if resource is not None:  # the CPU of this process and every one under it
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    g._record({"cpu_seconds": round(sum(u.ru_utime + u.ru_stime for u in used), 2)})
sys.exit(status)
"""


# ---------------------------------------------------------------- one notebook

@dataclass
class Graded:
    """The outcome of grading one file: a lesson's results, or why it could not be graded."""
    path: Path
    lesson: str | None            # the lesson's file stem, when known
    results: list = field(default_factory=list)
    problem: str | None = None    # why the notebook could not be graded, if it could not
    sha256: str = ""
    seconds: float = 0.0
    submission: object = None     # the learner's notebook, for the feedback file
    placements: list = field(default_factory=list)
    retried: str | None = None    # why it was graded a second time, if it was
    log: str = ""                 # each try, the cells that did not pass, pytest's output tail
    sandbox: str = ""             # how its code ran: SANDBOXED, UNSANDBOXED, or "" (it did not run)
    cpu_seconds: float | None = None  # CPU of its pytest and kernel, every try (None: not measured)
    help: dict = field(default_factory=dict)  # exercise -> help_taken.Help, read from its source
    solution_costs: float | None = None       # the points a shown solution cost (--solution-costs)
    check_cpu_seconds: float | None = None   # CPU the grader's own checks of its exercises took
    seed: int | None = None       # the grading seed its checks' inputs were drawn from
    stopped: str = ""             # where and why its run stopped ('' when it ran to its end)


FILE_LIMIT = 2 ** 30  # bytes of any one file a graded notebook writes


class SandboxUnavailable(RuntimeError):
    pass


def use_sandbox(sandbox):
    """Whether to run in a sandbox: True, False or "auto"; SandboxUnavailable when one is required and missing."""
    if sandbox == "auto":
        return unavailable() is None
    if sandbox and unavailable() is not None:
        raise SandboxUnavailable(f"no sandbox can be made on this machine: {unavailable()}")
    return bool(sandbox)



@dataclass
class Run:
    """What one pytest run of a graded copy left: per-cell records and why it ended early."""
    cells: dict
    stopped: str | None = None        # why the run ended before the checks, in words
    start_failure: str | None = None  # why no kernel got as far as the first cell: worth a retry
    output: str = ""                  # the tail of pytest's own output
    kernel_seconds: float | None = None  # how long the kernel took to start, imports included
    cpu_seconds: float | None = None     # CPU of pytest and the kernel, as pytest measured it


def _run_copy(folder, lesson_name, notebook_timeout, startup_timeout=STARTUP_TIMEOUT, limits=None,
              sandboxed=False, serve=None, call_timeout=CELL_TIMEOUT):
    """Run pytest on the copy, in a sandbox when `sandboxed`; (a Run, serve's result).

    The notebook's time limit counts from when its kernel is ready: the kernel's start-up,
    with the libraries its lesson imports, has a limit of its own, since a busy machine
    and not the learner decides how long that takes. `limits` maps resource names
    (RLIMIT_AS...) to the hard limits the copy's first process sets. Once pytest has run,
    `serve(served, why)` is called as in `session.ForkedSandbox.run`: here the grader itself
    says whether the notebook's server is the only process of it left (`LAUNCH`).
    """
    from course_lib.grading.remote import Served, server_pipes   # torch: imported when a notebook runs
    private = Path(tempfile.mkdtemp(prefix="grading-"))    # the grader's alone: pytest's output
    records = Path(tempfile.mkdtemp(prefix="grading-records-"))  # where the plugin writes
    record, key = records / f"{secrets.token_hex(8)}.jsonl", secrets.token_hex(32)
    uid = learner_uid(sandboxed)
    theirs, mine = server_pipes()
    setup = {"record": [str(record), key], "uid": uid, "limits": dict(limits or {}), "server": theirs}
    setup["limits"].setdefault("RLIMIT_NPROC", process_limit())
    command = [sys.executable, "-c", LAUNCH, f"notebooks/{lesson_name}"]
    extra = {"PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
    if sandboxed:
        give_to(folder, uid)
        give_to(records, uid)
        command, env = bwrap_command(command, folder, [records]), sandbox_env(folder, extra)
    elif uid is not None:  # root, unsandboxed: the copy is that user's, and so is HOME; no secrets
        give_to(folder, uid)
        give_to(records, uid)
        env = sandbox_env(folder, extra)
    else:
        env = own_env(extra)
    log = private / "pytest.log"
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(command, cwd=folder, env=env, stdin=subprocess.PIPE, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, text=True, pass_fds=theirs)
    for fd in theirs:
        os.close(fd)
    try:
        proc.stdin.write(json.dumps(setup) + "\n")
        proc.stdin.flush()
    except OSError:  # pytest ended at once; its output says why
        pass
    began, ready, stopped, start_failure, served = time.monotonic(), None, None, None, None
    while True:
        try:
            proc.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            pass
        finished = next((e for e in _read_records(record, key)[0] if "finished" in e), None)
        if finished is not None:
            server = Served(*mine, deadline=(ready or time.monotonic()) + notebook_timeout,
                            call_timeout=call_timeout) if finished["server"] else None
            served = serve(server, finished["unserved"]) if serve else {}
            break
        ready, stopped, start_failure = watch(record, key, began, ready, startup_timeout, notebook_timeout)
        if stopped:
            break
    for fd in mine:
        os.close(fd)
    try:
        proc.stdin.close()
        proc.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if served is None and serve is not None:
        served = serve(None, stopped or "the notebook's run ended before the grader's last cell")
    entries, forged = _read_records(record, key)
    output = tail(log)
    shutil.rmtree(private, ignore_errors=True)
    shutil.rmtree(records, ignore_errors=True)
    # the kernel of an unsandboxed run killed at its time limit (a sandbox's die with it)
    for entry in entries if stopped and not sandboxed else []:
        if "kernel_pid" in entry:
            try:
                os.kill(entry["kernel_pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return outcome(entries, forged, output, stopped, start_failure, proc.returncode), served


def tail(log):
    """The end of a run's output (a notebook may have written a great deal), never following a link or a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        with os.fdopen(os.open(log, flags), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return f"(its output file was replaced: mode {stat.filemode(info.st_mode)})"
            f.seek(max(0, info.st_size - 4000))
            return f.read(4000).decode("utf-8", errors="replace")
    except OSError as e:
        return f"(its output could not be read: {e.strerror})"


def watch(record, key, began, ready, startup_timeout, notebook_timeout):
    """(when the kernel was ready, why to stop the run now, why its kernel did not start) at one look.

    The notebook's time limit counts from when its kernel is ready (the record says so).
    """
    now, stopped, start_failure = time.monotonic(), None, None
    if ready is None and any("kernel_ready" in e for e in _read_records(record, key)[0]):
        ready = now
    if ready is None and now - began > startup_timeout + 60:
        start_failure = stopped = (f"the machine was too slow to start the kernel: it was not "
                                   f"ready {now - began:.0f} s after grading began")
    elif ready is not None and now - ready > notebook_timeout:
        stopped = f"the notebook ran past its {notebook_timeout:g} s time limit"
    return ready, stopped, start_failure


def outcome(entries, forged, output, stopped, start_failure, returncode):
    """The Run that a run's signed records, output and exit status make.

    stopped: why the grader stopped it (its time limits), start_failure: why it saw no kernel
    start; returncode: pytest's exit status (negative: the signal that ended it).
    """
    if forged:
        return Run({}, ("the grader's record of this run was written to by something else, so none "
                        "of it counts"), output=output)
    cells = {e["cell"]: e for e in entries if "cell" in e}
    started = next((e for e in entries if "kernel_ready" in e), None)
    failed = next((e for e in entries if "kernel_failed" in e), None)
    first = cells.get(min(cells)) if cells else None
    if start_failure is None and started is None and failed is not None:
        start_failure = (f"the machine was too slow to start the kernel ({failed['kernel_failed']}, "
                         f"after {failed['seconds']:g} s)")
        if "died" in failed["kernel_failed"].lower():
            start_failure = f"the kernel died while it started ({failed['kernel_failed']})"
    elif (start_failure is None and started is not None and first is not None
          and "Kernel dead on test start" in (first["message"] or "")):
        start_failure = "the kernel died after it started, before the first cell ran"
    elif start_failure is None and stopped is None and not cells and returncode not in (0, 1):
        start_failure = f"pytest stopped with status {returncode} before any cell ran"
    if stopped is None and returncode not in (0, 1):
        stopped = f"pytest stopped with status {returncode}: {output.strip()[-500:]}"
    if start_failure:
        stopped = start_failure
    cpu = next((e["cpu_seconds"] for e in entries if "cpu_seconds" in e), None)
    return Run(cells, stopped, start_failure, output,
               None if started is None else started["seconds"], cpu)


_CHECKING = threading.Lock()   # one check at a time in the grader's process: the checkers seed torch's RNG


def checking(found, pass_lines, base_seed, used):
    """serve(served, why) for a run: each exercise of `found` checked in the notebook's server
    (a remote.Served), by the grader's own checker with inputs from `base_seed`; returns
    {exercise: remote.Outcome}, or {} with why there was no server. `used` gets the CPU
    seconds the checks took in this process."""
    from course_lib.grading.remote import Unserved

    def serve(served, why):
        if served is None:
            return {"unserved": why}
        began = time.thread_time()
        outcomes = {}
        try:
            served.reset()
            for ex in found:
                checker = getattr(importlib.import_module(ex.module), f"check_{ex.name}")
                with _CHECKING:
                    outcomes[ex.name] = served.check(ex.name, checker, base_seed, pass_lines[ex.name])
        except Unserved as e:
            outcomes.setdefault("unserved", str(e))
        finally:
            used.append(time.thread_time() - began)
        return outcomes
    return serve


def grade(path, lesson=None, *, lessons=LESSONS, cell_timeout=CELL_TIMEOUT,
          notebook_timeout=NOTEBOOK_TIMEOUT, memory_gib=MEMORY_GIB, keep=None, root=ROOT,
          startup_timeout=STARTUP_TIMEOUT, sandbox="auto", session=None, seed=None):
    """Grade the notebook at `path` against its lesson (by file name unless given); a Graded.

    sandbox: True runs it in a bubblewrap sandbox (SandboxUnavailable if there is none),
    False without one, "auto" in one where this machine can make one. session: the grading
    job's `session.ForkedSandbox`, which runs it in the job's sandbox (forked from a process
    that has imported the libraries); None: a sandbox of its own.
    seed: the grading seed the checks' inputs are drawn from (None: drawn afresh, `secrets`);
    the same notebook graded with the same seed gets the same feedback (Graded.seed keeps it).
    """
    path, start = Path(path), time.monotonic()
    sandboxed = use_sandbox(sandbox)
    index = _lesson_index(lessons)
    lesson_path = Path(lesson) if lesson else index.get(path.name)
    data = submission = None
    try:
        data = read_submission(path)
    except ValueError as e:  # a link, a FIFO, a device, too large: never opened
        unreadable = f"this submission was refused: {e}"
    try:
        if data is not None:
            submission = nbformat.reads(data.decode("utf-8"), as_version=4)
            if not isinstance(submission.get("cells"), list):
                raise ValueError("it has no list of cells")
    except Exception as e:  # not JSON, not a notebook
        submission = None
        unreadable = f"the notebook could not be read ({type(e).__name__}: {str(e)[:200]})"
    if lesson_path is None:
        guess = ""
        if submission is not None:
            scores = identify(submission, lessons)
            best = max(scores, key=scores.get, default=None)
            if best and scores[best] > 0:
                guess = f"; it looks like {best}: save it under that name"
        what = "no lesson is named" if submission is not None else "unreadable, and no lesson is named"
        return Graded(path, None, problem=f"{what} {path.name}{guess} (lessons: {', '.join(index)})")
    lesson_nb = nbformat.read(lesson_path, as_version=4)
    found = lesson_exercises(lesson_nb, root)
    stem = lesson_path.stem

    def not_run(reason):
        return Graded(path, stem, [Result(e.name, "not run", reason, 0, e.points) for e in found]
                      + questions_not_graded(lesson_nb, reason), problem=reason, submission=submission)

    if submission is None:
        return not_run(unreadable)
    scores = identify(submission, lessons)
    best = max(scores, key=scores.get)
    if best != lesson_path.name and scores[best] > scores.get(lesson_path.name, 0) + 0.5:
        return not_run(f"this notebook is lesson {Path(best).stem} (its text and exercises are that "
                       f"lesson's), saved as {path.name}; hand in {lesson_path.name} itself")
    sha = submission_hash(path, lesson_path, root, data=data)
    if session is not None and (keep or not sandboxed):
        raise ValueError("a notebook graded in a job's sandbox is sandboxed, and its copy is not kept")

    def new_folder():
        if session is not None:
            return session.new_copy()
        if keep:
            shutil.rmtree(keep, ignore_errors=True)
            Path(keep).mkdir(parents=True)
            return Path(keep)
        return Path(tempfile.mkdtemp(prefix=f"grade-{stem}-"))

    folder = new_folder()
    tries = []  # why each earlier try's kernel did not get as far as the first cell
    cpu_used, check_cpu = [], []  # each try's CPU seconds; the grader's checks'
    pass_lines = {e.name: "".join(o["text"] for o in e.pass_output).strip() for e in found}
    checks = sorted({e.module for e in found})
    # the seed of this grading's inputs: drawn now, known to the grader alone
    base_seed = secrets.randbelow(2 ** 62) if seed is None else int(seed)
    try:
        while True:
            copy_root = folder.resolve()
            nb, placements = graded_copy(submission, lesson_nb, found, copy_root)
            cpu = int(notebook_timeout + startup_timeout + 30)
            write_copy(copy_root, nb, lesson_path.name, placements, cell_timeout,
                       memory_gib * 2 ** 30, cpu, root, startup_timeout=startup_timeout,
                       lib=None if session is None else session.lib, checks=checks)
            settings = json.loads((copy_root / "grading.json").read_text())
            before = tree_hash(copy_root, ("course_lib",))
            limits = {"RLIMIT_AS": int(memory_gib * 2 ** 30) or None, "RLIMIT_CPU": [cpu, cpu + 5],
                      "RLIMIT_CORE": 0, "RLIMIT_FSIZE": FILE_LIMIT}
            serve = checking(found, pass_lines, base_seed, check_cpu)
            if session is None:
                run, outcomes = _run_copy(copy_root, lesson_path.name, notebook_timeout, startup_timeout,
                                          limits=limits, sandboxed=sandboxed, serve=serve, call_timeout=cell_timeout)
            else:
                run, outcomes = session.run(copy_root, lesson_path.name, notebook_timeout, startup_timeout,
                                            dict(limits, RLIMIT_NPROC=process_limit()), sandbox_uid(),
                                            settings["kernel"], serve)
            cpu_used.append(run.cpu_seconds)
            if run.start_failure is None or len(tries) == 1:
                break
            tries.append(run.start_failure)  # the machine's fault, not the notebook's: once more
            shutil.rmtree(folder, ignore_errors=True)
            folder = new_folder()
        outcomes = outcomes or {}
        if run.start_failure:
            reason = f"{run.start_failure}; tried twice, so this notebook was not graded: grade it again"
            results = [Result(e.name, "not run", reason, 0, e.points) for e in found]
        else:
            unserved = outcomes.pop("unserved", None)
            from course_lib.grading.kernel import NO_SERVER
            if unserved == NO_SERVER and "this kernel runs without seccomp" in run.output:
                unserved = ("this machine refused the seccomp filter that marks the grader's server, so no "
                            "process of the notebook could be trusted to answer the grader's calls")
            results = verdicts(run.cells, placements, settings, run.stopped, outcomes, pass_lines, unserved)
        touched = changed(before, tree_hash(copy_root, ("course_lib",)))
        if touched:
            reason = (f"the notebook changed the grading copy of course_lib ({', '.join(touched[:3])}), "
                      f"so its checks cannot be trusted: a notebook must not write into course_lib")
            results = [Result(r.exercise, "failed", reason, 0, r.max_points) for r in results]
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    retried = None
    if tries:
        retried = f"graded on a second try: on the first, {tries[0]}"
    stop = stopped_at({int(k): v for k, v in run.cells.items()}, settings, run.stopped)
    return Graded(path, stem, results + grade_questions(submission, lesson_nb), sha256=sha,
                  seconds=time.monotonic() - start, help=help_taken(submission, [e.name for e in found]),
                  submission=submission, placements=placements, retried=retried,
                  log=_diagnosis(run, settings, tries) + (f"\nthe notebook stopped: {stop}" if stop else "")
                  + f"\nthe grader's checks took {sum(check_cpu):.3f} s of CPU",
                  sandbox=(SANDBOXED if sandboxed else UNSANDBOXED) + (
                      " without seccomp" if "this kernel runs without seccomp" in run.output else ""), stopped=stop,
                  cpu_seconds=None if None in cpu_used else round(sum(cpu_used), 2),
                  check_cpu_seconds=round(sum(check_cpu), 3), seed=base_seed)


def _diagnosis(run, settings, tries):
    """What to read when a check did not run: each try, the cells that did not pass, pytest's output."""
    lines = [f"try {i + 1}: {why}" for i, why in enumerate(tries)]
    if run.kernel_seconds is not None:
        lines.append(f"kernel ready after {run.kernel_seconds:g} s "
                     f"(imports at start: {', '.join(settings.get('preload', [])) or 'none'})")
    if run.stopped:
        lines.append(f"stopped: {run.stopped}")
    dead = [n for n in sorted(run.cells) if run.cells[n]["message"] == "Kernel dead on test start"]
    for number in sorted(run.cells):
        cell = run.cells[number]
        if number in dead[1:]:
            continue
        if number in dead[:1]:
            lines.append(f"cells {number}-{dead[-1]}: the kernel was already dead when each was to run")
        elif cell["outcome"] != "passed" or cell.get("late") or cell.get("busy"):
            lines.append(f"{_cell_name(settings, number)} [{cell['when']}] {cell['outcome']}: "
                         + json.dumps({k: cell.get(k) for k in ("message", "error", "late", "busy", "died")
                                       if cell.get(k)})[:1500])
    lines.append("pytest's output (its tail):")
    lines.append(run.output.rstrip() or "(none)")
    return "\n".join(lines)


