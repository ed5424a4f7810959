"""Decide verdicts: one Result per exercise from the grader's replay of its record, with the reason in words.

An exercise passes only when the grader's own checker, replayed on what the grader's probe
of the notebook's definitions recorded (`probe`, `replay`), printed the lesson's stored pass
line. Nothing the notebook's run printed or wrote counts. When it did not pass, the reason comes from the replay's feedback, or, where the
check did not end normally or left no record, from nbval's per-cell records (the kernel
died, a time limit, never reached): `failed` or `not run`, with the first cause named.
"""
import re
from dataclasses import dataclass

from course_lib.grading.replay import decide, pass_count

# ---------------------------------------------------------------- verdicts

@dataclass
class Result:
    exercise: str
    status: str        # passed, failed, not run or missing
    feedback: str      # the check's pass line or feedback, or why it did not run
    points: float = 0
    max_points: float = 1
    # How many of the check's cases passed, of how many a right answer passes (the stored pass
    # line's count); None where the check never ran or the count is unknown.
    cases_passed: int | None = None
    cases_total: int | None = None


def _points(x):
    return f"{x:g}"


def _cell_name(settings, number):
    line = (settings.get("sources") or {}).get(str(number), "")
    return f"cell {number}" + (f" (`{line}`)" if line else "")


def verdicts(cells, placements, settings, stopped=None, replayed=None, pass_lines=None):
    """One Result per exercise: from `replayed` ({exercise: replay dict, or None without a record})
    and the lesson's `pass_lines`, with nbval's per-cell records (keyed by code-cell number) for
    the reason where the check did not end normally or left no record."""
    cells = {int(k): v for k, v in cells.items()}
    replayed, pass_lines = replayed or {}, pass_lines or {}
    limit = settings["cell_timeout"]
    died = next((c for c in sorted(cells) if cells[c]["died"]), None)
    hung = next((c for c in sorted(cells) if "Failed to interrupt" in (cells[c]["message"] or "")), None)
    results = []
    for p in placements:
        cell = cells.get(p.check_cell)
        got, line = replayed.get(p.exercise), pass_lines.get(p.exercise, "")
        total = pass_count(line)
        if got is not None:
            status, feedback, done, total = decide(p.exercise, got, line)
            if status == "passed":
                results.append(Result(p.exercise, "passed", feedback, p.points, p.points, done, total))
                continue
            if not _ended_early(cell):
                results.append(Result(p.exercise, "failed", _cause(p, cells, settings) + feedback
                                      + _notebook_said(cell, feedback, p.exercise), 0, p.points, done, total))
                continue
        status, feedback = _why(cell, p, cells, settings, died, hung, limit, stopped)
        if got is None and status == "failed" and not _ended_early(cell) and p.defined_in is not None \
                and re.fullmatch(rf"{re.escape(p.exercise)}: \d+ checks passed", (cell or {}).get("stdout", "").strip()):
            feedback = ("the check left no record of what your function did (something in the "
                        "notebook removed or moved it), so it cannot be graded; only the grader's "
                        "replay of that record passes an exercise, never a printed line")
        results.append(Result(p.exercise, status, feedback, 0, p.points, None, total))
    return results


def _notebook_said(cell, feedback, exercise):
    """What the check said in the notebook's own run, when the probe's check of its definitions alone
    differs in a way that state of the notebook's explains (a name it lacks; a pass there), else ''."""
    said = ((cell or {}).get("stdout") or "").strip()
    passed_there = re.fullmatch(rf"{re.escape(exercise)}: \d+ checks passed", said) is not None
    if not said or said in feedback or not (passed_there or "NameError" in feedback):
        return ""
    from course_lib.grading.replay import _shown
    return (f"\n(in your notebook's own run, where every cell had run, the check said: {_shown(said[:3000])}; "
            f"the grader checks your definitions alone)")


def _ended_early(cell):
    """Whether a check cell did not run to its end: not run, the kernel dead or stopped, a time limit."""
    if cell is None:
        return True
    message = cell.get("message") or ""
    return bool("Kernel dead on test start" in message or cell.get("late") is not None or cell["died"]
                or "Failed to interrupt kernel" in message
                or ("Timeout of" in message and "waiting for output" not in message)
                or cell.get("error") or (cell.get("stdout") or "").strip().startswith("interrupted"))


def _cause(p, cells, settings):
    """'the cell that defines it raised ...: ' when it did, else ''."""
    defined = cells.get(p.defined_in) or {} if p.defined_in is not None else {}
    if defined.get("error"):
        ename, evalue = defined["error"]
        return (f"the cell that defines {p.exercise}, {_cell_name(settings, p.defined_in)}, "
                f"raised {ename}: {evalue}. Then the check said: ")
    return ""


def _why(cell, p, cells, settings, died, hung, limit, stopped):
    """(status, feedback) for a check that did not pass: the first cause, in words."""
    message = (cell or {}).get("message") or ""
    if cell is None:
        return "not run", stopped or "the check cell did not run"
    if "Kernel dead on test start" in message:
        if died is not None and died < p.check_cell:
            return "not run", f"{cells[died]['message']} in {_cell_name(settings, died)}, before this check"
        if hung is not None and hung < p.check_cell:
            return "not run", (f"{_cell_name(settings, hung)} ran past the {limit:g} s time limit per "
                               f"cell and did not stop when interrupted (a loop that catches "
                               f"KeyboardInterrupt?), so the kernel was stopped")
        before = [c for c in sorted(cells) if c < p.check_cell and cells[c]["outcome"] != "passed"
                  and "Kernel dead on test start" not in (cells[c]["message"] or "")]
        if before and cells[before[0]].get("late") is not None:
            return "not run", _late(settings, before[0], cells[before[0]]["late"]) + ", before this check"
        if before:
            first = (cells[before[0]]["message"] or "no message").strip().splitlines()[0]
            return "not run", (f"the kernel had stopped before this check, after "
                               f"{_cell_name(settings, before[0])}: {first}")
        return "not run", "the kernel had stopped before this check (no cell before it failed)"
    if cell.get("late") is not None:
        return "not run", _late(settings, p.check_cell, cell["late"], "the check")
    if cell["died"]:
        return "failed", f"{message} while the check ran"
    if "Failed to interrupt kernel" in message:
        return "failed", (f"the check ran past the {limit:g} s time limit per cell and did not stop "
                          f"when interrupted (a loop that catches KeyboardInterrupt?), so the kernel "
                          f"was stopped")
    if "Timeout of" in message and "waiting for output" not in message:
        return "failed", (f"the check ran past the {limit:g} s time limit per cell (an endless loop, "
                          f"or far too slow?)" + _busy_note(cell))
    if p.defined_in is None:
        return "failed", (f"no cell defines {p.exercise}: was the exercise cell deleted, or its "
                          f"function renamed?")
    defined = cells.get(p.defined_in) or {}
    earlier = [c for c in sorted(cells) if c < p.check_cell and cells[c]["error"]]
    cause = ""
    if defined.get("error"):
        ename, evalue = defined["error"]
        cause = (f"the cell that defines {p.exercise}, {_cell_name(settings, p.defined_in)}, "
                 f"raised {ename}: {evalue}. Then the check said: ")
    elif earlier and cell["stdout"].startswith("NameError"):  # what was never defined, and why
        ename, evalue = cells[earlier[0]]["error"]
        cause = f"{_cell_name(settings, earlier[0])} raised {ename}: {evalue}. Then the check said: "
    if cell["error"]:
        ename, evalue = cell["error"]
        return "failed", (f"the restored check cell itself raised {ename}: {evalue} (was it changed "
                          f"before it ran, e.g. by an input transformer?)")
    said = cell["stdout"].strip()
    if said.startswith("interrupted"):
        return "failed", f"the check ran past the {limit:g} s time limit per cell" + _busy_note(cell)
    if not said:
        first = message.splitlines()[0] if message else "no output"
        return "failed", f"the check printed nothing, so no pass line ({first})"
    return "failed", cause + said


def _late(settings, number, seconds, what=None):
    what = what or _cell_name(settings, number)
    return (f"the machine was too busy: the kernel finished {what} but its output had not arrived "
            f"{seconds:g} s later, so nbval stopped the kernel; grade it again")


def _busy_note(cell):
    """How busy the machine was while a cell ran to its time limit, when it was busy."""
    busy = cell.get("busy")
    if not busy or busy[2] < 0.25 * busy[0]:
        return ""
    return (f"; the machine was busy: of those {busy[0]:g} s the kernel ran {busy[1]:g} s and "
            f"waited {busy[2]:g} s for a CPU")

