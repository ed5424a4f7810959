"""The lesson's side of grading: its exercises, their checkers, points and stored pass lines.

Also which names a cell binds, which tells where a learner's notebook defines each exercise.
"""
import ast
import copy
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT, exercises, parse_python

LESSONS = ROOT / "notebooks"


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



def _lesson_index(lessons):
    return {p.name: p for p in sorted(Path(lessons).glob("*.ipynb"))}


@functools.lru_cache(maxsize=64)
def _lesson_marks(stamp):
    """(the lesson's text cells, its exercise names), read once while the file is unchanged."""
    lesson = nbformat.read(stamp[0], as_version=4)
    ours = frozenset(c.source.strip() for c in lesson.cells if c.cell_type == "markdown") - {""}
    return ours, tuple(n for n, _, _ in exercises(lesson))



DYNAMIC = ("exec", "eval", "globals", "setattr", "__import__", "locals", "vars")


@functools.lru_cache(maxsize=4096)
def uses(source, name):
    """The global names that the function `name`, defined at the top of a cell, reads in its body."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return frozenset()
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            args = node.args
            local = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            loaded = set()
            for inner in node.body:
                for n in ast.walk(inner):
                    if isinstance(n, ast.Name):
                        (loaded if isinstance(n.ctx, ast.Load) else local).add(n.id)
            found = loaded - local
    return frozenset(found - {name})


@functools.lru_cache(maxsize=4096)
def may_bind(source, name):
    """Whether a cell may bind `name` without saying so: exec, globals()[...], setattr... with the name in it."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return False
    dynamic = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in DYNAMIC
                  for n in ast.walk(tree))
    return dynamic and re.search(rf"\b{re.escape(name)}\b", source) is not None
