"""Find and read submissions: a class folder's learners and notebooks, and which lesson a notebook is."""
import hashlib
from pathlib import Path

from course_lib.exercises import ROOT
from course_lib.grading.graded_copy import tree_hash
from course_lib.grading.lessons import LESSONS, _lesson_index, _lesson_marks, _stamp, defines

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


def submission_hash(path, lesson_path, root=ROOT):
    h = hashlib.sha256(Path(path).read_bytes())
    h.update(Path(lesson_path).read_bytes())
    for name, digest in sorted(tree_hash(root, ("course_lib/checks",)).items()):
        h.update(f"{name}:{digest}".encode())
    return h.hexdigest()



def _learner_units(folder):
    """(learner folders, [(learner, path)], [(learner, file, problem)]) found under the class folder."""
    learners, units, problems = [], [], []
    for entry in sorted(Path(folder).iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            learners.append(entry.name)
            for nb in sorted(entry.rglob("*.ipynb")):
                if ".ipynb_checkpoints" not in nb.parts:
                    units.append((entry.name, nb))
        elif entry.suffix == ".ipynb":
            problems.append(("", entry.name, "a notebook directly in the class folder: put each "
                                             "learner's notebooks in a folder of their own"))
    return learners, units, problems



def read_roster(path):
    names = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        name = line.split(",")[0].strip()
        if name and not name.startswith("#") and name.lower() != "learner":
            names.append(name)
    return names

