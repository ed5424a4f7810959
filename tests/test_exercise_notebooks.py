"""The exercise notebooks: generated from the lessons, failing when blank, passing when answered.

These are COURSE.md's grader tests 2-4; test 1 is nbval on notebooks/ itself.
"""
import re

import pytest

from course_lib.exercises import exercises, stale, tags

from answers import REFERENCE, WRONG
from notebook_tools import LESSONS, ROOT, fill, first_error, read

NAMES = [path.name for path in LESSONS]


def exercise_notebook(name):
    return read(ROOT / "exercises" / name)


def test_there_are_lessons_and_exercises():
    assert NAMES[:3] == ["00_start_here.ipynb", "01_attention_by_hand.ipynb",
                         "02_causal_masking.ipynb"]
    assert sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb")) == NAMES


def test_exercises_are_what_the_generator_makes_today():
    assert stale() == [], "run `python -m course_lib.exercises` (or `make exercises`)"


@pytest.mark.parametrize("name", NAMES)
def test_lessons_are_saved_from_one_top_to_bottom_run(name):
    cells = [c for c in read(ROOT / "notebooks" / name).cells if c.cell_type == "code"]
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    assert not any(o.output_type == "error" for c in cells for o in c.outputs)


@pytest.mark.parametrize("name", NAMES)
def test_exercise_and_check_cells_hold_no_magics(name):
    for cell in read(ROOT / "notebooks" / name).cells:
        if {"exercise", "check"} & set(tags(cell)):
            assert not re.search(r"^\s*[%!]", cell.source, re.MULTILINE), cell.source


@pytest.mark.parametrize("name", NAMES)
def test_blank_notebook_fails_first_at_its_first_check(name):
    nb = exercise_notebook(name)
    found = exercises(nb)
    assert found, f"{name} has no exercises"
    first_name, _, first_check = found[0]
    index, ename, evalue = first_error(nb)
    assert (index, ename) == (first_check, "NotImplementedError")
    assert f"Exercise '{first_name}'" in evalue


@pytest.mark.parametrize("name", NAMES)
def test_notebook_passes_with_the_reference_answers(name):
    nb = fill(exercise_notebook(name), REFERENCE)
    assert first_error(nb) is None


INJECTED = [w for w in WRONG if w.inject]


@pytest.mark.parametrize("wrong", INJECTED, ids=lambda w: f"{w.exercise}-{w.name}")
def test_injected_wrong_answer_fails_at_its_check_with_its_hint(wrong):
    name = next(n for n in NAMES if wrong.exercise in [e for e, _, _ in exercises(exercise_notebook(n))])
    nb = fill(exercise_notebook(name), {**REFERENCE, wrong.exercise: wrong.body})
    check = next(j for e, _, j in exercises(nb) if e == wrong.exercise)
    index, ename, evalue = first_error(nb)
    assert (index, ename) == (check, "AssertionError")
    assert wrong.hint in evalue


LESSON_NUMBERS = {name[:2] for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_every_lesson_a_notebook_mentions_exists(name):
    """'lesson 08' or 'lessons 04-07' in a lesson's text points at lessons that are there."""
    text = "\n".join(cell.source for cell in read(ROOT / "notebooks" / name).cells)
    for match in re.finditer(r"(?i)\blessons? (\d{2})(?:\s*[-–]\s*(\d{2}))?", text):
        first, last = match.group(1), match.group(2) or match.group(1)
        missing = [f"{n:02d}" for n in range(int(first), int(last) + 1)
                   if f"{n:02d}" not in LESSON_NUMBERS]
        assert not missing, f"{name} mentions {match.group(0)!r}, but lesson {missing} does not exist"


@pytest.mark.parametrize("name", NAMES)
def test_checkers_are_imported_the_same_way_in_every_lesson(name):
    text = "\n".join(cell.source for cell in read(ROOT / "notebooks" / name).cells)
    assert "from course_lib.checks import" in text
    assert not re.search(r"from course_lib\.checks\.\w+ import", text)


@pytest.mark.parametrize("name", NAMES)
def test_code_fits_a_laptop_window(name):
    """JupyterLab at 1,400 px shows about 100 characters of code; longer lines are cut off."""
    long = [(number, line) for number, cell in enumerate(read(ROOT / "notebooks" / name).cells)
            if cell.cell_type == "code" for line in cell.source.splitlines() if len(line) > 100]
    assert not long, f"{name}: code lines over 100 characters (cell, line): {long[:3]}"
