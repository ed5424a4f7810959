"""What a learner meets when a lesson opens, read from the stored notebooks (no browser needed)."""
import json

import pytest

from notebook_tools import LESSONS, ROOT, stated_run_time

OPENED = LESSONS + sorted((ROOT / "exercises").glob("*.ipynb"))


def _installed_kernelspec():
    from ipykernel.kernelspec import get_kernel_dict
    spec = get_kernel_dict()
    return spec["display_name"], spec["language"]


@pytest.mark.parametrize("path", OPENED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_opens_without_an_unsaved_mark(path):
    """JupyterLab rewrites a kernelspec that differs from the kernel's, and marks the tab unsaved."""
    spec = json.loads(path.read_text())["metadata"]["kernelspec"]
    display_name, language = _installed_kernelspec()
    assert (spec["name"], spec["display_name"], spec["language"]) == \
        ("python3", display_name, language)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_states_one_run_time_at_its_top(path):
    assert 5 <= stated_run_time(path) <= 600


# JupyterLab's code column on a 1366 x 768 laptop is about 932 px wide, and about 620 px of
# notebook show at once; a wider figure is shrunk, text and all, and a taller one never fits.
COLUMN_PX, VISIBLE_PX = 932, 620


def _figures(path):
    import base64
    import struct
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                data = base64.b64decode("".join(png) if isinstance(png, list) else png)
                yield i, struct.unpack(">II", data[16:24])   # the PNG header's width, height


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_figure_fits_a_laptops_column(path):
    too_big = [(i, w, h) for i, (w, h) in _figures(path) if w > COLUMN_PX or h > VISIBLE_PX]
    assert not too_big, f"figures (cell, width, height) over {COLUMN_PX} x {VISIBLE_PX} px: {too_big}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_copy_says_under_its_title_which_copy_it_is(path):
    from course_lib.exercises import SOLVED_NOTE, WORKING_NOTE
    solved = json.loads(path.read_text())["cells"][0]["source"]
    working = json.loads((ROOT / "exercises" / path.name).read_text())["cells"][0]["source"]
    assert SOLVED_NOTE.format(name=path.name) in "".join(solved)
    assert WORKING_NOTE.format(name=path.name) in "".join(working)
