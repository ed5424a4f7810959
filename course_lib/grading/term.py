"""The term: every rule that shapes the gradebook, kept in the out folder, one object handed down.

A gradebook row's `points` is what counts. From the checks come `cases` and the points
before any penalty (`points_before_penalty`: all or nothing, or the passed share where
partial credit applies, less --solution-costs); the late penalty gives `auto_points`; an
override, where there is one, replaces them (`override` says "yes", `comment` says why). Each
run works every row out again from its status, cases and submission time, so a changed rule
or override reaches the rows that were not graded again.

The term's options (the roster, --partial, --due, --late-penalty, --timezone, --overrides,
--solution-costs, --export and --lessons) are kept in the out folder: term.json, with copies of
the roster (roster.csv) and the overrides (overrides.csv). A run that does not give one uses
the kept one, until it is given again; "none" drops it. So a regrade of one learner, or a
second run with fewer flags, makes the gradebook the first run made. `--show-term` prints it.
"""
import datetime
import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from course_lib.grading.book import plain, write_csv
from course_lib.grading.lateness import (FLAGGED, LATE, flag_of, late_by, parse_due, parse_penalty,
                                         penalty_share, zone)
from course_lib.grading.overrides import STORED, read_overrides, write_overrides
from course_lib.grading.partial import automatic_points, cases_text, parse_cases, DECIMALS
from course_lib.grading.questions import is_question
from course_lib.grading.roster import read_roster

SETTINGS = "term.json"
ROSTER = "roster.csv"   # the roster's kept copy
NONE = "none"  # given for an option, drops its kept value
LMSES = ("canvas", "moodle")
LATENESS_UNKNOWN = "late, by a time not given"   # `lateness` of a hand-in the LMS flagged late without a time


@dataclass(frozen=True)
class Given:
    """The term's options as one run gave them: None keeps the one kept in the out folder, "none" drops it."""
    roster: object = None          # a roster file
    partial: object = None         # True / False
    due: object = None             # "01=2026-12-08T17:00,..." or a file
    late_penalty: object = None    # "10%/day,max=50%"
    timezone: object = None        # an IANA zone
    overrides: object = None       # an overrides CSV
    solution_costs: object = None  # points, 0 or more
    export: object = None          # LMSes: ["canvas", "moodle"]
    only: object = None            # the lessons expected of everyone: [lesson stem]


@dataclass(frozen=True)
class Term:
    """The rules that turn the checks' results into the points that count, and the class they grade."""
    partial: bool = False                                  # --partial: every exercise
    partial_exercises: dict = field(default_factory=dict)  # {lesson stem: {exercise}} by metadata
    due: dict = field(default_factory=dict)                # {lesson stem: aware datetime}
    penalty: object = None                                 # a lateness.Penalty, or None
    timezone: str = "UTC"
    overrides: dict = field(default_factory=dict)          # {(learner, stem, exercise): Override}
    roster: tuple = ()                                     # roster.read_roster's entries
    solution_costs: object = None                          # points, or None: the help only reported
    export: tuple = ()                                     # LMSes to write an import for
    only: object = None                                    # lesson stems expected of everyone, or None
    settings: dict = field(default_factory=dict)           # what term.json keeps

    def tz(self):
        return zone(self.timezone)

    @property
    def names(self):
        """The learners on the roster."""
        return [e["learner"] for e in self.roster]


def _points(x):
    return f"{round(x, DECIMALS):g}"


def settle(out, given, stems):
    """The Term of a run from the options `given` over those kept in `out` (no overrides yet: `with_class`).

    stems: every lesson's stem. ValueError names what is wrong (a bad roster, due time, penalty,
    zone, LMS or cost); nothing is written.
    """
    out = Path(out)
    settings = dict(read_settings(out))
    for f in fields(Given):
        value = getattr(given, f.name)
        if f.name in ("roster", "overrides") or value is None:
            continue
        settings[f.name] = None if _is_none(value) else value
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
    costs = settings.get("solution_costs")
    if costs is not None and (isinstance(costs, bool) or not isinstance(costs, (int, float))
                              or not 0 <= costs < float("inf")):
        raise ValueError(f"--solution-costs: {costs!r} is not a number of points of 0 or more")
    export = tuple(settings.get("export") or ())
    for lms in export:
        if lms not in LMSES:
            raise ValueError(f"--export {lms!r}: the exports are {', '.join(LMSES)}")
    only = settings.get("only")
    if only:
        unknown = [s for s in only if s not in stems]
        if unknown:
            raise ValueError(f"--lessons: no lesson is {', '.join(unknown)}; lessons: {', '.join(stems)}")
    roster_path = None if _is_none(given.roster) else given.roster or (out / ROSTER if (out / ROSTER).exists() else None)
    roster = tuple(read_roster(roster_path)) if roster_path else ()
    if roster and not given.roster:   # the kept copy: its text made inert (write_csv), undone
        roster = tuple({k: plain(v) for k, v in e.items()} for e in roster)
    if "moodle" in export and not any(e["lms_id"] or e["email"] for e in roster):
        raise ValueError("--export moodle needs each learner's Moodle ID number or email: give "
                         "--roster a CSV with the columns learner,lms_id,email")
    settings = {k: v for k, v in settings.items() if v is not None and v != []}
    return Term(bool(settings.get("partial")), {}, dues, penalty, settings.get("timezone") or "UTC",
                {}, roster, costs, export, list(only) if only else None, settings)


def _is_none(value):
    return isinstance(value, str) and value.strip().lower() == NONE


def with_class(term, out, given, learners, maxima, partial_exercises):
    """The term with the class's overrides (given, or kept in `out`) and the lessons' partial exercises.

    learners: every name the class knows besides the roster's (folders, gradebook); maxima:
    {lesson stem: {exercise: points}} of every lesson, or a function that gives it (called only
    when there are overrides). ValueError names a bad override line.
    """
    out = Path(out)
    source = None if _is_none(given.overrides) else given.overrides or (
        out / STORED if (out / STORED).exists() else None)
    found = read_overrides(source, set(learners) | set(term.names),
                           maxima() if callable(maxima) else maxima) if source else {}
    return replace(term, overrides=found, partial_exercises=partial_exercises)


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


def keep(out, term, extra=None):
    """Write out/term.json, out/roster.csv and out/overrides.csv, for the runs to come (and merge's checks)."""
    out = Path(out)
    (out / SETTINGS).write_text(json.dumps({**term.settings, **(extra or {})}, indent=1, sort_keys=True)
                                + "\n", encoding="utf-8")
    if term.roster:
        write_csv(out / ROSTER, ["learner", "lms_id", "email", "name", "sis_user_id", "sis_login_id", "section"],
                  term.roster)
    else:
        (out / ROSTER).unlink(missing_ok=True)
    if term.overrides:
        write_overrides(out / STORED, term.overrides)
    else:
        (out / STORED).unlink(missing_ok=True)


def show(out):
    """The term kept in `out`, in words, one option a line (what `--show-term` prints)."""
    out = Path(out)
    settings = read_settings(out)
    lines = [f"the term kept in {out}:"]
    names = {"partial": "--partial", "due": "--due", "late_penalty": "--late-penalty",
             "timezone": "--timezone", "solution_costs": "--solution-costs", "export": "--export",
             "only": "--lessons"}
    for key, flag in names.items():
        value = settings.get(key)
        if isinstance(value, dict):
            value = ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        elif isinstance(value, list):
            value = ",".join(value)
        lines.append(f"  {flag}: {'(none)' if value in (None, '', False) else value}")
    roster = read_roster(out / ROSTER) if (out / ROSTER).exists() else []
    lines.append(f"  --roster: {f'{len(roster)} learner(s), kept in {out / ROSTER}' if roster else '(none)'}")
    overrides = sum(1 for _ in open(out / STORED, encoding="utf-8")) - 1 if (out / STORED).exists() else 0
    lines.append(f"  --overrides: {f'{overrides} line(s), kept in {out / STORED}' if overrides else '(none)'}")
    return "\n".join(lines)


def submitted_text(when, term):
    """A submission time as the gradebook writes it: ISO 8601 in the term's zone, with its offset;
    an LMS's flag without a time (lateness.LATE, ON_TIME) as its words (lateness.FLAGGED)."""
    if isinstance(when, str):
        return FLAGGED[when]
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
        flag = flag_of(row["submitted"])   # an LMS that said late or on time, and gave no time
        if flag is None:
            late = late_by(datetime.datetime.fromisoformat(row["submitted"]), due)
        else:
            late = LATE if flag == LATE else datetime.timedelta(0)
        share = penalty_share(late, term.penalty)
        row["lateness"] = LATENESS_UNKNOWN if late == LATE else str(late)
        row["penalty"] = f"{share * 100:g}%"
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
