"""Help on request for every exercise: `hint(name)`, one hint at a time, and `solution(name)`.

Each lesson's checks module (course_lib/checks/lessonNN.py) holds a HINTS dict beside its
checkers: for each exercise, two or three hints, the first about the idea, the second about
the usual mistake, a third (where it helps) about the shape of the code. None holds a line of
the answer. `solution(name)` shows the reference answer, read from the package's own
course_lib/checks/solutions.json (written from notebooks/ by `python -m course_lib.exercises`),
which no run of a lesson saves over; the check still runs on the learner's own function either way.
"""
import json
from pathlib import Path

from course_lib.checks.rendering import refusals
from course_lib.checks.tables import hints_of, lesson_modules
from course_lib.exercises import SOLUTIONS

_shown = {}            # exercise -> the highest hint shown in this kernel
_solutions_shown = set()


def all_hints():
    """{exercise: (hint, ...)} of every lessonNN module's HINTS, in lesson order, read from the
    modules' source (course_lib.checks.tables), never imported."""
    found = {}
    for path in lesson_modules():
        found.update(hints_of(path))
    return found


def _known(name, names):
    if not isinstance(name, str) or name not in names:
        listed = ", ".join(sorted(names))
        raise ValueError(f"no exercise is called {name!r}; the exercises are: {listed}. "
                         f"Give its name as a string, e.g. hint(\"softmax\")")


@refusals
def hint(name, k=None):
    """Show hint k of exercise `name`; without k, the next one not yet shown (then the last again)."""
    hints = all_hints()
    _known(name, hints)
    n = len(hints[name])
    if k is None:
        k = min(_shown.get(name, 0) + 1, n)
    elif isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
        raise ValueError(f"'{name}' has hints 1 to {n}; got k={k!r}")
    _shown[name] = max(_shown.get(name, 0), k)
    print(hint_text(name, k, hints[name]))


def hint_text(name, k, hints):
    """What hint(name) prints for hint k of `hints` (the exercise's), as the feedback page shows it too."""
    n = len(hints)
    more = (f"hint(\"{name}\") again shows hint {k + 1}" if k < n else
            f"that was the last; solution(\"{name}\") shows the reference answer")
    return f"Hint {k} of {n} for '{name}': {hints[k - 1]}\n({more})"


def solution_intro(name, lesson):
    """The line solution(name) prints above the reference answer."""
    return (f"The reference answer to '{name}', from notebooks/{lesson}. The check still runs on "
            f"the function you write: type it into the exercise cell, run it, then run the check.")


def solution_source(name, path=SOLUTIONS):
    """(lesson file name, reference answer) of exercise `name`, from the package's solutions file."""
    path = Path(path)
    try:
        found = json.loads(path.read_text(encoding="utf-8"))["solutions"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(f"the reference solutions live in {path}, which is missing or unreadable; "
                         f"run `python -m course_lib.exercises` (make exercises) in the course's "
                         f"folder to write it") from None
    if name not in found:
        _known(name, all_hints())
        raise ValueError(f"exercise {name!r} has hints but no solution in {path}; run "
                         f"`python -m course_lib.exercises` to write it again")
    return found[name]["lesson"], found[name]["source"]


@refusals
def solution(name):
    """Show the reference answer of exercise `name`, as code; the check still runs on yours."""
    lesson, source = solution_source(name)
    _solutions_shown.add(name)
    print(solution_intro(name, lesson))
    try:
        from IPython import get_ipython
        from IPython.display import Code, display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(Code(source, language="python"))
    else:
        print(source)
