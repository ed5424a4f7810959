"""`pip install .` gives a working package: the wheel holds every course_lib module."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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
    # Build from a copy, so that a stale build/ folder in the worktree can neither hide a missing
    # module nor be left behind.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "course_lib", src / "course_lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation: build with the setuptools already installed, so no network is needed.
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(out), str(src)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    wheels = list(out.glob("course_lib-*.whl"))
    assert len(wheels) == 1, f"expected one course_lib wheel in {out}, found {wheels}"
    return wheels[0]


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
