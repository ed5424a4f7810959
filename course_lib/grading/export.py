"""The gradebook as the CSV an LMS imports: `--export canvas` and `--export moodle`, one column per lesson.

Each learner's LMS identity comes from the roster, a CSV with a header row:

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
  A grade above the site's maximum (100 unless raised) stops it too.
"""
import csv
from pathlib import Path

from course_lib.grading.lessons import LESSONS, _lesson_index
from course_lib.grading.verdicts import _points

LMSES = ("canvas", "moodle")
# The roster's columns, by a name written in any case, with spaces, '-' or '_' as one likes.
ROSTER_COLUMNS = {"learner": "learner", "lmsid": "lms_id", "email": "email",
                  "sisuserid": "sis_user_id", "sisloginid": "sis_login_id", "section": "section"}
CANVAS_HEAD = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "    Points Possible"   # as Canvas's own export writes it


def _key(name):
    return "".join(ch for ch in name.lower() if ch.isalnum())


def read_lms_roster(path):
    """[{learner, lms_id, email, sis_user_id, sis_login_id, section}] from a roster file.

    A CSV roster has a header row naming its columns (learner, lms_id, email, ...); a plain
    roster (one name a line, the grader's first form) gives learners with no ids. ValueError,
    with the line, for a malformed roster: an unknown or missing column, a row with more
    fields than the header, a learner or LMS id given twice.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"the roster {path} could not be read ({e}): it should be a UTF-8 text file")
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return []
    first = next(csv.reader([lines[0][1]]))
    if _key(first[0]) != "learner" or len(first) == 1:
        if any("," in line for _, line in lines):
            raise ValueError(f"the roster {path} has commas but no header row: start it with a "
                             f"line `learner,lms_id,email`, or give one name a line")
        return [dict(learner=line.strip(), lms_id="", email="") for _, line in lines
                if _key(line) != "learner"]
    unknown = [h for h in first if _key(h) not in ROSTER_COLUMNS]
    if unknown:
        raise ValueError(f"the roster {path}, line {lines[0][0]}: unknown column(s) "
                         f"{', '.join(map(repr, unknown))}; a roster's columns are learner, lms_id, "
                         f"email (and, for Canvas, sis_user_id, sis_login_id, section)")
    fields = [ROSTER_COLUMNS[_key(h)] for h in first]
    if len(set(fields)) != len(fields):
        raise ValueError(f"the roster {path}, line {lines[0][0]}: a column is named twice")
    entries, seen, ids = [], {}, {}
    for n, line in lines[1:]:
        values = next(csv.reader([line]))
        if len(values) > len(fields):
            raise ValueError(f"the roster {path}, line {n}: {len(values)} fields, but the header "
                             f"names {len(fields)} ({', '.join(first)}); quote a field that holds a comma")
        entry = dict.fromkeys(ROSTER_COLUMNS.values(), "")
        entry.update({f: v.strip() for f, v in zip(fields, values)})
        if not entry["learner"]:
            raise ValueError(f"the roster {path}, line {n}: no learner name")
        if entry["learner"] in seen:
            raise ValueError(f"the roster {path}, line {n}: {entry['learner']} is on line "
                             f"{seen[entry['learner']]} too")
        if entry["lms_id"] and entry["lms_id"] in ids:
            raise ValueError(f"the roster {path}, line {n}: the LMS id {entry['lms_id']} is "
                             f"{ids[entry['lms_id']]}'s too")
        seen[entry["learner"]] = n
        ids[entry["lms_id"]] = entry["learner"]
        entries.append(entry)
    return entries


def check_export(lmses, roster):
    """Before grading: ValueError for an unknown LMS, a malformed roster, or Moodle without ids."""
    for lms in lmses:
        if lms not in LMSES:
            raise ValueError(f"--export {lms!r}: the exports are {', '.join(LMSES)}")
    entries = read_lms_roster(roster) if roster else []
    if "moodle" in lmses and not any(e["lms_id"] or e["email"] for e in entries):
        raise ValueError("--export moodle needs each learner's Moodle ID number or email: give "
                         "--roster a CSV with the columns learner,lms_id,email")


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

    Learners in the gradebook but not on the roster, or on it without the id the LMS needs,
    are named in a warning through `log` (and, for Moodle, left out of the file). ValueError
    for an unknown LMS, a malformed roster, or a Moodle export with no roster ids at all.
    """
    from course_lib.grading.gradebook import _write_csv  # the gradebook's atomic, inert CSV writer
    if lms not in LMSES:
        raise ValueError(f"--export {lms!r}: the exports are {', '.join(LMSES)}")
    entries = read_lms_roster(roster) if roster else []
    people = {e["learner"]: e for e in entries}
    points, maxima, unknown = lesson_points(rows, lessons)
    learners = sorted(points)
    missing = [name for name in learners if name not in people]
    if missing:
        log(f"WARNING: --export {lms}: not on the roster{f' {roster}' if roster else ' (no --roster)'}: "
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
        _write_csv(path, CANVAS_HEAD + lessons_, table)
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
    too_big = [s for s, m in maxima.items() if m > 100]
    if too_big:
        log(f"WARNING: --export moodle: {', '.join(too_big)} is worth over 100 points, above "
            f"Moodle's default maximum grade")
    table = [{"Learner": learner, **{head: people[learner][field] for field, head in columns},
              **{s: cell[learner, s] for s in lessons_}} for learner in keep]
    _write_csv(path, ["Learner", *(h for _, h in columns), *lessons_], table)
    return path
