"""The test set-up itself: nbval waits for a busy kernel's outputs instead of failing after 5 s."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_nbval_cells_wait_patiently_for_output():
    plugin = pytest.importorskip("nbval.plugin")
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    cell = object.__new__(plugin.IPyNbCell)  # an nbval cell item, as collected from a notebook
    cell.output_timeout = 5                  # nbval's fixed default
    other = object()                         # any other test item is left alone
    root_conftest.pytest_collection_modifyitems([cell, other])
    assert cell.output_timeout == root_conftest.NBVAL_OUTPUT_TIMEOUT >= 60
    assert not hasattr(other, "output_timeout")


def test_make_lab_opens_the_learners_working_copy():
    """A learner lands in exercises/, where the exercises are blank, not on the solved lesson."""
    lab = (ROOT / "Makefile").read_text().split("\nlab:", 1)[1].split("\n\n", 1)[0]
    url = lab.split("--LabApp.default_url=/lab/tree/", 1)[1].split()[0]
    assert url == "exercises/00_start_here.ipynb" and (ROOT / url).is_file()
