"""Answers to the exercises, for testing the graders: a call of the reference, and known-wrong ones.

Each answer is the body that replaces an exercise's solution region in its lesson, so it
runs against the lesson's own function signature. A wrong answer names the mistake and a
phrase the checker's feedback must contain: failing is not enough, it must fail with the
right hint. Those marked `inject` are also run inside the exercise notebook.

The answers live one file per lesson, tests/answers_NN.py, each with REFERENCE, WRONG and
ALTERNATIVES; this module merges them.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Wrong:
    exercise: str
    name: str
    body: str
    hint: str            # must appear in the checker's feedback
    inject: bool = False


REFERENCE = {}
WRONG = []

ALTERNATIVES = []   # right answers written differently from the reference: each must pass


def _add_lessons():
    """Merge the answers of every lesson, kept one file per lesson: tests/answers_NN.py."""
    import importlib
    from pathlib import Path
    for path in sorted(Path(__file__).parent.glob("answers_[0-9][0-9].py")):
        module = importlib.import_module(path.stem)
        REFERENCE.update(module.REFERENCE)
        WRONG.extend(module.WRONG)
        ALTERNATIVES.extend(getattr(module, "ALTERNATIVES", []))


_add_lessons()


def _squeeze(text):
    """Text without whitespace and parentheses and with one kind of quote, for finding code
    inside prose (ast.unparse writes f((x for x in y)) where a person writes f(x for x in y))."""
    import re
    return re.sub(r"[\s()]+", "", text).replace('"', "'")


def exercise_statement(name):
    """The markdown above exercise `name`'s cell (its statement), squeezed (see `_squeeze`)."""
    from course_lib.exercises import exercises
    from notebook_tools import LESSONS, read
    for path in LESSONS:
        nb = read(path)
        for found, i, _ in exercises(nb):
            if found == name:
                return _squeeze(" ".join(c.source for c in nb.cells[max(i - 2, 0):i]
                                         if c.cell_type == "markdown"))
    raise KeyError(name)


def reference_statements(name, shortest=12):
    """The statements of exercise `name`'s reference answer (course_lib/checks/solutions.json)
    that no hint or failure message may hold: each simple statement (`x = x + f(x)`, `return
    e`) and its expression, and each `if`/`while` test, squeezed (see `_squeeze`), of
    `shortest` characters or more, except those the exercise's own statement spells out."""
    import ast

    from course_lib.checks.hints import solution_source
    _, source = solution_source(name)
    function = ast.parse(source).body[0]
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]                                   # the docstring
    found = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)):
            found.add(ast.unparse(node))
            if getattr(node, "value", None) is not None:
                found.add(ast.unparse(node.value))
        elif isinstance(node, (ast.If, ast.While)):
            found.add(ast.unparse(node.test))
    statement = exercise_statement(name)
    return {squeezed for squeezed in map(_squeeze, found)
            if len(squeezed) >= shortest and squeezed not in statement}


def module_texts(path):
    """(line, text) of every string a module writes: its literals (adjacent ones joined, as
    Python joins them) and its f-strings, each placeholder as '{}'."""
    import ast
    from pathlib import Path
    texts = []
    for node in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            texts.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}"
                                               for v in node.values)))
    return texts


def giveaways(name):
    """The calls in exercise `name`'s reference answer (`f(a, b)`, `.view(B, T, H, D)`) that
    feedback and hints must not hold, squeezed (see `_squeeze`): those of 18 characters or
    more that the exercise's own statement does not already spell out."""
    import ast
    import textwrap

    from course_lib.exercises import BEGIN, END, exercises
    from notebook_tools import LESSONS, read
    for path in LESSONS:
        nb = read(path)
        for found, i, _ in exercises(nb):
            if found != name:
                continue
            body = nb.cells[i].source.split(BEGIN, 1)[1].split(END, 1)[0]
            statement = _squeeze(" ".join(c.source for c in nb.cells[max(i - 2, 0):i]
                                          if c.cell_type == "markdown"))
            calls = set()
            for node in ast.walk(ast.parse(textwrap.dedent(body))):
                if isinstance(node, ast.Call) and (node.args or node.keywords):
                    text = ast.unparse(node)
                    if isinstance(node.func, ast.Attribute):   # x.view(...) -> view(...)
                        text = text[len(ast.unparse(node.func.value)) + 1:]
                    text = _squeeze(text)
                    if len(text) >= 18 and text not in statement:
                        calls.add(text)
            return calls
    raise KeyError(name)


def gives_away(name, text):
    """The first call of exercise `name`'s answer that `text` holds (see `giveaways`), or None."""
    squeezed = _squeeze(text)
    return next((call for call in sorted(giveaways(name)) if call in squeezed), None)
