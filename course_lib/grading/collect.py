"""Collect: what an LMS hands the instructor, laid out as the class folder the grader reads.

    python -m course_lib.grading collect DOWNLOAD --into CLASS [--roster R] [--lesson NN] [--times FILE]

DOWNLOAD is one of:

- Canvas's "Download Submissions" zip: one entry per file, named
  `{sortable name}_{LATE_}?{user id}_{file id}_{file name}` (the sortable name lowercased, with
  only letters, digits and `_` kept; `LATE_` when Canvas counts the submission late; a file
  uploaded under a name already taken gets `-1`, `-2` before its extension), or with anonymous
  grading `{LATE_}?anon_{anonymous id}_{file id}_{file name}` (instructure/canvas-lms,
  lib/content_zipper.rb). Canvas writes every entry when the zip is made, so an entry's time
  is the download's, never the hand-in's: lateness comes from the `LATE` flag, or from
  `--times FILE` (read_times), the submission times of Canvas's Submissions API;
- Moodle's "Download all submissions" zip: a folder per learner,
  `{Full Name}_{participant id}_assignsubmission_file/` (with a trailing `_` before Moodle 4.1),
  or, with "download submissions in folders" off, the same prefix on each file's name; each
  entry carries the time its file was last changed in Moodle;
- an nbgrader course's `submitted/{student}/{assignment}/` folder (or the course folder
  holding it), each assignment folder with its `timestamp.txt`.

Each learner's notebook of a lesson goes to `CLASS/{learner}/{lesson}/{lesson}.ipynb`, beside a
`timestamp.txt` that late work reads: nbgrader's own; a Moodle entry's time (UTC where the zip
records it, else written without a zone, so that the term's --timezone reads it); for Canvas,
the time `--times` gives, else the word `late` or `on time` from the entry's flag
(course_lib.grading.lateness). A notebook collected again unchanged keeps the time it had.

A learner is named as on the roster where the LMS id in the download (Canvas's user id, Moodle's
participant id, nbgrader's student id) is a roster entry's `lms_id`, or Canvas's anonymous id
its `anonymous_id` (for
nbgrader, also its learner name; for Moodle, whose participant id is the assignment's own,
also where the roster's `name` column is the learner's full name, held by one entry);
otherwise as the LMS names them. Two learners never share a folder: one whose name is taken
(by a roster learner with another id, an earlier collect's learner, another learner of this
download, or a file collect writes itself, such as collected.csv), compared without regard to
case, is collected as `{name} ({LMS id})`, and a line says so. Of several files of one learner
and lesson the newest wins (the later time, Canvas's later file id, then the higher `-N`).

Nothing is run: notebooks are copied as bytes. A zip is read as hostile: an entry whose name
climbs out (`..`, an absolute path, a drive letter) or that is a link is refused, so is one
over SUBMISSION_LIMIT bytes (counted as it is read, not as its header claims), and reading
stops at TOTAL_LIMIT bytes or MAX_ENTRIES entries. Every file that could not be placed is
listed with why; a download of which nothing was placed exits with 1. `CLASS/collected.csv`
keeps, per learner and lesson, where the notebook came from and the LMS's names for the
learner, which `return` needs to hand the feedback back.
"""
import argparse
import csv
import datetime
import os
import re
import stat
import struct
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_lib.grading.book import plain, write_csv
from course_lib.grading.lateness import LATE, ON_TIME, TIMESTAMP, flag_stamp, parse_time, read_stamp
from course_lib.grading.learner_folders import COLLECTED, folders
from course_lib.grading.lessons import LESSONS, _lesson_index
from course_lib.grading.roster import read_roster
from course_lib.grading.sandbox import printable
from course_lib.grading.submissions import SUBMISSION_LIMIT, identify

TOTAL_LIMIT = 4 * 2 ** 30     # bytes read from one download in all
MAX_ENTRIES = 50_000          # entries read from one zip
COLUMNS = ["learner", "lesson", "lms", "lms_id", "lms_name", "lms_prefix", "source", "submitted"]
# Canvas (lib/content_zipper.rb): [sortable name, "LATE", user id] joined by "_" with every other
# character than a letter, a digit or "_" removed, or "anon_{anonymous id}" in place of the name
# and the user id; then "_{file id}_{file name}". The guide once wrote the flag `late_`: read too.
CANVAS = re.compile(r"^(?P<name>[^/]+?)_(?P<late>(?i:late)_)?(?P<id>\d+)_(?P<other>\d+)_(?P<file>[^/]+)$")
CANVAS_ANONYMOUS = re.compile(r"^(?P<late>(?i:late)_)?(?P<id>anon_[A-Za-z0-9]+)_(?P<other>\d+)_(?P<file>[^/]+)$")
MOODLE = re.compile(r"^(?P<name>[^/]+)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?(?P<sep>/?)(?P<file>.*)$")
REUPLOAD = re.compile(r"^(?P<stem>.+?)(?:-(?P<n>\d+)| \((?P<copy>\d+)\))?$")


@dataclass(frozen=True)
class Found:
    """One notebook of the download, before it is placed."""
    lms: str           # "canvas", "moodle", "nbgrader"
    lms_id: str        # the learner's id in the download
    lms_name: str      # the learner's name in the download
    prefix: str        # the entry's name up to the learner's own file name (to name feedback as the LMS does)
    source: str        # the entry or file it came from
    file: str          # the learner's own file name
    when: object       # an aware or naive datetime, nbgrader's timestamp text, or lateness.LATE / ON_TIME
    order: tuple       # to pick the newest of one learner's files of a lesson
    read: object       # () -> the bytes


class Refused(ValueError):
    """An entry that is not placed, and why."""


# ---------------------------------------------------------------- Canvas's submission times

def read_times(path, tz=None):
    """{Canvas user id or `anon_` id: aware submission time} from Canvas's Submissions API.

    `path` is what `GET /api/v1/courses/:course/assignments/:assignment/submissions` returns,
    saved as JSON (a list of Submission objects; their `user_id`, `anonymous_id` and
    `submitted_at` are read), or a CSV with a header row and the columns `user_id` (or `id`)
    and/or `anonymous_id`, and `submitted_at`. A time with no zone is in `tz`. A submission
    with no time (nothing handed in) is left out. ValueError names what is wrong.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--times: {path} could not be read ({e})") from None
    if text.lstrip().startswith(("[", "{")):
        import json
        try:
            records = json.loads(text)
        except ValueError as e:
            raise ValueError(f"--times: {path} is not JSON ({e})") from None
        if isinstance(records, dict):
            records = records.get("submissions", [records])
        where = [f"{path} item {i}" for i in range(1, len(records) + 1)] if isinstance(records, list) else []
    else:
        rows = list(csv.reader(text.splitlines()))
        head = [h.strip().lower().replace(" ", "_") for h in (rows[0] if rows else [])]
        head = ["user_id" if h == "id" else h for h in head]
        records = [dict(zip(head, row)) for row in rows[1:] if any(c.strip() for c in row)]
        where = [f"{path} line {i}" for i in range(2, len(records) + 2)]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"--times: {path} should be the list of submissions Canvas's API gives")
    found = {}
    for place, record in zip(where, records):
        if "submitted_at" not in record:
            raise ValueError(f"--times: {place} has no submitted_at: give Canvas's Submissions API's "
                             f"JSON, or a CSV with the columns user_id and submitted_at")
        when = record["submitted_at"]
        if not when:
            continue
        when = parse_time(str(when).replace("Z", "+00:00") if str(when).endswith("Z") else str(when), tz, place)
        keys = [str(record[k]).strip() for k in ("user_id",) if record.get(k) not in (None, "")]
        if record.get("anonymous_id") not in (None, ""):
            keys.append(f"anon_{str(record['anonymous_id']).strip()}")
        if not keys:
            raise ValueError(f"--times: {place} names no learner (user_id or anonymous_id)")
        for key in keys:
            if key in found and found[key] != when:
                raise ValueError(f"--times: {place}: learner {key} has two times: give the submissions "
                                 f"of one assignment, the one this download is")
            found[key] = when
    return found


# ---------------------------------------------------------------- zips

def _entry_problem(info):
    """Why a zip entry is refused unread, or None."""
    name = info.filename
    if "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name) or "\0" in name:
        return "its name is an absolute path or uses backslashes"
    if any(part == ".." for part in name.split("/")):
        return "its name climbs out of the download (..)"
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return "it is a symbolic link"
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "it is not a regular file"
    if info.file_size > SUBMISSION_LIMIT:
        return f"it is {info.file_size / 2 ** 20:.0f} MB, over the {SUBMISSION_LIMIT / 2 ** 20:.0f} MB a notebook may be"
    return None


class _Budget:
    """Bytes left to read from one download."""

    def __init__(self):
        self.left = TOTAL_LIMIT


def _reader(archive, info, budget):
    """() -> the entry's bytes, at most SUBMISSION_LIMIT of them, whatever its header says."""
    def read():
        with archive.open(info) as f:
            data = f.read(SUBMISSION_LIMIT + 1)
        if len(data) > SUBMISSION_LIMIT:
            raise Refused(f"it unpacks to over {SUBMISSION_LIMIT / 2 ** 20:.0f} MB")
        budget.left -= len(data)
        if budget.left < 0:
            raise Refused(f"the download unpacks to over {TOTAL_LIMIT / 2 ** 30:.0f} GiB: collect it in parts")
        return data
    return read


def _zip_time(info):
    """The entry's time: aware UTC from its extended-timestamp field where there is one, else naive."""
    extra = info.extra
    while len(extra) >= 4:
        kind, size = struct.unpack("<HH", extra[:4])
        body = extra[4:4 + size]
        if kind == 0x5455 and len(body) >= 5 and body[0] & 1:
            seconds = struct.unpack("<i", body[1:5])[0]
            return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
        extra = extra[4 + size:]
    return datetime.datetime(*info.date_time)


def _instant(when):
    """Seconds since the epoch of an aware time, or of a naive one read as UTC (only to order them)."""
    return (when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)).timestamp()


def _from_zip(path, skipped, times=None):
    """[Found] of a Canvas or Moodle zip; what is refused goes to `skipped` as (entry, why).

    times: {Canvas user id or anon_ id: aware time} (read_times) for Canvas's entries, whose own
    time is the download's."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ValueError(f"{path} is not a zip that can be read ({e}): give the zip the LMS made, "
                         f"or an nbgrader submitted/ folder") from None
    infos = archive.infolist()
    if len(infos) > MAX_ENTRIES:
        raise ValueError(f"{path} holds {len(infos)} entries, over the {MAX_ENTRIES} a download may")
    budget, found = _Budget(), []
    for info in infos:
        if info.is_dir():
            continue
        problem = _entry_problem(info)
        if problem:
            skipped.append((info.filename, problem))
            continue
        name = info.filename
        base = name.rsplit("/", 1)[-1]
        if base.startswith(".") or name.startswith("__MACOSX/"):
            continue  # a file manager's own files
        moodle = MOODLE.match(name)
        if moodle and moodle["plugin"] != "file":
            skipped.append((name, f"Moodle's {moodle['plugin']} submission, not a file"))
            continue
        if moodle:
            when = _zip_time(info)
            file = moodle["file"].rsplit("/", 1)[-1]
            found.append(Found("moodle", moodle["id"], moodle["name"], name[:len(name) - len(moodle["file"])],
                               name, file, when, (_instant(when),), _reader(archive, info, budget)))
            continue
        canvas = CANVAS_ANONYMOUS.match(name) or CANVAS.match(name)
        if canvas:
            anonymous = canvas.re is CANVAS_ANONYMOUS
            when = (times or {}).get(canvas["id"]) or (LATE if canvas["late"] else ON_TIME)
            found.append(Found("canvas", canvas["id"], canvas["id"] if anonymous else canvas["name"],
                               name[:len(name) - len(canvas["file"])], name, canvas["file"], when,
                               (int(canvas["other"]),), _reader(archive, info, budget)))
            continue
        skipped.append((name, "its name is neither Canvas's ({name}_{user id}_{file id}_{file}, or "
                              "anon_{id}_{file id}_{file}) nor Moodle's ({Full Name}_{participant id}"
                              "_assignsubmission_file_)"))
    return found


# ---------------------------------------------------------------- nbgrader

def _from_nbgrader(folder, skipped):
    """[Found] of an nbgrader submitted/ folder (or the course folder that holds one)."""
    folder = Path(folder)
    if (folder / "submitted").is_dir():
        folder = folder / "submitted"
    found = []
    for student in sorted(folder.iterdir()):
        if student.name.startswith("."):
            continue
        if student.is_symlink() or not student.is_dir():
            skipped.append((str(student), "not a student's folder (a link or a file)"))
            continue
        for assignment in sorted(student.iterdir()):
            if assignment.is_symlink() or not assignment.is_dir():
                skipped.append((str(assignment), "not an assignment folder (a link or a file)"))
                continue
            stamp = assignment / "timestamp.txt"
            when = (stamp.read_text(encoding="utf-8", errors="replace")[:200].strip()
                    if stamp.is_file() and not stamp.is_symlink() else None)
            for notebook in sorted(assignment.rglob("*.ipynb")):
                if ".ipynb_checkpoints" in notebook.parts:
                    continue
                info = os.lstat(notebook)
                if not stat.S_ISREG(info.st_mode):
                    skipped.append((str(notebook), "not a regular file (a link?)"))
                    continue
                if info.st_size > SUBMISSION_LIMIT:
                    skipped.append((str(notebook), f"over the {SUBMISSION_LIMIT / 2 ** 20:.0f} MB a notebook may be"))
                    continue
                found.append(Found("nbgrader", student.name, student.name, "", str(notebook),
                                   notebook.name, when or datetime.datetime.fromtimestamp(
                                       info.st_mtime, datetime.timezone.utc),
                                   (info.st_mtime,), notebook.read_bytes))
    return found


# ---------------------------------------------------------------- placing

def lesson_of(file, data, stems, forced=None, lessons=LESSONS):
    """(the lesson stem a notebook is, how that is known); Refused when it is no lesson's."""
    if forced:
        return forced, "--lesson"
    stem = REUPLOAD.match(Path(file).stem)["stem"] if file.endswith(".ipynb") else None
    if stem in stems:
        return stem, "its name"
    if not file.endswith(".ipynb"):
        raise Refused("not a notebook (.ipynb)")
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        scores = identify(nb, lessons)
    except Exception:
        raise Refused(f"{file} names no lesson and could not be read as a notebook") from None
    best = max(scores, key=scores.get)
    if scores[best] < 0.5:
        raise Refused(f"{file} names no lesson and holds none of a lesson's text")
    return Path(best).stem, f"its content (named {file})"


def _newest(found):
    """Found sorted oldest first: by time, then the re-upload's -N."""
    def key(f):
        match = REUPLOAD.match(Path(f.file).stem)
        return (*f.order, int(match["n"] or match["copy"] or 0))
    return sorted(found, key=key)


def _timestamp(when):
    """timestamp.txt's text: nbgrader's as it was; an LMS's flag (lateness.LATE, ON_TIME) with what it
    means; an aware time in UTC; a naive one without a zone."""
    if when in (LATE, ON_TIME):
        return flag_stamp(when, "Canvas").rstrip("\n")
    if isinstance(when, str):
        return when
    if when.tzinfo is not None:
        return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    return when.strftime("%Y-%m-%d %H:%M:%S.%f")


def _write(path, data):
    """Write bytes whole to a temporary file beside `path`, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def collect(download, into, roster=None, lesson=None, lessons=LESSONS, log=print, times=None):
    """Lay out a download (a Canvas or Moodle zip, an nbgrader folder) as the class folder `into`.

    times: Canvas's submission times (read_times), or a file of them. Returns ([(learner, lesson,
    path)] placed, [(entry, why)] not placed); `log` gets a line for each learner collected under
    another name than the LMS's (a name taken) and each notebook placed by its content. ValueError
    for a download that is neither, a bad roster, times file or --lesson.
    """
    download, into = Path(download), Path(into)
    stems = [Path(n).stem for n in _lesson_index(lessons)]
    forced = None
    if lesson:
        match = [s for s in stems if s == lesson or s.split("_")[0] == lesson]
        if len(match) != 1:
            raise ValueError(f"--lesson: no single lesson is {lesson!r}; lessons: {', '.join(stems)}")
        forced = match[0]
    entries = read_roster(roster) if roster else []
    reserved = [e["learner"] for e in entries if e["learner"].casefold() == COLLECTED]
    if reserved:
        raise ValueError(f"the roster names a learner {reserved[0]!r}, the name of a file collect writes "
                         f"in the class folder: rename them on the roster")
    if times is not None and not isinstance(times, dict):
        times = read_times(times)
    skipped = []
    if download.is_dir():
        found = _from_nbgrader(download, skipped)
    elif download.is_file():
        found = _from_zip(download, skipped, times)
    else:
        raise ValueError(f"there is no download at {download}: give the zip Canvas or Moodle made, "
                         f"or an nbgrader submitted/ folder")
    kept = _read_collected(into)
    folder_of = folders(found, entries, kept.values(), log)
    chosen = {}   # (learner, lesson) -> (Found, bytes, how)
    for f in _newest(found):
        learner = folder_of[f.lms, f.lms_id]
        try:
            data = f.read()
            stem, how = lesson_of(f.file, data, stems, forced, lessons)
        except Refused as e:
            skipped.append((f.source, str(e)))
            continue
        if (learner, stem) in chosen:
            older = chosen[(learner, stem)][0]
            skipped.append((older.source, f"an older file of {learner}'s {stem}: {f.source} is newer"))
        chosen[(learner, stem)] = (f, data, how)
    placed = []
    for (learner, stem), (f, data, how) in sorted(chosen.items()):
        folder = into / learner / stem
        notebook, stamp = folder / f"{stem}.ipynb", folder / TIMESTAMP
        submitted = _timestamp(f.when)
        if _unchanged(notebook, data) and _holds_a_time(stamp):
            # the same hand-in collected again (a later download, another re-upload): its time stays
            submitted = kept.get((learner, stem), {}).get("submitted") or submitted
        else:
            _write(notebook, data)
            _write(stamp, (_timestamp(f.when) + "\n").encode("utf-8"))
        placed.append((learner, stem, notebook))
        kept[(learner, stem)] = dict(learner=learner, lesson=stem, lms=f.lms, lms_id=f.lms_id,
                                     lms_name=f.lms_name, lms_prefix=f.prefix, source=f.source,
                                     submitted=submitted.splitlines()[0])
        if how != "its name":
            log(f"{learner}/{stem}: placed by {how}")
    into.mkdir(parents=True, exist_ok=True)
    write_csv(into / COLLECTED, COLUMNS, [kept[k] for k in sorted(kept)])
    return placed, skipped


def _unchanged(notebook, data):
    """Whether `notebook` is a regular file holding exactly `data`."""
    try:
        info = os.lstat(notebook)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == len(data) and notebook.read_bytes() == data


def _holds_a_time(stamp):
    """Whether a timestamp.txt holds a time (not an LMS's flag, not nothing)."""
    try:
        if not stat.S_ISREG(os.lstat(stamp).st_mode):
            return False
        return isinstance(read_stamp(stamp.read_text(encoding="utf-8", errors="replace")[:400], None,
                                     str(stamp)), datetime.datetime)
    except (OSError, ValueError):
        return False


def _read_collected(into):
    """{(learner, lesson): row} of an earlier collect into the same class folder."""
    path = Path(into) / COLLECTED
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {(plain(r["learner"]), r["lesson"]): {k: plain(r.get(k) or "") for k in COLUMNS}
                for r in csv.DictReader(f)}


def read_collected(into):
    """The rows of CLASS/collected.csv: where each learner's notebook came from, and their LMS names."""
    return list(_read_collected(into).values())


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m course_lib.grading collect",
                                     description="Lay out a Canvas or Moodle submissions zip, or an nbgrader "
                                                 "submitted/ folder, as the class folder the grader reads.")
    parser.add_argument("download", help="the LMS's zip, or an nbgrader submitted/ folder")
    parser.add_argument("--into", required=True, help="the class folder (made if needed)")
    parser.add_argument("--roster", help="a roster whose lms_id column names the learners")
    parser.add_argument("--lesson", help="the lesson every notebook of the download is (default: by its "
                                         "file name, else its content)")
    parser.add_argument("--times", metavar="FILE",
                        help="Canvas: the submission times, as Canvas's Submissions API gives them (JSON), "
                             "or a CSV with the columns user_id (or anonymous_id) and submitted_at; "
                             "without it a Canvas hand-in is late or on time by its LATE flag")
    args = parser.parse_args(argv)
    lines = []   # collect's own notes, printed after the notebooks
    try:
        placed, skipped = collect(args.download, args.into, args.roster, args.lesson, log=lines.append,
                                  times=args.times)
    except ValueError as e:
        print(f"error: {printable(e)}", file=sys.stderr)
        return 2
    for learner, stem, path in placed:
        print(printable(f"{learner}/{stem}: {path}"))
    for line in lines:
        print(printable(line))
    for entry, why in skipped:
        print(printable(f"not placed: {entry}: {why}"))
    if not placed:
        print(f"error: nothing was collected from {printable(args.download)}: "
              + (f"none of its {len(skipped)} file(s) could be placed (listed above)" if skipped else
                 "it holds no submission"), file=sys.stderr)
        return 1
    print(printable(f"collected {len(placed)} notebook(s) of {len({p[0] for p in placed})} learner(s) into "
                    f"{args.into}" + (f"; {len(skipped)} file(s) not placed, listed above" if skipped else "")))
    return 0
