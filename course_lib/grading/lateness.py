"""Late work: due times per lesson, when a notebook was handed in, and the penalty rule.

The rule, exactly: a notebook handed in after its lesson's due time is late by the time
between the two; each started day (or hour, for a `/hour` rule) counts in full, so one
minute late is one day late, and a notebook handed in at the due time itself is on time.
The penalty is `rate` per counted unit, at most `max` (100% unless given), and takes that
share off the points the checks gave: `10%/day,max=50%` turns 1 point handed in 26 hours
late (2 days) into 0.8, and any lateness over 5 days into 0.5.

Times: a time with no zone (`2026-12-08T17:00`, or a timestamp.txt that names none) is in
the zone of `--timezone` (default UTC, as nbgrader's is), never the grading machine's own
zone, so that every machine that grades a shard reads it the same. A file's modification
time is an instant and needs no zone.

Where the LMS says only whether a hand-in was late (Canvas's download: a `LATE` flag in the
entry's name, and no time), its timestamp.txt holds that word (`late` or `on time`) instead
of a time. A hand-in flagged late without a time is late by one started unit of the rule:
under `10%/day` it loses 10%, the least that any late hand-in loses (the flag cannot say by
how much). One flagged on time is on time.
"""
import datetime
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UNITS = {"day": 86400, "hour": 3600}
TIMESTAMP = "timestamp.txt"
# What an LMS says of a hand-in when it gives no time (Canvas's LATE flag, or its absence):
# the first line of timestamp.txt, and (FLAGGED) the gradebook's `submitted` cell.
LATE, ON_TIME = "late", "on time"
FLAGGED = {LATE: "late (the LMS's flag; no time given)", ON_TIME: "on time (the LMS's flag; no time given)"}


@dataclass(frozen=True)
class Penalty:
    """`rate` of the points off per started `unit` of lateness, at most `cap` in all (fractions)."""
    rate: float
    unit: str = "day"
    cap: float = 1.0

    def __str__(self):
        return f"{self.rate * 100:g}%/{self.unit}" + (f",max={self.cap * 100:g}%" if self.cap < 1 else "")


def _percent(text, what):
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", text)
    if not match or float(match[1]) > 100:
        raise ValueError(f"--late-penalty: {what} {text.strip()!r} should be a percentage from 0% to "
                         f"100%, e.g. 10%")
    return float(match[1]) / 100


def parse_penalty(text):
    """A Penalty from '10%/day', '2%/hour' or '10%/day,max=50%'."""
    example = "e.g. 10%/day or 10%/day,max=50%"
    rule, *options = [part.strip() for part in text.split(",")]
    rate, _, unit = rule.partition("/")
    if unit.strip() not in UNITS:
        raise ValueError(f"--late-penalty: {rule!r} should be a percentage per day or per hour, {example}")
    cap = 1.0
    for option in options:
        key, _, value = option.partition("=")
        if key.strip() != "max":
            raise ValueError(f"--late-penalty: {option!r} is not an option; the only one is max=N%, {example}")
        cap = _percent(value, "max")
    return Penalty(_percent(rate, "the rate"), unit.strip(), cap)


def zone(name):
    """The ZoneInfo called `name` ('UTC', 'Europe/Berlin'); ValueError naming it if there is none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"--timezone: there is no time zone {name!r}; give an IANA name such as UTC, "
                         f"Europe/Berlin or America/New_York") from None


def parse_time(text, tz, where):
    """An aware datetime from ISO 8601 text or nbgrader's '2026-12-08 17:00:00.000000 UTC'.

    A time with no zone is in `tz`. `where` names the text's origin in the error message.
    """
    text = text.strip()
    body, zone_name = text, None
    match = re.fullmatch(r"(.*\d)\s+([A-Za-z][\w/+-]*)", text)
    if match:
        body, zone_name = match.groups()
    try:
        when = datetime.datetime.fromisoformat(body)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a time; write it as 2026-12-08T17:00 (in the "
                         f"--timezone zone) or 2026-12-08T17:00+01:00") from None
    if zone_name is not None:
        if when.tzinfo is not None:
            raise ValueError(f"{where}: {text!r} gives its zone twice")
        if zone_name.upper() in ("UTC", "GMT", "Z"):
            zone_name = "UTC"
        try:
            when = when.replace(tzinfo=ZoneInfo(zone_name))
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{where}: {text!r} names the zone {zone_name!r}, which is not an IANA "
                             f"zone (abbreviations such as CEST are ambiguous): write the offset, e.g. "
                             f"2026-12-08T17:00+01:00") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=tz)


def parse_due(text, stems, tz):
    """{lesson stem: due time} from '01=2026-12-08T17:00,02=...' or a file of such lines.

    A file holds one `lesson=time` (or `lesson,time`) a line; # starts a comment. A lesson
    is its number (01) or its name (01_attention_by_hand).
    """
    path = Path(text)
    if path.is_file():
        lines = [(f"{path} line {i}", line.split("#")[0].strip())
                 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]
        parts = [(where, line) for where, line in lines if line and line.lower() != "lesson,due"]
    else:
        parts = [("--due", part.strip()) for part in text.split(",") if part.strip()]
    due = {}
    for where, part in parts:
        lesson, sep, when = part.partition("=")
        if not sep:
            lesson, sep, when = part.partition(",")
        if not sep:
            raise ValueError(f"{where}: {part!r} should be lesson=time, e.g. 01=2026-12-08T17:00")
        stem = lesson_stem(lesson.strip(), stems, where)
        if stem in due:
            raise ValueError(f"{where}: lesson {stem} has a due time already")
        due[stem] = parse_time(when, tz, where)
    return due


def lesson_stem(text, stems, where):
    """The one lesson stem that `text` names, by number ('01') or whole name."""
    match = [s for s in stems if s == text or s.split("_")[0] == text]
    if len(match) != 1:
        raise ValueError(f"{where}: no single lesson is {text!r}; lessons: {', '.join(stems)}")
    return match[0]


def flag_stamp(flag, lms):
    """timestamp.txt's text for a hand-in that `lms` says was `flag` (LATE or ON_TIME) without a time."""
    return (f"{flag}\n# {lms}'s download says this hand-in was {flag} and gives no time; "
            f"`collect --times FILE` gives the time\n")


def read_stamp(text, tz, where):
    """An aware datetime from timestamp.txt's text, or LATE / ON_TIME where it holds only that word."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first.lower() in (LATE, ON_TIME):
        return first.lower()
    return parse_time(first, tz, where)


def flag_of(submitted):
    """LATE or ON_TIME where a gradebook `submitted` cell is an LMS's flag (FLAGGED), else None."""
    return next((flag for flag, text in FLAGGED.items() if submitted == text), None)


def submitted_at(notebook, learner_folder, tz):
    """(when the notebook was handed in, how that is known).

    From the nearest timestamp.txt in the notebook's folder or a folder above it, up to the
    learner's folder (nbgrader's convention), else from the notebook file's modification time.
    `when` is an aware datetime, or LATE / ON_TIME where timestamp.txt holds an LMS's flag.
    """
    folder, top = Path(notebook).parent, Path(learner_folder)
    while True:
        stamp = folder / TIMESTAMP
        if stamp.is_file() and not stamp.is_symlink():
            text = stamp.read_text(encoding="utf-8", errors="replace")[:400]
            return read_stamp(text, tz, str(stamp)), TIMESTAMP
        if folder == top or top not in folder.parents:
            break
        folder = folder.parent
    seconds = os.lstat(notebook).st_mtime
    return datetime.datetime.fromtimestamp(seconds, tz), "file time"


def late_by(submitted, due):
    """How late: a timedelta of 0 or more (whole seconds)."""
    return datetime.timedelta(seconds=max(0, math.ceil((submitted - due).total_seconds())))


def penalty_share(late, penalty):
    """The share of the points taken off for `late` (a timedelta, or LATE: flagged late without a
    time, one started unit) under `penalty` (None: none)."""
    if penalty is None:
        return 0.0
    if late == LATE:
        return min(penalty.cap, penalty.rate)
    if late <= datetime.timedelta(0):
        return 0.0
    units = math.ceil(late.total_seconds() / UNITS[penalty.unit])
    return min(penalty.cap, penalty.rate * units)
