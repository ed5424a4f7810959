"""`python -m course_lib.hub links` prints one nbgitpuller link per lesson, each opening the
learner's working copy (exercises/) in JupyterLab; tests/test_hub.py follows one on a real hub."""
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from course_lib import hub

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted(p.name for p in (ROOT / "exercises").glob("[0-9][0-9]_*.ipynb"))


def test_a_link_pulls_the_repository_and_opens_the_working_copy():
    link = hub.lesson_link("https://hub.example.org/", "https://github.com/org/transformer-course.git",
                           "03_multi_head_attention.ipynb", branch="term-1")
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "hub.example.org", "/hub/user-redirect/git-pull")
    query = {k: v for k, [v] in parse_qs(parts.query).items()}
    assert query == {"repo": "https://github.com/org/transformer-course.git", "branch": "term-1",
                     "targetpath": "transformer-course",
                     "urlpath": "lab/tree/transformer-course/exercises/03_multi_head_attention.ipynb"}


def test_a_folder_of_ones_own_and_a_hub_under_a_path():
    link = hub.lesson_link("https://example.org/jupyter", "https://github.com/org/c", "00_start_here.ipynb",
                           folder="transformers")
    assert link.startswith("https://example.org/jupyter/hub/user-redirect/git-pull?")
    query = parse_qs(urlsplit(link).query)
    assert query["targetpath"] == ["transformers"]
    assert query["urlpath"] == ["lab/tree/transformers/exercises/00_start_here.ipynb"]


@pytest.mark.parametrize("repo, folder", [("https://github.com/org/course", "course"),
                                          ("https://github.com/org/course.git", "course"),
                                          ("https://github.com/org/course/", "course"),
                                          ("git://127.0.0.1:9418/course.git", "course")])
def test_the_folder_is_the_repositorys_name(repo, folder):
    assert hub.repo_folder(repo) == folder


def test_the_command_prints_every_lesson_in_order():
    done = subprocess.run([sys.executable, "-m", "course_lib.hub", "links", "--hub", "https://hub.example.org",
                           "--repo", "https://github.com/org/course"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert [lesson for lesson, _ in rows] == LESSONS and len(LESSONS) == 12
    for lesson, link in rows:
        assert parse_qs(urlsplit(link).query)["urlpath"] == [f"lab/tree/course/exercises/{lesson}"]


@pytest.mark.parametrize("args, message", [
    (["--hub", "hub.example.org", "--repo", "r"], "should be the hub's address"),
    (["--hub", "https://h", "--repo", "r", "--course", "/nonexistent"], "no lessons in"),
])
def test_a_wrong_argument_says_what_to_do(args, message):
    done = subprocess.run([sys.executable, "-m", "course_lib.hub", "links", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
