"""Make exercises/ from notebooks/: every solution replaced by a stub that names its exercise.

In a lesson, an exercise is a code cell tagged `exercise` that defines one function
whose body holds the answer between `### BEGIN SOLUTION` and `### END SOLUTION`.
The next cell is tagged `check` and calls `check_<name>(<name>)`. A question is a code
cell tagged `question` that calls `answer("<id>", <the right answer>)`; its answer
becomes `...`, the blank.

    python -m course_lib.exercises            # rewrite exercises/ and the solutions file
    python -m course_lib.exercises --check    # exit 1 if either is out of date

The same command writes course_lib/checks/solutions.json: each exercise's reference answer,
which `solution(name)` shows. The learner runs and saves the lessons in notebooks/; the
package's own file is what no run of a notebook writes over.
"""
import argparse
import ast
import copy
import json
import re
import sys
import threading
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = Path(__file__).resolve().parent / "checks" / "solutions.json"


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


def answer_call(source):
    """The one `answer(qid, given)` call of a question cell's source, as an ast.Call."""
    try:
        tree = parse_python(source)
    except SyntaxError as e:
        raise ValueError(f"a cell tagged 'question' must parse; this one does not ({e}):\n"
                         f"{source}") from None
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "answer"]
    if len(calls) != 1 or len(calls[0].args) != 2 or calls[0].keywords:
        raise ValueError(f"a cell tagged 'question' must call answer(\"<id>\", <answer>) "
                         f"exactly once, with two arguments; found {len(calls)} calls of "
                         f"answer in:\n{source}")
    return calls[0]


def blank_answer(source):
    """A question cell's source with the answer of its one `answer(qid, given)` call made `...`."""
    given = answer_call(source).args[1]
    lines = source.splitlines(keepends=True)
    start = sum(map(len, lines[: given.lineno - 1])) + _chars(lines[given.lineno - 1],
                                                              given.col_offset)
    end = sum(map(len, lines[: given.end_lineno - 1])) + _chars(lines[given.end_lineno - 1],
                                                                given.end_col_offset)
    return source[:start] + "..." + source[end:]


def _chars(line, utf8_offset):
    """The character offset of ast's UTF-8 byte offset into a line."""
    return len(line.encode("utf-8")[:utf8_offset].decode("utf-8"))


def ask_for_help(name):
    """Comment lines above a stub: where the hints and the solution are, asked for, never shown."""
    return (f"# Stuck? In a new cell: from course_lib.checks import hint, solution\n"
            f"# hint(\"{name}\") shows a hint, and the next one each time you call it again;\n"
            f"# solution(\"{name}\") shows the reference answer.\n")


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

    Outputs are removed from the exercise and check cells and from every cell that depends on
    an exercise's function, since they would show the answer, or show a result that the stub
    cannot give: a cell that uses the function, or a name that such a cell assigned (until
    code that does not depend on them assigns that name again). Each question cell's answer
    becomes `...` and its output ("right" and why) goes.
    """
    nb = copy.deepcopy(nb)
    found = exercises(nb)
    names = {name for name, _, _ in found}
    for name, i, _ in found:
        nb.cells[i].source = replace_solution(nb.cells[i].source, ask_for_help(name) + stub(name))
    for cell in nb.cells:
        if cell.cell_type == "code" and "question" in tags(cell):
            cell.source = blank_answer(cell.source)
            cell.outputs = []
            cell.execution_count = None
    tainted = set(names)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        statements = _statements(cell.source, tainted)
        answer = depends = "exercise" in tags(cell)
        for loaded, bound in statements:
            if answer or loaded & tainted:
                depends = True
                tainted |= bound
            else:
                tainted -= bound
        if depends:
            cell.outputs = []
            cell.execution_count = None
    return nb


def _statements(source, known):
    """(names read, names bound at the top level) for each top-level statement of a cell.

    For IPython magics, which do not parse, the whole cell reads the known names it mentions.
    """
    try:
        tree = parse_python(source)
    except SyntaxError:
        return [({name for name in known if re.search(rf"(?<![\w.]){name}\b", source)}, set())]
    found = []
    for statement in tree.body:
        bound = _bound([statement])
        loaded = _loaded(statement)
        if isinstance(statement, _COMPOUND):   # `for _, w in ...: print(w)` reads its own w
            loaded -= bound
        found.append((loaded, bound))
    return found


_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.If, ast.Try)


def _loaded(node, local=frozenset()):
    """Names a statement reads from the cell's namespace: a function's own names are not."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        outside = [*a.defaults, *[d for d in a.kw_defaults if d is not None],
                   *getattr(node, "decorator_list", [])]
        body = node.body if isinstance(node.body, list) else [node.body]
        params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p}
        return _loaded_all(outside, local) | _loaded_all(body, local | params | _stored(body))
    if isinstance(node, ast.ClassDef):
        return (_loaded_all([*node.bases, *node.decorator_list], local)
                | _loaded_all(node.body, local | _stored(node.body)))
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        own = _stored([g.target for g in node.generators])
        return _loaded_all(list(ast.iter_child_nodes(node)), local | own)
    found = set()
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
        found.add(node.id)
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        found.add(node.target.id)   # x += ... reads x as well
    return found | _loaded_all(list(ast.iter_child_nodes(node)), local)


def _loaded_all(nodes, local):
    return set().union(*(_loaded(n, local) for n in nodes))


def _stored(nodes):
    return {n.id for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _bound(statements):
    """Names bound in the cell's own namespace: not those local to a function or comprehension."""
    bound, todo = set(), list(statements)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return bound


# Each solved lesson's title ends with this, so that its page reads differently from the working
# copy's; the working copy's title is the lesson's name alone.
SOLVED_TITLE = " (solved)"

# The line under each lesson's title that says which copy the learner has open.
SOLVED_NOTE = ("> **The solved lesson.** Every exercise here is answered, with its outputs. Work in "
               "your own copy, [`exercises/{name}`](../exercises/{name}), where the exercises are "
               "blank.")
WORKING_NOTE = ("> **Your working copy.** The exercises here are blank: write each one, then run "
                "the check under it; the comment in each says how to ask for a hint or the "
                "solution. The solved lesson is [`notebooks/{name}`](../notebooks/{name}).")


# The line under each exercise's heading that says where its solution lives: in notebooks/ that
# the cell below is the solution; in exercises/ a link to the solved lesson at this heading.
SOLVED_EXERCISE_NOTE = ("> **Solved here:** the code of `{name}` below is the solution. To write "
                        "it yourself, open [this exercise in your working copy]"
                        "(../exercises/{lesson}#{anchor}).")
WORKING_EXERCISE_NOTE = ("> **The solution** of `{name}`: in a new cell here, "
                         "`from course_lib.checks import solution` and then "
                         "`solution(\"{name}\")` shows it.")
EXERCISE_HEADING = re.compile(r"^#{2,4} .*\bExercise\b.*$", re.MULTILINE)


def heading_anchor(heading):
    """The fragment JupyterLab gives a markdown heading: its text, spaces made dashes."""
    text = heading.lstrip("#").strip()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)   # a link shows its text
    text = re.sub(r"[`*]", "", text)                          # code and emphasis marks
    return text.replace(" ", "-")


def exercise_headings(nb):
    """(markdown cell index, heading line, exercise name) for each exercise's heading.

    An exercise's heading is the last markdown heading that says "Exercise" before its cell and
    after the exercise before it; an exercise without one is left out (the lessons' tests require
    one for every exercise).
    """
    found, heading = [], None
    names = {i: name for name, i, _ in exercises(nb)}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            lines = EXERCISE_HEADING.findall(cell.source)
            if lines:
                heading = (i, lines[-1])
        elif i in names:
            if heading is not None:
                found.append((*heading, names[i]))
            heading = None
    return found


def exercise_notes(nb, lesson):
    """(markdown cell index, heading, solved note, working note) for each exercise of a lesson."""
    notes = []
    for i, heading, name in exercise_headings(nb):
        fields = dict(name=name, lesson=lesson, anchor=heading_anchor(heading))
        notes.append((i, heading, SOLVED_EXERCISE_NOTE.format(**fields),
                      WORKING_EXERCISE_NOTE.format(**fields)))
    return notes


def working_copy(nb, name):
    """The blanked lesson; its title's note and its exercises' notes say it is the learner's copy."""
    notes = exercise_notes(nb, name)
    nb = blank(nb)
    solved, working = SOLVED_NOTE.format(name=name), WORKING_NOTE.format(name=name)
    if nb.cells and nb.cells[0].cell_type == "markdown":
        title, *rest = nb.cells[0].source.split("\n", 1)
        if title.startswith("# ") and title.endswith(SOLVED_TITLE):
            title = title[: -len(SOLVED_TITLE)]
        nb.cells[0].source = "\n".join([title, *rest]).replace(solved, working)
    for i, _, solved, working in notes:
        nb.cells[i].source = nb.cells[i].source.replace(solved, working)
    return nb


def expected_files(src=ROOT / "notebooks"):
    """{file name: notebook text} that exercises/ should hold."""
    import nbformat  # here, not at load: a lesson's kernel imports this module and never needs it

    return {path.name: nbformat.writes(working_copy(nbformat.read(path, as_version=4),
                                                    path.name)) + "\n"
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


def solutions_text(src=ROOT / "notebooks"):
    """The solutions file's text: {"solutions": {exercise: {"lesson", "source"}}}, the source being
    the exercise cell with its BEGIN/END markers taken out."""
    import nbformat  # here, not at load (see expected_files)

    found = {}
    for path in sorted(Path(src).glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for name, i, _ in exercises(nb):
            kept = [line for line in nb.cells[i].source.splitlines() if line.strip() not in (BEGIN, END)]
            found[name] = {"lesson": path.name, "source": "\n".join(kept)}
    doc = {"written_by": "python -m course_lib.exercises, from the lessons in notebooks/",
           "solutions": found}
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def solutions_stale(src=ROOT / "notebooks", path=SOLUTIONS):
    """Whether the solutions file at `path` is missing or not what `src` makes."""
    path = Path(path)
    return not path.is_file() or path.read_text(encoding="utf-8") != solutions_text(src)


def write_solutions(src=ROOT / "notebooks", path=SOLUTIONS):
    """Write the solutions file; returns its path."""
    Path(path).write_text(solutions_text(src), encoding="utf-8")
    return Path(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only report whether exercises/ is up to date")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for name in out_of_date:
            print(f"exercises/{name} is out of date; run `python -m course_lib.exercises`")
        if solutions_stale():
            print(f"{SOLUTIONS.relative_to(ROOT)} is out of date; run `python -m course_lib.exercises`")
        return 1 if out_of_date or solutions_stale() else 0
    for name in build():
        print(f"wrote exercises/{name}")
    print(f"wrote {write_solutions().relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
