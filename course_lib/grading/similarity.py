"""Similar submissions: pairs of learners whose exercise code is nearly the same, for the instructor to look at.

Never a penalty: two learners may share a solution honestly, and short exercises have few
right answers. Each pair is scored per lesson, from the pair's own code and the lesson's:

- A learner's code for an exercise is the cell of their notebook that (last) defines the
  exercise's function, read as data from the submitted file (never run).
- It is compared as a syntax tree, normalised: comments and docstrings dropped, every name the
  cell binds (arguments, variables, functions) written as `_`, a module alias written as the
  module (`np` -> `numpy`), and the statements of each block sorted (order set aside). Its *shingles* are the
  normalised subtrees (statements and expressions of at least MIN_NODES nodes), less those of
  the lesson's own stub cell. Code equal to the stub or to the lesson's reference answer
  (which `solution()` shows every learner) is left out.
- Two learners match on an exercise when the Jaccard index of their shingles is at least
  MATCH. Code within MATCH of the lesson's own answer (an edit of what `solution()` shows) is
  left out too.
- A pair's score for a lesson is the mean, over the exercises both answered, of the Jaccard
  index of each matching exercise (0 for the others). A pair is marked to look at when its
  score is at least LOOK and at least two exercises match (one, in a lesson of one). The
  score and the mark depend only on the pair's code and the lesson's answer, never on who
  else handed in what: a classmate's resubmission cannot make a copied pair disappear.
- `shared_by` says, for each matching exercise, how many of the learners who answered it
  wrote that code (m of n): many honest learners write a short exercise the same way, so a
  match that many share is worth less of your time. It informs; it changes no score.
"""
import ast
import itertools
from pathlib import Path

import nbformat

from course_lib.exercises import ROOT, exercises, parse_python
from course_lib.grading.book import write_csv
from course_lib.grading.lessons import LESSONS, _lesson_index, defines
from course_lib.grading.submissions import _learner_units, read_submission

MIN_NODES = 5
MAX_NODES = 5000   # a cell larger than this (an honest answer has a few hundred) is not compared
MATCH = 0.8
LOOK = 0.5
COLUMNS = ["lesson", "learner_a", "learner_b", "score", "look_at", "matching", "compared", "shared_by"]


class _Normalise(ast.NodeTransformer):
    """Names the cell binds become `_`, module aliases their module, docstrings and annotations go."""

    def __init__(self, bound, modules):
        self.bound, self.modules = bound, modules

    def generic_visit(self, node):
        """Each block's statements sorted, after its own parts are normalised."""
        node = super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and all(isinstance(s, ast.stmt) for s in block):
                block.sort(key=ast.dump)
        return node

    def visit_Name(self, node):
        if node.id in self.modules:
            node.id = self.modules[node.id]
        elif node.id in self.bound:
            node.id = "_"
        return node

    def visit_arg(self, node):
        node.arg, node.annotation, node.type_comment = "_", None, None
        return node

    def visit_alias(self, node):
        node.asname = None
        return node

    def _body(self, node):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:] or [ast.Pass()]
        node.body = body
        return node

    def visit_FunctionDef(self, node):
        node.name, node.returns, node.type_comment = "_", None, None
        return self.generic_visit(self._body(node))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node.name = "_"
        return self.generic_visit(self._body(node))

    def visit_Expr(self, node):  # a bare string is a comment in disguise
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        return self.generic_visit(node)

    def visit_AnnAssign(self, node):
        node.annotation = ast.Constant(None)
        return self.generic_visit(node)


def _bindings(tree):
    """(names the code binds, {alias: module path}) anywhere in it."""
    bound, modules = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                modules[a.asname or a.name] = f"{node.module or ''}.{a.name}"
    return bound - set(modules), modules


def normalised(source):
    """The cell's syntax tree, normalised (see the module's docstring); None if it does not parse."""
    try:
        tree = parse_python(source)
        if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
            return None
        return _Normalise(*_bindings(tree)).visit(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # hostile or broken code
        return None


def shingles(tree):
    """The normalised subtrees of a tree: each statement or expression of MIN_NODES nodes or more."""
    nodes = list(ast.walk(tree))   # breadth first: a node before its children
    size = {}
    for node in reversed(nodes):
        size[id(node)] = 1 + sum(size[id(c)] for c in ast.iter_child_nodes(node))
    return {ast.dump(n) for n in nodes if isinstance(n, (ast.stmt, ast.expr)) and size[id(n)] >= MIN_NODES}


def defining_cell(nb, name):
    """The source of the last code cell of a notebook that defines `name`, or None."""
    cells = [c.get("source", "") for c in nb.cells if c.get("cell_type") == "code"]
    found = [s for s in cells if isinstance(s, str) and defines(s, name)]
    return found[-1] if found else None


def _lesson_forms(lesson_path, root):
    """{exercise: (stub shingles, {canonical dumps left out: the stub's and the reference's},
    the reference's shingles less the stub's)}."""
    solved = nbformat.read(lesson_path, as_version=4)
    blank = nbformat.read(Path(root) / "exercises" / Path(lesson_path).name, as_version=4)
    forms = {}
    for name, i, _ in exercises(solved):
        stub = defining_cell(blank, name) or ""
        stub_tree, ref_tree = normalised(stub), normalised(solved.cells[i].source)
        skip = {ast.dump(t) for t in (stub_tree, ref_tree) if t is not None}
        stub_shingles = shingles(stub_tree) if stub_tree else set()
        forms[name] = (stub_shingles, skip, (shingles(ref_tree) - stub_shingles) if ref_tree else set())
    return forms


def _read(path):
    """A submitted notebook read as data, or None when it cannot be (the gradebook says why)."""
    try:
        return nbformat.reads(read_submission(path).decode("utf-8"), as_version=4)
    except Exception:  # hostile or broken files: nothing to compare, never a crash
        return None


def learner_code(folder, rows, lessons=LESSONS, root=ROOT):
    """{lesson: {exercise: {learner: shingles}}} for the notebooks the gradebook rows graded."""
    index = _lesson_index(lessons)
    wanted = {(r["learner"], r["lesson"]) for r in rows if r["status"] != "missing"}
    _, units, _, _ = _learner_units(folder)
    code, forms, seen = {}, {}, set()
    for learner, path in units:
        lesson = path.stem
        if path.name not in index or (learner, lesson) not in wanted or (learner, lesson) in seen:
            continue
        seen.add((learner, lesson))
        nb = _read(path)
        if nb is None:
            continue
        if lesson not in forms:
            forms[lesson] = _lesson_forms(index[path.name], root)
        for name, (stub, skip, reference) in forms[lesson].items():
            try:
                source = defining_cell(nb, name)
                tree = normalised(source) if source else None
                own = shingles(tree) - stub if tree is not None and ast.dump(tree) not in skip else None
                if own and reference and jaccard(own, reference) >= MATCH:
                    own = None   # an edit of the lesson's own answer
            except (RecursionError, MemoryError, ValueError, TypeError):  # a cell too odd to compare
                own = None
            if own:
                code.setdefault(lesson, {}).setdefault(name, {})[learner] = own
    return code


def jaccard(a, b):
    return len(a & b) / len(a | b) if a or b else 0.0


def pairs(code):
    """One dict per (lesson, pair of learners) that match on at least one exercise, best first."""
    found = []
    for lesson, by_exercise in sorted(code.items()):
        learners = sorted({l for s in by_exercise.values() for l in s})
        for a, b in itertools.combinations(learners, 2):
            compared = [e for e, s in by_exercise.items() if a in s and b in s]
            total, matching, shared = 0.0, [], []
            for e in compared:
                s = by_exercise[e]
                j = jaccard(s[a], s[b])
                if j < MATCH:
                    continue
                near = {l for l in s if l in (a, b) or max(jaccard(s[a], s[l]), jaccard(s[b], s[l])) >= MATCH}
                matching.append(e)
                shared.append(f"{e}: {len(near)} of {len(s)}")
                total += j
            if not matching:
                continue
            score = total / len(compared)
            look = score >= LOOK and len(matching) >= min(2, len(compared))
            found.append(dict(lesson=lesson, learner_a=a, learner_b=b, score=f"{score:.2f}",
                              look_at="yes" if look else "", matching="; ".join(matching),
                              compared=len(compared), shared_by="; ".join(shared)))
    return sorted(found, key=lambda p: (-float(p["score"]), p["lesson"], p["learner_a"], p["learner_b"]))


def write_similarity(rows, out, folder, *, lessons=LESSONS, root=ROOT):
    """Write out/similarity.csv from the class folder's notebooks; returns the pairs written."""
    found = pairs(learner_code(folder, rows, lessons, root))
    write_csv(Path(out) / "similarity.csv", COLUMNS, found)
    return found
