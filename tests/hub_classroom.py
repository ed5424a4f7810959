"""The classroom on a real JupyterHub that tests/test_hub.py and tests/test_live_hub.py look at:
one hub (tests/hub_fixture.py) with the live view turned on by the configuration docs/hub.md
gives, and one run of lesson 00 by its learners. Its fixtures, `hub` and `classroom`, are
session-scoped (tests/conftest.py provides them), so both test files share the hub and what its
learners did: conftest.py's ONE_PROCESS keeps the two files on one test process for that, and
the hub stops after the last test that uses it.

The learners, each a Unix user: ada, bob and cy log in through the hub's form, start their
servers, follow the nbgitpuller link that `python -m course_lib.hub links` prints for lesson 00
(the course is pulled into their home and their working copy, exercises/00_start_here.ipynb,
opens in JupyterLab) and run it in a kernel of their server, over its websocket as JupyterLab
does, with every exercise answered rightly; then each gives a wrong answer to text_to_ids and
checks it again. cy asks for the exercise's first hint before that check, and ada puts the right
answer back afterwards and checks it once more. Each check sends its event to the live view; the
last cell of each kernel waits until its last event is sent. dee starts a server and does nothing
(the idle culler stops it); cy's server has the limits a hub's spawner passes (MEM_LIMIT below
lesson 00's measured peak, CPU_LIMIT 2).
"""
import concurrent.futures
import contextlib
import os
import re
import time

import pytest

from browser_tools import browser_test, free_port
from hub_fixture import ROOT, Browser, HubConfig, missing, running_hub

LESSON = "00_start_here.ipynb"
FOLDER = "course"                 # the folder the course is pulled into, in each learner's home
WORKERS = ("ada", "bob", "cy")    # the learners who run lesson 00
IDLE = "dee"                      # the learner who does nothing after starting a server
HINTED = "cy"                     # asks for text_to_ids's first hint before checking the wrong answer
FIXED = "ada"                     # puts text_to_ids's right answer back after the wrong one
LIMITED = {"mem_limit": 64 * 2**20, "cpu_limit": 2}   # cy's server's limits
CULL_TIMEOUT = 30                 # seconds idle before the culler stops a server
LIVE = "course-live"              # the live view's service, as docs/hub.md names it
INSTRUCTOR = "teacher"            # the hub user in the instructors' group (no server, no Unix user)

# What the last cell of each learner's kernel runs: the report is sent by a background thread,
# which a kernel shut down at once could stop before it has sent the last check's event.
LAST_EVENT = """\
import time
from course_lib.checks.report import last
waited = time.monotonic() + 30
while last().startswith("queued") and time.monotonic() < waited:
    time.sleep(0.05)
print(last())"""


def live_configuration(port):
    """docs/hub.md's configuration of the live view, as written there, with its four settings
    set for this hub: the learners' Python (the image's, with the course from its wheel), a
    database in the hub's folder, `port`, and INSTRUCTOR. A hub's own Python needs nothing more;
    the test's copy of Python may need LD_LIBRARY_PATH (cfg["env"]), which the service gets too."""
    page = (ROOT / "docs" / "hub.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```", page, re.M | re.S) if "course_lib.live" in b]
    assert len(blocks) == 1, "docs/hub.md should show the live view's configuration in one block"
    block = blocks[0]
    for name, value in (("live_python", 'cfg["python"]'), ("live_db", 'cfg["folder"] + "/course-live.sqlite"'),
                        ("live_port", str(port)), ("instructors", repr([INSTRUCTOR]))):
        block, found = re.subn(rf"^{name} = .*$", f"{name} = {value}", block, count=1, flags=re.M)
        assert found == 1, f"docs/hub.md's configuration of the live view has no line '{name} = ...'"
    return (f"\n# docs/hub.md's live view, section 6\n{block}"
            f'next(s for s in c.JupyterHub.services if s["name"] == {LIVE!r})["environment"] = cfg["env"]\n')


def classroom_config():
    """The classroom's HubConfig: its learners and limits, and the live view turned on."""
    port = free_port()
    return HubConfig(learners=(*WORKERS, IDLE), cull_timeout=CULL_TIMEOUT, limits={"cy": LIMITED},
                     extra_config=live_configuration(port)), port


_RUNNING = []   # the running hub's context, closed by stop_after() or at the session's end


@pytest.fixture(scope="session")
def hub():
    """The classroom's hub (a Hub; hub.live_events: where kernels post), running until the last
    test that uses it ends (stop_after)."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    config, port = classroom_config()
    with contextlib.ExitStack() as running:
        _RUNNING.append(running)
        hub = running.enter_context(running_hub(config))
        hub.live_events = f"http://127.0.0.1:{port}/services/{LIVE}/api/events"
        _wait_for_the_live_view(hub)
        yield hub


def stop_after(item, nextitem):
    """Stop the hub, and everything it started, after the last of the tests that use it rather
    than at the session's end: under make test-browser, the test process that ran them goes on
    to run lessons (tests/conftest.py calls this after each test)."""
    def uses(test):
        return "hub" in getattr(test, "fixturenames", ())
    if uses(item) and not uses(nextitem):
        while _RUNNING:
            _RUNNING.pop().close()


def _wait_for_the_live_view(hub, timeout=120):
    """Wait until the live view's service answers through the hub's proxy (its stylesheet)."""
    import requests
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{hub.url}/services/{LIVE}/live.css", timeout=10).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise AssertionError(f"the live view did not answer in {timeout} s; the hub's log:\n{hub.log()[-6000:]}")


def text(outputs, name=None):
    """The streams' text of some outputs (of stream `name` only, when given)."""
    return "".join(o["text"] for o in outputs if o["output_type"] == "stream" and name in (None, o["name"]))


def work_through_lesson_00(hub, learner):
    """A learner's session: log in, start the server, follow lesson 00's link, run the working
    copy with right answers, then a wrong one (and what HINTED and FIXED do). What each step showed."""
    import nbformat

    from answers import REFERENCE, WRONG
    from course_lib import hub as course_hub
    from course_lib.exercises import exercises
    from notebook_tools import fill, replace_stub
    wrong_answer = next(w for w in WRONG if w.exercise == "text_to_ids" and w.inject)
    who = learner.name.rsplit("-", 1)[0]
    browser = Browser(hub, learner)
    browser.spawn()
    link = course_hub.lesson_link(hub.url, hub.repo, LESSON, branch="main", folder=FOLDER)
    events, opened = browser.pull(link)
    assert events and events[-1].get("phase") == "finished", f"{learner.name}'s pull: {events}"
    path = f"{FOLDER}/exercises/{LESSON}"
    found = browser.api("GET", f"contents/{path}")
    found.raise_for_status()
    working_copy = nbformat.from_dict(found.json()["content"])
    answered = fill(working_copy, {name: REFERENCE[name] for name, _, _ in exercises(working_copy)})
    kernel = browser.kernel(path)
    try:
        ran = [kernel.run(cell.source) for cell in answered.cells if cell.cell_type == "code"]
        where = kernel.run("import course_lib, course_lib.paths, torch\n"
                           "print(course_lib.__file__, course_lib.paths.DATA_DIR, torch.get_num_threads())")
        exercise, check = next((i, j) for ex, i, j in exercises(working_copy) if ex == "text_to_ids")
        defined = kernel.run(replace_stub(working_copy.cells[exercise].source, "text_to_ids", wrong_answer.body))
        hinted = kernel.run('from course_lib.checks import hint\nhint("text_to_ids")') if who == HINTED else None
        wrong = [defined, kernel.run(working_copy.cells[check].source)]
        fixed = ([kernel.run(answered.cells[exercise].source), kernel.run(answered.cells[check].source)]
                 if who == FIXED else None)
        last_event = text(kernel.run(LAST_EVENT), "stdout").strip()
    finally:
        kernel.close()
    return {"link": link, "events": events, "opened": opened, "working_copy": working_copy,
            "answered": answered, "ran": ran, "where": text(where, "stdout").split(),
            "wrong": wrong, "wrong_answer": wrong_answer, "hinted": hinted, "fixed": fixed,
            "last_event": last_event, "browser": browser}


@pytest.fixture(scope="session")
def classroom(hub):
    """Every learner's session, run at once, and what the hub said about the idle server."""
    idle = Browser(hub, hub.learner(IDLE))
    idle.spawn()
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(WORKERS)) as pool:
        sessions = dict(zip(WORKERS, pool.map(lambda name: work_through_lesson_00(hub, hub.learner(name)),
                                               WORKERS)))
    # The workers' servers were busy all along; the idle one has had its chance to be culled.
    running = {name: hub.server(hub.learner(name).name) is not None for name in WORKERS}
    deadline = started + CULL_TIMEOUT + 60
    while hub.server(hub.learner(IDLE).name) is not None and time.monotonic() < deadline:
        time.sleep(1)
    return {"sessions": sessions, "workers_running": running,
            "idle_stopped": hub.server(hub.learner(IDLE).name) is None}


def hub_test(name):
    """Skip the calling module where the hub cannot run (not root: the learners are Unix users);
    else run it only under `make test-browser` (tests/browser_tools.py), which fails it where
    anything else it needs is missing."""
    if os.geteuid() != 0:
        pytest.skip(f"{name}: {missing()}", allow_module_level=True)
    browser_test(name, missing)
