"""Make exercises/ from notebooks/: every solution replaced by a stub that names its exercise.

In a lesson, an exercise is a code cell tagged `exercise` that defines one function
whose body holds the answer between `### BEGIN SOLUTION` and `### END SOLUTION`.
The next cell is tagged `check` and calls `check_<name>(<name>)`.

    python -m course_lib.exercises            # rewrite exercises/
    python -m course_lib.exercises --check    # exit 1 if exercises/ is out of date
"""
import argparse
import ast
import copy
import re
import sys
import threading
from pathlib import Path

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
ROOT = Path(__file__).resolve().parent.parent


# Python 3.11's AST constructor is not safe in threads: the grader, parsing cells of two
# notebooks at once (--jobs), got "SystemError: AST constructor recursion depth mismatch"
# (CPython gh-106905). So every parse here goes through one lock.
_AST_LOCK = threading.Lock()


def parse_python(source):
    """ast.parse, one thread at a time."""
    with _AST_LOCK:
        return ast.parse(source)


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def exercise_name(source):
    """The name of the function an exercise cell defines."""
    for node in parse_python(source).body:
        if isinstance(node, ast.FunctionDef):
            return node.name
    raise ValueError("an exercise cell must define a function; this one defines none:\n" + source)


def replace_solution(source, code):
    """The cell source with its solution region replaced by `code`, indented to match."""
    lines = source.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(f"an exercise cell needs exactly one {BEGIN!r} followed by one {END!r}; "
                         f"found {len(starts)} and {len(ends)} in:\n{source}")
    indent = lines[starts[0]][: len(lines[starts[0]]) - len(lines[starts[0]].lstrip())]
    body = [indent + line if line else line for line in code.splitlines()]
    return "\n".join(lines[: starts[0]] + body + lines[ends[0] + 1:])


def stub(name):
    """The line that stands in for a solution; short, so it fits a narrow window when indented."""
    return f'raise NotImplementedError("Exercise \'{name}\': write your solution here")'


def exercises(nb):
    """(name, exercise cell index, check cell index) for every exercise in a notebook."""
    found = []
    for i, cell in enumerate(nb.cells):
        if "exercise" not in tags(cell):
            continue
        name = exercise_name(cell.source)
        check = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
        if check is None or "check" not in tags(check):
            raise ValueError(f"exercise '{name}' (cell {i}) must be followed by a cell tagged 'check'")
        if check.source.strip() != f"check_{name}({name})":
            raise ValueError(f"the check cell after exercise '{name}' must be exactly "
                             f"`check_{name}({name})`, got {check.source.strip()!r}")
        found.append((name, i, i + 1))
    return found


def blank(nb):
    """A copy of a lesson with every solution stubbed.

    Outputs are removed from the exercise and check cells and from every cell that
    uses an exercise's function, since they would show the answer.
    """
    nb = copy.deepcopy(nb)
    found = exercises(nb)
    names = {name for name, _, _ in found}
    for name, i, _ in found:
        nb.cells[i].source = replace_solution(nb.cells[i].source, stub(name))
    for cell in nb.cells:
        if cell.cell_type == "code" and _uses(cell.source, names):
            cell.outputs = []
            cell.execution_count = None
    return nb


def _uses(source, names):
    """Whether code refers to (or defines) a function of one of these names."""
    try:
        tree = parse_python(source)
    except SyntaxError:  # IPython magics: judge by the text
        return any(re.search(rf"(?<![\w.]){name}\b", source) for name in names)
    return any((isinstance(node, ast.Name) and node.id in names) or
               (isinstance(node, ast.FunctionDef) and node.name in names)
               for node in ast.walk(tree))


def expected_files(src=ROOT / "notebooks"):
    """{file name: notebook text} that exercises/ should hold."""
    return {path.name: nbformat.writes(blank(nbformat.read(path, as_version=4))) + "\n"
            for path in sorted(Path(src).glob("*.ipynb"))}


def stale(src=ROOT / "notebooks", dst=ROOT / "exercises"):
    """Names of files in `dst` that are missing, different or extra compared with what `src` makes."""
    want = expected_files(src)
    have = {p.name: p.read_text(encoding="utf-8") for p in Path(dst).glob("*.ipynb")}
    return sorted(name for name in want.keys() | have.keys() if want.get(name) != have.get(name))


def build(src=ROOT / "notebooks", dst=ROOT / "exercises"):
    """Write the exercise notebooks; returns the names written."""
    dst = Path(dst)
    dst.mkdir(exist_ok=True)
    want = expected_files(src)
    for extra in set(p.name for p in dst.glob("*.ipynb")) - want.keys():
        (dst / extra).unlink()
    for name, text in want.items():
        (dst / name).write_text(text, encoding="utf-8")
    return sorted(want)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only report whether exercises/ is up to date")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for name in out_of_date:
            print(f"exercises/{name} is out of date; run `python -m course_lib.exercises`")
        return 1 if out_of_date else 0
    for name in build():
        print(f"wrote exercises/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
