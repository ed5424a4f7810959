"""Partial credit: an exercise's points as the share of its check's cases that passed.

An exercise is worth its `points` (its check cell's metadata). It earns a share of them,
points x cases_passed / cases_total, where its check cell's metadata says `"partial": true`
or the grader is run with `--partial`; otherwise all or nothing. A check whose counts are
not known (it never ran, or nothing counted its cases) earns no partial points, and its
`cases` cell in the gradebook says so. A passed check always earns its full points; a
failed one whose counts say that every case passed failed for another reason (the course's
own implementation, a changed grading copy) and earns none.
"""
import dataclasses
import re

from course_lib.exercises import exercises

PASS_LINE = re.compile(r"(?P<name>\w+): (?P<n>\d+) checks passed")
UNKNOWN = "unknown: no partial credit"
DECIMALS = 3  # points are rounded to this many decimals


def stored_counts(lesson):
    """{exercise: cases a right answer passes}, from the lesson's stored pass lines ('softmax: 26 checks passed')."""
    found = {}
    for name, _, j in exercises(lesson):
        text = "".join(o.get("text", "") for o in lesson.cells[j].get("outputs", [])
                       if o.get("output_type") == "stream")
        match = PASS_LINE.fullmatch(text.strip())
        if match and match["name"] == name:
            found[name] = int(match["n"])
    return found


def partial_exercises(lesson):
    """The names of the lesson's exercises whose check cell's metadata says `"partial": true`."""
    found = set()
    for name, _, j in exercises(lesson):
        flag = lesson.cells[j].get("metadata", {}).get("partial", False)
        if not isinstance(flag, bool):
            raise ValueError(f"the check cell of '{name}' has partial={flag!r} in its metadata; "
                             f"it must be true or false")
        if flag:
            found.add(name)
    return found


def counted(result, total=None):
    """The Result with the counts that its pass line and the lesson's stored count tell filled in.

    cases_total: the pass line's count on a pass, else `total` (the lesson's stored count);
    cases_passed: the total on a pass. A failed check's passed count is left as it came.
    """
    if result.cases_total is None:
        match = PASS_LINE.fullmatch(result.feedback.strip()) if result.status == "passed" else None
        found = int(match["n"]) if match and match["name"] == result.exercise else total
        result = dataclasses.replace(result, cases_total=found)
    if result.status == "passed" and result.cases_passed is None and result.cases_total is not None:
        result = dataclasses.replace(result, cases_passed=result.cases_total)
    return result


def cases_text(passed, total, partial=False):
    """The gradebook's `cases` cell: '12/26', '?/26' when the passed count is unknown, '' for no check.

    Where partial credit applies and a count is unknown, the cell says that no partial
    points were given.
    """
    if passed is None and total is None:
        return f"? ({UNKNOWN})" if partial else ""
    text = f"{'?' if passed is None else passed}/{'?' if total is None else total}"
    return f"{text} ({UNKNOWN})" if partial and (passed is None or total is None) else text


def parse_cases(text):
    """(passed, total) from a `cases` cell; None for what it does not say."""
    match = re.match(r"(\d+|\?)/(\d+|\?)", text or "")
    if not match:
        return None, None
    return tuple(None if part == "?" else int(part) for part in match.groups())


def automatic_points(status, max_points, passed, total, partial):
    """The points the checks give: all on a pass; the passed share on a failure where partial and counted."""
    if status == "passed":
        return max_points
    if partial and status == "failed" and passed is not None and total and passed < total:
        return round(max_points * max(passed, 0) / total, DECIMALS)
    return 0  # a failure with every case passed failed for another reason (no credit, tampering)
