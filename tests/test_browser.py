"""Every lesson as a learner sees it: opened in JupyterLab in a real browser, then run.

Chromium (Debian's `chromium` package) driven by Playwright, against one JupyterLab server
started here on 127.0.0.1 and stopped at the end. As a learner works, JupyterLab loads once in
one page, and each lesson is opened in it, run, then closed and its kernel shut down before the
next one opens. For each lesson it checks:

- on first open, before anything runs, no output shows a raw widget repr
  ("interactive(children=(FloatSlider(...") or a stale progress bar ("0%| | 0/500");
- on first open, its tab is not marked unsaved (JupyterLab rewrites metadata that differs
  from the running kernel's, such as the kernel's display name);
- after "Run All Cells" in the kernel the lesson opened with (nothing has run in it yet), no
  cell shows an error, no `$...$` is left unrendered by MathJax, every explorer is a live
  widget, and moving its first slider changes what it shows;
- at a laptop's 1366 x 768, no figure is shown below 90% of its size (a wider one is shrunk
  to the column, and its text with it);
- the run took at most twice the run time the lesson states at its top (each lesson's time
  is printed beside the stated one).

A screenshot of each lesson goes to tests/artefacts/browser/ (git-ignored).

`make test-browser` runs it (COURSE_BROWSER_TEST=1); `make test` skips it in one line.
"""
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser_tools import browser_test, chromium, free_port

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ARTEFACTS = ROOT / "tests" / "artefacts" / "browser"
RUN_ALL_TIMEOUT_S = 900      # one lesson, run to the end, on a busy 2-core machine

RAW_WIDGET = re.compile(r"\b(interactive|[A-Z]\w*(Slider|Box|Progress|Output))\((children|value)=")
STALE_BAR = re.compile(r"\d+%\|[^|\n]*\|\s*\d+/\d+")
RAW_MATH = re.compile(r"\$[^$\s][^$]*\$")
LAPTOP = {"width": 1366, "height": 768}
SHRUNK_BELOW = 0.9           # a figure shown at less than this share of its width is unreadable


def stated_seconds(lesson):
    """The run time a lesson states at its top ("**Run time:** about 40 s ..."), in seconds."""
    from notebook_tools import stated_run_time
    return stated_run_time(lesson)


browser_test("browser test")

from playwright.sync_api import sync_playwright  # noqa: E402

# JupyterLab settings for the test: render every cell (no windowing, so off-screen outputs are in
# the page), fetch no news, and save nothing back (the lessons are copies anyway).
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
        '{"windowingMode": "none"}',
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        '{"fetchNews": "false", "checkForUpdates": false}',
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings":
        '{"autosave": false}',
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, token) of a JupyterLab serving copies of the lessons; stopped afterwards."""
    home = tmp_path_factory.mktemp("lab")
    served = home / "notebooks"
    served.mkdir()
    for path in LESSONS:
        shutil.copy(path, served / path.name)
    for name, text in SETTINGS.items():
        target = home / "settings" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    port, token = free_port(), "course-browser-test"
    env = dict(os.environ, PYTHONPATH=str(ROOT), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    env.pop("OMP_NUM_THREADS", None)   # as a learner runs it: default settings
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={home}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    command.append("--LabApp.expose_app_in_browser=True")   # window.jupyterapp, for _open/_close
    log = open(home / "jupyterlab.log", "w")
    server = subprocess.Popen(command, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n"
                                       + (home / "jupyterlab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def lab_page(lab, browser):
    """One page at a laptop's size with JupyterLab loaded in it (a workspace of its own, reset),
    for every lesson this process tests; the time JupyterLab took to load is printed."""
    base, token = lab
    page = browser.new_page(viewport=LAPTOP)
    started = time.monotonic()
    page.goto(f"{base}/lab/workspaces/browser-test?reset&token={token}")
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=120_000)
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    print(f"JupyterLab loaded in {time.monotonic() - started:.1f} s")
    yield page
    page.close()


def _open(page, path):
    """Open a notebook from the file browser, which shows its folder (filebrowser:open-path)."""
    page.evaluate("""async path => { await window.jupyterapp.commands.execute(
                         'filebrowser:open-path', {path: path}); }""", path)


def _close_all(page):
    """Close every tab in the main area without saving, and shut down every kernel."""
    page.evaluate("""async () => {
        const app = window.jupyterapp, sessions = app.serviceManager.sessions;
        for (const widget of Array.from(app.shell.widgets('main'))) widget.dispose();
        await sessions.refreshRunning();
        for (const session of Array.from(sessions.running())) await sessions.shutdown(session.id);
    }""")
    page.wait_for_function("() => !document.querySelector('.jp-Notebook')", timeout=60_000)


def _output_texts(page):
    return page.eval_on_selector_all(".jp-OutputArea-output", "els => els.map(e => e.innerText)")


def _unrendered_math(page):
    """Text of rendered markdown (code, and what MathJax made, left out) with `$...$` in it."""
    texts = page.eval_on_selector_all(
        ".jp-MarkdownOutput",
        """els => els.map(e => {
            const c = e.cloneNode(true);
            c.querySelectorAll('code, pre, mjx-container, .MathJax').forEach(x => x.remove());
            return c.innerText; })""")
    return [m.group(0) for t in texts for m in RAW_MATH.finditer(t)]


def _prompts(page):
    return page.eval_on_selector_all(".jp-CodeCell .jp-InputPrompt",
                                     "els => els.map(e => e.innerText.trim())")


def _wait_until_run(page, timeout_s):
    """Wait for the run to start (cells queued or running show [*]), then until every code cell
    shows an execution count again; the stored outputs show counts before the run too."""
    deadline = time.monotonic() + timeout_s
    page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                 .some(e => e.innerText.includes('*'))""", timeout=300_000, polling=100)
    while time.monotonic() < deadline:
        prompts = _prompts(page)
        if prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts):
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"the lesson did not finish running in {timeout_s} s; prompts: {prompts}")


def _settle(page, at_least_ms, at_most_ms):
    """Wait until the outputs on the page have stopped changing: the same texts and widget views
    at_least_ms apart (the widget manager restoring views, a last stream flushed), at most
    at_most_ms in all."""
    deadline = time.monotonic() + at_most_ms / 1000
    before = None
    while time.monotonic() < deadline:
        now = (_output_texts(page),
               page.eval_on_selector_all(".jp-OutputArea-output .widget-interact, "
                                         ".jp-OutputArea-output img", "els => els.length"))
        if now == before:
            return
        before = now
        page.wait_for_timeout(at_least_ms)


def _menu(page, menu, item):
    page.click(f".lm-MenuBar-itemLabel:text-is('{menu}')")
    page.click(f".lm-Menu-itemLabel:text-matches('^{item}')")


def _run_all(page):
    _menu(page, "Run", "Run All Cells")


def _explorer_output(explorer):
    """What an explorer shows below its sliders (its image, or failing that its text)."""
    return explorer.evaluate(
        """e => { const out = e.querySelector('.widget-output');
                  if (!out) return '';
                  const imgs = [...out.querySelectorAll('img')].map(i => i.src);
                  return imgs.length ? imgs.join('|') : out.innerText; }""")


# Each lesson a group of its own, so that `make test-browser` (-n 2 --dist loadgroup) runs two
# at a time, the longest first (conftest.py orders groups by the run time a lesson states).
# Where loadgroup cannot read the groups (conftest.py says when), each test is its own group
# anyway, so the schedule is the same.
@pytest.mark.parametrize("lesson", [
    pytest.param(p, marks=pytest.mark.xdist_group(f"browser-{p.name}"), id=p.stem)
    for p in LESSONS])
def test_lesson_in_jupyterlab(lab_page, lesson):
    page = lab_page
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    errors = []
    def on_error(err):
        errors.append(str(err))
    page.on("pageerror", on_error)
    try:
        _close_all(page)        # the lesson before (or the launcher): only this lesson open
        opened = time.monotonic()
        _open(page, f"notebooks/{lesson.name}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        # the kernel has started and is idle (the status bar says so)
        page.wait_for_selector("text=/Python 3 \\(ipykernel\\) \\| Idle/", timeout=300_000)
        _settle(page, 1000, 6000)        # let the widget manager restore what it can
        first = _output_texts(page)
        raw = [t[:80] for t in first if RAW_WIDGET.search(t) or STALE_BAR.search(t)
               or "Error displaying widget" in t]
        page.screenshot(path=str(ARTEFACTS / f"{lesson.stem}-first-open.png"))
        assert not raw, f"{lesson.name} on first open shows raw widget or progress text: {raw}"
        dirty = page.query_selector(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")
        assert dirty is None, f"{lesson.name} opens with its tab marked unsaved"

        started = time.monotonic()
        _run_all(page)
        _wait_until_run(page, RUN_ALL_TIMEOUT_S)
        took, stated = time.monotonic() - started, stated_seconds(lesson)
        print(f"{lesson.stem}: ran in {took:.0f} s in JupyterLab; the lesson states about "
              f"{stated:.0f} s (opening it and its first checks took {started - opened:.0f} s)")
        assert took <= 2 * stated, (f"{lesson.name} took {took:.0f} s, more than twice the "
                                    f"{stated:.0f} s it states at its top")
        _settle(page, 500, 4000)
        failed = page.eval_on_selector_all(
            "[data-mime-type='application/vnd.jupyter.error']", "els => els.map(e => e.innerText)")
        assert not failed, f"{lesson.name} shows an error after running:\n{failed[0][-2000:]}"
        after = _output_texts(page)
        assert not [t for t in after if RAW_WIDGET.search(t) or STALE_BAR.search(t)], \
            f"{lesson.name} shows raw widget or progress text after running"
        math = _unrendered_math(page)
        assert not math, f"{lesson.name} leaves math unrendered: {math[:5]}"

        uses_widgets = "ipywidgets" in lesson.read_text()
        if uses_widgets:
            page.wait_for_selector(".widget-interact", timeout=120_000)
        explorers = page.query_selector_all(".widget-interact")
        assert bool(explorers) == uses_widgets, \
            f"{lesson.name}: {len(explorers)} live explorers, imports ipywidgets: {uses_widgets}"
        for i, explorer in enumerate(explorers):
            explorer.scroll_into_view_if_needed()
            handle = explorer.query_selector(".noUi-handle, input[type=range], .slider")
            assert handle is not None, f"{lesson.name}: explorer {i} has no slider"
            before = _explorer_output(explorer)
            assert before, f"{lesson.name}: explorer {i} shows nothing"
            box = handle.bounding_box()
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            page.mouse.move(x, y)
            page.mouse.down()
            page.mouse.move(x + 40, y, steps=5)      # drag the handle to the right
            page.mouse.up()
            page.wait_for_function(
                """([e, before]) => { const out = e.querySelector('.widget-output');
                     const imgs = [...out.querySelectorAll('img')].map(i => i.src);
                     const now = imgs.length ? imgs.join('|') : out.innerText;
                     return now && now !== before; }""",
                arg=[explorer, before], timeout=60_000)
            page.screenshot(path=str(ARTEFACTS / f"{lesson.stem}-explorer-{i}.png"))
        page.screenshot(path=str(ARTEFACTS / f"{lesson.stem}.png"))
        print(f"{lesson.stem}: the checks after the run took {time.monotonic() - started - took:.0f} s")
        assert not errors, f"{lesson.name}: errors in the page: {errors[:3]}"
        shrunk = page.eval_on_selector_all(
            ".jp-OutputArea-output img",
            f"""els => els.filter(i => i.naturalWidth > 0 &&
                                       i.clientWidth < {SHRUNK_BELOW} * i.naturalWidth)
                          .map(i => [i.naturalWidth, i.clientWidth])""")
        assert not shrunk, (f"{lesson.name}: figures shown below {SHRUNK_BELOW:.0%} of their "
                            f"width at {LAPTOP['width']} px (natural, shown): {shrunk}")
    finally:
        page.screenshot(path=str(ARTEFACTS / f"{lesson.stem}-last.png"))
        page.remove_listener("pageerror", on_error)
