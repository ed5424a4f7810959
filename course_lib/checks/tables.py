"""The HINTS and QUESTIONS of each lesson's checks module, read from its source, never imported.

A lessonNN module's HINTS and QUESTIONS are written out: HINTS as a literal dict, QUESTIONS
as a dict of `Choice(...)` and `Number(...)` calls whose arguments are literals. Reading them
with `ast` gives the grader (and `hint`) every lesson's tables without importing the checkers,
and so without torch.
"""
import ast
import functools
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent


def lesson_modules(here=HERE):
    """The paths of the lessonNN.py modules beside this one, in lesson order."""
    return sorted(p for p in Path(here).glob("lesson*.py") if re.fullmatch(r"lesson\d\d\.py", p.name))


@functools.lru_cache(maxsize=64)
def _body(path, stamp):
    """The top-level statements of the module at `path` as it was at `stamp` (parsed once)."""
    return ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path)).body


def _assigned(path, name):
    """The expression assigned to `name` at the top level of the module at `path`, or None."""
    info = Path(path).stat()
    for node in _body(str(path), (info.st_mtime_ns, info.st_size)):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    return None


def _literal(node, path, name):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"{name} in {path.name} (line {node.lineno}) is not written out as a "
                         f"literal; write it with strings, numbers, tuples and dicts only, so the "
                         f"grader can read it without importing the checkers") from None


def _made(node, path, makers):
    """A Choice(...) or Number(...) call of literal keyword arguments, built."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in makers and not node.args):
        raise ValueError(f"each entry of QUESTIONS in {path.name} (line {node.lineno}) must be "
                         f"{' or '.join(f'{m}(...)' for m in makers)} with keyword arguments")
    kwargs = {k.arg: _literal(k.value, path, f"QUESTIONS' {k.arg}=") for k in node.keywords}
    return makers[node.func.id](**kwargs)


def hints_of(path):
    """{exercise: (hint, ...)} of the module at `path`; {} when it has no HINTS."""
    node = _assigned(path, "HINTS")
    return {} if node is None else _literal(node, path, "HINTS")


def questions_of(path, makers):
    """{question id: question} of the module at `path`, each built by makers[its call's name]."""
    node = _assigned(path, "QUESTIONS")
    if node is None:
        return {}
    if not isinstance(node, ast.Dict) or None in node.keys:
        raise ValueError(f"QUESTIONS in {path.name} must be a dict written out, {{\"NN-name\": ...}}")
    return {_literal(k, path, "a QUESTIONS id"): _made(v, path, makers)
            for k, v in zip(node.keys, node.values)}
