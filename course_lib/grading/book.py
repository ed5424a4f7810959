"""The gradebook's files: its columns, reading an earlier run's rows, and writing CSV safely.

Every CSV the grader writes (gradebook.csv, summary.csv, similarity.csv, the LMS exports, the
kept overrides and roster) is written whole to a temporary file and renamed into place, so a
grader killed mid-write leaves the last complete file; text a spreadsheet would run as a
formula gets a leading `'`.
"""
import csv
import os
import tempfile
from pathlib import Path

from course_lib.grading.feedback import note_feedback
from course_lib.grading.questions import question_totals
from course_lib.grading.verdicts import _points

STATUSES = ("passed", "failed", "not run", "missing", "not answered")
# `sandbox`: how the row's notebook ran: "bubblewrap", "none" (--no-sandbox, or a machine without
# one), or empty when it never ran (missing, unreadable, misnamed).
# `cpu_seconds`: the CPU that grading the row's notebook took, its pytest and kernel together
# (the same on each of its rows; empty when nothing ran or it was not measured).
# The term's columns (course_lib.grading.term): `cases` passed/total of the check ("12/26");
# `points_before_penalty` what the checks gave (all or nothing, or the passed share);
# `submitted` when it was handed in (ISO 8601 with offset); `lateness` how long after the due
# time ("1 day, 2:05:00", "0:00:00" on time, empty with no due time); `penalty` the share taken
# off ("20%"); `auto_points` the points after it; `override` "yes" where points were set by
# hand, with the `comment` that says why. `points` is always what counts.
TERM = ["cases", "points_before_penalty", "submitted", "lateness", "penalty", "auto_points",
        "override", "comment"]
# `seed`: the grading seed its checks' inputs were drawn from; the same notebook graded again
# with this seed gives the same feedback (empty where nothing ran).
# `hints`, `solution` (last): the help an exercise's notebook asked for (course_lib.grading.help_taken);
# empty on a question's row (its `exercise` is the question id, "00-bytes") and where none was read.
GRADEBOOK = ["learner", "lesson", "exercise", "points", "max_points", "status", "feedback", "sha256",
             "sandbox", "cpu_seconds", *TERM, "stopped", "seed", "hints", "solution"]


def ordered(rows):
    """The rows in the gradebook's order: by learner, then lesson; a notebook's rows in exercise order."""
    return sorted(rows, key=lambda r: (r["learner"], r["lesson"]))


def write_outputs(out, rows, lessons):
    """Write what a class's grading ends with: gradebook.csv, summary.csv, the feedback pages' notes.

    grade_class and `merge` both end here. Returns the rows in the gradebook's order, each
    with every column, as text.
    """
    out = Path(out)
    rows = [{k: "" if row.get(k) is None else str(row.get(k, "")) for k in GRADEBOOK} for row in ordered(rows)]
    write_csv(out / "gradebook.csv", GRADEBOOK, rows)
    write_summary(out / "summary.csv", rows, lessons)
    note_feedback(out / "feedback", rows)
    return rows


def read_rows(path):
    """The rows of an earlier run's gradebook, in order, as the grader wrote them; None if there is none.

    A gradebook of an older version (fewer columns) is read too, its new columns empty.
    """
    path = Path(path)
    if not path.exists():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not set(GRADEBOOK[:7]) <= set(reader.fieldnames or []):
            return None
        return [{k: plain(row.get(k) or "") for k in GRADEBOOK} for row in reader]


def group(rows):
    """{(learner, lesson): rows}, the latest rows of each winning."""
    runs = {}
    for row in rows:
        key = (row["learner"], row["lesson"])
        found = runs.setdefault(key, [])
        if found and (found[-1]["sha256"] != row["sha256"]
                      or any(r["exercise"] == row["exercise"] for r in found)):
            found.clear()
        found.append(row)
    return runs


def write_csv(path, fields, rows):
    """Write a CSV whole to a temporary file beside `path`, then rename it into place (atomic)."""
    path = Path(path)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({k: inert(v) for k, v in row.items()} for row in rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# A spreadsheet reads a cell that starts with one of these as a formula (=HYPERLINK(...), +1+1,
# -2+3, @SUM(...)) or a control; such text gets a leading ' that makes it plain text there.
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def inert(value):
    """Text a spreadsheet shows as text: a leading ' before a formula sign (and before a leading ')."""
    if isinstance(value, str) and value[:1] in (*FORMULA, "'"):
        return "'" + value
    return value


def plain(value):
    """inert, undone: the text as the grader wrote it."""
    return value[1:] if value[:1] == "'" and value[1:2] in (*FORMULA, "'") else value


def write_summary(path, rows, lessons):
    """One line per learner: each lesson's points and `total` (exercises and questions together),
    `max_total`, then `questions` and `max_questions`, the part of those that questions earned."""
    learners = sorted({r["learner"] for r in rows})
    table = []
    for learner in learners:
        mine = [r for r in rows if r["learner"] == learner]
        line = {"learner": learner}
        for stem in lessons:
            line[stem] = _points(sum(float(r["points"]) for r in mine if r["lesson"] == stem))
        line["total"] = _points(sum(float(r["points"]) for r in mine))
        line["max_total"] = _points(sum(float(r["max_points"]) for r in mine))
        line.update(question_totals(mine))
        table.append(line)
    write_csv(path, ["learner", *lessons, "total", "max_total", "questions", "max_questions"], table)
