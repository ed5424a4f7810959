"""The course as an image installs it: course_lib built into a wheel from the working tree and
installed without -e (tests/test_packaging.py, tests/hub_fixture.py)."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What building the wheel reads: the build's files, the package and the data it carries.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "course_lib", "data")


def working_tree_files(root=ROOT):
    """The working tree's files that git tracks or would track (uncommitted changes included),
    as paths relative to `root`."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=root, capture_output=True, check=True).stdout
    return [Path(name) for name in listed.decode().split("\0") if name and (root / name).is_file()]


def copy_tree(dest, parts=None, root=ROOT):
    """Copy the working tree's files (only those under `parts`, when given) into `dest`."""
    for rel in working_tree_files(root):
        if parts is None or rel.parts[0] in parts:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, dest / rel)
    return dest


def build_wheel(workdir):
    """Build the course_lib wheel from a copy of the working tree (a stale build/ in the tree can
    neither hide a missing file nor be left behind); its path."""
    src = copy_tree(Path(workdir) / "src", BUILD_INPUTS)
    out = Path(workdir) / "wheel"
    # --no-build-isolation: build with the setuptools already installed, so no network is needed.
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(out), str(src)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    wheels = list(out.glob("course_lib-*.whl"))
    assert len(wheels) == 1, f"expected one course_lib wheel in {out}, found {wheels}"
    return wheels[0]


def install_wheel(wheel, target):
    """pip-install the wheel (without its dependencies) into the folder `target`; `target`."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
         "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"pip install --target failed:\n{done.stdout}\n{done.stderr}"
    return Path(target)
