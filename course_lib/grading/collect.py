"""Collect: what an LMS hands the instructor, laid out as the class folder the grader reads.

    python -m course_lib.grading collect DOWNLOAD --into CLASS [--roster R] [--lesson NN]

DOWNLOAD is one of:

- Canvas's "Download Submissions" zip: one entry per file, named
  `{sortable name}_{late_}?{user id}_{id}_{file name}` (the sortable name lowercased, without
  spaces or commas; `late_` when it was handed in after the due time; a file uploaded again
  under a name already taken gets `-1`, `-2` before its extension);
- Moodle's "Download all submissions" zip: a folder per learner,
  `{Full Name}_{participant id}_assignsubmission_file/` (with a trailing `_` before Moodle 4.1),
  or, with "download submissions in folders" off, the same prefix on each file's name;
- an nbgrader course's `submitted/{student}/{assignment}/` folder (or the course folder
  holding it), each assignment folder with its `timestamp.txt`.

Each learner's notebook of a lesson goes to `CLASS/{learner}/{lesson}/{lesson}.ipynb`, beside a
`timestamp.txt` that late work reads (nbgrader's own, else the zip entry's time: UTC where the
zip records it, else written without a zone, so that the term's --timezone reads it). A
learner is named as on the roster where the LMS id in the download (Canvas's user id, Moodle's
participant id, nbgrader's student id) is a roster entry's `lms_id` (for nbgrader, also its
learner name; for Moodle, whose participant id is the assignment's own, also where the
roster's `name` column is the learner's full name); otherwise as the LMS names them. Of several files of one learner and lesson,
the newest wins (the later entry time, then the higher `-N`).

Nothing is run: notebooks are copied as bytes. A zip is read as hostile: an entry whose name
climbs out (`..`, an absolute path, a drive letter) or that is a link is refused, so is one
over SUBMISSION_LIMIT bytes (counted as it is read, not as its header claims), and reading
stops at TOTAL_LIMIT bytes or MAX_ENTRIES entries. Every file that could not be placed is
listed with why. `CLASS/collected.csv` keeps, per learner and lesson, where the notebook came
from and the LMS's names for the learner, which `return` needs to hand the feedback back.
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
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_lib.grading.book import plain, write_csv
from course_lib.grading.lessons import LESSONS, _lesson_index
from course_lib.grading.roster import read_roster
from course_lib.grading.submissions import SUBMISSION_LIMIT, identify

TOTAL_LIMIT = 4 * 2 ** 30     # bytes read from one download in all
MAX_ENTRIES = 50_000          # entries read from one zip
COLLECTED = "collected.csv"
COLUMNS = ["learner", "lesson", "lms", "lms_id", "lms_name", "lms_prefix", "source", "submitted"]
CANVAS = re.compile(r"^(?P<name>[^_/]+)_(?P<late>late_)?(?P<id>\d+)_(?P<other>\d+)_(?P<file>[^/]+)$", re.I)
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
    when: object       # an aware or naive datetime, or nbgrader's timestamp text
    order: tuple       # to pick the newest of one learner's files of a lesson
    read: object       # () -> the bytes


class Refused(ValueError):
    """An entry that is not placed, and why."""


def safe_name(text):
    """A folder name from a learner's LMS name: no slash, no leading dot, no control character."""
    text = unicodedata.normalize("NFC", text).strip()
    text = "".join("_" if ch in '/\\:' or unicodedata.category(ch).startswith("C") else ch for ch in text)
    return text.lstrip(".").strip() or "_"


def _folded(name):
    """A name as compared: NFC, case folded, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFC", name).casefold().split())


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


def _from_zip(path, skipped):
    """[Found] of a Canvas or Moodle zip; what is refused goes to `skipped` as (entry, why)."""
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
        moodle, canvas = MOODLE.match(name), CANVAS.match(name)
        if moodle and moodle["plugin"] != "file":
            skipped.append((name, f"Moodle's {moodle['plugin']} submission, not a file"))
            continue
        match = moodle or canvas
        if match:
            when = _zip_time(info)
            file = match["file"].rsplit("/", 1)[-1]
            found.append(Found("moodle" if moodle else "canvas", match["id"], match["name"],
                               name[:len(name) - len(match["file"])], name, file, when, (_instant(when),),
                               _reader(archive, info, budget)))
        else:
            skipped.append((name, "its name is neither Canvas's ({name}_{user id}_{id}_{file}) nor "
                                  "Moodle's ({Full Name}_{participant id}_assignsubmission_file_)"))
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
    """timestamp.txt's text: nbgrader's as it was; an aware time in UTC; a naive one without a zone."""
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


def collect(download, into, roster=None, lesson=None, lessons=LESSONS, log=print):
    """Lay out a download (a Canvas or Moodle zip, an nbgrader folder) as the class folder `into`.

    Returns ([(learner, lesson, path)] placed, [(entry, why)] not placed). ValueError for a
    download that is neither, a bad roster or an unknown --lesson.
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
    by_id = {e["lms_id"]: e["learner"] for e in entries if e["lms_id"]}
    names = {e["learner"] for e in entries}
    by_name = {_folded(e["name"]): e["learner"] for e in entries if e["name"]}
    skipped = []
    if download.is_dir():
        found = _from_nbgrader(download, skipped)
    elif download.is_file():
        found = _from_zip(download, skipped)
    else:
        raise ValueError(f"there is no download at {download}: give the zip Canvas or Moodle made, "
                         f"or an nbgrader submitted/ folder")
    chosen = {}   # (learner, lesson) -> (Found, bytes, how)
    for f in _newest(found):
        learner = (by_id.get(f.lms_id) or (f.lms_id if f.lms == "nbgrader" and f.lms_id in names else None)
                   or (by_name.get(_folded(f.lms_name)) if f.lms == "moodle" else None) or safe_name(f.lms_name))
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
    placed, kept = [], _read_collected(into)
    for (learner, stem), (f, data, how) in sorted(chosen.items()):
        folder = into / learner / stem
        _write(folder / f"{stem}.ipynb", data)
        _write(folder / "timestamp.txt", (_timestamp(f.when) + "\n").encode("utf-8"))
        placed.append((learner, stem, folder / f"{stem}.ipynb"))
        kept[(learner, stem)] = dict(learner=learner, lesson=stem, lms=f.lms, lms_id=f.lms_id,
                                     lms_name=f.lms_name, lms_prefix=f.prefix, source=f.source,
                                     submitted=_timestamp(f.when))
        if how != "its name":
            log(f"{learner}/{stem}: placed by {how}")
    into.mkdir(parents=True, exist_ok=True)
    write_csv(into / COLLECTED, COLUMNS, [kept[k] for k in sorted(kept)])
    return placed, skipped


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
    args = parser.parse_args(argv)
    try:
        placed, skipped = collect(args.download, args.into, args.roster, args.lesson)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for learner, stem, path in placed:
        print(f"{learner}/{stem}: {path}")
    for entry, why in skipped:
        print(f"not placed: {entry}: {why}")
    print(f"collected {len(placed)} notebook(s) of {len({p[0] for p in placed})} learner(s) into "
          f"{args.into}" + (f"; {len(skipped)} file(s) not placed, listed above" if skipped else ""))
    return 0
