"""binder/: the learners' image for repo2docker (Binder, Zero to JupyterHub).

Checked on every run: what binder/ pins agrees with the lock. Built for real (no Docker here:
the environment it describes, in a fresh virtual environment, as repo2docker's steps build it)
when COURSE_BINDER_BUILD=1, since it downloads and installs the whole course's packages (about
2 GB installed, minutes):

    COURSE_BINDER_BUILD=1 .venv/bin/python -m pytest tests/test_hub_image.py
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_wheel import copy_tree

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"


def pins(path):
    """{package: version} of the name==version lines of a requirements file."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


def test_torch_is_the_locks_version_as_pytorchs_cpu_build():
    image = BINDER / "requirements.txt"
    text = image.read_text(encoding="utf-8")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text.splitlines()
    assert pins(image)["torch"] == pins(ROOT / "requirements-lock.txt")["torch"] + "+cpu"
    assert {"-r ../requirements.txt", "-r hub.txt", "-c ../requirements-lock.txt"} <= set(text.splitlines())


def test_the_hubs_packages_are_pinned_and_the_image_installs_the_course_without_e():
    assert {"jupyterhub", "nbgitpuller", "jupyterhub-idle-culler"} <= set(pins(BINDER / "hub.txt"))
    post = (BINDER / "postBuild").read_text(encoding="utf-8")
    assert os.access(BINDER / "postBuild", os.X_OK)
    commands = [line for line in post.splitlines() if line.strip() and not line.startswith("#")]
    assert "python -m pip install --no-cache-dir --no-deps ." in commands
    installs = [line.split() for line in commands if "pip" in line.split()]
    assert not any({"-e", "--editable"} & set(words) for words in installs)
    # The image's Python: one the lock was resolved for (the Makefile's LOCK_PYTHON_MIN and newer).
    runtime = (BINDER / "runtime.txt").read_text().strip()
    oldest = re.search(r"^LOCK_PYTHON_MIN \?= (\d+)\.(\d+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert re.fullmatch(r"python-3\.\d+", runtime) and oldest
    assert tuple(map(int, runtime[len("python-"):].split("."))) >= tuple(map(int, oldest.groups()))


RUN_LESSON = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, iopub_timeout=60, kernel_name="python3",
               resources={"metadata": {"path": sys.argv[2]}}).execute()
print("ran", len(nb.cells), "cells")
"""


@pytest.mark.skipif(os.environ.get("COURSE_BINDER_BUILD") != "1",
                    reason="builds the image's whole environment (minutes, ~2 GB): COURSE_BINDER_BUILD=1 runs it")
def test_the_image_builds_and_runs_lesson_00(tmp_path):
    repo = copy_tree(tmp_path / "repo")
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    path = {**os.environ, "PATH": f"{env / 'bin'}:{os.environ['PATH']}"}
    path.pop("VIRTUAL_ENV", None)
    path.pop("PYTHONPATH", None)
    # repo2docker's steps: pip install -r binder/requirements.txt, then binder/postBuild, both in
    # the repository's root. --retries 0: where PyPI's mirror is all there is (as on the course's
    # development machines), the CPU index is unreachable and pip moves on at once.
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--retries", "0",
                           "-r", "binder/requirements.txt"], cwd=repo, env=path, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    done = subprocess.run(["binder/postBuild"], cwd=repo, env=path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    shutil.rmtree(repo / "build", ignore_errors=True)
    check = ("import importlib.metadata as m, torch, course_lib.paths as p\n"
             "print(torch.__version__, p.DATA_DIR == p.BUNDLED, m.version('jupyterhub'), m.version('nbgitpuller'))\n"
             "print(sorted(d.metadata['Name'] for d in m.distributions() if d.metadata['Name'].startswith('nvidia')))")
    done = subprocess.run([str(python), "-c", check], cwd=tmp_path, env=path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    versions, nvidia = done.stdout.splitlines()
    hub = pins(BINDER / "hub.txt")
    assert versions.split() == [pins(BINDER / "requirements.txt")["torch"], "True", hub["jupyterhub"], hub["nbgitpuller"]]
    assert nvidia == "[]", f"CUDA packages in a CPU image: {nvidia}"
    # The learner's copy: lesson 00 from exercises/'s folder, as the link opens it (the solved
    # lesson, for its answers), with the image's course_lib.
    done = subprocess.run([str(python), "-c", RUN_LESSON, str(repo / "notebooks" / "00_start_here.ipynb"),
                           str(repo / "exercises")], cwd=tmp_path, env={**path, "COURSE_DEVICE": "cpu"},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
