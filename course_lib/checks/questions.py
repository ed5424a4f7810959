"""Questions that check understanding: `answer(qid, given)` says right or not quite, and why.

Each lesson's checks module (course_lib/checks/lessonNN.py) holds a QUESTIONS dict,
{"NN-name": question}, of two kinds:

- `Choice`: plausible answers by letter, each wrong one with its own reason why it is wrong,
  the right one with the reason why it is right;
- `Number`: a number to predict, right within a tolerance, with the usual wrong reasonings
  by range of the value they lead to.

A question also records its prompt (markdown, for the notebook) and the lesson cell it
belongs after (`after`: a heading or a phrase found in exactly one cell of the lesson).
A wrong answer gets only the reason that answer is wrong, never the right answer.

The grader reads an answer from the notebook's source, never running it: a literal, or
arithmetic on number literals (`1256 - 256`), read as a syntax tree (`written_answer`).
`answer()` in a notebook reads its own cell the same way, so the two agree: an answer
computed from names or calls is refused at once, in the notebook as in the gradebook.
"""
import ast
import linecache
import math
import numbers
import operator
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from course_lib.checks.rendering import refusals
from course_lib.checks.tables import lesson_modules, questions_of
from course_lib.exercises import answer_call

_given = {}   # question id -> [(the answer given, right or not), ...] in this kernel


@dataclass(frozen=True)
class Choice:
    """A choice among plausible answers: choices maps a letter to (text, why right or wrong)."""
    prompt: str
    after: str
    choices: dict
    right: str

    def __post_init__(self):
        letters = list(self.choices)
        if len(letters) < 3 or letters != [chr(ord("a") + i) for i in range(len(letters))]:
            raise ValueError(f"choices need letters a, b, c, ... in order, at least three; "
                             f"got {letters}")
        for letter, entry in self.choices.items():
            if not (isinstance(entry, tuple) and len(entry) == 2 and all(
                    isinstance(s, str) and s.strip() for s in entry)):
                raise ValueError(f"choice {letter!r} must be (text, why), two non-empty strings")
        if self.right not in self.choices:
            raise ValueError(f"the right choice {self.right!r} is not among {letters}")

    def how(self, qid):
        letters = ", ".join(f'"{letter}"' for letter in self.choices)
        return (f'replace ... with the letter of your choice, one of {letters}: '
                f'answer("{qid}", "x") with x your letter')

    def markdown(self, qid):
        options = "\n".join(f"- **({letter})** {text}"
                             for letter, (text, _) in self.choices.items())
        return f"**{qid}.** {self.prompt}\n\n{options}"

    def expected(self):
        return repr(self.right).replace("'", '"')

    def judge(self, qid, given):
        """(right?, why) for the answer given; ValueError for one that is not a choice."""
        letter = given.strip().strip("()").strip().lower() if isinstance(given, str) else None
        if letter not in self.choices:
            raise ValueError(f"question '{qid}' is answered with one letter among "
                             f"{', '.join(repr(c) for c in self.choices)}; got {given!r}")
        return letter == self.right, self.choices[letter][1]


@dataclass(frozen=True)
class Number:
    """A number to predict: right within `tolerance` of `value`.

    wrong holds the usual wrong reasonings, ((low, high, why), ...): an answer with
    low <= given <= high gets that why. Any other wrong number gets `otherwise`.
    """
    prompt: str
    after: str
    value: float
    tolerance: float
    why: str
    wrong: tuple = ()
    otherwise: str = ("not that; go back over the steps of the computation in the section "
                      "named above")
    unit: str = ""

    def __post_init__(self):
        if not self.tolerance >= 0:
            raise ValueError(f"the tolerance must be 0 or more, got {self.tolerance!r}")
        low, high = self.value - self.tolerance, self.value + self.tolerance
        ranges = sorted(self.wrong)
        for a, b, why in ranges:
            if not (a <= b and isinstance(why, str) and why.strip()):
                raise ValueError(f"a wrong range is (low, high, why) with low <= high; "
                                 f"got {(a, b)}")
            if a <= high and low <= b:
                raise ValueError(f"the wrong range [{a}, {b}] overlaps the right answer's "
                                 f"[{low}, {high}]")
        for (a1, b1, _), (a2, b2, _) in zip(ranges, ranges[1:]):
            if a2 <= b1:
                raise ValueError(f"the wrong ranges [{a1}, {b1}] and [{a2}, {b2}] overlap")

    def how(self, qid):
        close = ("the exact number" if self.tolerance == 0 else
                 f"within {self.tolerance:g} counts as right")
        return f"replace ... with your number (an int or a float; {close})"

    def markdown(self, qid):
        unit = f" (in {self.unit})" if self.unit else ""
        if self.tolerance == 0:
            return f"**{qid}.** {self.prompt}\n\nAnswer with the exact number{unit}."
        return (f"**{qid}.** {self.prompt}\n\nAnswer with a number{unit}; within "
                f"{self.tolerance:g} of the exact value counts as right.")

    def expected(self):
        whole = float(self.value).is_integer() and abs(self.value) < 1e15
        return f"{int(self.value):_}" if whole and abs(self.value) >= 10_000 else (
            str(int(self.value)) if whole else repr(float(self.value)))

    def judge(self, qid, given):
        """(right?, why) for the number given; ValueError for anything that is not a number."""
        number = _as_number(qid, given)
        if abs(number - self.value) <= self.tolerance * (1 + 1e-9):
            return True, self.why
        why = next((why for low, high, why in self.wrong if low <= number <= high),
                   self.otherwise)
        if isinstance(given, str) and "," in given:   # say how the comma was read
            plain = int(number) if float(number).is_integer() else number
            why += (f" (Your {given.strip()!r} was read as {plain}, a comma before three "
                    f"digits being a thousands separator; a decimal takes a point: 1.5.)")
        return False, why


def _as_number(qid, given):
    if isinstance(given, str):
        text = given.strip().replace("_", "")
        if "," in text:
            if not re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d*)?", text):
                raise ValueError(
                    f"question '{qid}' is answered with a number; {given!r} holds a comma that "
                    f"does not separate groups of three digits (as in 1,000 or 2,064): write "
                    f"the number with a point for decimals (1.5), and commas, if any, between "
                    f"thousands")
            text = text.replace(",", "")   # 1,000 and 2,064 as people write them
        try:
            given = float(text)
        except ValueError:
            raise ValueError(f"question '{qid}' is answered with a number; got the text "
                             f"{given!r}, which is not one") from None
    if isinstance(given, bool) or not (isinstance(given, numbers.Real) or hasattr(given, "item")):
        raise ValueError(f"question '{qid}' is answered with a number (an int or a float); "
                         f"got {type(given).__name__} {given!r}")
    try:
        number = float(given)
    except (TypeError, ValueError, RuntimeError):   # an array or tensor of several numbers
        raise ValueError(f"question '{qid}' is answered with one number; got {given!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"question '{qid}' is answered with a finite number; got {number}")
    return number


def all_questions():
    """{question id: question} of every lessonNN module's QUESTIONS, in lesson order, read from
    the modules' source (course_lib.checks.tables), never imported."""
    found = {}
    for path in lesson_modules():
        for qid, question in questions_of(path, {"Choice": Choice, "Number": Number}).items():
            if qid in found:
                raise ValueError(f"question id {qid!r} is defined twice")
            found[qid] = question
    return found


def _known(qid, questions):
    if isinstance(qid, str) and qid in questions:
        return
    lesson = qid[:2] if isinstance(qid, str) else None
    same = sorted(q for q in questions if q[:2] == lesson) or sorted(questions)
    raise ValueError(f"no question is called {qid!r}; the questions are: {', '.join(same)}. "
                     f"Give its id as a string, e.g. answer(\"{same[0]}\", ...)")


def judge(qid, given):
    """(right?, why) for an answer to question `qid`, printing and recording nothing.

    The blank, `...`, gives (None, how to answer).
    """
    questions = all_questions()
    _known(qid, questions)
    if given is Ellipsis:
        return None, questions[qid].how(qid)
    return questions[qid].judge(qid, given)


_HERE = str(Path(__file__).resolve().parent)   # course_lib/checks: the course's own frames
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
               ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
               ast.Mod: operator.mod, ast.Pow: operator.pow}
_WRITTEN_LIMIT = 10 ** 30     # larger numbers are no answer to a lesson's question


class NotWritten(ValueError):
    """An answer that is not written out: what it is instead ("a name", "a call", ...)."""


def written_answer(node):
    """The value of an answer node read as data: a literal (a number, a string, `...`), or
    arithmetic (+ - * / // % **, unary + -) on number literals, as `1256 - 256`.

    Nothing is run: the tree is walked, and only these node shapes are read. NotWritten (a
    ValueError) names what the node is instead.
    """
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis or type(node.value) in (str, int, float):
            return node.value
        raise NotWritten(f"a {type(node.value).__name__} literal")
    if isinstance(node, (ast.UnaryOp, ast.BinOp)):
        return _arithmetic(node)
    raise NotWritten({ast.Call: "a call", ast.Name: "a name", ast.Attribute: "an attribute",
                      ast.Subscript: "an index", ast.JoinedStr: "an f-string"}.get(
        type(node), "an expression"))


def _arithmetic(node, depth=0):
    """The number an arithmetic tree of number literals makes, or NotWritten."""
    if depth > 20:
        raise NotWritten("a computation too deep to read")
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _arithmetic(node.operand, depth + 1)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        a, b = _arithmetic(node.left, depth + 1), _arithmetic(node.right, depth + 1)
        if isinstance(node.op, ast.Pow) and (abs(b) > 64 or abs(a) > _WRITTEN_LIMIT):
            raise NotWritten("a power too large to be an answer")
        try:
            value = _ARITHMETIC[type(node.op)](a, b)
        except (ArithmeticError, ValueError):
            raise NotWritten("a computation with no number for a result (a division by "
                             "0, say)") from None
        if isinstance(value, complex) or not math.isfinite(value) or abs(value) > _WRITTEN_LIMIT:
            raise NotWritten("a computation whose result is no finite number")
        return value
    raise NotWritten("a computation on something other than written-out numbers")


def answer_in(source):
    """(qid, given) from a question cell's `answer("qid", given)`, read without running it.

    For a grader: only a written-out answer is read (`written_answer`: a literal, or
    arithmetic on number literals); anything else, or a cell without exactly one such call,
    is a ValueError that says so.
    """
    call = answer_call(source)
    try:
        qid, given = (written_answer(arg) for arg in call.args)
    except NotWritten as e:
        raise ValueError(f"the answer must be written out as a number or a letter in quotes, "
                         f"not computed from names or calls (this one is {e})") from None
    return qid, given


def _cell_answer(qid, frame):
    """How the `answer(qid, ...)` call that runs in `frame` wrote its answer, when the call
    sits in a notebook cell: None where it is written out (or the source is not a cell's),
    else what it is instead ("a name", "a call")."""
    try:
        from IPython import get_ipython
        shell = get_ipython()
    except ImportError:
        return None
    if shell is None or frame.f_globals is not getattr(shell, "user_ns", None):
        return None      # not a notebook cell: a script, a test, a function of the course
    lines = linecache.getlines(frame.f_code.co_filename)
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant)
             and node.args[0].value == qid and node.lineno <= line <= node.end_lineno]
    if not calls:   # run by a magic (%time answer(...)) or exec: the grader sees no call
        return "a call the cell's code does not hold as written (run by a magic or exec)"
    for call in calls:
        try:
            written_answer(call.args[1])
        except NotWritten as e:
            return str(e)
    return None


@refusals   # a refused answer shows its message only
def answer(qid, given, *more):
    """Say whether `given` answers question `qid`, and why; `...` (the blank) says how to answer.

    In a notebook cell, an answer the grader cannot read (computed from names or calls, see
    `written_answer`) is refused at once, as the grader refuses it.
    """
    if more:
        raise ValueError(f"answer(\"{qid}\", ...) takes one answer after the question's id; "
                         f"got {1 + len(more)}: a comma inside a number splits it in two "
                         f"(1,731 is read as 1 and 731). Write 1.731 with a point for a "
                         f"decimal, or 1731 without the comma")
    caller = sys._getframe(1)
    while caller is not None and caller.f_code.co_filename.startswith(_HERE):
        caller = caller.f_back      # past the course's own wrappers (rendering.refusals)
    computed = None if caller is None else _cell_answer(qid, caller)
    if computed is not None:
        judge(qid, ...)   # an unknown id is still a ValueError that lists the questions
        print(f"Question '{qid}': not judged: the grader reads the answer as written in the "
              f"cell, without running it, and this one is {computed}. Write it out: a letter "
              f"in quotes, a number, or arithmetic on numbers (such as 1256 - 256).")
        return
    right, why = judge(qid, given)
    if right is None:
        print(f"Question '{qid}': not answered yet; {why}.")
        return
    _given.setdefault(qid, []).append((given, right))
    print(f"Question '{qid}': {'right' if right else 'not quite'}. {why[:1].upper()}{why[1:]}")
