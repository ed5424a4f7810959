"""A notebook's definitions, read from its source as syntax trees and never run: what the probe loads.

The grader's probe (`probe`) holds only these, from every code cell in order (so a helper
defined after the function still counts):

- `def` and `class` statements, whose decorators, default values and class bodies run no
  code the notebook wrote: a decorator is a library's (`@torch.no_grad()`, `@dataclass`,
  `@staticmethod`), a default or a class attribute is plain data or a library's value;
  annotations are never evaluated (type hints stay as text);
- `import` and `from ... import`;
- constants: a name given a literal, arithmetic on literals, or a library's value
  (`D = 64`, `SCALE = 1 / 8`, `DTYPE = torch.float32`).

Every other top-level statement (a call, a loop, an assignment of a call's result, `exec`)
is left out, so no cell's side effects reach the probe. `Definitions.unreadable(name)` says
why an exercise bound some other way (exec, globals(), a lambda, a top-level call, a refused
decorator) cannot be graded, with what to write instead: the grader fails it with that
reason, and the learner's own check cell says the same before they hand it in.

IPython's magics and shell lines (`%%time`, `%matplotlib inline`, `!ls`) are read as
IPython would: a `%%time` cell's body is Python; any other `%%` cell is not Python at all.
"""
import __future__
import ast
import builtins
import re
from dataclasses import dataclass, field

# The modules whose decorators the probe applies, and whose values a default, a class
# attribute or a constant may name. Anything else named there is the notebook's own code.
LIBRARIES = frozenset({"torch", "numpy", "math", "functools", "dataclasses", "typing", "abc", "enum",
                       "collections", "itertools", "operator", "contextlib", "typing_extensions",
                       "fractions", "decimal", "string"})
# Builtins that a default, a class attribute or a decorator may name (plain data, pure functions)
PURE_BUILTINS = frozenset({
    "int", "float", "str", "bool", "bytes", "complex", "tuple", "list", "dict", "set", "frozenset",
    "range", "slice", "len", "min", "max", "sum", "abs", "round", "sorted", "reversed", "any",
    "all", "isinstance", "issubclass", "object", "staticmethod", "classmethod", "property",
    "print", "repr", "divmod", "pow", "ord", "chr", "hash", "id", "iter", "next", "zip", "map",
    "filter", "enumerate", "NotImplemented", "Ellipsis", "callable", "format", "type"}
    | {name for name, value in vars(builtins).items()
       if isinstance(value, type) and issubclass(value, BaseException)})
# Builtins that make or run code from text, or reach a namespace: a binding through one is unreadable
DYNAMIC = frozenset({"exec", "eval", "compile", "globals", "locals", "vars", "setattr", "delattr",
                     "__import__", "run_cell", "update"})
# `%%` magics whose body is Python that IPython runs as a cell
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
# Dunder methods that Python runs while a class is being made (not when an object is used)
AT_DEFINITION = frozenset({"__init_subclass__", "__set_name__", "__class_getitem__", "__prepare__",
                           "__mro_entries__"})
ANNOTATIONS = __future__.annotations.compiler_flag  # type hints kept as text, never evaluated


@dataclass
class Binding:
    """The last top-level binding of a name: how, where, and (when the probe cannot hold it) why not."""
    kind: str            # def, class, import, constant, refused, lambda, dynamic, other
    where: str           # e.g. "cell 4, line 2"
    text: str            # the statement's first line
    reason: str = ""     # for refused: what runs code the notebook wrote


@dataclass
class Definitions:
    """What the probe loads, in order, and how each top-level name was last bound."""
    statements: list = field(default_factory=list)   # [{"where", "source"}], source: one statement
    bindings: dict = field(default_factory=dict)     # name -> Binding
    unparsed: list = field(default_factory=list)     # cells that are not Python: "cell 3: SyntaxError ..."
    imports: dict = field(default_factory=dict)      # name -> the module it was imported from, so far
    constants: set = field(default_factory=set)      # names bound to constants, so far
    probe_problems: list = field(default_factory=list)  # what the probe could not load, for the log

    def unreadable(self, name):
        """Why the probe cannot hold `name` as the notebook binds it, with what to write; None when it can.

        None too when nothing binds it at all (the check's own "not defined" feedback says so).
        """
        b = self.bindings.get(name)
        if b is None or b.kind in ("def", "class", "import", "constant"):
            return None
        write = f"write `def {name}(...):` at the top level of a cell, and nothing after it that rebinds {name}"
        if b.kind == "refused":
            return (f"`{name}` is defined in {b.where} (`{b.text}`) with {b.reason}, which runs code of the "
                    f"notebook's as it is defined, and the grader does not run it: give `{name}` only a "
                    f"library's decorators (@torch.no_grad(), @dataclass), plain default values and class "
                    f"attributes, and move any other code inside its body")
        if b.kind == "lambda":
            return (f"`{name}` is bound to a lambda in {b.where} (`{b.text}`); the grader reads only "
                    f"definitions: {write}")
        if b.kind == "dynamic":
            return (f"`{name}` is bound through exec, eval, globals() or setattr in {b.where} (`{b.text}`), "
                    f"which the grader does not run; it grades only definitions read from your cells: {write}")
        return (f"`{name}` is last bound in {b.where} by `{b.text}`, a statement the grader does not run "
                f"(it runs only def, class, import and constants, never a cell's calls): {write}")

    def why_missing(self, name):
        """Why a name the probe lacks is missing, in words (None when the notebook never binds it)."""
        b = self.bindings.get(name)
        if b is None or b.kind in ("def", "class", "import", "constant"):
            return None
        return (f"`{name}` is bound in {b.where} by `{b.text}`, which the grader does not run: give it as "
                f"a constant (a literal), compute it inside the function, or pass it as an argument")

    def without(self, names):
        """These definitions less every statement that binds one of `names` (a lesson's exercises)."""
        kept = [s for s in self.statements if not (set(s["binds"]) & set(names))]
        return Definitions(kept, {k: v for k, v in self.bindings.items() if k not in names}, self.unparsed)


def read_notebook(nb, skip=lambda cell: False):
    """The Definitions of a notebook's code cells (an nbformat v4 notebook), in order; cells where skip(cell) are left out."""
    found = Definitions()
    number = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        number += 1
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        if not skip(cell):
            read_cell(source, f"cell {number}", found)
    return found


def read_sources(sources, names=None):
    """The Definitions of cell sources given in the order they ran (IPython's raw input history)."""
    found = Definitions()
    for i, source in enumerate(sources):
        read_cell(source, (names or {}).get(i, f"cell {i + 1}"), found)
    return found


# ---------------------------------------------------------------- one cell

def python_source(source):
    """The cell's Python, magics and shell lines turned into `pass`; None for a cell that is not Python."""
    lines = source.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        magic = lines[first].strip()[2:].split(None, 1)
        if not magic or magic[0] not in PYTHON_CELL_MAGICS:
            return None
        lines = [""] * (first + 1) + lines[first + 1:]   # line numbers kept
        source = "\n".join(lines)
    try:
        ast.parse(source)
        return source
    except SyntaxError:
        pass
    out = []
    for line in lines:
        text = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if text.startswith(("%", "!")) or (text.endswith("?") and not text.startswith("#")) \
                or re.match(r"^[\w.,\s]+=\s*[%!]", text):
            out.append(indent + "pass")
        else:
            out.append(line)
    return "\n".join(out)


def read_cell(source, where, found):
    """Add one cell's definitions and bindings to `found`."""
    text = python_source(source)
    if text is None:
        return
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        found.unparsed.append(f"{where}: SyntaxError: {e.msg} (line {e.lineno})")
        return
    lines = text.splitlines()
    imports, constants = found.imports, found.constants
    for node in tree.body:
        at = f"{where}, line {node.lineno}"
        first = lines[node.lineno - 1].strip() if node.lineno - 1 < len(lines) else ""
        first = first if len(first) <= 80 else first[:77] + "..."
        kind, reason = _kind(node, imports, constants)
        names = _binds(node)
        if kind in ("def", "class", "import", "constant"):
            reads = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)}) if kind != "import" else []
            found.statements.append({"where": at, "source": ast.unparse(node), "binds": sorted(names),
                                     "reads": reads})
        elif kind is None:
            continue
        for name in names:
            found.bindings[name] = Binding(kind, at, first, reason)
            constants.discard(name)
            imports.pop(name, None)
        if kind in ("constant", "def", "class"):   # a name another constant or default may alias
            constants |= names
        if kind == "import":
            imports.update(_imported(node))
        if kind in ("other", "dynamic"):  # a call that may bind names by their text (exec, globals()[...])
            for name in _dynamic_names(node):
                found.bindings[name] = Binding("dynamic", at, first)


def _imported(node):
    """{name bound: the top-level module it comes from} of an import statement."""
    if isinstance(node, ast.Import):
        return {(a.asname or a.name).split(".")[0]: a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.module != "__future__" and not node.level:
        return {a.asname or a.name: node.module.split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, ast.ImportFrom):
        return {a.asname or a.name: "" for a in node.names if a.name != "*"}
    return {}


def _binds(node):
    """The names a top-level statement binds (def, class, import, the targets of an assignment...)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return set(_imported(node))
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= set(_imported(n))
    return names


def _dynamic_names(node):
    """Identifiers in the strings and names of a statement that calls exec, eval, globals()... (what it may bind)."""
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
    if not any(_called(c) in DYNAMIC for c in calls):
        return set()
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            found |= set(re.findall(r"[A-Za-z_]\w*", n.value))
        elif isinstance(n, ast.keyword) and n.arg:
            found.add(n.arg)
    return found


def _called(call):
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _kind(node, imports, constants):
    """(kind, reason): how the probe treats a top-level statement; kind None for one that binds nothing."""
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        return None, ""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import", ""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        why = _function_runs(node, imports, constants)
        return ("refused", why) if why else ("def", "")
    if isinstance(node, ast.ClassDef):
        why = _class_runs(node, imports, constants)
        return ("refused", why) if why else ("class", "")
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is not None and all(isinstance(t, ast.Name) for t in targets):
            if isinstance(value, ast.Lambda):
                return "lambda", ""
            if _constant(value, imports, constants):
                return "constant", ""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return None, ""
    if not _binds(node) and not _dynamic_names(node):
        return None, ""
    return ("dynamic" if _dynamic_names(node) and not _binds(node) else "other"), ""


# ---------------------------------------------------------------- what runs at definition

def _root(node):
    """The name an attribute chain starts from (torch for torch.nn.functional.gelu), or None."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _library(node, imports):
    """Whether node is a dotted name from one of LIBRARIES (torch.no_grad, dataclass, np.float32)."""
    return isinstance(node, (ast.Name, ast.Attribute)) and imports.get(_root(node)) in LIBRARIES


def _constant(node, imports, constants, calls=False):
    """Whether an expression is plain data: literals, arithmetic on them, names of imports or constants.

    calls: also a call of a library's function (or a pure builtin) with such arguments
    (what a default value or a class attribute may be; a top-level constant may not call).
    """
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_constant(e, imports, constants, calls) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is None or _constant(k, imports, constants, calls) for k in node.keys) \
            and all(_constant(v, imports, constants, calls) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand, imports, constants, calls)
    if isinstance(node, ast.BinOp):
        return _constant(node.left, imports, constants, calls) and \
            _constant(node.right, imports, constants, calls)
    if isinstance(node, ast.Name):
        return node.id in constants or node.id in imports or (calls and node.id in PURE_BUILTINS)
    if isinstance(node, ast.Attribute):
        return _root(node) in imports
    if isinstance(node, ast.Starred):
        return _constant(node.value, imports, constants, calls)
    if calls and isinstance(node, ast.Call):
        f = node.func
        callee = (isinstance(f, ast.Name) and f.id in PURE_BUILTINS and f.id not in imports
                  and f.id not in constants) or _library(f, imports)
        return callee and all(_constant(a, imports, constants, calls) for a in node.args) \
            and all(_constant(k.value, imports, constants, calls) for k in node.keywords)
    return False


def _decorator_runs(node, imports, constants, in_class=False):
    """Why a decorator runs the notebook's code (its text), or '' for a library's."""
    target = node.func if isinstance(node, ast.Call) else node
    ok = (isinstance(target, ast.Name) and target.id in ("staticmethod", "classmethod", "property")
          and target.id not in imports) or _library(target, imports)
    if in_class and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
            and target.attr in ("setter", "getter", "deleter") and not isinstance(node, ast.Call):
        ok = True   # @value.setter of a property defined above it
    if ok and isinstance(node, ast.Call):
        ok = all(_constant(a, imports, constants, calls=True) for a in node.args) and \
            all(_constant(k.value, imports, constants, calls=True) for k in node.keywords)
    return "" if ok else f"the decorator @{ast.unparse(node)}"


def _function_runs(node, imports, constants, in_class=False):
    """Why defining a function runs the notebook's code (decorators, defaults), or ''."""
    for d in node.decorator_list:
        why = _decorator_runs(d, imports, constants, in_class)
        if why:
            return why
    args = node.args
    for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
        if not (isinstance(default, ast.Lambda) or _constant(default, imports, constants, calls=True)):
            return f"the default value `{ast.unparse(default)}`"
    return ""


def _class_runs(node, imports, constants, depth=0):
    """Why defining a class runs the notebook's code (decorators, bases, its body), or ''."""
    for d in node.decorator_list:
        why = _decorator_runs(d, imports, constants)
        if why:
            return why
    for base in node.bases:
        if not isinstance(base, (ast.Name, ast.Attribute)) or isinstance(base, ast.Attribute) \
                and _root(base) not in imports:
            return f"the base class `{ast.unparse(base)}`"
    for k in node.keywords:
        if not (isinstance(k.value, (ast.Name, ast.Attribute)) and _root(k.value) in imports):
            return f"the class keyword `{ast.unparse(k)}`"
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if item.name in AT_DEFINITION:
                return f"the method {item.name}, which Python runs while it makes a class"
            why = _function_runs(item, imports, constants, in_class=True)
        elif isinstance(item, ast.ClassDef) and depth < 8:
            why = _class_runs(item, imports, constants, depth + 1)
        elif isinstance(item, (ast.Assign, ast.AnnAssign)):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            value = item.value
            ok = all(isinstance(t, ast.Name) for t in targets) and (
                value is None or _constant(value, imports, constants, calls=True))
            why = "" if ok else f"the class-body statement `{ast.unparse(item)[:60]}`"
        elif isinstance(item, ast.Pass) or (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)):
            why = ""
        else:
            why = f"the class-body statement `{ast.unparse(item).splitlines()[0][:60]}`"
        if why:
            return why
    return ""


def compile_statement(statement, flags=ANNOTATIONS):
    """A code object for one statement of Definitions.statements (annotations kept as text)."""
    return compile(statement["source"], f"<{statement['where']}>", "exec", flags=flags, dont_inherit=True)


def needed(statements):
    """The statements less the imports that bind no name the others read (a lesson's widgets, plots)."""
    read = {name for s in statements for name in s.get("reads", ())}
    return [s for s in statements if not s["source"].startswith(("import ", "from "))
            or not s["binds"] or set(s["binds"]) & read]   # (a `from m import *` binds what it binds)
