"""Read the course's helper calls (answer, hint, solution) from a notebook's code, never running it.

The grader reads a learner's notebook as data: each code cell's source is parsed with `ast`
in the grader's own process, and only what is written out in it counts. Nothing is executed,
and the stored outputs are ignored (a learner can type any output into the file).

A call counts when the function is written as `answer`, `hint` or `solution`, as an alias
imported from course_lib (`from course_lib.checks.hints import hint as h`), or as an
attribute of that name (`checks.hint(...)`, `course_lib.checks.hints.hint(...)`). A cell
counts whether or not the notebook records that it ran: clearing a notebook's outputs (which
the grader itself suggests for a notebook too large to hand in) also clears its execution
counts, so "never run" cannot be told from "run, then cleared".
"""
import ast
from dataclasses import dataclass

from course_lib.exercises import parse_python

FUNCTIONS = ("answer", "hint", "solution")
# Characters of one cell that are read; a longer cell is left unread (an honest cell is a few
# thousand characters, and parsing megabytes of hostile source costs the grader memory).
CELL_LIMIT = 100_000
# Characters of a written-out answer: a letter or a number is a few.
ANSWER_LIMIT = 200


@dataclass(frozen=True)
class Call:
    """One call of a course helper in a code cell: the helper's name, where, and its argument nodes."""
    function: str      # "answer", "hint" or "solution"
    cell: int          # the index of its cell among the notebook's cells
    args: tuple        # ast nodes of the positional arguments
    keywords: tuple    # (name, ast node) of the keyword arguments


class NotWritten(ValueError):
    """An argument that is not a literal written out in the source (a call, a name, ...)."""


class TooLong(NotWritten):
    """A text literal longer than ANSWER_LIMIT."""


def _parse(source):
    """The cell's ast, or None when it cannot be read (too long, not Python even after IPython's syntax)."""
    if not isinstance(source, str) or len(source) > CELL_LIMIT:
        return None
    try:
        return parse_python(source)
    except SyntaxError:
        pass
    except Exception:  # MemoryError, RecursionError, ValueError (a NUL byte): unread
        return None
    try:  # `%time`, `!ls`, `x?`: IPython's own rewriting into Python, text only
        from IPython.core.inputtransformer2 import TransformerManager
        return parse_python(TransformerManager().transform_cell(source))
    except Exception:
        return None


def _aliases(trees):
    """{local name: helper} for helpers imported from course_lib under another name."""
    found = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
                for alias in node.names:
                    if alias.name in FUNCTIONS:
                        found[alias.asname or alias.name] = alias.name
    return found


def _helper(func, aliases):
    """The helper a call's function node names, or None."""
    if isinstance(func, ast.Name):
        return aliases.get(func.id, func.id if func.id in FUNCTIONS else None)
    if isinstance(func, ast.Attribute) and func.attr in FUNCTIONS:
        return func.attr
    return None


def course_calls(nb):
    """Every call of answer/hint/solution in the notebook's code cells, in the order written."""
    cells = nb.get("cells") if hasattr(nb, "get") else None
    trees = []
    for i, cell in enumerate(cells if isinstance(cells, list) else []):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            tree = _parse(cell.get("source", ""))
            if tree is not None:
                trees.append((i, tree))
    aliases = _aliases(tree for _, tree in trees)
    found = []
    for i, tree in trees:
        here = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                helper = _helper(node.func, aliases)
                if helper is not None:
                    here.append(((node.lineno, node.col_offset), Call(
                        helper, i, tuple(node.args),
                        tuple((k.arg, k.value) for k in node.keywords if k.arg))))
        found.extend(call for _, call in sorted(here, key=lambda pair: pair[0]))
    return found


def written(node):
    """The value of an argument written out as a literal: a string, a number, `...`, or -number.

    NotWritten (a ValueError) names what it is instead; a string over ANSWER_LIMIT is refused
    too. Nothing is evaluated: only these node shapes are read.
    """
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, str) and len(value) > ANSWER_LIMIT:
            raise TooLong(f"a text of {len(value):,} characters")
        if value is Ellipsis or isinstance(value, (str, int, float)):
            return value
        raise NotWritten(f"a {type(value).__name__} literal")
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)):
        value = node.operand.value
        return -value if isinstance(node.op, ast.USub) else value
    what = {ast.Call: "a call", ast.Name: "a name", ast.Attribute: "an attribute",
            ast.BinOp: "a computation", ast.Subscript: "an index",
            ast.JoinedStr: "an f-string"}.get(type(node), "an expression")
    raise NotWritten(what)


def shown(value, limit=40):
    """A short repr of a written-out value, for feedback."""
    if isinstance(value, int) and abs(value) >= 10 ** 30:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
