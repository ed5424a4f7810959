"""How a failed check shows in a notebook: its feedback, without the course's own frames.

IPython shows an exception through its `_render_traceback_` method when it has one: the
lines it returns are the error output that JupyterLab shows, nbval prints and nbconvert
saves. `explain(e)` gives a checker's failure (its AssertionError, an unfinished exercise's
NotImplementedError, a refusal's ValueError) one that shows

- the feedback itself: the exercise, what was tested, expected, got and the hint;
- for an unfinished exercise (the stub's NotImplementedError), that it is unfinished and
  what to do;
- the warnings the check provoked in the learner's code, each once, after the message;
- when the learner's own function raised, where: its frames, as IPython shows them, without
  the checkers' frames.

The exception's type and message (nbval's and Jupyter's `ename` and `evalue`) are unchanged.
"""
import functools
import linecache
import re
import sys
import traceback
import types
import warnings
from pathlib import Path

CHECKS = str(Path(__file__).resolve().parent)   # a frame whose file is in here is the course's
STUB = re.compile(r"Exercise '(\w+)': write your solution here")
RED, RESET = "\x1b[1;31m", "\x1b[0m"


def explain(e, caught=(), raised=None):
    """Give `e` a `_render_traceback_` that shows its feedback only; returns `e`.

    `caught` holds the warnings recorded while checking (warnings.WarningMessage); `raised`
    the learner's own exception, when the feedback is about it (its frames are shown).
    Calling it again on the same exception adds the warnings and keeps what it had.
    """
    try:
        shown = getattr(e, "_course_shown", None) or {"raised": None, "warnings": []}
        shown["raised"] = raised if raised is not None else shown["raised"]
        shown["warnings"] = list(shown["warnings"]) + list(learner_warnings(caught))
        e._course_shown = shown
        e._render_traceback_ = functools.partial(render, e)
    except AttributeError:   # an exception that takes no attributes shows IPython's way
        pass
    return e


def render(e):
    """The lines an error output shows for `e` (see the module's docstring)."""
    shown = getattr(e, "_course_shown", {})
    text = _text(e)
    stub = STUB.fullmatch(text.strip()) if isinstance(e, NotImplementedError) else None
    lines = text.splitlines() or [type(e).__name__]
    if isinstance(e, NotImplementedError) and stub is None:
        lines[0] = f"NotImplementedError: {lines[0]}"
    elif isinstance(e, (ValueError, TypeError)):
        lines[0] = f"{type(e).__name__}: {lines[0]}"
    out = [RED + lines[0] + RESET, *lines[1:]]
    if stub is not None:
        name = stub.group(1)
        out.append(f"Hint: the exercise cell still holds its stub, the line `raise "
                   f"NotImplementedError(...)`: replace it with your code, run that cell, then "
                   f"this one again. Stuck? In a new cell: `from course_lib.checks import hint` "
                   f"and `hint(\"{name}\")`.")
    out += warning_lines(shown.get("warnings", ()))
    raised = shown.get("raised")
    if raised is None and isinstance(e, NotImplementedError) and stub is None:
        raised = e    # raised in the learner's code (or deeper), not by the stub
    if raised is not None:
        frames = learner_frames(raised)
        if frames:
            out += ["", "Where your function raised it:", *frames]
    return out


def _text(e):
    try:
        return str(e)
    except Exception:
        return f"<a {type(e).__name__} whose message could not be shown>"


# ---------------------------------------------------------------- frames

def is_course(filename):
    """Whether code in `filename` is the checkers' own (course_lib/checks)."""
    return str(filename).startswith(CHECKS)


def learner_traceback(tb):
    """A new traceback chain holding the frames of `tb` that are not the checkers'; None if none."""
    kept = []
    while tb is not None:
        if not is_course(tb.tb_frame.f_code.co_filename):
            kept.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    chain = None
    for frame, lasti, lineno in reversed(kept):
        chain = types.TracebackType(chain, frame, lasti, lineno)
    return chain


def learner_frames(raised):
    """The lines of `raised`'s traceback through the learner's code, IPython's way where it runs."""
    tb = learner_traceback(raised.__traceback__)
    if tb is None:
        return []
    shell = _shell()
    if shell is not None:
        try:
            return list(shell.InteractiveTB.structured_traceback(type(raised), raised, tb, tb_offset=0))
        except Exception:  # an IPython whose formatter differs: Python's own form
            pass
    return "".join(traceback.format_exception(type(raised), raised, tb)).rstrip("\n").splitlines()


def _shell():
    ipython = sys.modules.get("IPython")
    try:
        return ipython.get_ipython() if ipython is not None else None
    except Exception:
        return None


# ---------------------------------------------------------------- warnings

def learner_warnings(caught):
    """The warnings of `caught` raised outside the checkers' code, each (kind, text, file, line) once."""
    seen = []
    for w in caught:
        key = (w.category.__name__, _text(w.message), str(w.filename), int(w.lineno or 0))
        if not is_course(w.filename) and key not in seen:
            seen.append(key)
    return seen


def warning_lines(found):
    """The lines that show warnings found by `learner_warnings`, under a heading; [] for none."""
    if not found:
        return []
    lines = ["", "Warnings while checking (each shown once):"]
    for kind, text, filename, lineno in found:
        lines.append(f"  {_place(filename, lineno)}: {kind}: {text}")
        source = linecache.getline(filename, lineno).strip()
        if source:
            lines.append(f"      {source}")
    return lines


def _place(filename, lineno):
    """'Cell In[4], line 2' for a notebook cell's code (as IPython names it), else 'file:line'."""
    shell = _shell()
    try:
        named = shell.compile.format_code_name(filename) if shell is not None else None
    except Exception:
        named = None
    return f"{named[0]} {named[1]}, line {lineno}" if named else f"{filename}:{lineno}"


def show_warnings(caught, stream=None):
    """Print the learner's warnings among `caught` (after a check's pass line), each once, to stderr."""
    lines = warning_lines(learner_warnings(caught))
    if lines:
        print("\n".join(lines[1:]), file=stream or sys.stderr)


def recorded():
    """warnings.catch_warnings(record=True), the filters as they are (a warning shown once stays so)."""
    return warnings.catch_warnings(record=True)


def refusals(function):
    """Decorate a helper the learner calls (hint, solution, answer) so that its ValueError or
    TypeError shows as its message, without the course's frames."""
    @functools.wraps(function)
    def run(*args, **kwargs):
        __tracebackhide__ = True
        try:
            return function(*args, **kwargs)
        except (ValueError, TypeError) as e:
            raise explain(e)
    return run
