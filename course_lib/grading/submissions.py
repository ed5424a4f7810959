"""Find and read submissions: a class folder's learners and notebooks, and which lesson a notebook is.

A submission is read as hostile input: it must be a regular file, reached without following a
link, inside its learner's folder, and no larger than SUBMISSION_LIMIT. A link (to anything), a
FIFO, a device, a learner folder that is a link, or a file over the limit is refused, without
being opened, with a row that says why.
"""
import hashlib
import os
import stat
from pathlib import Path

from course_lib.exercises import ROOT
from course_lib.grading.graded_copy import read_regular, tree_hash
from course_lib.grading.lessons import LESSONS, _lesson_index, _lesson_marks, _stamp, defines
from course_lib.grading.roster import roster_names

def identify(nb, lessons=LESSONS):
    """{lesson file name: score}: how much of each lesson this notebook holds (text cells and exercises)."""
    texts = {c.get("source", "").strip() for c in nb.cells if c.get("cell_type") == "markdown"}
    code = [c.get("source", "") for c in nb.cells if c.get("cell_type") == "code"]
    scores = {}
    for name, path in _lesson_index(lessons).items():
        ours, names = _lesson_marks(_stamp(path))
        scores[name] = (len(ours & texts) / max(1, len(ours))
                        + sum(any(defines(s, n) for s in code) for n in names) / max(1, len(names)))
    return scores


# Bytes a submission may have: well above an honest notebook (30 MB of printed output is honest).
SUBMISSION_LIMIT = 100 * 2 ** 20


def read_submission(path):
    """The bytes of a submission; ValueError saying why it is refused (it is then never opened)."""
    try:
        info = os.lstat(path)
    except OSError as e:
        raise ValueError(f"it could not be read ({e.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise ValueError(f"it is a symbolic link (to {os.readlink(path)}), not a notebook of its own: "
                         f"hand in the file itself")
    if not stat.S_ISREG(info.st_mode):
        kind = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
                stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}.get(stat.S_IFMT(info.st_mode), "not a file")
        raise ValueError(f"it is {kind}, not a regular file")
    if info.st_size > SUBMISSION_LIMIT:
        raise ValueError(f"it is {info.st_size / 2 ** 20:.0f} MB, over the {SUBMISSION_LIMIT / 2 ** 20:.0f} MB "
                         f"a notebook may be: clear its outputs (Edit > Clear Outputs of All Cells) "
                         f"and save it")
    return read_regular(path, SUBMISSION_LIMIT)


def submission_hash(path, lesson_path, root=ROOT, data=None):
    h = hashlib.sha256(read_submission(path) if data is None else data)
    h.update(Path(lesson_path).read_bytes())
    for name, digest in sorted(tree_hash(root, ("course_lib/checks",)).items()):
        h.update(f"{name}:{digest}".encode())
    return h.hexdigest()



def _learner_units(folder):
    """(learner folders, [(learner, path)], [(learner, file, problem)], [warning]) found under the class folder.

    Every entry gets a place: a learner folder, a problem row (a link, a loose notebook) or a
    warning (a name starting with a dot, a link inside a learner's folder); none is skipped silently.
    """
    learners, units, problems, warnings = [], [], [], []
    for entry in sorted(Path(folder).iterdir()):
        if entry.name.startswith("."):
            warnings.append(f"{entry.name}: not graded, since its name starts with a dot (hidden); "
                            f"rename it if it is a learner's")
        elif entry.is_symlink():
            problems.append((entry.name, f"{entry.name}/", f"the learner folder {entry.name} is a symbolic "
                             f"link (to {os.readlink(entry)}), so it was not graded: each learner's "
                             f"notebooks must be in a folder of their own, not a link"))
        elif entry.is_dir():
            learners.append(entry.name)
            for top, dirs, files in os.walk(entry):
                here = Path(top)
                for name in sorted(dirs):
                    inner = here / name
                    if name == ".ipynb_checkpoints":
                        dirs.remove(name)
                    elif name.startswith(".") or inner.is_symlink():
                        why = "its name starts with a dot" if name.startswith(".") else "it is a symbolic link"
                        warnings.append(f"{inner.relative_to(folder)}/: not graded, since {why}")
                        dirs.remove(name)
                dirs.sort()
                for name in sorted(files):
                    if name.endswith(".ipynb") and name.startswith("."):
                        warnings.append(f"{(here / name).relative_to(folder)}: not graded, since its name "
                                        f"starts with a dot")
                    elif name.endswith(".ipynb"):
                        units.append((entry.name, here / name))
        elif entry.suffix == ".ipynb":
            problems.append(("", entry.name, "a notebook directly in the class folder: put each "
                                             "learner's notebooks in a folder of their own"))
    return learners, units, problems, warnings


def read_roster(path):
    """The learners' names on a roster, read as a CSV by the grader's one roster reader."""
    return roster_names(path)

