"""The test set-up itself: nbval waits for a busy kernel's outputs instead of failing after 5 s."""
import importlib.util
import re
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
    root_conftest.wait_patiently([cell, other])
    assert cell.output_timeout == root_conftest.NBVAL_OUTPUT_TIMEOUT >= 60
    assert not hasattr(other, "output_timeout")


def _root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_lesson_weighs_its_stated_run_time_in_the_run_order():
    """The heaviest groups go first: each lesson's nbval run and its browser run weigh its
    stated run time, which conftest.py must be able to read from every lesson."""
    conftest = _root_conftest()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        stated = conftest.stated_seconds(path)
        assert stated > 0, f"conftest.py reads no run time from {path.name}"
        assert conftest.group_weight(f"notebooks/{path.name}") == stated
        assert conftest.group_weight(f"browser-{path.name}") == stated
    assert conftest.group_weight("tests/test_attention.py") == 0
    for name, seconds in conftest.HEAVY_FILES.items():
        assert (ROOT / name).is_file() or name in conftest.ONE_PROCESS.values(), name
        assert conftest.group_weight(name) == seconds > 0


class _Item:
    """What group_and_order reads of a collected test: its file, its marks."""

    def __init__(self, name, path, group=None):
        self.name, self.path = name, path
        self.marks = [pytest.mark.xdist_group(group).mark] if group else []

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, mark):
        self.marks.append(mark.mark)


def test_suite_runs_in_groups_longest_first(monkeypatch):
    """Every test gets an xdist group: its file's, or the one it names; heaviest groups first,
    each group's tests in their collected order."""
    conftest = _root_conftest()
    monkeypatch.setattr(conftest, "HEAVY_FILES", {"tests/test_b.py": 5, "mine": 9})
    a, b = ROOT / "tests" / "test_a.py", ROOT / "tests" / "test_b.py"
    items = [_Item("a1", a), _Item("b1", b), _Item("a2", a), _Item("m1", b, group="mine"),
             _Item("nb", ROOT / "notebooks" / "06_training.ipynb")]
    conftest.group_and_order(items)
    assert [i.name for i in items] == ["nb", "m1", "b1", "a1", "a2"]
    assert [conftest.group_of(i) for i in items] == [
        "notebooks/06_training.ipynb", "mine", "tests/test_b.py", "tests/test_a.py",
        "tests/test_a.py"]


def test_files_that_share_a_hub_run_on_one_worker_as_one_group():
    """tests/test_hub.py and tests/test_live_hub.py share one hub (session fixtures): under
    --dist loadgroup (make test-browser) and loadfile (make test) they are one work unit, which
    pytest-xdist gives one worker; every other test is scheduled as before."""
    pytest.importorskip("xdist")
    from types import SimpleNamespace
    conftest = _root_conftest()
    hub = ["tests/test_hub.py::test_the_link[ada]", "tests/test_live_hub.py::test_the_view"]
    lesson = "tests/test_browser.py::test_lesson_in_jupyterlab[00_start_here]"
    for dist, other in (("loadgroup", lesson), ("loadfile", "tests/test_browser.py")):
        config = SimpleNamespace(getvalue=lambda name, dist=dist: dist, option=SimpleNamespace(
            loadscopereorder=False, maxschedchunk=None), getini=lambda name: None)
        scheduling = conftest.pytest_xdist_make_scheduler(config, None)
        assert {scheduling._split_scope(nodeid) for nodeid in hub} == {"hub"}
        assert scheduling._split_scope(lesson) == other
        assert scheduling._split_scope("tests/test_a.py::test_x@mine") == (
            "mine" if dist == "loadgroup" else "tests/test_a.py")
    assert conftest.pytest_xdist_make_scheduler(SimpleNamespace(getvalue=lambda name: "load"), None) is None
    assert conftest.group_weight("hub") > 0     # scheduled early, beside the longest lessons


def test_make_lab_opens_the_learners_working_copy():
    """A learner lands in exercises/, where the exercises are blank, not on the solved lesson."""
    lab = (ROOT / "Makefile").read_text().split("\nlab:", 1)[1].split("\n\n", 1)[0]
    url = lab.split("--LabApp.default_url=/lab/tree/", 1)[1].split()[0]
    assert url == "exercises/00_start_here.ipynb" and (ROOT / url).is_file()


def test_variant_tests_run_in_their_lessons_nbval_file_after_its_last_cell():
    """With a lesson under nbval, its variant tests move into its nbval file, after its last
    cell, under the same names (so --dist loadfile runs them in the process that ran the lesson,
    after it); the variant tests of a lesson not under nbval stay in tests/."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    def collect(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                               "no:cacheprovider", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
    with ThreadPoolExecutor(max_workers=2) as pool:  # the two collections, side by side
        found = pool.submit(collect, "--nbval", "--nbval-current-env", "notebooks/00_start_here.ipynb",
                            "tests/test_exercise_notebooks.py")
        count = pool.submit(collect, "tests/test_exercise_notebooks.py")
    found, count = found.result(), count.result()
    ids = [line for line in found.stdout.splitlines() if "::" in line]
    lesson = [i for i in ids if i.startswith("notebooks/00_start_here.ipynb::")]
    cells = [i for i in lesson if "::Cell " in i]
    moved = lesson[len(cells):]
    assert cells and lesson[:len(cells)] == cells, found.stdout[-2000:]
    assert "notebooks/00_start_here.ipynb::test_blank_notebook_fails_first_at_its_first_check" \
        "[00_start_here.ipynb]" in moved
    assert "notebooks/00_start_here.ipynb::test_notebook_passes_with_the_reference_answers" \
        "[00_start_here.ipynb]" in moved
    assert any("test_injected_wrong_answer" in i for i in moved)
    assert not any("[00_start_here.ipynb]" in i and "blank" in i for i in ids
                   if i.startswith("tests/"))
    assert "tests/test_exercise_notebooks.py::test_blank_notebook_fails_first_at_its_first_check" \
        "[01_attention_by_hand.ipynb]" in ids
    assert len([i for i in count.stdout.splitlines() if "::" in i]) == len(
        [i for i in ids if i.startswith("tests/") or i in moved])


def test_the_suite_times_plugin_records_each_test_once_and_sums_them(tmp_path):
    """bench/suite_times.py: one row per test, from the process that ran it (with pytest-xdist,
    not again from the controller), and a summary that names the slowest."""
    import json
    import os
    import subprocess
    import sys
    (tmp_path / "test_demo.py").write_text(
        "import time\n"
        "def test_sleeps():\n    time.sleep(0.3)\n"
        "def test_counts():\n    sum(range(10**6))\n")
    times = tmp_path / "times.jsonl"
    env = dict(os.environ, SUITE_TIMES_OUT=str(times), PYTHONPATH=str(ROOT / "bench"))
    base = [sys.executable, "-m", "pytest", "-p", "suite_times", "-p", "no:cacheprovider",
            "-p", "no:nbval", "-q", "test_demo.py"]
    for extra in ([], ["-n", "2"]):
        times.unlink(missing_ok=True)
        run = subprocess.run(base + extra, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        rows = [json.loads(line) for line in times.read_text().splitlines()]
        assert sorted(r["id"] for r in rows) == ["test_demo.py::test_counts", "test_demo.py::test_sleeps"]
        sleeps = next(r for r in rows if r["id"].endswith("test_sleeps"))
        assert sleeps["wall"] >= 0.3 and sleeps["cpu"] < sleeps["wall"]
        assert {r["worker"] for r in rows} <= ({"main"} if not extra else {"gw0", "gw1"})
    summary = subprocess.run([sys.executable, str(ROOT / "bench" / "suite_times.py"), str(times)],
                             capture_output=True, text=True, check=True).stdout
    lines = summary.splitlines()
    slowest = lines[lines.index("the tests that took longest: wall s, CPU s, worker") + 1]
    assert "2 tests" in lines[0] and slowest.endswith("test_demo.py::test_sleeps")
    unset = subprocess.run(base, cwd=tmp_path, env=dict(env, SUITE_TIMES_OUT=""),
                           capture_output=True, text=True)
    assert unset.returncode != 0 and "set SUITE_TIMES_OUT" in unset.stdout + unset.stderr


def test_busy_reports_the_commands_own_cpu_time_and_passes_the_status_on():
    """bench/busy.py: a command that computes shows its own CPU time and busy core-seconds, one that
    sleeps next to none of its own; the command's exit status is busy.py's, and a missing command is
    a usage error. The machine-wide idle time is not asserted: the suite's other workers fill it."""
    import subprocess
    import sys
    busy = [sys.executable, str(ROOT / "bench" / "busy.py"), "--"]

    def figures(out):
        machine = re.search(r"wall (\d+) s; core-seconds busy (\d+), idle (\d+), stolen (\d+)", out)
        own = re.search(r"the command's own CPU time (\d+\.\d) core-seconds", out)
        assert machine and own and "logical CPUs" in out, out
        return [float(x) for x in machine.groups()], float(own.group(1))

    computes = subprocess.run(busy + [sys.executable, "-c", "import time\nend = time.process_time() + 1.5\n"
                                      "while time.process_time() < end: pass\nraise SystemExit(3)"],
                              capture_output=True, text=True)
    assert computes.returncode == 3, computes.stderr
    (wall, busy_s, idle_s, stolen), own = figures(computes.stdout)
    assert own >= 1.5 and busy_s >= 1 and wall >= 1, computes.stdout
    sleeps = subprocess.run(busy + [sys.executable, "-c", "import time; time.sleep(2)"],
                            capture_output=True, text=True, check=True).stdout
    (wall, busy_s, idle_s, stolen), own = figures(sleeps)
    assert wall >= 2 and own < 1, sleeps
    none = subprocess.run(busy[:-1], capture_output=True, text=True)
    assert none.returncode == 2 and "name the command to run" in none.stderr
