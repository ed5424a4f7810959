"""The term's rules on top of the checks: partial credit, late penalties and overrides, row by row.

A gradebook row's `points` is what counts. From the checks come `cases` and the points
before any penalty (`points_before_penalty`: all or nothing, or the passed share where
partial credit applies); the late penalty gives `auto_points`; an override, where there is
one, replaces them (`override` says "yes", `comment` says why). Each run works every row out
again from its status, cases and submission time, so a changed rule or override reaches the
rows that were not graded again.

The rules a run was given are kept in its out folder (term.json, overrides.csv), and a run
that is not given one uses the kept one: a regrade of one learner is graded as the rest were.
"""
import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.grading.lateness import late_by, parse_due, parse_penalty, penalty_share, zone
from course_lib.grading.overrides import STORED, read_overrides, write_overrides
from course_lib.grading.partial import automatic_points, cases_text, parse_cases, DECIMALS
from course_lib.grading.questions import is_question

SETTINGS = "term.json"
NONE = "none"  # given for an option, drops its kept value


@dataclass(frozen=True)
class Term:
    """The rules that turn the checks' results into the points that count."""
    partial: bool = False                                  # --partial: every exercise
    partial_exercises: dict = field(default_factory=dict)  # {lesson stem: {exercise}} by metadata
    due: dict = field(default_factory=dict)                # {lesson stem: aware datetime}
    penalty: object = None                                 # a lateness.Penalty, or None
    timezone: str = "UTC"
    overrides: dict = field(default_factory=dict)          # {(learner, stem, exercise): Override}

    def tz(self):
        return zone(self.timezone)


def _points(x):
    return f"{round(x, DECIMALS):g}"


def resolve(out, stems, learners, maxima, partial_exercises, *, partial=None, due=None,
            late_penalty=None, timezone=None, overrides=None):
    """(Term, what to keep in out/term.json) from the options given over those kept in `out`.

    learners: every learner's name; maxima: {lesson stem: {exercise: points}} of every lesson (or
    a function that gives it, called only when there are overrides). Each option left as None
    takes its kept value; "none" drops it. ValueError names what is wrong.
    """
    out = Path(out)
    kept = read_settings(out)
    settings = dict(kept)
    for key, value in (("partial", partial), ("due", due), ("late_penalty", late_penalty),
                       ("timezone", timezone)):
        if value is not None:
            settings[key] = None if value == NONE else value
    tz = zone(settings.get("timezone") or "UTC")
    dues = {}
    if settings.get("due"):
        text = settings["due"]
        if isinstance(text, dict):  # kept: {stem: ISO time}
            dues = {stem: datetime.datetime.fromisoformat(when) for stem, when in text.items()}
        else:
            dues = parse_due(text, stems, tz)
        settings["due"] = {stem: when.isoformat() for stem, when in dues.items()}
    penalty = parse_penalty(settings["late_penalty"]) if settings.get("late_penalty") else None
    if penalty is not None and not dues:
        raise ValueError("--late-penalty needs due times: give --due 01=2026-12-08T17:00,... too")
    source = None if overrides == NONE else overrides or (out / STORED if (out / STORED).exists() else None)
    found = read_overrides(source, learners, maxima() if callable(maxima) else maxima) if source else {}
    term = Term(bool(settings.get("partial")), partial_exercises, dues, penalty,
                settings.get("timezone") or "UTC", found)
    return term, {k: v for k, v in settings.items() if v is not None}


def read_settings(out):
    """What out/term.json keeps ({} when there is none)."""
    path = Path(out) / SETTINGS
    if not path.exists():
        return {}
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise ValueError(f"{path} is not JSON: delete it, and give the term's options again") from None
    return kept if isinstance(kept, dict) else {}


def keep(out, settings, term, extra=None):
    """Write out/term.json and out/overrides.csv, for the runs to come (and merge's checks)."""
    out = Path(out)
    (out / SETTINGS).write_text(json.dumps({**settings, **(extra or {})}, indent=1, sort_keys=True) + "\n",
                                encoding="utf-8")
    if term.overrides:
        write_overrides(out / STORED, term.overrides)
    elif (out / STORED).exists():
        (out / STORED).unlink()


def submitted_text(when, term):
    """A submission time as the gradebook writes it: ISO 8601 in the term's zone, with its offset."""
    return when.astimezone(term.tz()).isoformat(timespec="seconds")


def finish(row, term):
    """The row with its term columns worked out from its status, cases and submission time."""
    row = dict(row)
    for name in ("cases", "submitted"):
        row.setdefault(name, "")
    if not row.get("exercise"):
        row.update(points_before_penalty="", lateness="", penalty="", auto_points=row["points"],
                   override="", comment="")
        return row
    passed, total = parse_cases(row["cases"])
    partial = not is_question(row["exercise"]) and (
        term.partial or row["exercise"] in term.partial_exercises.get(row["lesson"], ()))
    row["cases"] = cases_text(passed, total, partial and row["status"] == "failed")
    before = automatic_points(row["status"], float(row["max_points"]), passed, total, partial)
    before -= min(solution_cost(row.get("solution", "")), before)  # --solution-costs, never below 0
    share, due = 0.0, term.due.get(row["lesson"])
    row["lateness"] = row["penalty"] = ""
    if due is not None and row["submitted"]:
        late = late_by(datetime.datetime.fromisoformat(row["submitted"]), due)
        share = penalty_share(late, term.penalty)
        row["lateness"], row["penalty"] = str(late), f"{share * 100:g}%"
    auto = before * (1 - share)
    override = term.overrides.get((row["learner"], row["lesson"], row["exercise"]))
    row.update(points_before_penalty=_points(before), auto_points=_points(auto),
               points=_points(override.points if override else auto),
               override="yes" if override else "", comment=override.comment if override else "")
    return row


def solution_cost(label):
    """The points --solution-costs takes off a row whose `solution` cell reads "yes, costs N"; else 0."""
    if not label.startswith("yes, costs "):
        return 0.0
    try:
        return max(float(label.removeprefix("yes, costs ")), 0.0)
    except ValueError:
        return 0.0


def unmatched(rows, term):
    """The overrides that no row took (their learner's notebook was not in this run)."""
    taken = {(r["learner"], r["lesson"], r["exercise"]) for r in rows if r.get("override")}
    return [o for key, o in term.overrides.items() if key not in taken]
