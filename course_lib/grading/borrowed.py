"""The course's own answer gets no credit: an exercise answered by calling course_lib's implementation.

Decided by reading the learner's cells (their syntax trees), in the grader, not in the
sandbox: an exercise `softmax` whose function calls `course_lib.attention.softmax` (imported,
imported under another name, reached as `A.softmax` after `import course_lib.attention as A`,
or bound to another name first), or whose name is bound to it, is failed with that reason.
What the trees cannot show (importlib, exec of a built string) is not caught.
"""
import ast
import functools
from pathlib import Path

from course_lib.exercises import ROOT, parse_python


@functools.lru_cache(maxsize=8)
def _implemented(root, stamp):
    """{function name: [module]} of what course_lib implements, checkers and the grader left out."""
    found = {}
    base = Path(root) / "course_lib"
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(base).parts
        if parts[0] in ("checks", "grading") or "__pycache__" in parts:
            continue
        try:
            tree = parse_python(path.read_text(encoding="utf-8"))
        except (SyntaxError, OSError, UnicodeDecodeError):
            continue
        module = ".".join(("course_lib",) + path.relative_to(base).with_suffix("").parts)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.setdefault(node.name, []).append(module.removesuffix(".__init__"))
    return found


def implemented(root=ROOT):
    base = Path(root) / "course_lib"
    stamp = tuple((str(p), p.stat().st_mtime_ns) for p in sorted(base.rglob("*.py")))
    return _implemented(str(root), stamp)


def _trees(submission):
    trees = []
    for cell in submission.cells:
        if cell.get("cell_type") == "code":
            try:
                trees.append(parse_python(cell.get("source", "")))
            except SyntaxError:
                trees.append(None)
    return trees


def _dotted(node, aliases):
    """The dotted name an expression stands for (`A.softmax` -> course_lib.attention.softmax), or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        base = aliases.get(node.id, node.id)
        return ".".join([base, *reversed(parts)])
    return None


def _aliases(trees):
    """{name: dotted course_lib name} for every import from course_lib and every name bound to one."""
    aliases = {}
    for tree in filter(None, trees):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "course_lib":
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "course_lib"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "course_lib":
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                dotted = _dotted(node.value, aliases)
                if dotted and dotted.startswith("course_lib."):
                    aliases[node.targets[0].id] = dotted
    return aliases


def borrowed(submission, exercise, root=ROOT):
    """The course_lib function that answers `exercise` in this notebook, or None when it is the learner's own."""
    if exercise not in implemented(root):
        return None
    trees = _trees(submission)
    aliases = _aliases(trees)

    modules = set(implemented(root)[exercise]) | {"course_lib"}  # where it is defined, or re-exported

    def course(dotted):
        return dotted is not None and dotted.rsplit(".", 1) in ([m, exercise] for m in modules)

    last = None  # the last top-level statement that binds the exercise's name
    for tree in filter(None, trees):
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == exercise:
                last = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    (a.asname or a.name.split(".")[0]) == exercise for a in node.names):
                last = node
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == exercise for t in node.targets):
                last = node
    if last is None:
        return None
    if isinstance(last, ast.ImportFrom) and course(f"{last.module}.{exercise}"):
        return f"{last.module}.{exercise}"
    body = last.body if isinstance(last, (ast.FunctionDef, ast.AsyncFunctionDef)) else [last.value] \
        if isinstance(last, ast.Assign) else []
    local = dict(aliases)
    for part in body:
        for node in ast.walk(part):  # imports inside the function count too
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "course_lib":
                for a in node.names:
                    local[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "course_lib":
                        local[a.asname or "course_lib"] = a.name if a.asname else "course_lib"
    for part in body:
        inner = {id(n.value) for n in ast.walk(part) if isinstance(n, ast.Attribute)}
        for node in ast.walk(part):
            if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in inner:
                dotted = _dotted(node, local)
                if course(dotted) and not (isinstance(node, ast.Name) and node.id == exercise):
                    return dotted
    return None


def no_credit(results, submission, root=ROOT):
    """The results, with each passed exercise that the course's own implementation answers failed, and why."""
    from course_lib.grading.verdicts import Result
    out = []
    for r in results:
        source = borrowed(submission, r.exercise, root) if r.status == "passed" and submission else None
        if source:
            r = Result(r.exercise, "failed", f"no credit: the answer uses the course's own {source} "
                       f"(the implementation this exercise asks you to write); write it yourself",
                       0, r.max_points)
        out.append(r)
    return out
