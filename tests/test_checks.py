"""The checkers: the reference passes, and each known-wrong answer fails with its own hint."""
import numpy as np
import pytest

from course_lib import checks
from course_lib.exercises import exercises

from answers import REFERENCE, WRONG
from notebook_tools import LESSONS, function_from, read

# Several wrong answers overflow or divide 0 by 0 on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

EXERCISES = [name for path in LESSONS for name, _, _ in exercises(read(path))]


def checker(name):
    return getattr(checks, f"check_{name}")


def test_every_exercise_has_a_checker_a_reference_and_three_wrong_answers():
    assert len(EXERCISES) >= 6
    for name in EXERCISES:
        assert callable(checker(name)), name
        assert name in REFERENCE, name
        assert sum(w.exercise == name for w in WRONG) >= 3, f"{name} needs >= 3 wrong answers"
        assert sum(w.exercise == name and w.inject for w in WRONG) == 1, name
    assert {w.exercise for w in WRONG} <= set(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_reference_passes_with_one_line(name, capsys):
    checker(name)(function_from(name, REFERENCE[name]))
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"{name}: ") and out[0].endswith("checks passed")


@pytest.mark.parametrize("wrong", WRONG, ids=lambda w: f"{w.exercise}-{w.name}")
def test_wrong_answer_gets_its_hint(wrong):
    with pytest.raises(AssertionError) as failure:
        checker(wrong.exercise)(function_from(wrong.exercise, wrong.body))
    message = str(failure.value)
    assert message.startswith(f"Exercise '{wrong.exercise}': ")
    assert "\nHint: " in message
    assert wrong.hint in message, f"expected the hint {wrong.hint!r}, got:\n{message}"


@pytest.mark.parametrize("name", EXERCISES)
def test_unfinished_exercise_raises_not_implemented(name):
    with pytest.raises(NotImplementedError):
        checker(name)(function_from(name, "raise NotImplementedError('todo')"))


@pytest.mark.parametrize("name", EXERCISES)
def test_not_a_function_is_explained(name):
    with pytest.raises(AssertionError, match=r"expected a function, got ndarray"):
        checker(name)(np.zeros(3))


def test_feedback_shows_input_expected_and_got():
    wrong = next(w for w in WRONG if w.name == "no max subtraction")
    with pytest.raises(AssertionError) as failure:
        checks.check_softmax(function_from("softmax", wrong.body))
    lines = str(failure.value).splitlines()
    assert lines[1].startswith("  input:    softmax(np.array([1000.")
    assert any(line.startswith("  got:      [nan") for line in lines)


def test_crash_inside_the_learners_code_becomes_feedback():
    with pytest.raises(AssertionError, match=r"your function raised ZeroDivisionError"):
        checks.check_causal_mask(lambda T: 1 / 0)
