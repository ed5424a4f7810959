"""requirements-lock.txt: every package the course installs, pinned at the version the tests ran with.

requirements.txt keeps ranges (for JupyterHub images and Binder); the lock pins each package inside
them, and `make setup` (so `make lab`, `make test` and CI) installs requirements.txt with the lock
as constraints. These tests check the lock against the ranges, and that the environment they run
in is the lock's: in CI, a fresh clone whose .ci/run installed it.
"""
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from notebook_tools import ROOT

LOCK = ROOT / "requirements-lock.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(?:;\s*(.+))?$")


def lock_entries(text):
    """(name, version, marker or None) of each line of a lock; ValueError for a line that is not an
    exact pin (a range, a URL, an editable install), naming the line."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        found = PIN.match(line)
        if not found:
            raise ValueError(f"requirements-lock.txt line {number} is not 'name==version [; marker]': {line!r}")
        name, version, marker = found.groups()
        entries.append((canonicalize_name(name), Version(version), Marker(marker) if marker else None))
    return entries


def pins_here(entries):
    """{name: version} of the entries whose marker holds on this machine."""
    return {name: version for name, version, marker in entries if marker is None or marker.evaluate()}


def requirements():
    """The requirements of requirements.txt, comments dropped."""
    lines = (line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def installed(name):
    """The version of `name` installed in this environment (its local label, e.g. +cpu, dropped),
    or None."""
    try:
        return Version(Version(importlib.metadata.version(name)).public)
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.fixture(scope="module")
def entries():
    return lock_entries(LOCK.read_text(encoding="utf-8"))


def test_lock_entries_refuse_a_line_that_is_not_an_exact_pin():
    assert lock_entries("# a comment\nnumpy==2.4.6\nappnope==1.0.0 ; sys_platform == 'darwin'\n") == [
        ("numpy", Version("2.4.6"), None), ("appnope", Version("1.0.0"), Marker("sys_platform == 'darwin'"))]
    for line in ("numpy>=1.24", "-e file:///work/main", "torch @ https://example.org/torch.whl"):
        with pytest.raises(ValueError, match="line 1 is not"):
            lock_entries(line + "\n")


def test_the_lock_pins_each_package_once_per_platform(entries):
    for system in ("linux", "darwin"):
        here = {"sys_platform": system, "platform_system": system.title(),
                "platform_machine": "x86_64" if system == "linux" else "arm64"}
        seen = {}
        for name, version, marker in entries:
            if marker is None or marker.evaluate(here):
                assert name not in seen, f"{name} is pinned twice on {system}: {seen[name]} and {version}"
                seen[name] = version


def test_every_requirement_is_pinned_inside_its_range(entries):
    pinned = pins_here(entries)
    for requirement in requirements():
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"requirements.txt's {requirement} is not in requirements-lock.txt: run make lock"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"requirements-lock.txt pins {name}=={pinned[name]}, outside requirements.txt's "
            f"{requirement}: run make lock in an environment inside the range")


def test_the_lock_pins_the_tools_setup_and_ci_install(entries):
    # make setup installs uv with the lock as constraints, .ci/run playwright for the browser test
    pinned = pins_here(entries)
    assert {"uv", "playwright", "torch"} <= pinned.keys()


def _not_the_locked_environment(pinned):
    """The reason to skip the environment's checks: `make test-latest` runs the tests on the newest
    versions on purpose (it sets COURSE_LATEST=1), and make setup keeps a torch that was installed
    before it at another version (README: a CPU build), when the rest may follow requirements.txt."""
    if os.environ.get("COURSE_LATEST") == "1":
        return "make test-latest: the newest versions requirements.txt allows, not the lock's"
    here = installed("torch")
    if here != pinned["torch"]:
        return f"torch {here} is installed, not the lock's {pinned['torch']}: make setup kept it"
    return None


def test_this_environment_holds_the_locked_versions(entries):
    pinned = pins_here(entries)
    if reason := _not_the_locked_environment(pinned):
        pytest.skip(reason)
    wrong = {name: (str(installed(name)), str(version)) for name, version in pinned.items()
             if installed(name) is not None and installed(name) != version}
    assert not wrong, (f"installed versions that differ from requirements-lock.txt (installed, locked): "
                       f"{wrong}; run make setup")
    missing = [r.name for r in requirements() if installed(r.name) is None]
    assert not missing, f"requirements.txt's {missing} are not installed: run make setup"


def test_installing_the_lock_here_would_change_nothing(entries):
    # uv resolves requirements.txt within the lock against this environment, offline: the whole
    # closure, dependencies of dependencies too, must already be at the locked versions.
    pinned = pins_here(entries)
    if reason := _not_the_locked_environment(pinned):
        pytest.skip(reason)
    if installed("uv") is None:
        pytest.skip("uv is not installed here (make setup installed with pip instead)")
    done = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", "--dry-run", "--offline", "--python", sys.executable,
         "-r", str(ROOT / "requirements.txt"), "-c", str(LOCK)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "Would make no changes" in output, output


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_setup_installs_again_when_the_lock_changes(tmp_path):
    stamp = tmp_path / ".course-installed"
    stamp.touch()  # newer than every file of the repository
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "MAKEFLAGS")}

    def dry_run(*extra):
        done = subprocess.run(["make", "-n", "setup", f"STAMP={stamp}", *extra], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "uv pip install" not in dry_run()  # installed, and nothing changed since
    recipe = dry_run("-W", "requirements-lock.txt")  # as if the lock had just changed
    assert "uv pip install" in recipe and "-c requirements-lock.txt uv" in recipe
    assert "-r requirements.txt -c $pins" in recipe and "pins=requirements-lock.txt" in recipe


def test_the_readme_names_the_locked_torch(entries):
    # README's command for a CPU build of torch installs the lock's version, which setup then keeps
    named = re.findall(r"torch==([0-9][^\s`]*)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert named and {Version(v) for v in named} == {pins_here(entries)["torch"]}, named


def test_ci_installs_the_locked_torch_and_playwright(entries):
    # .ci/run installs torch before make setup and playwright after it: both at the lock's versions
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    torch_line = next(line for line in ci.splitlines() if re.match(r"phase .*pip install.*torch", line))
    (spec,) = re.findall(r'"(\$\(sed [^"]+\))"', torch_line)
    done = subprocess.run(["bash", "-c", f"echo {spec}"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == f"torch=={pins_here(entries)['torch']}", (torch_line, done.stdout, done.stderr)
    assert re.search(r"pip install .*playwright -c requirements-lock\.txt", ci), "CI's playwright is not the lock's"
