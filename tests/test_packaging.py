"""`pip install .` gives a working package: the wheel holds every course_lib module and the data
course_lib reads, and lessons run with course_lib installed from it and nothing else."""
import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from course_lib import paths
from course_wheel import build_wheel, install_wheel

ROOT = Path(__file__).resolve().parent.parent


def _modules_in_tree():
    """Every importable module under course_lib/ in the source tree, as dotted names."""
    names = []
    for path in sorted((ROOT / "course_lib").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools")
    return build_wheel(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """The wheel installed without -e into a folder of its own, as an image installs it."""
    return install_wheel(wheel, tmp_path_factory.mktemp("site"))


def run_with(site, code, cwd, timeout=300):
    """Run `code` in a Python whose only course_lib is the one in `site`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(site), COURSE_DEVICE="cpu", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_wheel_holds_every_module(wheel):
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = {n for n in zf.namelist() if n.endswith(".py")}
    in_tree = {str(p.relative_to(ROOT)) for p in (ROOT / "course_lib").rglob("*.py")}
    missing = sorted(in_tree - in_wheel)
    assert not missing, f"the wheel leaves out {missing}"


def test_every_module_imports_from_the_wheel(wheel, tmp_path):
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    modules = _modules_in_tree()
    assert "course_lib.checks.lesson01" in modules
    code = (
        "import importlib\n"
        f"for name in {modules!r}:\n"
        "    module = importlib.import_module(name)\n"
        f"    assert module.__file__.startswith({str(target)!r}), (name, module.__file__)\n"
        "print('ok')\n")
    # Run from the empty target, with only the target (not the worktree) on the path.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    done = subprocess.run([sys.executable, "-c", code], cwd=target, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"importing from the wheel failed:\n{done.stderr[-3000:]}"
    assert done.stdout.strip() == "ok"


def test_wheel_holds_the_solutions_that_solution_shows(wheel):
    with zipfile.ZipFile(wheel) as zf:
        assert "course_lib/checks/solutions.json" in zf.namelist()


def test_the_wheel_carries_the_data_course_lib_reads(wheel):
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    listed = [ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
              and [t.id for t in node.targets] == ["BUNDLED_FILES"]]
    assert listed == [paths.BUNDLED_FILES], "setup.py's BUNDLED_FILES should be course_lib.paths'"
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = set(zf.namelist())
    expected = {f"course_lib/_data/{p.relative_to(ROOT / 'data').as_posix()}"
                for pattern in paths.BUNDLED_FILES for p in (ROOT / "data").glob(pattern)}
    assert "course_lib/_data/configs/gpt2.json" in expected
    expected.add("course_lib/lesson_peaks.json")      # what a lesson on a hub reads (course_lib.hub)
    assert expected <= in_wheel, f"the wheel leaves out {sorted(expected - in_wheel)}"
    assert not any(n.startswith("data/") for n in in_wheel), "data/ belongs inside course_lib/"


def test_an_editable_install_reads_the_repository_data(tmp_path, monkeypatch):
    assert paths.DATA_DIR == ROOT / "data"
    monkeypatch.chdir(tmp_path)
    assert paths.course_file("data/configs/gpt2.json") == ROOT / "data" / "configs" / "gpt2.json"


def test_the_installed_course_lib_finds_everything_it_reads(installed, tmp_path):
    # From an empty folder, with only the installed package on the path: the lessons' calls.
    code = f"""
import course_lib, course_lib.paths as paths
from course_lib.costs import load_config
from course_lib.data import CORPUS_PATH, load_corpus
from course_lib.checkpoint import load_model
from course_lib.checks import solution
assert course_lib.__file__.startswith({str(installed)!r}), course_lib.__file__
assert paths.DATA_DIR == paths.BUNDLED, paths.DATA_DIR
print(load_config("data/configs/gpt2.json").d_model)
print(len(load_corpus()))
print(sum(p.numel() for p in load_model(CORPUS_PATH.parent / "tinylm.pt").parameters()) > 0)
solution("text_to_ids")
"""
    done = run_with(installed, code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[:3] == ["768", str(len((ROOT / "data" / "shakespeare.txt").read_text())), "True"]
    assert "text.encode" in done.stdout, "solution() showed no reference answer"


def _compared(cell):
    """What nbval compares of a code cell's outputs, unless it is told not to: each stream's text
    (however the kernel cut it into messages) and the results' plain text."""
    tags = cell.metadata.get("tags", [])
    if "nbval-ignore-output" in tags or "nbval-skip" in tags:
        return None
    streams = {}
    for o in cell.outputs:
        if o.output_type == "stream":
            streams[o.name] = streams.get(o.name, "") + o.text
    return streams, [o.get("data", {}).get("text/plain") for o in cell.outputs
                     if o.output_type in ("execute_result", "error")]


RUN_LESSON = """
import sys
import nbformat
from nbclient import NotebookClient
path, out = sys.argv[1:3]
nb = nbformat.read(path, as_version=4)
nb.cells.append(nbformat.v4.new_code_cell("import course_lib; print(course_lib.__file__)"))
NotebookClient(nb, timeout=600, iopub_timeout=60, kernel_name="python3",
               resources={"metadata": {"path": str(__import__("pathlib").Path(path).parent)}}).execute()
nbformat.write(nb, out)
"""


@pytest.mark.parametrize("lesson", ["00_start_here.ipynb", "11_tokenization.ipynb"])
def test_a_lesson_runs_with_only_the_installed_course_lib(lesson, installed, tmp_path):
    # The lesson alone in a notebooks/ folder (no data/, no course_lib/ beside it), run top to
    # bottom in a fresh kernel whose only course_lib is the wheel's: the outputs nbval compares
    # are the saved ones.
    (tmp_path / "notebooks").mkdir()
    copy = shutil.copy(ROOT / "notebooks" / lesson, tmp_path / "notebooks" / lesson)
    out = tmp_path / "ran.ipynb"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(installed), COURSE_DEVICE="cpu", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", RUN_LESSON, str(copy), str(out)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{lesson} failed with the installed course_lib:\n{done.stderr[-4000:]}"
    ran = nbformat.read(out, as_version=4)
    assert ran.cells[-1].outputs[0]["text"].startswith(str(installed))
    saved = nbformat.read(ROOT / "notebooks" / lesson, as_version=4)
    for index, (was, now) in enumerate(zip(saved.cells, ran.cells)):
        if was.cell_type == "code":
            assert _compared(now) == _compared(was), f"{lesson}, cell {index}: outputs differ"
