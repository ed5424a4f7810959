"""Grade exercise notebooks with nbval: a check passes only when it ran and printed its pass line.

    python -m course_lib.grading exercises/01_attention_by_hand.ipynb        # one notebook
    python -m course_lib.grading --class submissions/ --out grades/ [--roster roster.txt]

For each submission the grader writes a graded copy in a temporary folder of its own,
next to a fresh copy of `course_lib` and `data/`: the learner's cells, then each of the
lesson's check cells put back after the cell that last defines its exercise function,
and nothing after the last check. A restored check cell loads its checker afresh from
that copy (not the name in the kernel), runs it, and prints what it printed; it carries
the lesson's stored pass line, e.g. `softmax: 20 checks passed`, and nbval compares the
two. So an exercise passes on positive evidence only: a dead kernel, a timeout, an error
swallowed or a line missing is a fail or "not run", with its reason in words.

The copy is run by `python -m pytest` with nbval, one process and one kernel per
notebook, one torch thread per kernel, a time limit per cell and per notebook, and a
memory limit (RLIMIT_AS) in the kernel. `--keep DIR` leaves the graded copy in DIR; then
`python -m pytest DIR/notebooks/<lesson>.ipynb` runs exactly what the grader ran.

A busy machine is not the learner's fault. The kernel imports the libraries its notebook
uses (torch, matplotlib) while it starts, under a start-up limit of its own; the
notebook's time limit counts from when the kernel is ready; a kernel that did not start,
or died before the first cell, is started again once, and the notebook's row says so.
A kernel that has finished a cell gets the per-cell limit, not nbval's 5 s, to send the
cell's outputs. In class mode every notebook that did not fully run, or ran twice, gets
an entry in grades/grading.log (appended, never overwritten): each try, the cells that did
not pass, and the tail of pytest's output.

This is feedback, not a sandbox: the learner's code runs with the rights of whoever
grades, and code that sets out to fool the checks from inside the kernel can.
"""
import argparse
import ast
import copy
import csv
import datetime
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT, exercises, parse_python, tags

LESSONS = ROOT / "notebooks"
STATUSES = ("passed", "failed", "not run", "missing")
GRADEBOOK = ["learner", "lesson", "exercise", "points", "max_points", "status", "feedback", "sha256"]
CELL_TIMEOUT, NOTEBOOK_TIMEOUT, MEMORY_GIB = 120, 600, 4.0
# Seconds a kernel may take to start, with the libraries its lesson imports (below), before
# the learner's first cell: a busy machine's business, not the learner's, so a separate and
# generous limit, and a kernel that did not start is started again once.
STARTUP_TIMEOUT = 300
# Libraries a kernel imports while it starts, when the notebook imports them: their import
# time then counts against the start-up limit, not against the learner's first cell.
PRELOAD = ("numpy", "torch", "matplotlib.pyplot")
COPIED = ("course_lib", "data")   # what a graded copy gets of the instructor's tree
WATCHED = ("course_lib", "notebooks", "data")  # what must not change while grading
# `python -m pytest`, less the second of CPU that jsonschema (imported by nbformat) spends
# compiling a grammar for a URL format check that notebooks never use. The grader sends
# where to record each cell's result, and a key to sign it with, on stdin: never in the
# environment or a file that the kernel, a child of pytest, could read.
# Only nbval and the grader's plugin are loaded: not every pytest plugin installed (xdist...).
LAUNCH = ("import json, os, sys; sys.modules['rfc3987_syntax'] = None; import course_lib.grading as g; "
          "g._RECORD = json.loads(sys.stdin.readline()); sys.stdin.close(); import pytest; "
          "os.environ['PYTEST_DISABLE_PLUGIN_AUTOLOAD'] = '1'; "
          "sys.exit(pytest.main(['-p', 'nbval.plugin', *sys.argv[1:]]))")


# ---------------------------------------------------------------- the lesson's exercises

@dataclass(frozen=True)
class Exercise:
    name: str
    points: float
    pass_output: list   # the check cell's stored outputs in the lesson: its pass line
    module: str         # the checker's module, e.g. course_lib.checks.lesson00


def _stamp(path):
    """What tells whether a file changed since it was last read: its path, size and time."""
    info = os.stat(path)
    return str(path), info.st_size, info.st_mtime_ns


@functools.lru_cache(maxsize=256)
def _checkers_in(stamp):
    """The check_<name> functions a checks module defines (cached while the file is unchanged)."""
    tree = parse_python(Path(stamp[0]).read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def checker_module(name, root=ROOT):
    """The module under course_lib/checks that defines check_<name>, found by reading the files."""
    for path in sorted((Path(root) / "course_lib" / "checks").glob("*.py")):
        if f"check_{name}" in _checkers_in(_stamp(path)):
            return f"course_lib.checks.{path.stem}"
    raise ValueError(f"no module in course_lib/checks defines check_{name}")


def lesson_exercises(lesson, root=ROOT):
    """The lesson's exercises in order, with points from the check cell's metadata (default 1)."""
    found = []
    for name, _, j in exercises(lesson):
        check = lesson.cells[j]
        points = check.get("metadata", {}).get("points", 1)
        if isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0:
            raise ValueError(f"the check cell of '{name}' has points={points!r} in its metadata; "
                             f"it must be a number of 0 or more")
        lines = [o for o in check.get("outputs", []) if o.get("output_type") == "stream"]
        if not lines or not re.fullmatch(rf"{re.escape(name)}: \d+ checks passed\n?",
                                         "".join(o["text"] for o in lines)):
            raise ValueError(f"the lesson's check cell of '{name}' should hold its stored pass line "
                             f"'{name}: N checks passed'; rerun the lesson and save it")
        found.append(Exercise(name, points, [copy.deepcopy(o) for o in lines],
                              checker_module(name, root)))
    return found


def _assigned_names(tree):
    """Names bound at the top level of a cell: def, class, assignment (not inside functions)."""
    names, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in getattr(node, "targets", [getattr(node, "target", None)]):
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for part in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, part, []))
        elif isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)
    return names


@functools.lru_cache(maxsize=4096)
def _names_bound(source):
    """The names a cell binds at its top level, or None when it does not parse."""
    try:
        return frozenset(_assigned_names(parse_python(source)))
    except SyntaxError:
        return None


def defines(source, name):
    """Whether a cell's code defines (or binds) `name` at its top level; by its text if it does not parse."""
    names = _names_bound(source)
    if names is not None:
        return name in names
    return re.search(rf"^(def\s+{re.escape(name)}\s*\(|{re.escape(name)}\s*=[^=])", source,
                     re.MULTILINE) is not None


# ---------------------------------------------------------------- the graded copy

CHECK_CELL = '''\
# Restored by the grader: the lesson's check of `{name}`, with its checker loaded afresh
# from the grading copy of course_lib. What it prints is compared with the lesson's pass line.
def _grader_check(root, module, exercise, namespace):
    import contextlib, importlib, importlib.machinery as machinery, io, sys
    kept = {{k: sys.modules.pop(k) for k in list(sys.modules)
             if k == "course_lib" or k.startswith("course_lib.")}}
    path, meta_path, out = sys.path[:], sys.meta_path[:], io.StringIO()
    figures = set()
    if "matplotlib.pyplot" in sys.modules:
        figures = set(sys.modules["matplotlib.pyplot"].get_fignums())
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            try:
                sys.path[:0] = [root]
                sys.meta_path[:] = [machinery.BuiltinImporter, machinery.FrozenImporter,
                                    machinery.PathFinder]
                checker = getattr(importlib.import_module(module), "check_" + exercise)
            finally:
                sys.path[:], sys.meta_path[:] = path, meta_path
            if exercise not in namespace:
                raise NameError(f"name '{{exercise}}' is not defined: no cell defined it, "
                                f"or the cell that does stopped with an error")
            checker(namespace[exercise])
        lines = out.getvalue().splitlines()
        result = lines[-1] if lines else "the checker printed nothing"
    except KeyboardInterrupt:
        sys.stdout.write("interrupted\\n")
        raise
    except BaseException as e:  # a failed check: its feedback, never a pass line
        result = f"{{type(e).__name__}}: {{e}}"
    finally:
        sys.modules.update(kept)
        if "matplotlib.pyplot" in sys.modules:
            plt = sys.modules["matplotlib.pyplot"]
            for number in set(plt.get_fignums()) - figures:
                plt.close(number)
    sys.stdout.write(result + "\\n")


_grader_check({root!r}, {module!r}, {name!r}, globals())
del _grader_check'''

CONFTEST = '''\
"""Written by course_lib.grading: run this folder's notebook as the grader does.

    python -m pytest notebooks/   # from this folder
"""
from course_lib.grading import (pytest_configure, pytest_runtest_call,  # noqa: F401
                                pytest_runtest_makereport, pytest_terminal_summary)
'''

PYTEST_INI = """\
[pytest]
addopts = --nbval-lax --nbval-current-env -p no:cacheprovider -q
"""

STARTUP = '''\
# Written by course_lib.grading: the kernel's limits, set before any learner code runs.
def _grading_limits():
    import os
    try:
        import resource
    except ImportError:  # Windows: no limits but the time limits
        return
    memory = int(os.environ.get("COURSE_GRADING_MEMORY", "0"))
    if memory > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(os.environ.get("COURSE_GRADING_CPU", "0"))
    if cpu > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def _grading_preload():
    # the libraries the notebook imports, so their import counts as the kernel's start-up
    import os
    for name in filter(None, os.environ.pop("COURSE_GRADING_PRELOAD", "").split(",")):
        try:
            __import__(name)
        except Exception:  # the learner's own import will show the error
            pass


_grading_limits()
_grading_preload()
del _grading_limits, _grading_preload
'''


@dataclass
class Placement:
    """Where the graded copy puts each check, in nbval's numbering of code cells."""
    exercise: str
    points: float
    check_cell: int           # code-cell number of the restored check in the copy
    defined_in: int | None    # code-cell number of the cell defining the function, if any


def graded_copy(submission, lesson, found, root):
    """(notebook, placements): the learner's cells with the lesson's checks restored.

    Each check goes right after the code cell that last defines its function. The
    learner's own check cells and nbval markers are dropped, their outputs cleared, and
    cells after the last check are left out.
    """
    nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(lesson.metadata))
    cells = []
    for cell in submission.cells:
        if cell.get("cell_type") == "code" and "check" in tags(cell):
            continue
        cell = copy.deepcopy(cell)
        if cell.get("cell_type") == "code":
            cell.outputs, cell.execution_count = [], None
            keep = [t for t in tags(cell) if not t.startswith(("nbval", "raises-exception"))]
            cell.setdefault("metadata", {})["tags"] = keep
        cells.append(cell)
    after = {}
    for ex in found:
        where = [i for i, c in enumerate(cells) if c.get("cell_type") == "code"
                 and defines(c.get("source", ""), ex.name)]
        after[ex.name] = where[-1] if where else None
    last = max((i for i in after.values() if i is not None), default=-1)
    out, placed, position = [], {}, {}
    for i, cell in enumerate(cells[: last + 1]):
        position[i] = len(out)
        out.append(cell)
        for ex in found:
            if after[ex.name] == i:
                placed[ex.name] = len(out)
                out.append(_check_cell(ex, root))
    for ex in found:  # no cell defines it: its check runs after the others and says so
        if after[ex.name] is None:
            placed[ex.name] = len(out)
            out.append(_check_cell(ex, root))
    nb.cells = out
    code_number = {}
    for i, cell in enumerate(out):
        if cell.get("cell_type") == "code":
            code_number[i] = len(code_number)
    placements = [Placement(ex.name, ex.points, code_number[placed[ex.name]],
                            None if after[ex.name] is None else code_number[position[after[ex.name]]])
                  for ex in found]
    return nb, placements


def _check_cell(ex, root):
    cell = nbformat.v4.new_code_cell(CHECK_CELL.format(root=str(root),
                                                       module=ex.module, name=ex.name))
    cell.metadata = {"tags": ["check", "nbval-check-output"], "grading": {"exercise": ex.name}}
    cell.outputs = [nbformat.from_dict(o) for o in copy.deepcopy(ex.pass_output)]
    for o in cell.outputs:
        o["name"] = "stdout"
    cell.execution_count = 1
    return cell


def tree_hash(root, parts=WATCHED):
    """{relative path: sha256} of the files under root/<part>, caches left out."""
    found = {}
    for part in parts:
        for path in sorted((Path(root) / part).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts:
                found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def changed(before, after):
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def preloads(nb):
    """The libraries of PRELOAD that a notebook's code imports (course_lib imports torch)."""
    found = set()
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        found |= set(re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", cell.get("source", ""), re.MULTILINE))
    if "course_lib" in found:
        found |= {"torch", "numpy"}
    return [name for name in PRELOAD if name.split(".")[0] in found]


def write_copy(folder, nb, lesson_name, placements, cell_timeout, memory_bytes, cpu_seconds,
               root=ROOT, startup_timeout=STARTUP_TIMEOUT):
    """Lay out a graded copy in `folder`: course_lib, data, notebooks/<lesson>, and the pytest set-up."""
    folder = Path(folder)
    for part in COPIED:
        shutil.copytree(Path(root) / part, folder / part,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    (folder / "notebooks").mkdir()
    nbformat.write(nb, folder / "notebooks" / lesson_name)
    (folder / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (folder / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    startup = folder / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-grading-limits.py").write_text(STARTUP, encoding="utf-8")
    code = [c for c in nb.cells if c.cell_type == "code"]
    settings = dict(cell_timeout=cell_timeout, memory_bytes=int(memory_bytes),
                    cpu_seconds=int(cpu_seconds), lesson=lesson_name,
                    startup_timeout=startup_timeout, preload=preloads(nb),
                    checks=[p.__dict__ for p in placements],
                    sources={str(i): _first_line(c.source) for i, c in enumerate(code)})
    (folder / "grading.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")


# ---------------------------------------------------------------- the pytest plugin (in the copy)

class KernelDied(RuntimeError):
    pass


def _death(code):
    """The reason a kernel process ended, in words."""
    if code is None:
        return "the kernel died"
    if code < 0:
        names = {signal.SIGKILL: "was killed (SIGKILL), which is what the out-of-memory killer does",
                 signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)",
                 signal.SIGABRT: "aborted (SIGABRT)",
                 signal.SIGXCPU: "used more CPU time than the notebook is allowed (SIGXCPU)"}
        return "the kernel " + names.get(-code, f"was stopped by signal {-code}")
    return f"the kernel exited with status {code} (os._exit, or exit() outside Python)"


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
        return KernelDied(_death(getattr(getattr(provisioner, "process", None), "returncode", None)))

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
    if Path(path).exists():
        text = Path(path).read_text(encoding="utf-8")
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
    os.environ.update(threads, PYTHONPATH=os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
                      IPYTHONDIR=str(folder / ".ipython"), PYTHONDONTWRITEBYTECODE="1",
                      COURSE_GRADING_MEMORY=str(settings["memory_bytes"]),
                      COURSE_GRADING_CPU=str(settings["cpu_seconds"]), MPLBACKEND="agg",
                      COURSE_GRADING_PRELOAD=",".join(settings.get("preload", [])))
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


def pytest_terminal_summary(terminalreporter, config):
    """The verdict per exercise, the same words the grader writes to the gradebook."""
    settings = json.loads((Path(config.rootpath) / "grading.json").read_text(encoding="utf-8"))
    cells = getattr(config, "_grading_cells", {})
    terminalreporter.section("grading")
    for r in verdicts(cells, [Placement(**p) for p in settings["checks"]], settings):
        terminalreporter.write_line(f"{r.exercise}: {r.status} ({_points(r.points)}/"
                                    f"{_points(r.max_points)})  {r.feedback}")


# ---------------------------------------------------------------- verdicts

@dataclass
class Result:
    exercise: str
    status: str        # passed, failed, not run or missing
    feedback: str      # the check's pass line or feedback, or why it did not run
    points: float = 0
    max_points: float = 1


def _points(x):
    return f"{x:g}"


def _cell_name(settings, number):
    line = (settings.get("sources") or {}).get(str(number), "")
    return f"cell {number}" + (f" (`{line}`)" if line else "")


def verdicts(cells, placements, settings, stopped=None):
    """One Result per exercise from nbval's per-cell records (keyed by code-cell number)."""
    cells = {int(k): v for k, v in cells.items()}
    limit = settings["cell_timeout"]
    died = next((c for c in sorted(cells) if cells[c]["died"]), None)
    hung = next((c for c in sorted(cells) if "Failed to interrupt" in (cells[c]["message"] or "")), None)
    results = []
    for p in placements:
        cell = cells.get(p.check_cell)
        if cell is not None and cell["outcome"] == "passed":
            results.append(Result(p.exercise, "passed", cell["stdout"].strip(), p.points, p.points))
            continue
        status, feedback = _why(cell, p, cells, settings, died, hung, limit, stopped)
        results.append(Result(p.exercise, status, feedback, 0, p.points))
    return results


def _why(cell, p, cells, settings, died, hung, limit, stopped):
    """(status, feedback) for a check that did not pass: the first cause, in words."""
    message = (cell or {}).get("message") or ""
    if cell is None:
        return "not run", stopped or "the check cell did not run"
    if "Kernel dead on test start" in message:
        if died is not None and died < p.check_cell:
            return "not run", f"{cells[died]['message']} in {_cell_name(settings, died)}, before this check"
        if hung is not None and hung < p.check_cell:
            return "not run", (f"{_cell_name(settings, hung)} ran past the {limit:g} s time limit per "
                               f"cell and did not stop when interrupted (a loop that catches "
                               f"KeyboardInterrupt?), so the kernel was stopped")
        before = [c for c in sorted(cells) if c < p.check_cell and cells[c]["outcome"] != "passed"
                  and "Kernel dead on test start" not in (cells[c]["message"] or "")]
        if before and cells[before[0]].get("late") is not None:
            return "not run", _late(settings, before[0], cells[before[0]]["late"]) + ", before this check"
        if before:
            first = (cells[before[0]]["message"] or "no message").strip().splitlines()[0]
            return "not run", (f"the kernel had stopped before this check, after "
                               f"{_cell_name(settings, before[0])}: {first}")
        return "not run", "the kernel had stopped before this check (no cell before it failed)"
    if cell.get("late") is not None:
        return "not run", _late(settings, p.check_cell, cell["late"], "the check")
    if cell["died"]:
        return "failed", f"{message} while the check ran"
    if "Failed to interrupt kernel" in message:
        return "failed", (f"the check ran past the {limit:g} s time limit per cell and did not stop "
                          f"when interrupted (a loop that catches KeyboardInterrupt?), so the kernel "
                          f"was stopped")
    if "Timeout of" in message and "waiting for output" not in message:
        return "failed", (f"the check ran past the {limit:g} s time limit per cell (an endless loop, "
                          f"or far too slow?)" + _busy_note(cell))
    if p.defined_in is None:
        return "failed", (f"no cell defines {p.exercise}: was the exercise cell deleted, or its "
                          f"function renamed?")
    defined = cells.get(p.defined_in) or {}
    earlier = [c for c in sorted(cells) if c < p.check_cell and cells[c]["error"]]
    cause = ""
    if defined.get("error"):
        ename, evalue = defined["error"]
        cause = (f"the cell that defines {p.exercise}, {_cell_name(settings, p.defined_in)}, "
                 f"raised {ename}: {evalue}. Then the check said: ")
    elif earlier and cell["stdout"].startswith("NameError"):  # what was never defined, and why
        ename, evalue = cells[earlier[0]]["error"]
        cause = f"{_cell_name(settings, earlier[0])} raised {ename}: {evalue}. Then the check said: "
    if cell["error"]:
        ename, evalue = cell["error"]
        return "failed", (f"the restored check cell itself raised {ename}: {evalue} (was it changed "
                          f"before it ran, e.g. by an input transformer?)")
    said = cell["stdout"].strip()
    if said.startswith("interrupted"):
        return "failed", f"the check ran past the {limit:g} s time limit per cell" + _busy_note(cell)
    if not said:
        first = message.splitlines()[0] if message else "no output"
        return "failed", f"the check printed nothing, so no pass line ({first})"
    return "failed", cause + said


def _late(settings, number, seconds, what=None):
    what = what or _cell_name(settings, number)
    return (f"the machine was too busy: the kernel finished {what} but its output had not arrived "
            f"{seconds:g} s later, so nbval stopped the kernel; grade it again")


def _busy_note(cell):
    """How busy the machine was while a cell ran to its time limit, when it was busy."""
    busy = cell.get("busy")
    if not busy or busy[2] < 0.25 * busy[0]:
        return ""
    return (f"; the machine was busy: of those {busy[0]:g} s the kernel ran {busy[1]:g} s and "
            f"waited {busy[2]:g} s for a CPU")


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


def _lesson_index(lessons):
    return {p.name: p for p in sorted(Path(lessons).glob("*.ipynb"))}


@functools.lru_cache(maxsize=64)
def _lesson_marks(stamp):
    """(the lesson's text cells, its exercise names), read once while the file is unchanged."""
    lesson = nbformat.read(stamp[0], as_version=4)
    ours = frozenset(c.source.strip() for c in lesson.cells if c.cell_type == "markdown") - {""}
    return ours, tuple(n for n, _, _ in exercises(lesson))


def identify(nb, lessons=LESSONS):
    """{lesson file name: score}: how much of each lesson this notebook holds (text cells and exercises)."""
    texts = {c.get("source", "").strip() for c in nb.cells if c.get("cell_type") == "markdown"}
    code = [c.get("source", "") for c in nb.cells if c.get("cell_type") == "code"]
    scores = {}
    for name, path in _lesson_index(lessons).items():
        ours, names = _lesson_marks(_stamp(path))
        scores[name] = (len(ours & texts) / max(1, len(ours))
                        + sum(any(defines(s, n) for s in code) for n in names) / max(1, len(names)))
    return scores


def submission_hash(path, lesson_path, root=ROOT):
    h = hashlib.sha256(Path(path).read_bytes())
    h.update(Path(lesson_path).read_bytes())
    for name, digest in sorted(tree_hash(root, ("course_lib/checks",)).items()):
        h.update(f"{name}:{digest}".encode())
    return h.hexdigest()


@dataclass
class Run:
    """What one pytest run of a graded copy left: per-cell records and why it ended early."""
    cells: dict
    stopped: str | None = None        # why the run ended before the checks, in words
    start_failure: str | None = None  # why no kernel got as far as the first cell: worth a retry
    output: str = ""                  # the tail of pytest's own output
    kernel_seconds: float | None = None  # how long the kernel took to start, imports included


def _run_copy(folder, lesson_name, notebook_timeout, startup_timeout=STARTUP_TIMEOUT):
    """Run pytest on the copy; a Run.

    The notebook's time limit counts from when its kernel is ready: the kernel's start-up,
    with the libraries its lesson imports, has a limit of its own, since a busy machine
    and not the learner decides how long that takes.
    """
    private = Path(tempfile.mkdtemp(prefix="grading-"))
    record, key = private / f"{secrets.token_hex(8)}.jsonl", secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({"PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"})
    command = [sys.executable, "-c", LAUNCH, f"notebooks/{lesson_name}"]
    log = private / "pytest.log"
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(command, cwd=folder, env=env, stdin=subprocess.PIPE, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, text=True)
    began, ready, stopped, start_failure = time.monotonic(), None, None, None
    try:
        proc.stdin.write(json.dumps([str(record), key]) + "\n")
        proc.stdin.close()
    except OSError:  # pytest ended at once; its output says why
        pass
    while True:
        try:
            proc.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if ready is None and any("kernel_ready" in e for e in _read_records(record, key)[0]):
            ready = now
        if ready is None and now - began > startup_timeout + 60:
            start_failure = stopped = (f"the machine was too slow to start the kernel: it was not "
                                       f"ready {now - began:.0f} s after grading began")
        elif ready is not None and now - ready > notebook_timeout:
            stopped = f"the notebook ran past its {notebook_timeout:g} s time limit before this check"
        if stopped:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
    entries, forged = _read_records(record, key)
    output = log.read_text(encoding="utf-8", errors="replace")[-4000:]
    shutil.rmtree(private, ignore_errors=True)
    for entry in entries if stopped else []:  # the kernel of a run killed at its time limit
        if "kernel_pid" in entry:
            try:
                os.kill(entry["kernel_pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
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
    elif start_failure is None and stopped is None and not cells and proc.returncode not in (0, 1):
        start_failure = f"pytest stopped with status {proc.returncode} before any cell ran"
    if stopped is None and proc.returncode not in (0, 1):
        stopped = f"pytest stopped with status {proc.returncode}: {output.strip()[-500:]}"
    if start_failure:
        stopped = start_failure
    return Run(cells, stopped, start_failure, output,
               None if started is None else started["seconds"])


def grade(path, lesson=None, *, lessons=LESSONS, cell_timeout=CELL_TIMEOUT,
          notebook_timeout=NOTEBOOK_TIMEOUT, memory_gib=MEMORY_GIB, keep=None, root=ROOT,
          startup_timeout=STARTUP_TIMEOUT):
    """Grade the notebook at `path` against its lesson (by file name unless given); a Graded."""
    path, start = Path(path), time.monotonic()
    index = _lesson_index(lessons)
    lesson_path = Path(lesson) if lesson else index.get(path.name)
    try:
        submission = nbformat.read(path, as_version=4)
        if not isinstance(submission.get("cells"), list):
            raise ValueError("it has no list of cells")
    except Exception as e:  # not JSON, not a notebook, unreadable
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
        return Graded(path, stem, [Result(e.name, "not run", reason, 0, e.points) for e in found],
                      problem=reason, submission=submission)

    if submission is None:
        return not_run(unreadable)
    scores = identify(submission, lessons)
    best = max(scores, key=scores.get)
    if best != lesson_path.name and scores[best] > scores.get(lesson_path.name, 0) + 0.5:
        return not_run(f"this notebook is lesson {Path(best).stem} (its text and exercises are that "
                       f"lesson's), saved as {path.name}; hand in {lesson_path.name} itself")
    sha = submission_hash(path, lesson_path, root)
    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix=f"grade-{stem}-"))
    if keep:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    tries = []  # why each earlier try's kernel did not get as far as the first cell
    try:
        while True:
            copy_root = folder.resolve()
            nb, placements = graded_copy(submission, lesson_nb, found, copy_root)
            cpu = notebook_timeout + startup_timeout + 30
            write_copy(copy_root, nb, lesson_path.name, placements, cell_timeout,
                       memory_gib * 2 ** 30, cpu, root, startup_timeout=startup_timeout)
            settings = json.loads((copy_root / "grading.json").read_text())
            before = tree_hash(copy_root, ("course_lib",))
            run = _run_copy(copy_root, lesson_path.name, notebook_timeout, startup_timeout)
            if run.start_failure is None or len(tries) == 1:
                break
            tries.append(run.start_failure)  # the machine's fault, not the notebook's: once more
            shutil.rmtree(folder, ignore_errors=True)
            folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix=f"grade-{stem}-"))
            folder.mkdir(parents=True, exist_ok=True)
        if run.start_failure:
            reason = f"{run.start_failure}; tried twice, so this notebook was not graded: grade it again"
            results = [Result(e.name, "not run", reason, 0, e.points) for e in found]
        else:
            results = verdicts(run.cells, placements, settings, run.stopped)
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
    return Graded(path, stem, results, sha256=sha, seconds=time.monotonic() - start,
                  submission=submission, placements=placements, retried=retried,
                  log=_diagnosis(run, settings, tries))


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


def _first_line(source):
    lines = [line.strip() for line in source.splitlines()
             if line.strip() and not line.strip().startswith("#")]
    line = lines[0] if lines else ""
    return line if len(line) <= 60 else line[:57] + "..."


# ---------------------------------------------------------------- feedback file

def feedback_html(graded, learner=""):
    """The learner's notebook as HTML, with each check's result after the cell that defines it."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    nb = copy.deepcopy(graded.submission) if graded.submission is not None else nbformat.v4.new_notebook()
    nb.cells = [c for c in nb.cells if not (c.get("cell_type") == "code" and "check" in tags(c))]
    earned = sum(r.points for r in graded.results)
    total = sum(r.max_points for r in graded.results)
    who = re.sub(r"[^\w .@-]", "_", learner)
    head = [f"# Feedback: {graded.lesson or graded.path.name}" + (f", {who}" if who else ""),
            f"**{_points(earned)} of {_points(total)} points.** Graded "
            f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}. Each check's result follows "
            f"the cell that defines its function. The checks say what they tested; they are "
            f"feedback, not proof."]
    if graded.problem:
        head.append("This notebook was not graded; the reason is below.")
    cells = [nbformat.v4.new_markdown_cell("\n\n".join(head))]
    if graded.problem and not graded.results:
        cells.append(_result_cell("grading", graded.problem))
    code_seen, pending = -1, list(graded.results)
    by_name = {p.exercise: p for p in graded.placements}
    for cell in nb.cells:
        cells.append(cell)
        if cell.get("cell_type") != "code":
            continue
        code_seen += 1
        for r in list(pending):
            p = by_name.get(r.exercise)
            if p is not None and p.defined_in is not None and _defines_in(cell, r.exercise) and \
                    not any(_defines_in(c, r.exercise) for c in nb.cells[nb.cells.index(cell) + 1:]):
                cells.extend(_result_cells(r))
                pending.remove(r)
    for r in pending:
        cells.extend(_result_cells(r))
    nb.cells = cells
    if not hasattr(_EXPORTERS, "html"):  # loading the templates costs more than using them
        # the learner's own HTML (in markdown and outputs) is escaped: no script runs when opened
        _EXPORTERS.html = HTMLExporter(config=Config(
            {"HTMLExporter": {"preprocessors": ["nbconvert.preprocessors.sanitize.SanitizeHTML"]}}))
    body, _ = _EXPORTERS.html.from_notebook_node(nb)
    return body


_EXPORTERS = threading.local()


def _defines_in(cell, name):
    return cell.get("cell_type") == "code" and defines(cell.get("source", ""), name)


def _result_cell(title, text):
    cell = nbformat.v4.new_code_cell(f"# {title}")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text + "\n")]
    return cell


def _result_cells(r):
    mark = {"passed": "passed", "failed": "failed", "not run": "not run", "missing": "missing"}[r.status]
    return [nbformat.v4.new_markdown_cell(f"**Check `{r.exercise}`: {mark}**, "
                                          f"{_points(r.points)} of {_points(r.max_points)} points"),
            _result_cell(f"check_{r.exercise}({r.exercise})", r.feedback)]


# ---------------------------------------------------------------- a class

def _learner_units(folder):
    """(learner folders, [(learner, path)], [(learner, file, problem)]) found under the class folder."""
    learners, units, problems = [], [], []
    for entry in sorted(Path(folder).iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            learners.append(entry.name)
            for nb in sorted(entry.rglob("*.ipynb")):
                if ".ipynb_checkpoints" not in nb.parts:
                    units.append((entry.name, nb))
        elif entry.suffix == ".ipynb":
            problems.append(("", entry.name, "a notebook directly in the class folder: put each "
                                             "learner's notebooks in a folder of their own"))
    return learners, units, problems


def _rows(learner, graded):
    if graded.lesson is None:
        return [dict(learner=learner, lesson=graded.path.stem, exercise="", points=0, max_points=0,
                     status="not run", feedback=graded.problem, sha256="")]
    return [dict(learner=learner, lesson=graded.lesson, exercise=r.exercise, points=_points(r.points),
                 max_points=_points(r.max_points), status=r.status, feedback=r.feedback,
                 sha256=graded.sha256) for r in graded.results]


def cores():
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def read_roster(path):
    names = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        name = line.split(",")[0].strip()
        if name and not name.startswith("#") and name.lower() != "learner":
            names.append(name)
    return names


def grade_class(folder, out, *, jobs=None, roster=None, lessons=LESSONS, only=None,
                cell_timeout=CELL_TIMEOUT, notebook_timeout=NOTEBOOK_TIMEOUT,
                memory_gib=MEMORY_GIB, html=True, log=print, root=ROOT,
                startup_timeout=STARTUP_TIMEOUT):
    """Grade every learner's notebooks into out/gradebook.csv, out/summary.csv and out/feedback/.

    Returns (rows, problems): problems counts notebooks that could not be graded and
    learners with no submission. Raises FileNotFoundError with a plain message when the
    class folder is missing or holds nothing to grade.
    """
    folder, out = Path(folder), Path(out)
    if not folder.is_dir():
        raise FileNotFoundError(f"there is no class folder at {folder}: make one with a folder per "
                                f"learner holding their notebooks, e.g. {folder}/ada/00_start_here.ipynb")
    learners, units, loose = _learner_units(folder)
    names = read_roster(roster) if roster else []
    if not learners and not loose and not names:
        raise FileNotFoundError(f"the class folder {folder} is empty: it needs a folder per learner "
                                f"holding their notebooks, e.g. {folder}/ada/00_start_here.ipynb")
    jobs = jobs or cores()
    out.mkdir(parents=True, exist_ok=True)
    book = out / "gradebook.csv"
    old = _read_gradebook(book)
    index = _lesson_index(lessons)
    watched = tree_hash(root)
    with book.open("a" if old is not None else "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, GRADEBOOK)
        if old is None:
            writer.writeheader()
            old = {}
        final, problems, seen = {}, 0, set()
        todo = []
        for learner, path in units:
            lesson_path = index.get(path.name)
            key = (learner, path.stem if lesson_path else f"? {path.name}")
            if key in seen:
                final[(learner, f"! {path}")] = [dict(
                    learner=learner, lesson=path.stem, exercise="", points=0, max_points=0,
                    status="not run", sha256="", feedback=f"another notebook of lesson {path.stem} "
                    f"for {learner} was graded; only one per lesson counts ({path.relative_to(folder)})")]
                problems += 1
                continue
            seen.add(key)
            if lesson_path is not None:
                try:
                    sha = submission_hash(path, lesson_path, root)
                except OSError:
                    sha = None
                previous = old.get((learner, path.stem))
                if sha and previous and all(r["sha256"] == sha for r in previous):
                    final[key] = previous
                    log(f"{learner}/{path.name}: unchanged since it was graded, kept")
                    continue
            todo.append((learner, path, key))
        done = 0
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(grade, path, lessons=lessons, cell_timeout=cell_timeout,
                                   notebook_timeout=notebook_timeout, memory_gib=memory_gib,
                                   root=root, startup_timeout=startup_timeout):
                       (learner, path, key) for learner, path, key in todo}
            for future in as_completed(futures):
                learner, path, key = futures[future]
                done += 1
                try:
                    graded = future.result()
                except Exception as e:  # a bug of ours must not stop the class
                    graded = Graded(path, None, problem=f"the grader failed: {type(e).__name__}: {e}")
                rows = _rows(learner, graded)
                writer.writerows(rows)
                f.flush()
                if graded.retried or any(r["status"] == "not run" for r in rows):
                    _append_log(out / "grading.log", learner, path, graded, rows)
                final[key] = rows
                problems += graded.problem is not None
                if html and graded.lesson is not None:
                    target = out / "feedback" / learner / f"{graded.lesson}.html"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        target.write_text(feedback_html(graded, learner), encoding="utf-8")
                    except Exception as e:  # nbconvert on an odd notebook: the grades still stand
                        log(f"{learner}/{path.name}: no feedback file ({type(e).__name__}: {e})")
                earned = sum(float(r["points"]) for r in rows)
                total = sum(float(r["max_points"]) for r in rows)
                log(f"[{done}/{len(todo)}] {learner}/{path.name}: "
                    + (graded.problem if graded.problem and graded.lesson is None else
                       f"{_points(earned)}/{_points(total)} points") + f" ({graded.seconds:.0f} s)"
                    + (f"; {graded.retried}" if graded.retried else ""))
    for learner, name, problem in loose:
        final[(learner, f"? {name}")] = [dict(learner=learner, lesson=Path(name).stem, exercise="",
                                              points=0, max_points=0, status="not run",
                                              feedback=problem, sha256="")]
        problems += 1
    expected = set(only or []) or {k[1] for k in final if not k[1].startswith(("?", "!"))}
    maxima = {}
    for stem in sorted(expected):
        if f"{stem}.ipynb" in index:
            lesson_nb = nbformat.read(index[f"{stem}.ipynb"], as_version=4)
            maxima[stem] = [(e.name, e.points) for e in lesson_exercises(lesson_nb, root)]
    for learner in sorted(set(learners) | set(names)):
        have = {k[1] for k in final if k[0] == learner}
        why = (f"{learner} has no folder in {folder}" if learner not in learners
               else f"the folder {learner}/ holds no notebook of this lesson")
        if learner in learners and not any(u[0] == learner for u in units):
            why = f"the folder {learner}/ is empty: no notebooks were handed in"
        if not maxima and not have:
            final[(learner, "")] = [dict(learner=learner, lesson="", exercise="", points=0, max_points=0,
                                         status="missing", feedback=why, sha256="")]
            problems += 1
        for stem, found in maxima.items():
            if stem not in have:
                final[(learner, stem)] = [dict(learner=learner, lesson=stem, exercise=name, points=0,
                                               max_points=_points(points), status="missing",
                                               feedback=why.replace("this lesson", f"{stem}.ipynb"),
                                               sha256="") for name, points in found]
                problems += 1
    rows = [row for key in sorted(final) for row in final[key]]
    _write_csv(book, GRADEBOOK, rows)
    _write_summary(out / "summary.csv", rows, sorted(maxima))
    touched = changed(watched, tree_hash(root))
    if touched:
        log(f"WARNING: the instructor's files changed while grading: {', '.join(touched)}")
        problems += 1
    else:
        log(f"checked: course_lib, notebooks/ and data/ are unchanged ({len(watched)} files)")
    return rows, problems


def _append_log(path, learner, notebook, graded, rows):
    """Add why a notebook did not fully run to the class's grading.log; earlier runs' entries stay."""
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    head = f"### {stamp} {learner}/{Path(notebook).name}"
    body = [f"{r['exercise'] or '(notebook)'}: {r['status']}: {r['feedback']}" for r in rows]
    if graded.retried:
        body.insert(0, graded.retried)
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n".join([head, *body, graded.log, ""]) + "\n")


def _read_gradebook(path):
    """{(learner, lesson): rows} from an earlier run, the latest rows of each winning; None if none."""
    if not path.exists():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != GRADEBOOK:
            return None
        runs = {}
        for row in reader:
            key = (row["learner"], row["lesson"])
            rows = runs.setdefault(key, [])
            if rows and (rows[-1]["sha256"] != row["sha256"]
                         or any(r["exercise"] == row["exercise"] for r in rows)):
                rows.clear()
            rows.append(row)
    return runs


def _write_csv(path, fields, rows):
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def _write_summary(path, rows, lessons):
    learners = sorted({r["learner"] for r in rows})
    table = []
    for learner in learners:
        mine = [r for r in rows if r["learner"] == learner]
        line = {"learner": learner}
        for stem in lessons:
            line[stem] = _points(sum(float(r["points"]) for r in mine if r["lesson"] == stem))
        line["total"] = _points(sum(float(r["points"]) for r in mine))
        line["max_total"] = _points(sum(float(r["max_points"]) for r in mine))
        table.append(line)
    _write_csv(path, ["learner", *lessons, "total", "max_total"], table)


# ---------------------------------------------------------------- command line

def _lesson_names(text, lessons=LESSONS):
    """Lesson stems from '00,01_attention_by_hand,...': a number or a name each."""
    if not text:
        return None
    stems = [p.stem for p in sorted(Path(lessons).glob("*.ipynb"))]
    found = []
    for part in filter(None, (t.strip() for t in text.split(","))):
        match = [s for s in stems if s == part or s.split("_")[0] == part]
        if len(match) != 1:
            raise SystemExit(f"error: --lessons: no single lesson is {part!r}; lessons: {', '.join(stems)}")
        found.append(match[0])
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description="Grade exercise notebooks with nbval against the "
                                                 "lessons' checks.")
    parser.add_argument("path", help="a notebook, or with --class a folder with a folder per learner")
    parser.add_argument("--class", dest="folder", action="store_true",
                        help="grade every learner's notebooks under the folder PATH")
    parser.add_argument("--out", default="grades", help="where the gradebook, summary and feedback go "
                                                        "(class mode; default: grades/)")
    parser.add_argument("--roster", help="a file with one learner per line; those with no "
                                         "submission get 'missing' rows")
    parser.add_argument("--lessons", help="comma-separated lesson names expected of everyone, e.g. "
                                          "00_start_here,01_attention_by_hand (default: every "
                                          "lesson anyone handed in)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="notebooks graded at once (default: the number of cores)")
    parser.add_argument("--timeout", type=float, default=CELL_TIMEOUT, help="seconds allowed per cell")
    parser.add_argument("--notebook-timeout", type=float, default=NOTEBOOK_TIMEOUT,
                        help="seconds allowed per notebook")
    parser.add_argument("--startup-timeout", type=float, default=STARTUP_TIMEOUT,
                        help="seconds a kernel may take to start, before the first cell (a busy "
                             "machine's start-up is retried once)")
    parser.add_argument("--memory", type=float, default=MEMORY_GIB,
                        help="GiB of address space per kernel (0: no limit)")
    parser.add_argument("--keep", help="one notebook: leave the graded copy in this folder, to rerun "
                                       "it with `python -m pytest KEEP/notebooks/`")
    parser.add_argument("--no-html", action="store_true", help="class mode: skip the feedback files")
    args = parser.parse_args(argv)
    limits = dict(cell_timeout=args.timeout, notebook_timeout=args.notebook_timeout,
                  memory_gib=args.memory, startup_timeout=args.startup_timeout)
    if args.folder:
        try:
            rows, problems = grade_class(args.path, args.out, jobs=args.jobs, roster=args.roster,
                                         only=_lesson_names(args.lessons),
                                         html=not args.no_html, **limits)
        except FileNotFoundError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        passed = sum(r["status"] == "passed" for r in rows)
        print(f"{passed} of {len(rows)} exercise rows passed; gradebook: {Path(args.out) / 'gradebook.csv'}, "
              f"summary: {Path(args.out) / 'summary.csv'}, feedback: {Path(args.out) / 'feedback'}/")
        if problems:
            print(f"{problems} notebook(s) or learner(s) could not be graded or are missing: see the "
                  f"rows whose status is 'not run' or 'missing'")
        return 1 if problems else 0
    if not Path(args.path).is_file():
        print(f"error: there is no notebook at {args.path}", file=sys.stderr)
        return 2
    watched = tree_hash(ROOT)
    graded = grade(args.path, keep=args.keep, **limits)
    if graded.lesson is None:
        print(graded.problem)
        return 1
    if graded.retried:
        print(graded.retried)
    for r in graded.results:
        print(f"{r.exercise}: {r.status} ({_points(r.points)}/{_points(r.max_points)})  {r.feedback}")
    if any(r.status == "not run" for r in graded.results):
        print("what the grader saw:\n" + graded.log)
    earned = sum(r.points for r in graded.results)
    total = sum(r.max_points for r in graded.results)
    print(f"{_points(earned)} of {_points(total)} points for {graded.lesson}")
    if args.keep:
        print(f"the graded copy is in {args.keep}; `python -m pytest {args.keep}/notebooks/` reruns it")
    touched = changed(watched, tree_hash(ROOT))
    if touched:
        print(f"WARNING: the instructor's files changed while grading: {', '.join(touched)}")
        return 1
    print(f"checked: course_lib, notebooks/ and data/ are unchanged ({len(watched)} files)")
    return 0 if graded.problem is None and earned == total else 1


if __name__ == "__main__":
    sys.exit(main())
