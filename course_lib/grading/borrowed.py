"""The course's own answer gets no credit: an exercise answered by calling or copying course_lib's implementation.

Decided by reading the learner's cells (their syntax trees), in the grader, not in the
sandbox. An exercise `softmax` is failed, with the reason, when
- its function calls `course_lib.attention.softmax` (imported, imported under another name,
  reached as `A.softmax` after `import course_lib.attention as A`, or bound to another name
  first), or its name is bound to it;
- the notebook holds a copy of the course's source of it: a function whose syntax tree,
  normalised as `similarity` does (names it binds, docstrings, comments and annotations set
  aside), is that of `course_lib.attention.softmax`, and the exercise's function is that copy
  or calls it (a thin wrapper); course functions shorter than COPY_NODES nodes are left out,
  since an honest learner may write a short one the same way;
- the notebook `exec`s the course's source: `inspect.getsource` of the course's function
  (however the string is edited after), or a string literal holding a copy of it.
What the trees cannot show (importlib, exec of a string built piece by piece) is not caught.
"""
import ast
import functools
from pathlib import Path

from course_lib.exercises import ROOT, parse_python
from course_lib.grading.similarity import normalised

# Nodes a course function must have before a copy of it is named (count_params has 17).
COPY_NODES = 30


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


@functools.lru_cache(maxsize=64)
def _course_forms(root, stamp, exercise):
    """{normalised dump of the course's implementation of `exercise`: its dotted name}."""
    forms = {}
    for module in _implemented(root, stamp).get(exercise, []):
        base = Path(root, *module.split("."))
        path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        try:
            tree = parse_python(path.read_text(encoding="utf-8"))
        except (SyntaxError, OSError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == exercise \
                    and sum(1 for _ in ast.walk(node)) >= COPY_NODES:
                form = _form(node)
                if form is not None:
                    forms[form] = f"{module}.{exercise}"
    return forms


def _form(node):
    """The normalised dump of one function definition (decorators set aside), or None."""
    node = ast.FunctionDef(node.name, node.args, node.body, [], None, None) \
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else node
    tree = normalised(ast.unparse(ast.fix_missing_locations(ast.Module([node], []))))
    return None if tree is None else ast.dump(tree)


def _definitions(tree):
    """Every function defined in a tree, at any depth."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _exec_sources(trees, aliases):
    """(dotted names whose inspect.getsource a notebook's exec runs, string literals it execs)."""
    fetched, literals = set(), []
    for tree in filter(None, trees):
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("exec", "eval", "compile") and node.args):
                continue
            for inner in ast.walk(node.args[0]):
                if isinstance(inner, ast.Call) and inner.args and (
                        (_dotted(inner.func, aliases) or "").endswith("getsource")):
                    fetched.add(_dotted(inner.args[0], aliases))
                elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    literals.append(inner.value)
    return fetched, literals


def copied(submission, exercise, root=ROOT):
    """Why the notebook's answer to `exercise` is a copy of the course's source of it, or None."""
    base = Path(root) / "course_lib"
    stamp = tuple((str(p), p.stat().st_mtime_ns) for p in sorted(base.rglob("*.py")))
    if exercise not in _implemented(str(root), stamp):
        return None
    forms = _course_forms(str(root), stamp, exercise)
    trees = _trees(submission)
    aliases = _aliases(trees)
    modules = set(_implemented(str(root), stamp)[exercise]) | {"course_lib"}
    fetched, literals = _exec_sources(trees, aliases)
    for dotted in sorted(filter(None, fetched)):
        if dotted.rsplit(".", 1) in ([m, exercise] for m in modules):
            return f"it runs the course's own source of {dotted} (exec of inspect.getsource)"
    for text in literals:
        try:
            inner = parse_python(text)
        except (SyntaxError, ValueError):
            continue
        for node in _definitions(inner):
            if _form(node) in forms:
                return f"it runs a copy of the course's own {forms[_form(node)]} (exec of its source)"
    functions = [n for tree in filter(None, trees) for n in tree.body
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    answer = next((n for n in reversed(functions) if n.name == exercise), None)
    if answer is None:
        return None
    called = {n.func.id for n in ast.walk(answer) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    for node in functions:
        if (node is answer or node.name in called) and _form(node) in forms:
            how = "is" if node is answer else f"calls {node.name}, which is"
            return f"its {exercise} {how} a copy of the course's own {forms[_form(node)]}"
    return None


def no_credit(results, submission, root=ROOT):
    """The results, with each passed exercise that the course's own implementation answers failed, and why."""
    from course_lib.grading.verdicts import Result
    out = []
    for r in results:
        source = borrowed(submission, r.exercise, root) if r.status == "passed" and submission else None
        copy = copied(submission, r.exercise, root) if r.status == "passed" and submission and not source \
            else None
        if source:
            r = Result(r.exercise, "failed", f"no credit: the answer uses the course's own {source} "
                       f"(the implementation this exercise asks you to write); write it yourself",
                       0, r.max_points)
        elif copy:
            r = Result(r.exercise, "failed", f"no credit: {copy} (the implementation this exercise "
                       f"asks you to write); write it yourself", 0, r.max_points)
        out.append(r)
    return out
