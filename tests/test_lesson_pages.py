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
