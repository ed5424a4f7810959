"""Grading: check cells restored from the lesson, a time limit, a class table."""
import csv

import nbformat
import pytest

from course_lib import grading
from course_lib.exercises import exercises, tags

from answers import REFERENCE, WRONG
from notebook_tools import ROOT, fill, read

LESSON = "00_start_here.ipynb"
EXERCISE = "next_token_targets"


def submission(tmp_path, student, bodies, edit=None):
    nb = fill(read(ROOT / "exercises" / LESSON), bodies)
    if edit:
        edit(nb)
    path = tmp_path / student / LESSON
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return path


def test_grades_a_correct_notebook(tmp_path):
    results = grading.grade(submission(tmp_path, "ada", REFERENCE))
    assert [(r.exercise, r.status) for r in results] == [(EXERCISE, "passed")]


def test_an_edited_check_cell_is_put_back(tmp_path):
    wrong = next(w for w in WRONG if w.exercise == EXERCISE)

    def tamper(nb):
        for cell in nb.cells:
            if "check" in tags(cell):
                cell.source = "print('all good')"

    results = grading.grade(submission(tmp_path, "eve", {EXERCISE: wrong.body}, tamper))
    assert results[0].status == "failed"
    assert "AssertionError" in results[0].message and wrong.hint in results[0].message


def test_a_deleted_check_cell_is_put_back(tmp_path):
    wrong = next(w for w in WRONG if w.exercise == EXERCISE)

    def delete(nb):
        nb.cells = [cell for cell in nb.cells if "check" not in tags(cell)]

    results = grading.grade(submission(tmp_path, "mallory", {EXERCISE: wrong.body}, delete))
    assert results[0].status == "failed" and wrong.hint in results[0].message


def test_a_cell_that_never_ends_hits_the_time_limit(tmp_path):
    def hang(nb):
        name, i, _ = exercises(nb)[0]
        nb.cells.insert(i, nbformat.v4.new_code_cell("while True:\n    pass"))

    results = grading.grade(submission(tmp_path, "sisyphus", REFERENCE, hang), cell_timeout=5)
    assert results[0].status == "not run"
    assert "5 s limit" in results[0].message


def test_an_unreadable_notebook_is_reported(tmp_path):
    path = tmp_path / LESSON
    path.write_text("{ not json")
    results = grading.grade(path)
    assert results[0].status == "not run" and "could not be read" in results[0].message


def test_a_notebook_without_a_lesson_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="keeps its lesson's file name"):
        grading.grade(tmp_path / "homework.ipynb")


def test_class_table_and_csv(tmp_path, capsys):
    folder = tmp_path / "class"
    folder.mkdir()
    submission(folder, "ada", REFERENCE)
    submission(folder, "bob", {})
    report = tmp_path / "grades.csv"
    assert grading.main([str(folder), "--class", "--csv", str(report)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["student", EXERCISE, "passed"]
    assert table[1].split() == [f"ada/{LESSON[:-6]}", "passed", "1/1"]
    assert table[2].split() == [f"bob/{LESSON[:-6]}", "failed", "0/1"]
    rows = list(csv.DictReader(report.open()))
    assert [(r["student"], r["status"]) for r in rows] == [
        (f"ada/{LESSON[:-6]}", "passed"), (f"bob/{LESSON[:-6]}", "failed")]
    assert "NotImplementedError" in rows[1]["message"]


def test_single_notebook_command_exit_code(tmp_path, capsys):
    assert grading.main([str(submission(tmp_path, "ada", REFERENCE))]) == 0
    assert capsys.readouterr().out.strip().endswith("1 of 1 exercises: checks passed")
