"""Build the graded copy: the learner's cells, then the grader's one cell, and its folder.

The copy holds the learner's cells, less their own check cells (the grader checks), up to the
last cell that an exercise needs (the one that last defines its function, and any later one
that binds a name the function reads: a helper in a later cell), then `kernel.TRIGGER_CELL`:
from there the grader's checks call the learner's functions in the notebook's server, with
the namespace the notebook's run made. The copy holds no checker, no seed, no record.
"""
import atexit
import copy
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT, tags
from course_lib.grading.lessons import _names_bound as names_bound, defines, may_bind, uses
from course_lib.grading.sandbox import STARTUP_TIMEOUT

PRELOAD = ("numpy", "torch", "matplotlib.pyplot")
COPIED = ("course_lib", "data")   # what a graded copy gets of the instructor's tree
# what it does not: bytecode made elsewhere, and the reference answers that solution() shows
# (course_lib/checks/solutions.json), which a learner's function could otherwise read and run
NOT_COPIED = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "solutions.json")
WATCHED = ("course_lib", "notebooks", "data")  # what must not change while grading


# ---------------------------------------------------------------- the graded copy

CONFTEST = '''\
"""Written by course_lib.grading: run this folder's notebook as the grader does.

    python -m pytest notebooks/   # from this folder
"""
from course_lib.grading.plugin import (pytest_configure, pytest_runtest_call,  # noqa: F401
                                       pytest_runtest_makereport)
'''

PYTEST_INI = """\
[pytest]
addopts = --nbval-lax --nbval-current-env -p no:cacheprovider -q
"""

@dataclass
class Placement:
    """Where the graded copy defines each exercise, in nbval's numbering of code cells."""
    exercise: str
    points: float
    defined_in: int | None    # code-cell number of the cell defining the function, if any


def graded_copy(submission, lesson, found, root=None):
    """(notebook, placements): the learner's cells, then the grader's cell (`kernel.TRIGGER_CELL`).

    The copy runs up to the code cell that last defines an exercise's function, or later: the
    last cell that may bind it by exec or globals(), or that binds a name the function reads
    (a helper defined below it); cells after the last of these are left out. The learner's
    own check cells and nbval markers are dropped, and their outputs cleared.
    """
    from course_lib.grading.kernel import TRIGGER_CELL
    nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(lesson.metadata))
    cells, check_at = [], {}
    for cell in submission.cells:
        if cell.get("cell_type") == "code" and "check" in tags(cell):
            for ex in found:  # where the learner's own check was: helpers come before it
                if f"check_{ex.name}" in cell.get("source", ""):
                    check_at.setdefault(ex.name, len(cells))
            continue
        cell = copy.deepcopy(cell)
        if cell.get("cell_type") == "code":
            cell.outputs, cell.execution_count = [], None
            keep = [t for t in tags(cell) if not t.startswith(("nbval", "raises-exception"))]
            cell.setdefault("metadata", {})["tags"] = keep
        cells.append(cell)
    defined, after = {}, {}
    code = [(i, c.get("source", "")) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    for ex in found:
        where = [i for i, source in code if defines(source, ex.name)]
        defined[ex.name] = where[-1] if where else None
        # the check waits for the last cell that may bind the function (exec, globals()) and
        # for the last that binds a name the function reads (a helper in a later cell)
        needs = uses("" if defined[ex.name] is None else cells[defined[ex.name]].get("source", ""), ex.name)
        start = -1 if defined[ex.name] is None else defined[ex.name]
        end = check_at.get(ex.name, len(cells)) if check_at.get(ex.name, -1) > start else len(cells)
        later = [i for i, source in code if start < i < end and (
            may_bind(source, ex.name) or needs & (names_bound(source) or frozenset()))]
        after[ex.name] = max(where + later, default=None)
    last = max((i for i in after.values() if i is not None), default=-1)
    out = cells[: last + 1]
    trigger = nbformat.v4.new_code_cell(TRIGGER_CELL)
    trigger.metadata = {"tags": ["grader"]}
    nb.cells = out + [trigger]
    code_number = {}
    for i, cell in enumerate(nb.cells):
        if cell.get("cell_type") == "code":
            code_number[i] = len(code_number)
    placements = [Placement(ex.name, ex.points, None if defined[ex.name] is None else code_number[defined[ex.name]])
                  for ex in found]
    return nb, placements


def tree_hash(root, parts=WATCHED):
    """{relative path: sha256} of the files under root/<part>, caches left out; links not followed.

    What is not a regular file (a link, a FIFO, a device) counts by its kind, without being opened;
    a part that is itself a link (a notebook's, to a folder of the machine) is not walked.
    """
    found = {}
    for part in parts:
        try:
            info = os.lstat(Path(root) / part)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            found[part] = f"not a folder (mode {stat.filemode(info.st_mode)})"
            continue
        for top, dirs, files in os.walk(Path(root) / part):
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", ".ipynb_checkpoints"))
            for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(top, d))]):
                path = Path(top) / name
                info = os.lstat(path)
                key = str(path.relative_to(root))
                if stat.S_ISREG(info.st_mode):
                    found[key] = hashlib.sha256(read_regular(path, info.st_size + 1)).hexdigest()
                else:
                    found[key] = f"not a regular file (mode {stat.filemode(info.st_mode)})"
    return found


def read_regular(path, limit):
    """The bytes of a regular file, opened without following a link or blocking on a FIFO.

    ValueError, saying what it is, for anything else or for a file over `limit` bytes.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if os.path.islink(path):
            raise ValueError("it is a symbolic link") from None
        raise ValueError(f"it could not be opened ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"it is not a regular file (mode {stat.filemode(info.st_mode)})")
        if info.st_size > limit:
            raise ValueError(f"it is {info.st_size / 2 ** 20:.0f} MB, over the {limit / 2 ** 20:.0f} MB limit")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"it grew past the {limit / 2 ** 20:.0f} MB limit while it was read")
    return data


def _copy_font_cache(target):
    """Give the copy matplotlib's font list, so a kernel that cannot see the grader's cache need not rebuild it."""
    target.mkdir()
    home = Path(os.environ.get("MPLCONFIGDIR") or Path.home() / ".cache" / "matplotlib")
    for path in sorted(home.glob("fontlist-*.json")) if home.is_dir() else []:
        try:
            (target / path.name).write_bytes(read_regular(path, 2 ** 24))
        except (OSError, ValueError):
            pass


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


_compiled_lock, _compiled_trees = threading.Lock(), {}


def compiled_tree(root=ROOT):
    """A folder of this process's own holding root's course_lib compiled to bytecode; made once.

    Its bytecode is hash-checked (PEP 552): Python uses a file of it only when it was compiled
    from exactly the source beside it, and compiles the source afresh otherwise. So a graded
    copy given these files runs the same code as without them, without compiling course_lib
    from source in each of its processes (pytest's plugin, the kernel, each check cell).
    """
    import compileall
    import py_compile
    root = Path(root).resolve()
    with _compiled_lock:
        if root not in _compiled_trees:
            folder = Path(tempfile.mkdtemp(prefix="grading-bytecode-"))
            folder.chmod(0o755)   # a sandbox's processes read it as the notebook's user
            atexit.register(shutil.rmtree, folder, True)
            shutil.copytree(root / "course_lib", folder / "course_lib",
                            ignore=NOT_COPIED)
            compileall.compile_dir(folder / "course_lib", quiet=2, workers=1,
                                   invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
            _compiled_trees[root] = folder
        return _compiled_trees[root]


def _add_bytecode(copy_root, root):
    """Put the compiled tree's bytecode beside the copy's course_lib sources (see compiled_tree)."""
    compiled = compiled_tree(root)
    for top, dirs, files in os.walk(compiled / "course_lib"):
        if Path(top).name != "__pycache__":
            continue
        target = Path(copy_root) / Path(top).relative_to(compiled)
        if target.parent.is_dir():
            target.mkdir(exist_ok=True)
            for name in files:
                shutil.copyfile(os.path.join(top, name), target / name)


def write_copy(folder, nb, lesson_name, placements, cell_timeout, memory_bytes, cpu_seconds,
               root=ROOT, startup_timeout=STARTUP_TIMEOUT, checks=None, lib=None):
    """Lay out a graded copy in `folder`: course_lib, data, notebooks/<lesson>, and the pytest set-up.

    course_lib comes with hash-checked bytecode of its sources (`compiled_tree`). lib: a folder
    holding both, read-only in the sandbox, mounted read-only on the copy's empty folders of
    those names for its run (`sandbox.seal`) instead of copied: not links the notebook could replace.
    """
    folder = Path(folder)
    for part in COPIED:
        if lib is not None:
            (folder / part).mkdir()
        else:
            shutil.copytree(Path(root) / part, folder / part,
                            ignore=NOT_COPIED)
    if lib is None:
        _add_bytecode(folder, root)
    (folder / "notebooks").mkdir()
    nbformat.write(nb, folder / "notebooks" / lesson_name)
    (folder / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (folder / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    _copy_font_cache(folder / ".matplotlib")
    code = [c for c in nb.cells if c.cell_type == "code"]
    settings = dict(cell_timeout=cell_timeout, memory_bytes=int(memory_bytes),
                    cpu_seconds=int(cpu_seconds), lesson=lesson_name,
                    startup_timeout=startup_timeout, preload=preloads(nb),
                    checks=[p.__dict__ for p in placements],
                    sources={str(i): _first_line(c.source) for i, c in enumerate(code)},
                    # the graded kernel's (`kernel.run_kernel`): its lesson's checker modules, what it imports
                    kernel={"checks": checks, "preload": preloads(nb)})
    (folder / "grading.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")



def _first_line(source):
    lines = [line.strip() for line in source.splitlines()
             if line.strip() and not line.strip().startswith("#")]
    line = lines[0] if lines else ""
    return line if len(line) <= 60 else line[:57] + "..."

