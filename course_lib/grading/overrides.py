"""Overrides: points set by hand, with a reason, on top of what the checks gave.

The file is a CSV with the header `learner,lesson,exercise,points,comment` (comment may be
empty), one exercise a line; a lesson is its number (01) or its name. The grader keeps the
last file it was given in the out folder (overrides.csv), so that every later run, a
regrade of one learner included, applies the same overrides until it is given another
(`--overrides none` drops them all).
"""
import csv
from dataclasses import dataclass
from pathlib import Path

from course_lib.grading.book import plain, write_csv
from course_lib.grading.lateness import lesson_stem

FIELDS = ["learner", "lesson", "exercise", "points", "comment"]
STORED = "overrides.csv"


@dataclass(frozen=True)
class Override:
    learner: str
    lesson: str       # the lesson's stem
    exercise: str
    points: float
    comment: str
    line: int         # where it is in its file, for messages


def read_overrides(path, learners, maxima):
    """{(learner, lesson stem, exercise): Override} from a CSV; ValueError naming the line that is wrong.

    learners: every name the class knows (folders, roster, gradebook); maxima: {lesson stem:
    {exercise: max points}} of every lesson.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--overrides: {path} could not be read ({e})") from None
    reader = csv.reader(text.splitlines())
    header = [h.strip().lower() for h in next(reader, [])]
    if header[:4] != FIELDS[:4] or header[4:] not in ([], ["comment"]):
        raise ValueError(f"{path} line 1: the header should be {','.join(FIELDS)} (comment may be "
                         f"left out), not {','.join(header) or 'empty'}")
    found = {}
    for line, fields in enumerate(reader, 2):
        if not any(f.strip() for f in fields):
            continue
        where = f"{path} line {line}"
        if len(fields) not in (4, 5):
            raise ValueError(f"{where}: {len(fields)} fields, where {len(header)} are wanted "
                             f"({','.join(header)}); quote a comment that holds a comma")
        learner, lesson, exercise, points = (f.strip() for f in fields[:4])
        learner = plain(learner)   # the kept copy writes a name a spreadsheet would run inert
        comment = plain(fields[4].strip()) if len(fields) == 5 else ""
        if learner not in learners:
            raise ValueError(f"{where}: there is no learner {learner!r} in the class folder, roster "
                             f"or gradebook")
        stem = lesson_stem(lesson, sorted(maxima), where)
        if exercise not in maxima[stem]:
            raise ValueError(f"{where}: lesson {stem} has no exercise {exercise!r}; its exercises: "
                             f"{', '.join(maxima[stem]) or 'none'}")
        try:
            value = float(points)
        except ValueError:
            raise ValueError(f"{where}: points {points!r} is not a number") from None
        top = maxima[stem][exercise]
        if not 0 <= value <= top:
            raise ValueError(f"{where}: points {points} is outside 0 to {top:g}, what {exercise} is worth")
        key = (learner, stem, exercise)
        if key in found:
            raise ValueError(f"{where}: {learner}'s {stem} {exercise} is overridden already, on line "
                             f"{found[key].line}")
        found[key] = Override(learner, stem, exercise, value, comment, line)
    return found


def write_overrides(path, overrides):
    """Keep the overrides in the out folder (lesson stems written out), for the runs to come."""
    write_csv(Path(path), FIELDS, [dict(learner=o.learner, lesson=o.lesson, exercise=o.exercise,
                                         points=f"{o.points:g}", comment=o.comment)
                                    for o in sorted(overrides.values(), key=lambda o: o.line)])
