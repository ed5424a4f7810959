"""A lesson reads a hub's limits as it reads the device (course_lib.hub, course_lib.device):
torch's threads from CPU_LIMIT, and a word in the first cell when the lesson's measured peak
memory is more than MEM_LIMIT. tests/test_hub.py checks both on a real hub."""
import subprocess
import sys

import pytest

from course_lib import device, hub

PEAKS = {"lessons": {"00_start_here.ipynb": {"peak_bytes": 500 * 2**20},
                     "09_costs.ipynb": {"peak_bytes": 2 * 2**30}}}


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("COURSE_THREADS", "OMP_NUM_THREADS", "CPU_LIMIT", "MEM_LIMIT", "JPY_SESSION_NAME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("limit, threads", [(None, 1), ("0.5", 1), ("1", 1), ("1.0", 1), ("2.0", 2),
                                            ("3.7", 3), ("16", 16)])
def test_threads_follow_a_hubs_cpu_limit(clean_env, limit, threads):
    if limit is not None:
        clean_env.setenv("CPU_LIMIT", limit)
    assert device.cpu_threads() == threads


def test_the_learners_own_thread_settings_come_first(clean_env):
    clean_env.setenv("CPU_LIMIT", "4")
    clean_env.setenv("OMP_NUM_THREADS", "1")
    assert device.cpu_threads() == 1
    clean_env.setenv("COURSE_THREADS", "3")
    assert device.cpu_threads() == 3


@pytest.mark.parametrize("bad", ["0", "-1", "lots", "nan", "inf"])
def test_a_cpu_limit_that_is_no_number_of_cores_is_refused_clearly(clean_env, bad):
    clean_env.setenv("CPU_LIMIT", bad)
    with pytest.raises(ValueError, match="CPU_LIMIT=.*should be a number of cores.*COURSE_THREADS=1"):
        device.cpu_threads()


@pytest.mark.parametrize("session, lesson", [
    ("/home/ada/course/exercises/00_start_here.ipynb", "00_start_here.ipynb"),
    ("course/notebooks/09_costs.ipynb", "09_costs.ipynb"),
    ("/home/ada/00_start_here-Copy1.ipynb", "00_start_here.ipynb"),     # a learner's copy of it
    ("/home/ada/course/exercises/07_kv_cache_decoding.ipynb", None),    # not measured
    ("/home/ada/notes.ipynb", None),
    ("/home/ada/00_start_here.py", None),
    ("", None),
])
def test_the_lesson_is_known_from_the_notebooks_path(session, lesson, monkeypatch):
    monkeypatch.setattr(hub, "peaks", lambda: PEAKS)
    assert hub.lesson_of_session(session) == lesson


def test_a_limit_below_the_measured_peak_is_said_with_what_to_do(clean_env, monkeypatch):
    monkeypatch.setattr(hub, "peaks", lambda: PEAKS)
    clean_env.setenv("JPY_SESSION_NAME", "/home/ada/course/exercises/09_costs.ipynb")
    clean_env.setenv("MEM_LIMIT", str(2**30))
    words = hub.memory_warning()
    assert "needed up to 2.0 GiB" in words and "1.0 GiB this server may use (MEM_LIMIT)" in words
    assert "at least 2.5 GiB" in words and "make lab" in words
    # At or above the peak, or with no limit, or outside a lesson: nothing.
    for limit in (str(2 * 2**30), str(4 * 2**30), "", "2G"):
        clean_env.setenv("MEM_LIMIT", limit)
        assert hub.memory_warning() is None
    clean_env.setenv("MEM_LIMIT", str(2**20))
    clean_env.setenv("JPY_SESSION_NAME", "/home/ada/notes.ipynb")
    assert hub.memory_warning() is None


def test_every_lesson_has_its_measured_peak():
    measured = hub.peaks()
    lessons = sorted(p.name for p in (hub.PEAKS.parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(measured["lessons"]) == lessons, "run python bench/lesson_peaks.py"
    for figures in measured["lessons"].values():
        assert figures["peak_bytes"] == figures["kernel_peak_bytes"] + measured["server_bytes"]
        assert figures["cpu_seconds"] > 0 and figures["kernel_peak_bytes"] > 50 * 2**20
    assert measured["command"] == "python bench/lesson_peaks.py"


def test_the_first_import_in_a_lesson_says_it_once(tmp_path):
    # What a lesson's first cell does: import course_lib.device in a kernel whose notebook is a
    # lesson, on a server whose memory limit is below that lesson's peak.
    peak = hub.peaks()["lessons"]["00_start_here.ipynb"]["peak_bytes"]
    code = ("import course_lib.device\nimport importlib\nimport course_lib.device as again\n"
            "print('imported')")
    env = {"PATH": "/usr/bin:/bin", "JPY_SESSION_NAME": str(tmp_path / "00_start_here.ipynb"),
           "MEM_LIMIT": str(peak // 2)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Memory: this lesson needed up to") == 1
    assert done.stdout == "imported\n"
    env["MEM_LIMIT"] = str(peak * 2)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "Memory:" not in done.stderr

