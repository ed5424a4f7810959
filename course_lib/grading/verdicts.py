"""Decide verdicts: one Result per exercise from the grader's checks of it, with the reason in words.

An exercise passes only when the grader's own checker, run in the grader's process on the
learner's function in the notebook's server (`remote`), printed the lesson's stored pass line
with nothing flagged. Nothing the notebook's run printed or wrote counts. Where the check did
not pass, the reason is its feedback; where it could not run (the notebook never reached the
grader's last cell, its kernel died, its time ran out), the reason comes from nbval's per-cell
records: `not run`, with the first cause named. Where the notebook stopped with an error, the
feedback of what did not pass says at which cell and with what.
"""
import re
from dataclasses import dataclass


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


def pass_count(pass_line):
    """N of a pass line 'name: N checks passed', or None."""
    match = re.fullmatch(r"\S+: (\d+) checks passed", pass_line.strip())
    return int(match.group(1)) if match else None


def shown(text):
    """Text with each control character shown as its escape, never obeyed (no \\r over a line)."""
    return "".join(c if c == "\n" or (c >= " " and c != "\x7f") else repr(c)[1:-1] for c in str(text))


def verdicts(cells, placements, settings, stopped=None, outcomes=None, pass_lines=None, unserved=None):
    """One Result per exercise: from `outcomes` ({exercise: remote.Outcome}) and the lesson's
    `pass_lines`; where there are none (the notebook had no server: `unserved` says why), from
    nbval's per-cell records (keyed by code-cell number)."""
    cells = {int(k): v for k, v in cells.items()}
    outcomes, pass_lines = outcomes or {}, pass_lines or {}
    stop = stopped_at(cells, settings, stopped)
    results = []
    for p in placements:
        total = pass_count(pass_lines.get(p.exercise, ""))
        got = outcomes.get(p.exercise)
        if got is None:
            why = stop or shown(unserved or "the grader's checks did not run")
            results.append(Result(p.exercise, "not run", why, 0, p.points, None, total))
            continue
        if got.status == "passed":
            results.append(Result(p.exercise, "passed", shown(got.feedback), p.points, p.points, total, total))
            continue
        feedback = shown(got.feedback)
        if got.status == "not defined":
            feedback = _undefined(p, cells, settings) or feedback
        else:
            feedback = _cause(p, cells, settings) + feedback
        if stop and stop not in feedback:
            feedback += f"\n(your notebook: {stop})"
        results.append(Result(p.exercise, "failed", feedback, 0, p.points, got.cases_passed, total))
    return results


def stopped_at(cells, settings, stopped=None):
    """Where and why the notebook's run stopped, in words ('' when it ran to its end)."""
    died = next((c for c in sorted(cells) if cells[c].get("died")), None)
    hung = next((c for c in sorted(cells) if "Failed to interrupt" in (cells[c].get("message") or "")), None)
    error = next((c for c in sorted(cells) if cells[c].get("error") and not cells[c].get("xfail")), None)
    limit = settings.get("cell_timeout")
    if died is not None:
        return f"{cells[died]['message']} in {_cell_name(settings, died)}; the cells after it did not run"
    if hung is not None:
        return (f"{_cell_name(settings, hung)} ran past the {limit:g} s time limit per cell and did not stop when "
                f"interrupted (a loop that catches KeyboardInterrupt?), so the kernel was stopped")
    late = next((c for c in sorted(cells) if cells[c].get("late") is not None), None)
    if late is not None:
        return (f"the machine was too busy: the kernel finished {_cell_name(settings, late)} but its output had "
                f"not arrived {cells[late]['late']:g} s later, so nbval stopped the kernel; grade it again")
    if stopped:
        return shown(stopped)
    if error is not None:
        ename, evalue = cells[error]["error"]
        return shown(f"{_cell_name(settings, error)} stopped with {ename}: {evalue}")
    timeout = next((c for c in sorted(cells) if "Timeout of" in (cells[c].get("message") or "")
                    and "waiting for output" not in (cells[c].get("message") or "")), None)
    if timeout is not None:
        return f"{_cell_name(settings, timeout)} ran past the {limit:g} s time limit per cell and was interrupted"
    return ""


def _undefined(p, cells, settings):
    if p.defined_in is None:
        return (f"no cell defines {p.exercise}: was the exercise cell deleted, or its function renamed?")
    defined = cells.get(p.defined_in) or {}
    if defined.get("error"):
        ename, evalue = defined["error"]
        return shown(f"the cell that defines {p.exercise}, {_cell_name(settings, p.defined_in)}, raised "
                     f"{ename}: {evalue}, so {p.exercise} was never defined")
    return None


def _cause(p, cells, settings):
    """'the cell that defines it raised ...: ' when it did, else ''."""
    defined = cells.get(p.defined_in) or {} if p.defined_in is not None else {}
    if defined.get("error"):
        ename, evalue = defined["error"]
        return shown(f"the cell that defines {p.exercise}, {_cell_name(settings, p.defined_in)}, "
                     f"raised {ename}: {evalue}. Then the check said: ")
    return ""
