"""Return: the feedback pages handed back, laid out as each LMS takes them.

    python -m course_lib.grading return OUT --into FOLDER [--lms folder|moodle|canvas --class CLASS]

- `folder` (the default): `FOLDER/{learner}/{lesson}.html`, a folder per learner, for an LMS
  with no bulk upload, a shared drive, or nbgrader's `feedback/` (copy each learner's folder).
- `moodle`: one zip per lesson, `FOLDER/moodle-{lesson}.zip`, for the lesson's assignment's
  "Upload multiple feedback files in a zip". Moodle's importer
  (mod/assign/feedback/file/importziplib.php) finds the learner by a path part
  `{Full Name}_{participant id}_{plugin type}_{plugin name}`: each page goes to
  `{Full Name}_{participant id}_assignfeedback_file/{lesson}.html`, with the name and
  participant id that learner's download had (CLASS/collected.csv, written by `collect`).
- `canvas`: one zip per lesson, `FOLDER/canvas-{lesson}.zip`, for the assignment's "Re-Upload
  Submissions" (each file becomes a comment on the learner's submission): each page is named
  with the prefix its learner's downloaded file had (`{name}_{user id}_{id}_`).

A learner whose LMS names are not known (not collected from that LMS) is listed, not guessed.
Only the pages the grader wrote (regular files, not links) are read.
"""
import argparse
import os
import shutil
import stat
import sys
import zipfile
from pathlib import Path

from course_lib.grading.collect import read_collected

KINDS = ("folder", "moodle", "canvas")


def pages(out):
    """[(learner, lesson, path)] of the feedback pages in `out`/feedback/, regular files only."""
    root = Path(out) / "feedback"
    if not root.is_dir():
        raise ValueError(f"{out} has no feedback/ folder: grade the class into it first (without --no-html)")
    found = []
    for learner in sorted(root.iterdir()):
        if learner.is_symlink() or not learner.is_dir():
            continue
        for page in sorted(learner.glob("*.html")):
            if stat.S_ISREG(os.lstat(page).st_mode):
                found.append((learner.name, page.stem, page))
    return found


def hand_back(out, into, lms="folder", class_folder=None):
    """Write the feedback of `out` for `lms` into `into`; ([paths written], [(page, why) left out])."""
    if lms not in KINDS:
        raise ValueError(f"--lms {lms!r}: the layouts are {', '.join(KINDS)}")
    into = Path(into)
    found = pages(out)
    made, left = [], []
    if lms == "folder":
        for learner, lesson, page in found:
            target = into / learner / f"{lesson}.html"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, target)
            made.append(target)
        return made, left
    if class_folder is None:
        raise ValueError(f"--lms {lms} needs --class CLASS, the class folder `collect` wrote (its "
                         f"collected.csv has each learner's {lms} name and id)")
    known = {(r["learner"], r["lesson"]): r for r in read_collected(class_folder) if r["lms"] == lms}
    if not known:
        raise ValueError(f"{class_folder}/collected.csv names no learner collected from {lms}: "
                         f"collect the {lms} download into it first")
    zips = {}
    for learner, lesson, page in found:
        row = known.get((learner, lesson))
        if row is None:
            left.append((f"{learner}/{lesson}.html", f"{learner}'s {lesson} was not collected from {lms}"))
            continue
        if lms == "moodle":
            name = f"{row['lms_name']}_{row['lms_id']}_assignfeedback_file/{lesson}.html"
        else:
            name = f"{row['lms_prefix']}{lesson}_feedback.html"
        zips.setdefault(lesson, []).append((name, page))
    into.mkdir(parents=True, exist_ok=True)
    for lesson, members in sorted(zips.items()):
        path = into / f"{lms}-{lesson}.zip"
        tmp = path.with_name(f".{path.name}.tmp")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, page in sorted(members):
                z.write(page, name)
        tmp.replace(path)
        made.append(path)
    return made, left


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m course_lib.grading return",
                                     description="Hand the feedback pages back: a folder per learner, or "
                                                 "the zip Moodle's or Canvas's upload takes.")
    parser.add_argument("out", help="the grader's --out folder")
    parser.add_argument("--into", required=True, help="where the bundles go")
    parser.add_argument("--lms", default="folder", choices=KINDS, help="the layout (default: a folder per learner)")
    parser.add_argument("--class", dest="class_folder",
                        help="moodle, canvas: the class folder `collect` wrote (its collected.csv)")
    args = parser.parse_args(argv)
    try:
        made, left = hand_back(args.out, args.into, args.lms, args.class_folder)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for page, why in left:
        print(f"left out: {page}: {why}")
    print(f"wrote {len(made)} {'page(s)' if args.lms == 'folder' else 'zip(s)'} into {args.into}")
    return 0
