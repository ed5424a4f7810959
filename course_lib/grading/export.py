"""The gradebook as the CSV an LMS imports: `--export canvas` and `--export moodle`, one column per lesson.

Each learner's LMS identity comes from the roster (course_lib.grading.roster reads it), a CSV
with a header row:

    learner,lms_id,email
    ada,4821,ada@example.edu

(`learner` is the learner's folder name; `lms_id` the learner's id in the LMS: for Canvas the
number in the ID column of Canvas's own gradebook export, for Moodle the user's "ID number";
optional columns `sis_user_id`, `sis_login_id` and `section` go to Canvas's columns of those
names.) The plain roster of one name a line still works for grading and for a Canvas export,
which Canvas then matches by name; Moodle needs an id or an email.

What each LMS's importer reads, from its own source (instructure/canvas-lms,
app/models/gradebook_importer.rb; moodle/moodle, grade/import/csv/classes/load_data.php):

- **Canvas** (Gradebook > Import): the header row must start `Student`, `ID`, and may go on
  `SIS User ID`, `SIS Login ID`; the last of the learner columns must be `Section`; every later
  column is an assignment, matched by "Name (assignment id)", else by its title, else created
  new. A row whose first cell contains "Points Possible" sets the points possible of each
  assignment (Canvas's own export writes it as the second row, "    Points Possible"). A learner
  is found by ID, then SIS User ID, then SIS Login ID, then by name; one not found is listed for
  the instructor to match by hand. Commas or semicolons; numbers with a decimal point or comma.
- **Moodle** (Grades > Import > CSV file): the first row is the header; on the import page the
  instructor maps one column to a user field (`userid`, `useridnumber`, `useremail` or
  `username`), and each grade column to a grade item or to "new grade item" (named by its
  header). A grade is a number, or empty or "-" for none. A row whose user field is empty, or
  names no user, stops the whole import, so the export leaves such learners out and lists them.
  A grade above the site's maximum (100 unless raised) stops it too. A grade item the import
  creates gets a maximum grade of 100, not the lesson's points, so the export prints each
  lesson's maximum, for the instructor to create the items first.
"""
from pathlib import Path

from course_lib.grading.book import write_csv
from course_lib.grading.lessons import LESSONS, _lesson_index
from course_lib.grading.roster import read_roster
from course_lib.grading.term import LMSES
from course_lib.grading.verdicts import _points

CANVAS_HEAD = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "    Points Possible"   # as Canvas's own export writes it
MOODLE_NEW_ITEM_MAX = 100   # the maximum grade Moodle gives a grade item its CSV import creates


def lesson_points(rows, lessons=LESSONS):
    """({learner: {lesson: points}}, {lesson: max points}, {(learner, lesson)}) over the course's lessons.

    The third holds the notebooks with a 'not run' row, whose points are not yet known.
    """
    known = {Path(name).stem for name in _lesson_index(lessons)}
    points, maxima, unknown = {}, {}, set()
    for r in rows:
        if r["lesson"] not in known or not r["learner"]:
            continue
        mine = points.setdefault(r["learner"], {})
        mine[r["lesson"]] = mine.get(r["lesson"], 0.0) + float(r["points"] or 0)
        if r["status"] == "not run":
            unknown.add((r["learner"], r["lesson"]))
    for lesson in {lesson for mine in points.values() for lesson in mine}:
        maxima[lesson] = max(sum(float(r["max_points"] or 0) for r in rows
                                 if r["learner"] == learner and r["lesson"] == lesson)
                             for learner in points)
    return points, dict(sorted(maxima.items())), unknown


def write_export(rows, out, lms, roster=None, *, lessons=LESSONS, log=print):
    """Write out/<lms>.csv, the grade import for `lms` ("canvas" or "moodle"); returns its path.

    roster: the roster's entries (roster.read_roster), or its file.

    Learners in the gradebook but not on the roster, or on it without the id the LMS needs,
    are named in a warning through `log` (and, for Moodle, left out of the file). ValueError
    for an unknown LMS, a malformed roster, or a Moodle export with no roster ids at all.
    """
    if lms not in LMSES:
        raise ValueError(f"--export {lms!r}: the exports are {', '.join(LMSES)}")
    entries = list(roster) if isinstance(roster, (list, tuple)) else read_roster(roster) if roster else []
    people = {e["learner"]: e for e in entries}
    points, maxima, unknown = lesson_points(rows, lessons)
    learners = sorted(points)
    missing = [name for name in learners if name not in people]
    if missing:   # learners by name only: never a roster's e-mails or SIS ids in a log
        where = f" {roster}" if isinstance(roster, (str, Path)) else "" if roster else " (no --roster)"
        log(f"WARNING: --export {lms}: not on the roster{where}: "
            f"{', '.join(missing)}" + (": Canvas will match them by name or ask you" if lms == "canvas"
                                       else ": left out of the file"))
    for learner, lesson in sorted(unknown):
        log(f"WARNING: --export {lms}: {learner}/{lesson} was not run, so its cell is left empty: "
            f"grade it again before you import")
    lessons_ = list(maxima)
    cell = {(l, s): ("" if (l, s) in unknown else _points(points[l].get(s, 0.0)))
            for l in learners for s in lessons_}
    path = Path(out) / f"{lms}.csv"
    if lms == "canvas":
        table = [dict(zip(CANVAS_HEAD, [POINTS_POSSIBLE, "", "", "", ""]),
                      **{s: _points(m) for s, m in maxima.items()})]
        for learner in learners:
            e = people.get(learner, {})
            table.append({"Student": learner, "ID": e.get("lms_id", ""),
                          "SIS User ID": e.get("sis_user_id", ""), "SIS Login ID": e.get("sis_login_id", ""),
                          "Section": e.get("section", ""), **{s: cell[learner, s] for s in lessons_}})
        write_csv(path, CANVAS_HEAD + lessons_, table)
        return path
    columns = [(field, head) for field, head in (("lms_id", "ID number"), ("email", "Email address"))
               if any(e[field] for e in entries)]
    if not columns:
        raise ValueError("--export moodle needs each learner's Moodle ID number or email: give "
                         "--roster a CSV with the columns learner,lms_id,email")
    keep, lacking = [], []
    for learner in learners:
        e = people.get(learner)
        if e is None:
            continue
        (keep if all(e[field] for field, _ in columns) else lacking).append(learner)
    if lacking:
        log(f"WARNING: --export moodle: no {' or '.join(h for _, h in columns)} on the roster for "
            f"{', '.join(lacking)}: left out of the file (Moodle stops an import at a row it cannot match)")
    too_big = [s for s, m in maxima.items() if m > MOODLE_NEW_ITEM_MAX]
    if too_big:
        log(f"WARNING: --export moodle: {', '.join(too_big)} is worth over {MOODLE_NEW_ITEM_MAX} points, "
            f"above Moodle's default maximum grade: raise the site's limit first, or the import stops")
    log(f"--export moodle: a grade item that Moodle's import creates has a maximum grade of "
        f"{MOODLE_NEW_ITEM_MAX}, not the lesson's points: create each lesson's grade item first, with "
        f"its maximum ({', '.join(f'{s} {_points(m)}' for s, m in maxima.items())}), and map the "
        f"column to it")
    table = [{"Learner": learner, **{head: people[learner][field] for field, head in columns},
              **{s: cell[learner, s] for s in lessons_}} for learner in keep]
    write_csv(path, ["Learner", *(h for _, h in columns), *lessons_], table)
    return path
