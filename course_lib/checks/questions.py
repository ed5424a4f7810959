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
"""
import ast
import math
import numbers
from dataclasses import dataclass

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
        for low, high, why in self.wrong:
            if low <= number <= high:
                return False, why
        return False, self.otherwise


def _as_number(qid, given):
    if isinstance(given, str):
        text = given.strip().replace(",", "").replace("_", "")
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


def answer_in(source):
    """(qid, given) from a question cell's `answer("qid", given)`, read without running it.

    For a grader: only a literal answer is read (a number, a string, `...`); anything else,
    or a cell without exactly one such call, is a ValueError that says so.
    """
    call = answer_call(source)
    try:
        qid, given = (ast.literal_eval(arg) for arg in call.args)
    except ValueError:
        raise ValueError("the answer must be written out as a number or a letter in quotes, "
                         "not computed") from None
    return qid, given


@refusals   # a refused answer shows its message only
def answer(qid, given):
    """Say whether `given` answers question `qid`, and why; `...` (the blank) says how to answer."""
    right, why = judge(qid, given)
    if right is None:
        print(f"Question '{qid}': not answered yet; {why}.")
        return
    _given.setdefault(qid, []).append((given, right))
    print(f"Question '{qid}': {'right' if right else 'not quite'}. {why[:1].upper()}{why[1:]}")
