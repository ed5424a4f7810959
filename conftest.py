"""pytest set-up for the whole repository (tests/ and the nbval runs of notebooks/)."""
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tests"))       # tests/nbval_fold.py and the helpers it uses
# each lesson's exercise variants in its nbval run; kernels forked from one that imported torch
pytest_plugins = ["nbval_fold", "kernel_zygote"]

# nbval waits a fixed 5 s for each message a kernel sends after a cell finishes and fails with
# "Timeout of 5 seconds exceeded waiting for output" when none comes in time. On a busy machine a
# kernel that has finished can take longer than that to send its outputs, so wait longer. This
# is patience only: every output is still compared, and --nbval-cell-timeout still bounds a cell.
NBVAL_OUTPUT_TIMEOUT = 120  # seconds

# About how many seconds (on the scale of the lessons' stated run times) the test files (or
# ONE_PROCESS's groups of them, below) take that run far longer than their count of tests
# suggests; only the order of the run depends on these figures. Each is the file's wall time,
# its tests' durations summed, in one run of make test's pytest at load 3 to 5 (2026-12-01:
# docs/run-times.md's git history, "Third pass"), where the lessons' nbval runs took about their
# stated run times (536 s in all for 550 s stated). A lesson's nbval run, which also runs its
# exercise variants (tests/nbval_fold.py), weighs its stated run time.
HEAVY_FILES = {"tests/test_grading.py": 310, "tests/test_docs.py": 160, "tests/test_checks.py": 105,
               "tests/test_train_command.py": 70, "tests/test_fast_paths.py": 65,
               "tests/test_grading_term.py": 55, "tests/test_grading_help.py": 50,
               "tests/test_exercise_notebooks.py": 45,
               # make test-browser: the hub tests (below), 100 s at load 3.5 to 7 (2026-12-04)
               "hub": 100}

# Test files that share session fixtures which start something heavy once, and so run in one
# process, as one group: tests/hub_classroom.py's JupyterHub and its learners' work, which
# tests/test_hub.py and tests/test_live_hub.py both look at (two workers would start two hubs).
ONE_PROCESS = {"tests/test_hub.py": "hub", "tests/test_live_hub.py": "hub"}

_RUN_TIME = re.compile(r"\*\*Run time:\*\* about (\d+(?:\.\d+)?) (s|min)\b")


def stated_seconds(notebook):
    """The run time a lesson states near its top, in seconds; 0 when it states none."""
    try:
        cells = json.loads(Path(notebook).read_text())["cells"][:4]
    except (OSError, ValueError, KeyError):
        return 0.0
    for cell in cells:
        found = _RUN_TIME.search("".join(cell.get("source", "")))
        if cell.get("cell_type") == "markdown" and found:
            return float(found.group(1)) * (60 if found.group(2) == "min" else 1)
    return 0.0


def group_of(item):
    """The group an item is scheduled in: its own xdist_group mark (the browser test gives each
    lesson one), else its file, as --dist loadfile schedules it."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    path = Path(str(item.path)).resolve()
    path = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()
    return ONE_PROCESS.get(path, path)


def group_weight(group):
    """About how long a group takes, for running the longest first: a lesson's nbval run and its
    run in JupyterLab (tests/test_browser.py) each take about its stated run time."""
    if group in HEAVY_FILES:
        return HEAVY_FILES[group]
    lesson = group.removeprefix("browser-").removeprefix("notebooks/")
    if lesson.endswith(".ipynb"):
        return stated_seconds(ROOT / "notebooks" / lesson)
    return 0.0


def wait_patiently(items):
    """Give every nbval cell NBVAL_OUTPUT_TIMEOUT to send its outputs."""
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:
        return
    for item in items:
        if isinstance(item, IPyNbCell):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT


def group_and_order(items):
    """The longest groups first, so that no long one starts last while the other worker idles;
    within a group, the collected order. Every item is marked with its group, so that --dist
    loadgroup would schedule the same groups. (Under pytest 9.2 with pytest-xdist 3.8, loadgroup
    cannot: xdist names a group by rewriting item._nodeid, which pytest no longer reads, so every
    test becomes a group of its own; make test uses loadfile.)"""
    groups = {}
    for item in items:
        group = group_of(item)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
        groups.setdefault(group, len(groups))
    weight = {group: group_weight(group) for group in groups}
    items.sort(key=lambda item: (-weight[group_of(item)], groups[group_of(item)]))


def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's loadfile or loadgroup scheduling, but with ONE_PROCESS's files in one group
    (one worker) each: the controller, which schedules, sees only test ids, not marks, and
    loadgroup cannot put the marks into the ids here (group_and_order says why)."""
    from xdist.scheduler import LoadFileScheduling, LoadGroupScheduling
    base = {"loadfile": LoadFileScheduling, "loadgroup": LoadGroupScheduling}.get(config.getvalue("dist"))
    if base is None:
        return None

    class Scheduling(base):
        def _split_scope(self, nodeid):
            return ONE_PROCESS.get(nodeid.split("::", 1)[0]) or super()._split_scope(nodeid)

    return Scheduling(config, log)


# tryfirst: before pytest-xdist's own hook reads the marks (--dist loadgroup)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    from nbval_fold import fold_into_nbval
    fold_into_nbval(items)
    wait_patiently(items)
    group_and_order(items)
