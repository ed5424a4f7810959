"""Gradescope: the autograder zip, run as Gradescope runs it, on a right, a wrong, a late and a forged notebook.

Each submission gets a folder laid out as Gradescope's container is (`source/`: the zip
unzipped; `submission/`: what the learner uploaded; `submission_metadata.json`), and the zip's
own `run_autograder` runs there with AUTOGRADER_ROOT pointing at it; `setup.sh`'s installs are
skipped (the course is installed here: COURSE_PYTHON is this Python). The points in
results/results.json must be those that `--class` gives the same notebooks, handed in at the
same times, under the same rules.
"""
import csv
import json
import os
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from course_lib.exercises import exercises
from course_lib.grading import gradescope, sandbox

from answers import REFERENCE, WRONG
from notebook_tools import ROOT, fill, pass_line, read

LESSON = "00_start_here"
PENALTY = "10%/day"
DUE, LATE_DUE = "2026-12-08T17:00:00.000000-08:00", "2026-12-15T17:00:00.000000-08:00"
ON_TIME = "2026-12-08T16:59:59.500000-08:00"
LATE = "2026-12-09T18:30:00.000000-08:00"   # 25.5 hours late: 2 started days, 20% off
LATE_SHARE = 0.8
UNSHIFTED = next(w for w in WRONG if w.exercise == "next_token_targets" and w.inject)
EXERCISES = [name for name, _, _ in exercises(read(ROOT / "notebooks" / f"{LESSON}.ipynb"))]

# A notebook that claims what it did not earn: every check cell's stored output is its pass line,
# the kernel's checker passes anything and print() turns every line into a pass line, and it tries
# to write Gradescope's results itself and to patch the autograder's checkers. Its answers are wrong.
FORGERY = """\
import builtins, json, os
import course_lib.checks.core as _core
_core.Checker.close = lambda self, *args, **kwargs: None
_print = builtins.print
builtins.print = lambda *args, **kwargs: _print(*(PASSES.get(a.split(':')[0], a) if isinstance(a, str)
                                                   else a for a in args), **kwargs)
for path, text in ((RESULTS, json.dumps({"score": 100, "tests": []})), (CHECKS, "def check_text_to_ids(fn): pass\\n"),
                   (MARK, "the notebook wrote here")):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        pass
"""


def _forged(folder):
    blank = read(ROOT / "exercises" / f"{LESSON}.ipynb")
    nb = fill(blank, {name: next(w.body for w in WRONG if w.exercise == name) for name in EXERCISES})
    for name, _, j in exercises(nb):
        nb.cells[j].execution_count = 1
        nb.cells[j].outputs = [nbformat.v4.new_output("stream", name="stdout", text=pass_line(name) + "\n")]
    source = FORGERY.replace("RESULTS", repr(str(folder / "results" / "results.json"))).replace(
        "CHECKS", repr(str(folder / "source" / "course_lib" / "checks" / "lesson00.py"))).replace(
        "MARK", repr(str(folder / "FORGED"))).replace("PASSES", repr({n: pass_line(n) for n in EXERCISES}))
    nb.cells.insert(1, nbformat.v4.new_code_cell(source))
    return nb


def _notebooks(folders):
    blank = read(ROOT / "exercises" / f"{LESSON}.ipynb")
    return {"right": (fill(blank, REFERENCE), ON_TIME),
            "wrong": (fill(blank, {**REFERENCE, UNSHIFTED.exercise: UNSHIFTED.body}), ON_TIME),
            "late": (fill(blank, REFERENCE), LATE),
            "forged": (_forged(folders["forged"]), ON_TIME)}


def _metadata(created):
    return {"id": 1, "created_at": created,
            "assignment": {"due_date": DUE, "late_due_date": LATE_DUE, "title": "Lesson 00", "total_points": "7.0"},
            "users": [{"email": "learner@example.edu", "id": 7, "name": "A Learner"}], "previous_submissions": []}


def emulate(zip_path, folder, notebook, created, env=None, name=f"{LESSON}.ipynb"):
    """Lay out `folder` as Gradescope's /autograder and run the zip's run_autograder there;
    (results.json as a dict, its exit status, its output)."""
    (folder / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(folder / "source")
    (folder / "submission").mkdir()
    nbformat.write(notebook, folder / "submission" / name)
    (folder / "submission_metadata.json").write_text(json.dumps(_metadata(created)))
    environment = dict(os.environ, AUTOGRADER_ROOT=str(folder), COURSE_PYTHON=sys.executable, **(env or {}))
    environment.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", str(folder / "source" / "run_autograder")], cwd=folder, env=environment,
                          capture_output=True, text=True, timeout=900)
    results = folder / "results" / "results.json"
    assert results.is_file(), done.stdout + done.stderr
    return json.loads(results.read_text()), done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zip")
    done = subprocess.run([sys.executable, "-m", "course_lib.grading", "gradescope", "--lesson", "00",
                           "--out", str(folder / "autograder.zip"), "--late-penalty", PENALTY],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "autograder.zip"


@pytest.fixture(scope="module")
def graded(autograder, tmp_path_factory):
    """Each submission through the autograder, and the same four notebooks graded by `--class`:
    ({name: (results, exit status, output)}, {name: {exercise: gradebook row}}, the folders)."""
    here = tmp_path_factory.mktemp("gradescope")
    folders = {name: here / name for name in ("right", "wrong", "late", "forged")}
    notebooks = _notebooks(folders)
    for name, (nb, created) in notebooks.items():  # the class --class grades: the same files, times
        learner = here / "class" / name / LESSON
        learner.mkdir(parents=True)
        nbformat.write(nb, learner / f"{LESSON}.ipynb")
        (learner / "timestamp.txt").write_text(created)
    command = [sys.executable, "-m", "course_lib.grading", "--class", str(here / "class"), "--out",
               str(here / "grades"), "--no-html", "--jobs", "1", "--due", f"00={DUE}", "--late-penalty", PENALTY]
    if sandbox.unavailable() is not None:
        command.append("--no-sandbox")
    with ThreadPoolExecutor(2) as pool:
        by_class = pool.submit(subprocess.run, command, capture_output=True, text=True, timeout=900)
        runs = {name: pool.submit(emulate, autograder, folders[name], nb, created)
                for name, (nb, created) in notebooks.items()}
        results = {name: future.result() for name, future in runs.items()}
        done = by_class.result()
    assert (here / "grades" / "gradebook.csv").is_file(), done.stdout + done.stderr
    book = {}
    for row in csv.DictReader((here / "grades" / "gradebook.csv").open(newline="")):
        book.setdefault(row["learner"], {})[row["exercise"]] = row
    return results, book, folders


def _tests(results):
    return {t["name"].split(" ", 1)[1]: t for t in results["tests"]}


def test_the_zip_holds_gradescopes_scripts_and_the_lesson(autograder):
    with zipfile.ZipFile(autograder) as z:
        names = set(z.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist()}
        config = json.loads(z.read(gradescope.CONFIG))
        setup = z.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", f"notebooks/{LESSON}.ipynb", "course_lib/grading/gradescope.py",
            "requirements.txt"} <= names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert config == {"lesson": LESSON, "late_penalty": PENALTY, "partial": False, "solution_costs": None}
    assert "bubblewrap" in setup and "-c requirements-lock.txt" in setup
    assert not any("__pycache__" in n for n in names)
    for script in ("setup.sh", "run_autograder"):  # both parse as bash
        check = subprocess.run(["bash", "-n", "/dev/stdin"], input=z_text(autograder, script), text=True,
                               capture_output=True)
        assert check.returncode == 0, (script, check.stderr)


def z_text(path, name):
    with zipfile.ZipFile(path) as z:
        return z.read(name).decode()


def test_the_rules_can_come_from_a_terms_out_folder(tmp_path):
    (tmp_path / "grades").mkdir()
    (tmp_path / "grades" / "term.json").write_text(json.dumps(
        {"late_penalty": "5%/hour,max=50%", "partial": True, "solution_costs": 0.5, "timezone": "UTC"}))
    config = gradescope.build("01", tmp_path / "a.zip", term=tmp_path / "grades")
    assert config == {"lesson": "01_attention_by_hand", "late_penalty": "5%/hour,max=50%", "partial": True,
                      "solution_costs": 0.5}
    config = gradescope.build("01", tmp_path / "a.zip", term=tmp_path / "grades", late_penalty="10%/day",
                              partial=False)
    assert (config["late_penalty"], config["partial"]) == ("10%/day", False)
    with pytest.raises(ValueError, match="there is no term.json"):
        gradescope.build("01", tmp_path / "b.zip", term=tmp_path)


def test_the_autograder_gives_the_points_class_mode_gives(graded):
    results, book, _ = graded
    for name, (result, status, output) in results.items():
        assert status == 0, output
        tests = _tests(result)
        rows = book[name]
        assert set(tests) == set(rows), (name, output)
        assert {e: t["score"] for e, t in tests.items()} == {e: float(r["points"]) for e, r in rows.items()}, name
        assert {e: t["max_score"] for e, t in tests.items()} == {e: float(r["max_points"]) for e, r in rows.items()}
        assert result["score"] == pytest.approx(sum(float(r["points"]) for r in rows.values()))
        for t in tests.values():
            assert set(t) >= {"name", "score", "max_score", "status", "output", "visibility"}


def test_a_right_notebook_passes_every_exercise(graded):
    result, _, output = graded[0]["right"]
    tests = _tests(result)
    assert [tests[e]["status"] for e in EXERCISES] == ["passed"] * len(EXERCISES), output
    assert all(tests[e]["score"] == tests[e]["max_score"] > 0 for e in EXERCISES)
    assert "sandbox" in result["output"] and "after the due date" not in result["output"]


def test_a_wrong_answer_fails_with_its_hint(graded):
    result, _, _ = graded[0]["wrong"]
    tests = _tests(result)
    assert tests[UNSHIFTED.exercise]["status"] == "failed" and tests[UNSHIFTED.exercise]["score"] == 0
    assert UNSHIFTED.hint in tests[UNSHIFTED.exercise]["output"]
    assert all(tests[e]["status"] == "passed" for e in EXERCISES if e != UNSHIFTED.exercise)


def test_a_late_notebook_loses_the_terms_penalty(graded):
    late, _, _ = graded[0]["late"]
    right, _, _ = graded[0]["right"]
    on_time = _tests(right)
    for exercise, t in _tests(late).items():
        assert t["score"] == pytest.approx(on_time[exercise]["score"] * LATE_SHARE), exercise
    assert _tests(late)[EXERCISES[0]]["score"] == pytest.approx(LATE_SHARE)
    assert "late period" in late["output"] and PENALTY in late["output"]
    assert "20% off" in _tests(late)[EXERCISES[0]]["output"]


def test_a_forged_notebook_scores_nothing_and_reaches_nothing(graded):
    result, _, output = graded[0]["forged"]
    folder = graded[2]["forged"]
    tests = _tests(result)
    assert result["score"] == 0 and all(t["score"] == 0 for t in tests.values()), output
    assert all(tests[e]["status"] == "failed" for e in EXERCISES)
    assert not (folder / "FORGED").exists()
    assert "def check_text_to_ids(fn): pass" not in (folder / "source" / "course_lib" / "checks" / "lesson00.py").read_text()


def test_without_a_sandbox_it_says_so_and_never_runs_the_notebook_as_root(autograder, tmp_path):
    """A container where bubblewrap cannot make a sandbox (as Gradescope's Docker usually is): a
    right notebook (saved under a browser's renamed download) and the forged one."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    right = fill(read(ROOT / "exercises" / f"{LESSON}.ipynb"), REFERENCE)
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(emulate, autograder, tmp_path / "right", right, ON_TIME, env, f"{LESSON} (1).ipynb"),
                pool.submit(emulate, autograder, tmp_path / "forged", _forged(tmp_path / "forged"), ON_TIME, env)]
        (result, status, output), (forged, forged_status, forged_output) = [r.result() for r in runs]
    tests, forged_tests = _tests(result), _tests(forged)
    if os.geteuid() == 0 and sandbox.unprivileged_python() is not None:
        # no sandbox and no other user who can run this Python: nothing runs, and it says why
        for r, code, out in ((result, status, output), (forged, forged_status, forged_output)):
            assert code == 1 and r["score"] == 0, out
            assert "never runs a notebook as root" in r["output"]
            assert all(t["output"].startswith("Not graded") for t in r["tests"])
        return
    assert status == forged_status == 0, output + forged_output
    assert "WITHOUT a sandbox" in result["output"] and "No permissions" in result["output"]
    assert all(tests[e]["status"] == "passed" for e in EXERCISES), output
    assert {t["extra_data"]["sandbox"] for t in tests.values()} == {"none"}
    # the forged notebook ran (its checks failed, not "not run"), as a user who could write nothing of the autograder's
    assert forged["score"] == 0 and {forged_tests[e]["extra_data"]["status"] for e in EXERCISES} == {"failed"}
    assert not (tmp_path / "forged" / "FORGED").exists()
    checks = (tmp_path / "forged" / "source" / "course_lib" / "checks" / "lesson00.py").read_text()
    assert "def check_text_to_ids(fn): pass" not in checks


def test_what_to_grade_in_a_submission(tmp_path):
    name = f"{LESSON}.ipynb"
    assert gradescope.find_notebook(tmp_path, name) == (None, f"no notebook was handed in: upload your {name}")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "scratch.ipynb").write_text("{}")
    assert gradescope.find_notebook(tmp_path, name) == (tmp_path / "notes" / "scratch.ipynb", None)
    (tmp_path / "other.ipynb").write_text("{}")
    found, why = gradescope.find_notebook(tmp_path, name)
    assert found is None and "2 notebooks were handed in" in why and f"upload only {name}" in why
    (tmp_path / name).write_text("{}")
    assert gradescope.find_notebook(tmp_path, name) == (tmp_path / name, None)


def test_the_due_date_is_the_learners_own_extension(tmp_path):
    meta = _metadata(LATE)
    meta["users"][0]["assignment"] = {"due_date": "2026-12-10T17:00:00-08:00"}
    (tmp_path / "m.json").write_text(json.dumps(meta))
    created, due, late_due = gradescope.read_metadata(tmp_path / "m.json")
    assert created < due and due.isoformat() == "2026-12-10T17:00:00-08:00"
    (tmp_path / "m.json").write_text(json.dumps({**meta, "created_at": "yesterday"}))
    with pytest.raises(ValueError, match="created_at 'yesterday' is not an ISO 8601 time"):
        gradescope.read_metadata(tmp_path / "m.json")


def test_a_bad_lesson_or_rule_stops_the_build(tmp_path):
    for args, message in ((["--lesson", "99"], "no single lesson is '99'"),
                          (["--lesson", "00", "--late-penalty", "10%"], "percentage per day or per hour")):
        done = subprocess.run([sys.executable, "-m", "course_lib.grading", "gradescope", *args,
                               "--out", str(tmp_path / "a.zip")], capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert not (tmp_path / "a.zip").exists()
