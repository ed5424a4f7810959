"""Solutions the learner cannot overwrite: solution() reads the package's own file, the solved
lessons open read-only in `make lab`, and the two copies of a lesson read differently."""
import asyncio
import json
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from course_lib.exercises import (SOLUTIONS, SOLVED_TITLE, WORKING_EXERCISE_NOTE, exercise_notes,
                                  exercises, solutions_stale, solutions_text)
from notebook_tools import LESSONS, ROOT, read


def test_the_solutions_file_is_what_the_lessons_make():
    assert not solutions_stale(), "run `python -m course_lib.exercises` (make exercises)"
    found = json.loads(SOLUTIONS.read_text(encoding="utf-8"))["solutions"]
    names = [name for path in LESSONS for name, _, _ in exercises(read(path))]
    assert list(found) == names


def test_solution_is_unchanged_when_a_copys_notebooks_are_edited(tmp_path):
    """A copy of the course whose notebooks/01 had its softmax answer saved over (as running the
    solved lesson and editing it would): solution("softmax") in that copy shows the reference."""
    shutil.copytree(ROOT / "course_lib", tmp_path / "course_lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    path = tmp_path / "notebooks" / "01_attention_by_hand.ipynb"
    nb = nbformat.read(path, as_version=4)
    at = next(i for name, i, _ in exercises(nb) if name == "softmax")
    reference = nb.cells[at].source
    nb.cells[at].source = 'def softmax(x, axis=-1):\n    return "saved over"'
    nbformat.write(nb, path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    shown = subprocess.run([sys.executable, "-c", (
        "import course_lib, json\n"
        "from course_lib.checks.hints import solution_source\n"
        "print(json.dumps([course_lib.__file__, *solution_source('softmax')]))")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    where, lesson, source = json.loads(shown.stdout)
    assert where.startswith(str(tmp_path))             # the copy's package answered
    assert lesson == "01_attention_by_hand.ipynb"
    assert "saved over" not in source
    assert source.splitlines()[0] == "def softmax(x, axis=-1):"
    kept = [line for line in reference.splitlines() if "### " not in line]
    assert source.splitlines() == kept
    # and the solutions file of the copy is now out of date: the maintainer's check says so
    assert solutions_stale(tmp_path / "notebooks", tmp_path / "course_lib" / "checks" / "solutions.json")


def test_solution_without_its_file_says_how_to_write_it(tmp_path):
    from course_lib.checks.hints import solution_source
    with pytest.raises(ValueError, match=r"missing or unreadable; run `python -m course_lib.exercises`"):
        solution_source("softmax", path=tmp_path / "solutions.json")
    (tmp_path / "solutions.json").write_text(solutions_text().replace('"softmax"', '"other"'))
    with pytest.raises(ValueError, match="has hints but no solution in"):
        solution_source("softmax", path=tmp_path / "solutions.json")


# ---------------------------------------------------------------- make lab

@pytest.fixture
def contents(tmp_path):
    from course_lib.lab import CourseContents
    for folder in ("notebooks", "exercises"):
        (tmp_path / folder).mkdir()
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / folder / "00_x.ipynb")
    return CourseContents(root_dir=str(tmp_path)), tmp_path


def test_the_solved_lessons_open_read_only_and_refuse_a_save(contents):
    from tornado.web import HTTPError
    manager, root = contents
    before = (root / "notebooks" / "00_x.ipynb").read_bytes()
    solved = asyncio.run(manager.get("notebooks/00_x.ipynb"))
    assert solved["writable"] is False
    listed = asyncio.run(manager.get("notebooks"))
    assert [item["writable"] for item in listed["content"]] == [False]
    working = asyncio.run(manager.get("exercises/00_x.ipynb"))
    assert working["writable"] is True
    changed = dict(solved, content=nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]))
    for attempt in (lambda: manager.save(changed, "notebooks/00_x.ipynb"),
                    lambda: manager.save(changed, "/notebooks/00_x.ipynb"),
                    lambda: manager.rename_file("exercises/00_x.ipynb", "notebooks/00_y.ipynb"),
                    lambda: manager.delete_file("notebooks/00_x.ipynb")):
        with pytest.raises(HTTPError) as refused:
            asyncio.run(attempt())
        assert refused.value.status_code == 403 and "work in your own copy, exercises/" in str(refused.value)
    assert (root / "notebooks" / "00_x.ipynb").read_bytes() == before
    asyncio.run(manager.save(dict(working, content=changed["content"]), "exercises/00_x.ipynb"))
    assert "1" in (root / "exercises" / "00_x.ipynb").read_text()


def test_make_lab_starts_jupyterlab_with_the_read_only_contents():
    makefile = (ROOT / "Makefile").read_text()
    lab = makefile[makefile.index("\nlab: setup"):].split("\n\n")[0]
    assert "--ServerApp.contents_manager_class=course_lib.lab.CourseContents" in lab


# ---------------------------------------------------------------- the two copies

@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_solved_title_says_solved_and_the_working_one_does_not(path):
    solved = read(path).cells[0].source.splitlines()[0]
    working = read(ROOT / "exercises" / path.name).cells[0].source.splitlines()[0]
    assert solved.startswith("# ") and solved.endswith(SOLVED_TITLE)
    assert working == solved[: -len(SOLVED_TITLE)]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_working_copy_names_the_solution_call_not_a_link_that_opens_at_the_top(path):
    working = read(ROOT / "exercises" / path.name)
    for i, heading, _, note in exercise_notes(read(path), path.name):
        assert note in working.cells[i].source
        assert "](../notebooks/" not in note and "solution(\\\"" not in note
        name = note.split("`")[1]
        assert f'`solution("{name}")`' in note
    assert "{lesson}" not in WORKING_EXERCISE_NOTE


def test_jupyter_started_as_make_lab_starts_it_refuses_to_save_a_solved_lesson(tmp_path):
    """The server `make lab` starts (its contents manager option), over HTTP as JupyterLab uses it."""
    import secrets
    import socket
    import time
    import urllib.error
    import urllib.request
    for folder in ("notebooks", "exercises"):
        (tmp_path / folder).mkdir()
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / folder / "00_x.ipynb")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    server = subprocess.Popen([sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
                               f"--ServerApp.root_dir={tmp_path}", f"--ServerApp.port={port}",
                               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
                               "--ServerApp.contents_manager_class=course_lib.lab.CourseContents"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def call(method, path, body=None):
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/contents/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")
    try:
        for _ in range(240):
            try:
                status, solved = call("GET", "notebooks/00_x.ipynb")
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        else:
            pytest.fail("the Jupyter server did not start")
        assert status == 200 and solved["writable"] is False
        status, working = call("GET", "exercises/00_x.ipynb")
        assert status == 200 and working["writable"] is True
        before = (tmp_path / "notebooks" / "00_x.ipynb").read_bytes()
        content = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
        status, refused = call("PUT", "notebooks/00_x.ipynb", {"type": "notebook", "content": content})
        assert status == 403 and "work in your own copy, exercises/" in refused["message"]
        assert (tmp_path / "notebooks" / "00_x.ipynb").read_bytes() == before
        status, _ = call("PUT", "exercises/00_x.ipynb", {"type": "notebook", "content": content})
        assert status == 200 and "print(1)" in (tmp_path / "exercises" / "00_x.ipynb").read_text()
    finally:
        server.terminate()
        server.wait(timeout=30)
