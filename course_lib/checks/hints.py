"""Help on request for every exercise: `hint(name)`, one hint at a time, and `solution(name)`.

Each lesson's checks module (course_lib/checks/lessonNN.py) holds a HINTS dict beside its
checkers: for each exercise, two or three hints, the first about the idea, the second about
the usual mistake, a third (where it helps) about the shape of the code. None holds a line of
the answer. The hints shown survive a restart of the kernel (`state_file`). `solution(name)` shows the reference answer, read from the package's own
course_lib/checks/solutions.json (written from notebooks/ by `python -m course_lib.exercises`),
which no run of a lesson saves over; the check still runs on the learner's own function either way.
"""
import json
import os
from pathlib import Path

from course_lib.checks.rendering import refusals
from course_lib.checks.tables import hints_of, lesson_modules
from course_lib.exercises import SOLUTIONS

_shown = {}            # exercise -> the highest hint shown in this kernel
_solutions_shown = set()
_unsaved = []          # the state file that could not be written, once said


def state_file():
    """Where the hints shown are kept across kernel restarts: $COURSE_STATE_DIR/hints.json, else
    course_lib/hints.json in $XDG_STATE_HOME (~/.local/state by default)."""
    base = os.environ.get("COURSE_STATE_DIR")
    if base:
        return Path(base) / "hints.json"
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "course_lib" / "hints.json"


def _folder():
    """The folder whose notebooks this kernel runs (its working directory): hints are counted per
    copy of the course, so a fresh clone starts again at hint 1."""
    try:
        return str(Path.cwd().resolve())
    except OSError:
        return ""


def _stored():
    """{folder: {exercise: highest hint shown}} from the state file; {} when it is missing or
    not what this module writes."""
    try:
        data = json.loads(state_file().read_text(encoding="utf-8"))
        shown = data["shown"]
        return {str(f): {str(e): int(k) for e, k in ex.items() if type(k) is int and k > 0}
                for f, ex in shown.items() if isinstance(ex, dict)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def shown_before(name):
    """The highest hint of exercise `name` shown in this folder, in this kernel or an earlier one."""
    return max(_shown.get(name, 0), _stored().get(_folder(), {}).get(name, 0))


def help_taken(name):
    """(the highest hint of `name` shown in this folder, whether its solution was shown in this
    kernel): what a check reports as help taken (course_lib.checks.report)."""
    return shown_before(name), name in _solutions_shown


def _remember(name, k):
    """Note that hint k of `name` was shown, in this kernel and in the state file (atomically).
    Where the file cannot be written, say so once: hints then count from 1 after a restart."""
    _shown[name] = max(_shown.get(name, 0), k)
    path = state_file()
    every = _stored()
    here = every.setdefault(_folder(), {})
    here[name] = max(here.get(name, 0), k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps({"format": 1, "shown": every}), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as e:
        if not _unsaved:
            _unsaved.append(path)
            print(f"(the hints shown could not be saved to {path}: {e.strerror or e}; after a "
                  f"restart of the kernel, hint() starts again at hint 1)")


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
    """Show hint k of exercise `name`; without k, the next one not yet shown (then the last again).

    The hints shown are remembered across kernel restarts (`state_file`, per folder of
    notebooks), so the next hint after a restart is the one after those already read: the
    grader counts a notebook's hint() calls in order, and its "hint 2" is then the hint the
    learner read at the second call.
    """
    hints = all_hints()
    _known(name, hints)
    n = len(hints[name])
    if k is None:
        k = min(shown_before(name) + 1, n)
    elif isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
        raise ValueError(f"'{name}' has hints 1 to {n}; got k={k!r}")
    print(hint_text(name, k, hints[name]))
    _remember(name, k)


def hint_text(name, k, hints):
    """What hint(name) prints for hint k of `hints` (the exercise's), as the feedback page shows it too."""
    n = len(hints)
    more = (f"hint(\"{name}\") again shows hint {k + 1}" if k < n else
            f"that was the last; solution(\"{name}\") shows the reference answer")
    return f"Hint {k} of {n} for '{name}': {hints[k - 1]}\n({more})"


def solution_intro(name, lesson):
    """The line solution(name) prints above the reference answer."""
    return (f"The reference answer to '{name}' (lesson {lesson}'s solved copy, as the course ships "
            f"it). The check still runs on the function you write: type it into the exercise cell, "
            f"run it, then run the check.")


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
