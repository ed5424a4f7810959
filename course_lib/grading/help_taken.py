"""The help a submission asked for, per exercise: how many hints, and whether the solution.

Read from the learner's code cells as data (course_lib.grading.calls), never run: each
`hint("x")` call counts as the next hint of exercise x, `hint("x", k)` as hint k, and
`solution("x")` as the solution shown. An exercise's `hints` is the highest hint those calls
reach (a lower bound: a cell run three times shows three hints but is one call), at most the
number of hints the exercise has. It changes no points unless the instructor asks
(`--solution-costs POINTS`, charge_solutions below).

The kernel keeps the hints it showed across restarts (course_lib.checks.hints.state_file), so
`hint("x")` after a restart shows the hint after those already read: the n-th call of a
notebook run in order showed hint n, and "up to hint 2" is a hint the learner read, not hint 1
twice.

What it cannot see: a call in a cell deleted before the notebook was handed in, a cell run
several times, an exercise named by a variable (`hint(name)`), a helper renamed by
assignment (`h = hint`), or code run by exec. It reports the help an honest notebook
records; it is not proof that no help was taken.
"""
from dataclasses import dataclass

from course_lib.checks.hints import all_hints
from course_lib.grading.calls import NotWritten, course_calls, written
from course_lib.grading.verdicts import _points


@dataclass(frozen=True)
class Help:
    hints: int       # the highest hint the notebook's calls reach, 0 if none
    of: int          # the hints the exercise has
    solution: bool   # whether the notebook calls solution() for it


def _number(call):
    """The hint number a hint() call asks for, None for the next one (or one not written out)."""
    node = call.args[1] if len(call.args) > 1 else dict(call.keywords).get("k")
    if node is None:
        return None
    try:
        k = written(node)
    except NotWritten:
        return None
    return k if type(k) is int else None


def help_calls(nb, names):
    """(call, exercise) for each hint() or solution() call of the notebook that names, written
    out, one of `names`, in the notebook's order."""
    for call in course_calls(nb) if nb is not None else []:
        if call.function not in ("hint", "solution") or not call.args:
            continue
        try:
            name = written(call.args[0])
        except NotWritten:
            continue
        if name in names:
            yield call, name


def help_taken(nb, exercises):
    """{exercise: Help} for the given exercise names, from the notebook's calls."""
    known = all_hints()
    plain = {name: 0 for name in exercises}
    chosen = {name: 0 for name in exercises}
    solved = set()
    for call, name in help_calls(nb, plain):
        if call.function == "solution":
            solved.add(name)
            continue
        k, n = _number(call), len(known.get(name, ()))
        if k is None:
            plain[name] += 1
        elif 1 <= k <= n:  # any other k raised in the kernel and showed nothing
            chosen[name] = max(chosen[name], k)
    return {name: Help(min(len(known.get(name, ())), max(plain[name], chosen[name])),
                       len(known.get(name, ())), name in solved) for name in exercises}


def solution_label(shown, costs=None):
    """The gradebook's `solution` cell: "no", "yes", or "yes, costs N" under --solution-costs N."""
    if not shown:
        return "no"
    return "yes" if costs is None else f"yes, costs {_points(costs)}"


def charge_solutions(graded, costs):
    """Take `costs` points off each exercise of `graded` whose solution was shown (in place).

    An exercise never goes below 0: one that failed or did not run, having no points, loses
    none, and its feedback says so. Questions and exercises without the solution are unchanged.
    With costs None nothing changes. Returns graded.
    """
    if costs is None:
        return graded
    if isinstance(costs, bool) or not isinstance(costs, (int, float)) or not 0 <= costs < float("inf"):
        raise ValueError(f"solution costs are a number of points of 0 or more; got {costs!r}")
    graded.solution_costs = costs
    for r in graded.results:
        taken = graded.help.get(r.exercise)
        if taken is None or not taken.solution:
            continue
        cut = min(costs, r.points)
        r.points -= cut
        r.feedback += (f" [the solution was shown: {_points(cut)} point(s) taken off "
                       f"(--solution-costs {_points(costs)})]" if cut else
                       f" [the solution was shown; --solution-costs {_points(costs)} took nothing "
                       f"off, since this exercise earned no points]")
    return graded


def help_columns(graded, exercise):
    """{"hints", "solution"} of a gradebook row; both empty for a question or an ungraded notebook."""
    taken = getattr(graded, "help", {}).get(exercise)
    if taken is None:
        return {"hints": "", "solution": ""}
    return {"hints": str(taken.hints),
            "solution": solution_label(taken.solution, getattr(graded, "solution_costs", None))}


def help_current(rows, costs):
    """Whether a notebook's earlier rows were priced with the same --solution-costs as now."""
    return all(r.get("solution", "") in ("", "no") or r["solution"] == solution_label(True, costs)
               for r in rows)


def help_line(taken):
    """What a learner's feedback says of the help they took for one exercise, or None for none."""
    parts = []
    if taken.hints:
        parts.append(f"hints asked for: up to hint {taken.hints} of {taken.of}")
    if taken.solution:
        parts.append("the solution was shown")
    return "; ".join(parts) or None
