"""docs/hub.md: every command in its ```bash blocks is one this test knows, and each is run here
or, where it cannot be (TLJH's tljh-config needs TLJH's own installer, repo2docker and docker
need Docker), its settings are checked against the figures they come from. The sizing section
is the output of the command that prints it, so no figure in it is typed by hand.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from course_lib import hub

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "hub.md"
TEXT = GUIDE.read_text(encoding="utf-8")


def fenced(kind):
    return re.findall(rf"^```{kind}\n(.*?)^```", TEXT, re.MULTILINE | re.DOTALL)


def commands():
    found = []
    for block in fenced("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                found.append(re.sub(r"\s+", " ", line))
    return found


# How each command of the guide is tested (by the test named), or why it cannot run here.
KNOWN = {
    r"python bench/lesson_peaks\.py": "test_the_bench_command_measures_a_lesson",
    r"python -m course_lib\.hub sizing": "test_the_sizing_section_is_the_commands_output",
    r"python -m course_lib\.hub links --hub \S+ --repo \S+": "test_the_links_command_prints_every_lesson",
    r"sudo tljh-config set \S+ \S+": "test_tljh_settings_follow_the_measured_figures (TLJH is not installable here)",
    r"sudo tljh-config reload": "test_tljh_settings_follow_the_measured_figures (TLJH is not installable here)",
    r"sudo -E pip install .*": "test_the_tljh_install_is_the_images (built by tests/test_hub_image.py)",
    r"jupyter-repo2docker --no-run --user-name jovyan --image-name \S+ \.": "test_the_image_commands_name_one_image (no Docker here)",
    r"docker push \S+": "test_the_image_commands_name_one_image (no Docker here)",
    r"bash \.ci/hub-setup": "run by CI before make test (.ci/run)",
    r"COURSE_BROWSER_TEST=1 \.venv/bin/python -m pytest tests/test_hub\.py tests/test_live_hub\.py":
        "test_the_hub_tests_command_is_what_make_test_browser_runs",
}


def test_every_command_of_the_guide_is_known():
    unknown = [c for c in commands() if not any(re.fullmatch(p, c) for p in KNOWN)]
    assert not unknown, f"commands docs/hub.md shows that no test runs: {unknown}"
    assert len(commands()) >= 10


def test_the_hub_tests_command_is_what_make_test_browser_runs():
    """The guide's command runs the hub tests that `make test-browser` runs, as it runs them
    (COURSE_BROWSER_TEST=1: the files skip themselves elsewhere)."""
    [command] = [c for c in commands() if "pytest tests/test_hub.py" in c]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    hub_tests = re.search(r"^HUB_TESTS := (.+)$", makefile, re.MULTILINE).group(1).split()
    assert command.split()[4:] == hub_tests == ["tests/test_hub.py", "tests/test_live_hub.py"]
    recipe = re.search(r"^test-browser:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)
    assert "COURSE_BROWSER_TEST=1" in recipe and "$(HUB_TESTS)" in recipe


def test_the_sizing_section_is_the_commands_output():
    done = subprocess.run([sys.executable, "-m", "course_lib.hub", "sizing"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout in TEXT, "docs/hub.md's section 1 is not what `python -m course_lib.hub sizing` prints"


def test_the_bench_command_measures_a_lesson(tmp_path):
    # The guide's command, on the shortest lesson only and into a file of the test's own.
    [command] = [c for c in commands() if c.startswith("python bench/lesson_peaks.py")]
    out = tmp_path / "peaks.json"
    done = subprocess.run([sys.executable, *command.split()[1:], "05", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())["lessons"]["05_positions.ipynb"]
    assert figures["kernel_peak_bytes"] > 100 * 2**20 and figures["cpu_seconds"] > 0.5
    assert "05_positions.ipynb" in done.stdout and "idle JupyterLab server" in done.stdout


def test_the_links_command_prints_every_lesson():
    [command] = [c for c in commands() if c.startswith("python -m course_lib.hub links")]
    done = subprocess.run([sys.executable, *command.split()[1:]], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(list((ROOT / "exercises").glob("[0-9][0-9]_*.ipynb"))) == 12
    assert lines[0] in TEXT, "the guide's example link is not what the command prints"


def _tljh_settings():
    return dict(c.split()[3:5] for c in commands() if c.startswith("sudo tljh-config set "))


def test_tljh_settings_follow_the_measured_figures():
    sizes = hub.sizing()
    assert _tljh_settings() == {"limits.memory": hub.size(sizes["mem_limit"]),
                                "limits.cpu": f"{sizes['cpu_limit']:g}",
                                "services.cull.timeout": str(_z2jh()["cull"]["timeout"]),
                                "user_environment.default_app": "jupyterlab"}
    assert commands().index("sudo tljh-config reload") > max(
        i for i, c in enumerate(commands()) if c.startswith("sudo tljh-config set"))


def _z2jh():
    [block] = fenced("yaml")
    return yaml.safe_load(block)


def test_z2jh_values_follow_the_measured_figures():
    sizes, values = hub.sizing(), _z2jh()["singleuser"]
    assert values["memory"] == {"limit": hub.size(sizes["mem_limit"]), "guarantee": hub.size(sizes["mem_guarantee"])}
    assert values["cpu"] == {"limit": sizes["cpu_limit"], "guarantee": sizes["cpu_guarantee"]}
    assert values["defaultUrl"] == "/lab"
    cull = _z2jh()["cull"]
    assert cull["enabled"] is True
    # Far above the longest lesson's whole run, so that no silent cell looks idle.
    longest = max(f["wall_seconds"] for f in hub.peaks()["lessons"].values())
    assert cull["timeout"] >= 10 * longest


def test_the_tljh_install_is_the_images():
    lines = [c for c in commands() if c.startswith("sudo -E pip install")]
    lock_torch = re.search(r"^torch==(\S+)", (ROOT / "requirements-lock.txt").read_text(), re.MULTILINE).group(1)
    assert lines == [f"sudo -E pip install torch=={lock_torch} --index-url https://download.pytorch.org/whl/cpu",
                     "sudo -E pip install -r requirements.txt -c requirements-lock.txt",
                     "sudo -E pip install --no-deps ."]
    image = (ROOT / "binder" / "requirements.txt").read_text()
    assert f"torch=={lock_torch}+cpu" in image and "-r ../requirements.txt" in image


def test_the_image_commands_name_one_image():
    built = [c for c in commands() if c.startswith("jupyter-repo2docker")]
    pushed = [c for c in commands() if c.startswith("docker push")]
    image = _z2jh()["singleuser"]["image"]
    assert built[0].split()[-2] == pushed[0].split()[-1] == f"{image['name']}:{image['tag']}"


def test_the_prose_quotes_the_figures_the_sizing_gives():
    # Figures repeated outside section 1 (TLJH's machines) are the command's too.
    sizes = hub.sizing()
    cores = {n: f"{n * sizes['cpu_guarantee']:g}" for n in hub.LABS}
    memory = {n: f"{n * sizes['mem_guarantee'] / 2**30:g}" for n in hub.LABS}
    assert f"for 30 learners, at least {cores[30]} cores and {memory[30]} GiB" in TEXT
    assert f"For 60 learners that is {cores[60]}\ncores and {memory[60]} GiB" in TEXT
    assert f"120 learners ({cores[120]} cores, {memory[120]} GiB)" in TEXT
