"""The lab, live, on a real JupyterHub: learners' checks in their own kernels, the instructor's
view in Chromium.

A JupyterHub (from PyPI) with configurable-http-proxy (from npm) starts here on 127.0.0.1 with
the live view turned on by the configuration docs/hub.md shows, read from that page. Three
learners each get a single-user server (JupyterHub's SimpleLocalProcessSpawner: one Unix user,
each learner a hub user with a home and a token of their own) and run lesson 00's exercise and
check cells, from exercises/00_start_here.ipynb with answers filled in, in a kernel of their
server, which has what a learner's kernel on a hub has: the server's hub token and
COURSE_LIVE_URL. Then:

- the view, opened in Chromium at 1366 x 768 as the instructor, shows each learner's state on
  each exercise within seconds and where the room is stuck (a screenshot goes to
  tests/artefacts/live/, from which docs/images/hub-live.png is taken);
- a learner gets 403 for the view in their browser and for its state with their kernel's token;
- an event that names another learner is refused (400), one with a made-up token too (403),
  and an event's text shows on the page as text, never as HTML;
- the hub restarted (and the service with it) shows the same session, and a check run after it
  joins that session (the CSV says so); "Start a new session" starts an empty one.

The test stops every process it started. `make test-browser` runs it (COURSE_BROWSER_TEST=1);
`make test` skips it in one line.
"""
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from browser_tools import browser_test, chromium, free_port

ROOT = Path(__file__).resolve().parent.parent
ARTEFACTS = ROOT / "tests" / "artefacts" / "live"
LAPTOP = {"width": 1366, "height": 768}
SERVICE = "course-live"
PASSWORD = "a-lab-password"
LEARNERS = ("ada", "bob", "cy")
WAIT_S = 180          # for a server or a kernel to start on a busy 2-core machine
SHOWN_S = 20          # for a state to show in the view (it asks every 2 s)


def _chp():
    found = shutil.which("configurable-http-proxy")
    local = ROOT / "node_modules" / ".bin" / "configurable-http-proxy"
    return found or (str(local) if local.exists() else None)


def _missing():
    """What the hub test needs besides Chromium and this machine lacks, or None."""
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "jupyterhub is not installed (pip install jupyterhub)"
    if _chp() is None:
        return "configurable-http-proxy is not installed (npm install -g configurable-http-proxy)"
    return None


browser_test("live view on a hub", _missing)

from playwright.sync_api import sync_playwright  # noqa: E402


def docs_config():
    """The hub configuration docs/hub.md gives for the live view, as written there."""
    page = (ROOT / "docs" / "hub.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```", page, re.M | re.S) if "course_lib.live" in b]
    assert len(blocks) == 1, "docs/hub.md should show the hub's configuration in one block"
    return blocks[0]


def _set(config, name, value):
    """`config` with the value of its line `name = ...` replaced (the settings the guide asks for)."""
    found = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", config, count=1, flags=re.M)
    assert found[1] == 1, f"docs/hub.md's configuration has no line '{name} = ...'"
    return found[0]


def _get(url, token=None, data=None, method=None):
    """(status, body) of an HTTP request, with a hub token when given."""
    headers = {"Authorization": f"token {token}"} if token else {}
    if data is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(data).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return None, str(e)


def _until(what, check, seconds=WAIT_S, every=0.25, shown=None):
    """check()'s first true value, asked every `every` s; AssertionError after `seconds`, saying
    what `shown()` gives then."""
    end = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting {seconds} s for {what}"
                                 + (f"; it shows:\n{shown()}" if shown else ""))
        time.sleep(every)


class Hub:
    """A JupyterHub in `folder` with the live view turned on; `start()`, `stop()` and again."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.port, self.hub_port, self.api_port, self.live_port = (free_port() for _ in range(4))
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = uuid.uuid4().hex            # the test's own service, which drives the hub
        self.db = self.folder / "course-live.sqlite"
        live = docs_config()
        for name, value in (("live_python", sys.executable), ("live_db", str(self.db)),
                            ("live_port", self.live_port), ("instructors", ["teacher"])):
            live = _set(live, name, value)
        homes = self.folder / "home"
        singleuser = str(Path(sys.executable).with_name("jupyterhub-singleuser"))
        (self.folder / "jupyterhub_config.py").write_text(f"""
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {self.port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.api_port}"
c.ConfigurableHTTPProxy.command = [{_chp()!r}]
c.JupyterHub.db_url = "sqlite:///{self.folder / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = "{self.folder / 'cookie_secret'}"
c.JupyterHub.cleanup_servers = False        # the learners' servers outlive a hub restart
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {PASSWORD!r}
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{homes}/{{username}}"
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = {["--allow-root"] if os.getuid() == 0 else []!r}   # root: in a container
c.Spawner.start_timeout = {WAIT_S}
c.LocalProcessSpawner.interrupt_timeout = 1   # a server stops on SIGTERM at once
c.Spawner.http_timeout = {WAIT_S}
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0, "slow_stop_timeout": 0}}   # all at once
c.Spawner.environment = {{"OMP_NUM_THREADS": "1", "COURSE_DEVICE": "cpu", "MPLBACKEND": "agg"}}
c.JupyterHub.services = [{{"name": "driver", "api_token": {self.token!r}}}]
c.JupyterHub.load_roles = [{{"name": "driver", "services": ["driver"], "scopes": [
    "admin:users", "admin:servers", "admin:server_state", "access:servers", "list:users",
    "read:users"]}}]
""" + live, encoding="utf-8")
        self.proc = None

    def start(self):
        log = (self.folder / "hub.log").open("a")
        self.proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", "jupyterhub_config.py"],
                                     cwd=self.folder, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        _until("the hub", lambda: self.api("GET", "/")[0] == 200 or self._died())
        _until("the live view", lambda: _get(f"{self.url}/services/{SERVICE}/live.css")[0] == 200
               or self._died())

    def _died(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"the hub stopped:\n{(self.folder / 'hub.log').read_text()[-3000:]}")
        return False

    def stop(self):
        """Stop the hub, its proxy and its services (the learners' servers run on)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def stop_servers(self):
        """Stop every user's server, all at once, and wait until the hub says they have stopped."""
        status, body = self.api("GET", "/users")
        names = [u["name"] for u in json.loads(body)] if status == 200 else []
        for name in names:
            self.api("DELETE", f"/users/{name}/server")
        for name in names:
            _until(f"{name}'s server to stop", lambda: not json.loads(self.api("GET", f"/users/{name}")[1])
                   ["servers"], seconds=60)

    def api(self, method, path, data=None):
        return _get(f"{self.url}/hub/api{path}", self.token, data, method)


def run_cell(server, token, kernel, code):
    """Run `code` in a kernel of a learner's server through its websocket; (stdout, error) where
    error is (ename, evalue) or None. `kernel` is the kernel's id."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    async def run():
        ws_url = server.replace("http", "ws", 1) + f"api/kernels/{kernel}/channels"
        ws = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {token}"},
                                                 connect_timeout=WAIT_S))
        msg_id = uuid.uuid4().hex
        ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
        out, error, idle, replied = [], None, False, False
        while not (idle and replied):
            message = await asyncio.wait_for(ws.read_message(), WAIT_S)
            if message is None:
                raise AssertionError("the kernel's websocket closed")
            msg = json.loads(message)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                error = (msg["content"]["ename"], msg["content"]["evalue"])
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
            elif kind == "execute_reply":
                replied = True
        ws.close()
        return "".join(out), error

    with ThreadPoolExecutor(1) as thread:   # a loop of its own, beside Playwright's
        return thread.submit(asyncio.run, run()).result()


def lesson00(bodies, hints=()):
    """Lesson 00's exercise and check cells from exercises/, with `bodies` filled in, preceded
    by the hint() calls in `hints` (exercise names): the cells a learner runs, as one block."""
    from course_lib.exercises import exercises
    from notebook_tools import fill, read
    nb = fill(read(ROOT / "exercises" / "00_start_here.ipynb"), bodies)
    cells = ["import torch\nimport torch.nn.functional as F\nfrom course_lib.checks import hint, "
             "check_next_byte_loss, check_next_token_targets, check_text_to_ids"]
    cells += [f"hint({name!r})" for name in hints]
    for name, i, _ in exercises(nb):
        if name in bodies:
            cells += [nb.cells[i].source, nb.cells[i + 1].source]
    # each check cell on its own, as a learner runs them: one that fails stops only itself
    return cells


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    hub = Hub(tmp_path_factory.mktemp("hub"))
    try:
        hub.start()
        yield hub
    finally:
        hub.stop_servers()      # the hub stops the servers and their kernels...
        hub.stop()
        for pidfile in (hub.folder / "home").glob("*/.server-pid"):   # ...or, if it cannot, this
            try:
                os.kill(int(pidfile.read_text()), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


@pytest.fixture(scope="module")
def learners(hub):
    """Each learner's server started, a kernel of it, and what their cells printed."""
    from answers_00 import REFERENCE, WRONG
    wrong = {w.name: w.body for w in WRONG}
    work = {
        "ada": (dict(REFERENCE), ()),
        "bob": ({**REFERENCE, "next_token_targets": wrong["unshifted targets"],
                 "next_byte_loss": wrong["no minus sign"]}, ()),
        "cy": ({"text_to_ids": REFERENCE["text_to_ids"],
                "next_token_targets": wrong["unshifted targets"]}, ("next_token_targets",)),
    }
    assert hub.api("POST", "/users", {"usernames": list(LEARNERS)})[0] in (201, 409)
    for name in LEARNERS:
        assert hub.api("POST", f"/users/{name}/server")[0] in (201, 202)
    found = {}
    for name in LEARNERS:
        _until(f"{name}'s server", lambda: json.loads(hub.api("GET", f"/users/{name}")[1])
               ["servers"].get("", {}).get("ready"))
        server = f"{hub.url}/user/{name}/"
        pid = json.loads(hub.api("GET", f"/users/{name}")[1])["servers"][""]["state"].get("pid")
        if pid:   # for the fixture's clean-up, should the hub be gone
            (hub.folder / "home" / name / ".server-pid").write_text(str(pid))
        status, body = _get(f"{server}api/kernels", hub.token, {"name": "python3"}, "POST")
        assert status == 201, body
        found[name] = {"server": server, "kernel": json.loads(body)["id"]}

    def work_through(name):   # one learner's cells, in order; the three learners side by side
        learner = found[name]
        learner["outputs"] = [run_cell(learner["server"], hub.token, learner["kernel"], cell)
                              for cell in lesson00(*work[name])]
        learner["token"] = run_cell(learner["server"], hub.token, learner["kernel"],
                                    "import os; print(os.environ['JUPYTERHUB_API_TOKEN'])")[0].strip()

    with ThreadPoolExecutor(len(LEARNERS)) as pool:
        list(pool.map(work_through, LEARNERS))
    return found


def _last(hub, learner):
    """What became of the learner's latest event, said by their own kernel."""
    return run_cell(learner["server"], hub.token, learner["kernel"],
                    "from course_lib.checks.report import last\nprint(last())")[0].strip()


def test_learners_checks_run_in_their_kernels_and_reach_the_view(hub, learners):
    ada, bob, cy = (learners[n] for n in LEARNERS)
    assert all(error is None for _, error in ada["outputs"])
    assert sum("checks passed" in out for out, _ in ada["outputs"]) == 3
    bob_errors = [e for _, e in bob["outputs"] if e]
    assert [e[0] for e in bob_errors] == ["AssertionError", "AssertionError"]
    assert "Exercise 'next_token_targets'" in bob_errors[0][1]
    assert "Hint 1 of" in cy["outputs"][1][0]
    for learner in learners.values():
        said = _until("the last event sent", lambda: (lambda last: last.startswith("sent:") and last)(
            _last(hub, learner)), seconds=SHOWN_S)
        assert said.endswith("(the live view answered 201)")


def test_the_instructor_sees_each_state_in_chromium_and_a_learner_gets_403(hub, learners, tmp_path):
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    view = f"{hub.url}/services/{SERVICE}/"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            teacher = _signed_in(browser, hub, "teacher")
            page = teacher.new_page()
            page.goto(view)
            expected = {"ada": ["✓", "✓", "✓"], "bob": ["✓", "✗", "✗"], "cy": ["✓", "✗h1", ""]}
            grid = _until("every learner's state in the grid", lambda: (
                _grid(page) if _grid(page) == expected else None), seconds=SHOWN_S, every=0.5,
                shown=lambda: f"{page.url}\n{page.inner_text('body')}")
            assert grid == expected
            stuck = page.inner_text("#stuck")
            assert re.search(r"00 next_token_targets\s+2 failing now, 1 passed", stuck), stuck
            page.screenshot(path=str(ARTEFACTS / "view.png"))

            # a learner: 403 for the page in their browser, and for the state with their token
            learner = _signed_in(browser, hub, "ada")
            assert learner.new_page().goto(view).status == 403
            assert _get(f"{view}state", learners["ada"]["token"])[0] == 403
            assert _get(f"{view}session.csv", learners["ada"]["token"])[0] == 403

            # a forged event, a made-up token, and text that would be HTML
            events = f"http://127.0.0.1:{hub.live_port}/services/{SERVICE}/api/events"
            said = run_cell(learners["ada"]["server"], hub.token, learners["ada"]["kernel"], f"""
import os
from course_lib.checks.report import post
forged = {{"lesson": "00", "exercise": "text_to_ids", "passed": False, "kind": "wrong",
          "reason": "forged", "hints": 0, "solution": False, "learner": "bob"}}
print(post({events!r}, os.environ["JUPYTERHUB_API_TOKEN"], forged))
del forged["learner"]
print(post({events!r}, "a-made-up-token", forged))
forged.update(exercise="next_byte_loss", reason={HOSTILE!r})
print(post({events!r}, os.environ["JUPYTERHUB_API_TOKEN"], forged))
""")
            lines = said[0].splitlines()
            assert "(400: unknown field(s) 'learner'" in lines[0], said
            assert lines[1].endswith("(403: the hub does not know this token as a user's)"), said
            assert lines[2].startswith("sent:"), said
            _until("the event's text on the page", lambda: HOSTILE in page.inner_text("#stuck"),
                   seconds=SHOWN_S, every=0.5)
            assert page.evaluate("document.querySelectorAll('main img, main script, main b').length") == 0
            assert page.title() == "The lab, live"
            assert _grid(page)["bob"] == expected["bob"]     # the forgery changed nothing of bob's

            # the hub and its service restarted: the same session, and the next check joins it
            before = page.inner_text("#grid")
            session = _csv(teacher, view)[1][0]
            hub.stop()
            hub.start()
            page.reload()
            _until("the grid after the restart", lambda: page.inner_text("#grid") == before,
                   seconds=SHOWN_S, every=0.5)
            run_cell(learners["cy"]["server"], hub.token, learners["cy"]["kernel"],
                     "def next_token_targets(ids):\n    return ids[:-1], ids[1:]\n"
                     "check_next_token_targets(next_token_targets)")
            _until("cy's pass after the restart", lambda: _grid(page)["cy"][1] == "✓h1",
                   seconds=SHOWN_S, every=0.5)
            rows = _csv(teacher, view)
            assert {row[0] for row in rows[1:]} == {session}
            assert rows[-1][2:6] == ["cy", "00", "next_token_targets", "passed"]
            assert sum(row[2] == "ada" for row in rows[1:]) == 4    # 3 checks, 1 event of text

            # a new lab: a new session, empty but for the learners whose servers run
            page.click("text=Start a new session")
            _until("the new session", lambda: f"session {int(session) + 1} since" in
                   page.inner_text("#status"), seconds=SHOWN_S, every=0.5)
            assert _grid(page) == {name: [] for name in LEARNERS}
            assert f"session {session} (" in page.inner_text("#sessions")
            assert len(_csv(teacher, view)) == 1                    # the header alone
        finally:
            browser.close()


HOSTILE = '<img src=x onerror="document.title=1"><b>bold</b>'


def _signed_in(browser, hub, name):
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login?next=%2Fhub%2Fhome")    # home, not a server spawned for them
    page.fill("#username_input", name)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")
    page.wait_for_url(re.compile(r".*/hub/home"), timeout=WAIT_S * 1000)
    page.close()
    return context


def _grid(page):
    """{learner: [cell text, ...]} of the view's grid, as drawn."""
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#grid tbody tr')]
        .map(tr => [tr.querySelector('th').textContent,
                    [...tr.querySelectorAll('td')].map(td => td.textContent)]))""")


def _csv(context, view):
    import csv
    import io
    reply = context.request.get(f"{view}session.csv")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(reply.text())))
