"""What a failed check shows in a notebook: its feedback, never the checkers' frames.

The learner's copy of lesson 01 runs in a kernel up to its first check (the stub's), then
cells that answer an exercise wrongly, with a function that raises, with one whose NumPy
warnings explain its NaN, and a refused hint(). Each error output (what JupyterLab shows,
and what nbval prints, since both come from the kernel's traceback lines) must hold the
feedback and no frame of course_lib; the learner's own frames show when their function raised.
"""
import re
import subprocess
import sys
import textwrap

import answers_01
import nbformat
import pytest
from nbclient import NotebookClient

from course_lib.exercises import exercises
from notebook_tools import ROOT, read

ANSI = re.compile(r"\x1b\[[0-9;]*m")
COURSE_FRAME = re.compile(r"course_lib[/\\](checks|grading)[/\\]\w+\.py|record\.py|core\.py")

OVERFLOWS = """\
def softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)"""
RAISES = """\
def _largest(x):
    return x[len(x) + 3]

def softmax(x, axis=-1):
    top = _largest(x)
    return np.exp(x - top)"""
TALKS = "import warnings\n\ndef softmax(x, axis=-1):\n" + textwrap.indent(
    'warnings.warn("a warning from the learner\'s own code", RuntimeWarning)\n'
    + answers_01.REFERENCE["softmax"], "    ")


def _text(output):
    return ANSI.sub("", "\n".join(output["traceback"]))


@pytest.fixture(scope="module")
def ran():
    """{label: the cell's outputs} of lesson 01's working copy up to its first check, then the variants."""
    nb = read(ROOT / "exercises" / "01_attention_by_hand.ipynb")
    _, _, first_check = exercises(nb)[0]
    cells = nb.cells[: first_check + 1]
    labels = {first_check: "stub"}
    for label, source in [("overflows", OVERFLOWS), ("overflows check", "check_softmax(softmax)"),
                          ("raises", RAISES), ("raises check", "check_softmax(softmax)"),
                          ("talks", TALKS), ("talks check", "check_softmax(softmax)"),
                          ("refused hint", 'from course_lib.checks import hint\nhint("sofmax")')]:
        labels[len(cells)] = label
        cells.append(nbformat.v4.new_code_cell(source))
    nb.cells = cells
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "exercises")}}).execute()
    return {label: nb.cells[i].outputs for i, label in labels.items()}


def _error(outputs):
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert len(errors) == 1, outputs
    return errors[0]


def test_an_unfinished_exercise_shows_its_message_and_what_to_do(ran):
    error = _error(ran["stub"])
    assert error["ename"] == "NotImplementedError"      # nbval and the grader still see the stub
    text = _text(error)
    assert text.splitlines()[0] == "Exercise 'attention_steps': write your solution here"
    assert "replace it with your code" in text and 'hint("attention_steps")' in text
    assert not COURSE_FRAME.search(text), text
    assert "Traceback" not in text and "Cell In[" not in text, text


def test_a_wrong_answer_shows_its_feedback_then_its_warnings_once(ran):
    error = _error(ran["overflows check"])
    assert error["ename"] == "AssertionError"
    text = _text(error)
    lines = text.splitlines()
    assert lines[0] == "Exercise 'softmax': the result contains inf or NaN", text
    assert any(line.startswith("  input:") for line in lines) and any(
        line.startswith("  got:") for line in lines)
    hint_at = next(i for i, line in enumerate(lines) if line.startswith("Hint: "))
    warned_at = lines.index("Warnings while checking (each shown once):")
    assert hint_at < warned_at, text
    assert text.count("overflow encountered in exp") == 1, text
    assert "e = np.exp(x)" in text     # the learner's line that overflowed
    assert not COURSE_FRAME.search(text) and "Traceback" not in text, text
    # nothing printed above the message: the warnings are in it, after the hint
    assert [o for o in ran["overflows check"] if o["output_type"] == "stream"] == []


def test_a_function_that_raises_shows_its_own_frames_and_not_the_checkers(ran):
    text = _text(_error(ran["raises check"]))
    assert text.startswith("Exercise 'softmax': your function raised IndexError"), text
    where = text.index("Where your function raised it:")
    frames = text[where:]
    assert "in softmax(x, axis)" in frames and "in _largest(x)" in frames, frames
    assert "top = _largest(x)" in frames and "return x[len(x) + 3]" in frames
    assert re.match(r"IndexError: index \d+ is out of bounds", frames.splitlines()[-1]), frames
    assert not COURSE_FRAME.search(text), text


def test_a_passing_check_shows_its_pass_line_then_the_warnings_once(ran):
    outputs = ran["talks check"]
    assert not [o for o in outputs if o["output_type"] == "error"], outputs
    out = "".join(o["text"] for o in outputs if o.get("name") == "stdout")
    err = "".join(o["text"] for o in outputs if o.get("name") == "stderr")
    assert re.fullmatch(r"softmax: \d+ checks passed\n", out), out
    assert err.count("RuntimeWarning: a warning from the learner's own code") == 1, err
    # a busy kernel may send one print as two stream messages; JupyterLab shows them as one
    names = [o.get("name") for o in outputs]
    assert [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]] == ["stdout", "stderr"], outputs


def test_a_refused_request_shows_its_message_only(ran):
    error = _error(ran["refused hint"])
    assert error["ename"] == "ValueError"
    text = _text(error)
    assert text.startswith("ValueError: no exercise is called 'sofmax'"), text
    assert not COURSE_FRAME.search(text) and "Traceback" not in text, text


def test_nbval_prints_the_same_short_form(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in (
        "import numpy as np\nfrom course_lib.checks import check_softmax",
        OVERFLOWS, "check_softmax(softmax)")])
    for i, cell in enumerate(nb.cells):
        cell.execution_count, cell.id = i + 1, f"c{i}"
    nbformat.write(nb, tmp_path / "wrong.ipynb")
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
                          "-p", "no:cacheprovider", "-q", "wrong.ipynb"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    text = ANSI.sub("", run.stdout)
    assert run.returncode == 1, text
    assert "Exercise 'softmax': the result contains inf or NaN" in text, text
    assert "Warnings while checking (each shown once):" in text
    assert not COURSE_FRAME.search(text), text
