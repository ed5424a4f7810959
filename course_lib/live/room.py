"""What a session's events say about the room: each learner's latest result on each exercise.

`Room` is rebuilt from the store's events when the service starts and updated with each new
event, so the page's state is a dictionary away. Its `view()` is what the page draws:

- a grid of learners by exercises (the exercises of the lessons checked this session, in the
  course's order), each cell the learner's latest result there: not started, the stub still
  there, failing, or passed, with the highest hint shown and whether the solution was;
- the exercises most learners are failing now, each with the reasons their latest checks
  gave, in the checks' own words, and how many learners gave each.

A learner who ran no check yet is in the grid when the hub says they have a server running
(the roster), so the room's empty rows show who has not started.
"""
import csv
import io
import json
from datetime import datetime, timezone

from course_lib.exercises import SOLUTIONS

STUCK = 6       # exercises listed in "where the room is stuck"
REASONS = 3     # reasons listed for each


def course_exercises(path=SOLUTIONS):
    """[(lesson, exercise)] of every exercise, in the course's order (from solutions.json)."""
    found = json.loads(path.read_text(encoding="utf-8"))["solutions"]
    return [(entry["lesson"][:2], name) for name, entry in found.items()]


class Cell:
    """One learner's results on one exercise this session."""
    __slots__ = ("state", "kind", "reason", "hints", "solution", "tries")

    def __init__(self):
        self.state, self.kind, self.reason = "", None, None
        self.hints, self.solution, self.tries = 0, False, 0

    def add(self, row):
        self.tries += 1
        self.hints = max(self.hints, row["hints"])
        self.solution = self.solution or row["solution"]
        if row["passed"]:
            self.state, self.kind, self.reason = "passed", None, None
        else:
            self.state = "stub" if row["kind"] == "unfinished" else "failing"
            self.kind, self.reason = row["kind"], row["reason"]


class Room:
    """The state of one session, from its events; `version` grows with every change."""

    def __init__(self, session, started, exercises):
        self.session, self.started, self.last = session, started, None
        self.order = {key: i for i, key in enumerate(exercises)}
        self.cells = {}          # (learner, lesson, exercise) -> Cell
        self.learners = set()    # learners with an event this session
        self.roster = set()      # learners with a running server, as the hub said last
        self.roster_note = None  # why the hub's roster is unavailable, when it is
        self.version = 0

    def known(self, lesson, exercise):
        return (lesson, exercise) in self.order

    def add(self, row):
        key = (row["learner"], row["lesson"], row["exercise"])
        self.cells.setdefault(key, Cell()).add(row)
        self.learners.add(row["learner"])
        self.last = row["at"] if self.last is None else max(self.last, row["at"])
        self.version += 1

    def set_roster(self, names, note=None):
        names = set(names)
        if names != self.roster or note != self.roster_note:
            self.roster, self.roster_note = names, note
            self.version += 1

    def columns(self):
        """The exercises of every lesson checked this session, in the course's order."""
        lessons = {lesson for _, lesson, _ in self.cells}
        return [key for key in sorted(self.order, key=self.order.get) if key[0] in lessons]

    def stuck(self):
        """The exercises most learners fail now, most first, each with its commonest reasons."""
        found = {}
        for (learner, lesson, exercise), cell in self.cells.items():
            entry = found.setdefault((lesson, exercise), {"failing": 0, "passed": 0, "reasons": {}})
            if cell.state == "passed":
                entry["passed"] += 1
            elif cell.state == "failing":
                entry["failing"] += 1
                entry["reasons"][cell.reason] = entry["reasons"].get(cell.reason, 0) + 1
        ranked = sorted((key for key, e in found.items() if e["failing"]),
                        key=lambda key: (-found[key]["failing"], self.order.get(key, 0)))
        return [{"lesson": lesson, "exercise": exercise, "failing": found[(lesson, exercise)]["failing"],
                 "passed": found[(lesson, exercise)]["passed"],
                 "reasons": sorted(found[(lesson, exercise)]["reasons"].items(),
                                   key=lambda item: (-item[1], item[0]))[:REASONS]}
                for lesson, exercise in ranked[:STUCK]]

    def view(self):
        """The page's state, as JSON-ready data (every text in it is drawn as text, never HTML)."""
        columns = self.columns()
        rows = []
        for learner in sorted(self.learners | self.roster):
            cells = []
            for lesson, exercise in columns:
                cell = self.cells.get((learner, lesson, exercise))
                cells.append(None if cell is None else {
                    "state": cell.state, "kind": cell.kind, "reason": cell.reason,
                    "hints": cell.hints, "solution": cell.solution, "tries": cell.tries})
            rows.append({"learner": learner, "cells": cells})
        return {"version": self.version, "session": self.session, "started": self.started,
                "last": self.last, "columns": [{"lesson": l, "exercise": e} for l, e in columns],
                "rows": rows, "stuck": self.stuck(), "roster_note": self.roster_note,
                "learners": len(self.learners | self.roster), "checked": len(self.learners)}


CSV_FIELDS = ("session", "time", "learner", "lesson", "exercise", "result", "kind", "reason",
              "hints", "solution")


def _cell(value):
    """A CSV value a spreadsheet shows as text: one that starts like a formula gets a quote."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def session_csv(session, events):
    """The CSV of a session's events, one row each, times in UTC (ISO 8601)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_FIELDS)
    for row in events:
        at = datetime.fromtimestamp(row["at"], timezone.utc).isoformat(timespec="seconds")
        writer.writerow([_cell(v) for v in (
            session, at, row["learner"], row["lesson"], row["exercise"],
            "passed" if row["passed"] else "failed", row["kind"], row["reason"], row["hints"],
            "yes" if row["solution"] else "no")])
    return out.getvalue()
