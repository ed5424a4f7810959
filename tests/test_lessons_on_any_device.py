"""The lessons' compared outputs do not depend on the device the learner's machine has.

nbval compares a lesson's outputs with those saved from a CPU run. `pick_device` prints which
device it chose and why, which differs between machines, so a cell that calls it must be one
whose output nbval ignores, with an assertion beside it of what must hold. (With
verbose=False it prints nothing, unless a GPU fails its check against the CPU.)
"""
import re
import subprocess

import pytest

from tests.notebook_tools import ROOT, read

LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_cells_that_pick_a_device_are_ignored_by_nbval_with_an_assertion(path):
    for index, cell in enumerate(read(path).cells):
        if cell.cell_type != "code":
            continue
        calls = re.findall(r"\bpick_device\(([^)]*)\)", cell.source)
        if not any("verbose=False" not in args for args in calls):
            continue
        where = f"{path.name}, cell {index}"
        assert "nbval-ignore-output" in cell.metadata.get("tags", []), (
            f"{where} prints the device pick_device chose, which differs between machines: "
            f"tag it nbval-ignore-output")
        assert re.search(r"^\s*assert\b", cell.source, re.M), (
            f"{where} is ignored by nbval: add an assertion of what must hold on any device")


def test_make_test_runs_the_lessons_on_the_cpu_their_outputs_were_saved_from():
    # what make would run for `make test` (and `make test-latest`), as make expands it, not as written
    for target in ("test", "test-latest"):
        shown = subprocess.run(["make", "-n", "-s", target], cwd=ROOT, capture_output=True, text=True,
                               timeout=60).stdout
        commands = [line for line in shown.splitlines() if "-m pytest" in line]
        assert commands and all("COURSE_DEVICE=cpu" in line for line in commands), (target, shown)
