"""A real JupyterHub for tests, set up as a classroom hub on one machine is (The Littlest
JupyterHub's way): learners are Unix users, each learner's server runs as that user from a
shared environment with the course installed from its wheel (no -e), nbgitpuller hands the
course out from a git repository, and the idle culler stops idle servers.

What it starts: jupyterhub (from PyPI) with configurable-http-proxy (from npm, run by Node.js),
a password authenticator (DummyAuthenticator: every learner's password is PASSWORD), Unix users
made for the test (useradd, as TLJH does; removed afterwards), LocalProcessSpawner, a bare git
repository of the working tree, the idle culler as a managed service, and a service token with
admin scopes for the test itself. Everything runs on 127.0.0.1 and is shut down at the end:
servers, hub, proxy, services, every process of the test's users, the users and their homes.

`running_hub(HubConfig(...))` is the one way the tests start a hub; what it starts beyond the
default (learners, the culler's limits, managed services and roles, lines of configuration) is
the HubConfig's:

    with running_hub(HubConfig(learners=("ada", "bob"), extra_config=...)) as hub:
        hub.url, hub.learners[0].name, hub.api("GET", "/users"), hub.login(hub.learners[0])

tests/hub_classroom.py runs the classroom that tests/test_hub.py and tests/test_live_hub.py share
(one hub, with the live view turned on), as session fixtures; Browser and Kernel (below) act as a
learner in a browser.

It needs root (to make Unix users), jupyterhub, nbgitpuller and jupyterhub-idle-culler in this
Python (binder/hub.txt), configurable-http-proxy (found on PATH, in $CONFIGURABLE_HTTP_PROXY or
in .venv/node/; `bash .ci/hub-setup` installs both), git and Node.js; `missing()` says which of
them is not there.
"""
import contextlib
import dataclasses
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from course_wheel import ROOT, build_wheel, copy_tree, install_wheel

PASSWORD = "course-hub-test"
# The test's Unix users carry this comment and the test's process id, so that a run can tell the
# leftovers of a run that was killed from anybody else's users, whom it never touches.
GECOS = "course hub test"
READY_TIMEOUT = 180   # seconds for the hub, or a learner's server, to be ready on a busy machine
CHP_HELP = "bash .ci/hub-setup (npm install configurable-http-proxy into .venv/node)"


@dataclasses.dataclass
class HubConfig:
    """What a hub has beyond the default: its learners, the idle culler's limits, extra managed
    services and roles (JupyterHub's `services` and `load_roles` entries), and lines of
    jupyterhub_config.py appended last (e.g. `c.Spawner.environment["X"] = "1"` for every
    learner's server and kernels; they may read the fixture's settings, `cfg`: cfg["python"] is
    the learners' Python, cfg["folder"] the hub's folder, cfg["env"] what that Python needs in
    its environment). `limits` sets a learner's Spawner mem_limit /
    cpu_limit (what a hub's spawner passes as MEM_LIMIT / CPU_LIMIT), e.g. {"cy": {"mem_limit": "64M"}};
    the learners' hub and Unix names get a tag of the run's own (ada-1a2b), so that two runs at
    once never share a user.
    """
    learners: tuple = ("ada", "bob", "cy")
    cull_timeout: int = 20           # seconds idle before the culler stops a server
    cull_every: int = 2              # seconds between the culler's looks
    services: list = dataclasses.field(default_factory=list)
    roles: list = dataclasses.field(default_factory=list)
    limits: dict = dataclasses.field(default_factory=dict)
    extra_config: str = ""


@dataclasses.dataclass
class Learner:
    name: str        # the hub's user name, and the Unix user its server runs as
    home: Path
    password: str = PASSWORD


@dataclasses.dataclass
class Hub:
    url: str                 # the proxy's public address: http://127.0.0.1:PORT
    api_url: str             # url + /hub/api
    token: str               # the test's own service token (admin scopes)
    learners: list
    repo: str                # the course's git repository (git://127.0.0.1:PORT/course.git)
    folder: Path             # the hub's working folder (config, database, log)
    python: str              # the learners' Python: the shared environment
    process: subprocess.Popen = None

    def learner(self, name):
        """The learner called `name` in the HubConfig (ada), whose hub name has the run's tag (ada-1a2b)."""
        return next(learner for learner in self.learners if learner.name.rsplit("-", 1)[0] == name)

    def api(self, method, path, token=None, **kwargs):
        """A request to the hub's REST API (path after /hub/api), with the test's token by default."""
        import requests
        headers = {"Authorization": f"token {token or self.token}", **kwargs.pop("headers", {})}
        return requests.request(method, self.api_url + path, headers=headers, timeout=60, **kwargs)

    def token_for(self, learner, scopes=None, note="test"):
        """A new API token of the learner's own (with the learner's scopes, or those given)."""
        body = {"note": note, **({"scopes": scopes} if scopes is not None else {})}
        made = self.api("POST", f"/users/{learner.name}/tokens", json=body)
        assert made.status_code == 201, f"no token for {learner.name}: {made.status_code} {made.text}"
        return made.json()["token"]

    def login(self, learner):
        """A requests.Session logged in through the hub's login form, as a browser is."""
        import requests
        session = requests.Session()
        page = session.get(f"{self.url}/hub/login", timeout=60)
        page.raise_for_status()
        done = session.post(f"{self.url}/hub/login?next=", timeout=60, allow_redirects=False,
                            data={"username": learner.name, "password": learner.password,
                                  "_xsrf": session.cookies.get("_xsrf", "")})
        assert done.status_code == 302, f"{learner.name}'s login failed ({done.status_code}):\n{done.text[:2000]}"
        return session

    def server(self, name):
        """The learner's default server as the hub's API reports it, or None when it is stopped."""
        found = self.api("GET", f"/users/{name}")
        found.raise_for_status()
        return found.json().get("servers", {}).get("")

    def wait_ready(self, name, timeout=READY_TIMEOUT):
        """Wait until the learner's server is ready; its API record."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.server(name)
            if server and server.get("ready"):
                return server
            if server is None and self.spawn_failed(name):
                break
            time.sleep(0.5)
        raise AssertionError(f"{name}'s server was not ready in {timeout} s; the hub's log:\n"
                             f"{self.log()[-6000:]}")

    def spawn_failed(self, name):
        return f"Unhandled error starting {name}'s server" in self.log()

    def log(self):
        return (self.folder / "hub.log").read_text(errors="replace")

    def restart(self):
        """Stop the hub and start it again on the same configuration and database: the proxy,
        the managed services and the learners' servers stop with it (cleanup_servers: the hub
        that started a server reaps it) and the first two start anew; tokens, cookies and the
        learners' homes are kept."""
        end_hub_process(self)
        launch(self)


# ------------------------------------------------------------------ what the hub needs

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def configurable_http_proxy():
    """The configurable-http-proxy command, or None."""
    for candidate in (os.environ.get("CONFIGURABLE_HTTP_PROXY"),
                      shutil.which("configurable-http-proxy"),
                      str(ROOT / ".venv" / "node" / "node_modules" / ".bin" / "configurable-http-proxy")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def missing():
    """Why the hub cannot run here, or None."""
    if os.geteuid() != 0:
        return "the hub test makes Unix users for its learners (as TLJH does): it needs root, as CI has"
    for tool in ("useradd", "userdel", "git", "node"):
        if shutil.which(tool) is None:
            return f"the hub test needs {tool}"
    for module in ("jupyterhub", "nbgitpuller", "jupyterhub_idle_culler"):
        try:
            __import__(module)
        except ImportError:
            return f"the hub test needs {module}: pip install -r binder/hub.txt (or bash .ci/hub-setup)"
    if configurable_http_proxy() is None:
        return f"the hub test needs configurable-http-proxy: {CHP_HELP}"
    return None


def _readable_by_others(path):
    """Whether a user who is neither root nor in root's group can reach `path`."""
    path = Path(path).resolve()
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])


def reachable(path, folder):
    """`path` where the learners can reach it; else a copy of it in `folder`, made of hard links
    (no bytes copied) where the file system allows, for a checkout or a Python that lies where
    other users cannot go (pyenv's Pythons under /root)."""
    path = Path(path)
    if _readable_by_others(path):
        return path
    copy = folder / "reachable" / path.relative_to(path.anchor)
    copy.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["cp", "-al", str(path), str(copy)], capture_output=True, text=True)
    if done.returncode == 0:
        # The folders are the copy's own; the files are the originals' (their modes are left alone).
        subprocess.run(["find", str(copy), "-type", "d", "-exec", "chmod", "a+rx", "{}", "+"], check=True)
    else:                        # another file system: a real copy (slower: about a GB for Python)
        shutil.rmtree(copy, ignore_errors=True)
        subprocess.run(["cp", "-a", str(path), str(copy)], check=True, capture_output=True)
        subprocess.run(["chmod", "-R", "a+rX", str(copy)], check=True)
    return copy


def shared_environment(folder, wheel):
    """The learners' Python, as a hub image has it: a virtual environment with the course
    installed from its wheel (no -e) and, beneath it, this environment's packages (torch,
    JupyterLab, jupyterhub, nbgitpuller, ...) but not its editable course_lib.
    (its python, the environment variables it needs)."""
    base = reachable(sys.base_prefix, folder)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    # A Python built with a shared libpython finds it through its RUNPATH, which names the
    # original place; a copy's own lib/ comes first on LD_LIBRARY_PATH.
    env = {"LD_LIBRARY_PATH": str(base / "lib")} if base != Path(sys.base_prefix) else {}
    image = folder / "image"
    subprocess.run([str(base / "bin" / version), "-m", "venv", "--without-pip", str(image)],
                   check=True, env={**os.environ, **env})
    site = Path(sysconfig.get_path("purelib", vars={"base": str(image), "platbase": str(image)}))
    install_wheel(wheel, site)
    # A path line: the packages go on the path, but their .pth files (the editable course_lib's
    # finder among them) are not run, and the wheel's course_lib, earlier on the path, wins.
    packages = reachable(sysconfig.get_path("purelib"), folder)
    (site / "course-environment.pth").write_text(f"{packages}\n", encoding="utf-8")
    # JupyterLab's assets and the server extensions' settings (jupyterlab, nbgitpuller) as the
    # image has them beside its Python.
    for part in ("share/jupyter", "etc/jupyter"):
        if (Path(sys.prefix) / part).is_dir():
            (image / part).parent.mkdir(parents=True, exist_ok=True)
            (image / part).symlink_to(reachable(Path(sys.prefix) / part, folder))
    subprocess.run(["chmod", "-R", "a+rX", str(image)], check=True)
    return image / "bin" / "python", env


def course_repository(folder):
    """A bare git repository of the working tree (uncommitted changes included), served on
    127.0.0.1 by git daemon: what nbgitpuller clones, as it would clone the course from GitHub.
    (Learners could not clone it by its path: git refuses a repository owned by another user.)
    (its URL, git daemon's process)."""
    src = copy_tree(folder / "course-src")
    git = ["git", "-c", "user.name=course", "-c", "user.email=course@localhost", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the course"]):
        subprocess.run([*git, *args], cwd=src, check=True, capture_output=True)
    bare = folder / "course.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True, capture_output=True)
    shutil.rmtree(src)
    subprocess.run(["chmod", "-R", "a+rX", str(bare)], check=True)
    port = _free_port()
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
                               f"--base-path={folder}", "--export-all", "--informative-errors", str(bare)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"git://127.0.0.1:{port}/{bare.name}"
    deadline = time.monotonic() + READY_TIMEOUT
    while subprocess.run(["git", "ls-remote", "--heads", url], capture_output=True).returncode != 0:
        if daemon.poll() is not None or time.monotonic() > deadline:
            daemon.kill()
            raise AssertionError(f"git daemon did not serve {url}")
        time.sleep(0.2)
    return url, daemon


def _processes_of(uid):
    """The ids of the processes running as `uid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except FileNotFoundError:
                pass
    return found


def _stop_processes_of(uid, grace=5.0):
    """Stop every process of a test user: TERM, then KILL what is left after `grace` s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _processes_of(uid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while _processes_of(uid) and time.monotonic() < deadline:
            time.sleep(0.1)


def remove_user(user):
    """Remove a user the hub test made, after stopping its processes."""
    try:
        info = pwd.getpwnam(user)
    except KeyError:
        return
    if not info.pw_gecos.startswith(GECOS):
        raise RuntimeError(f"user {user} exists and is not the hub test's; not touching it")
    _stop_processes_of(info.pw_uid)
    subprocess.run(["userdel", "--remove", user], capture_output=True)


def remove_leftovers():
    """Remove the users of hub tests whose process is gone (a run that was killed)."""
    for info in pwd.getpwall():
        if info.pw_gecos.startswith(GECOS + " "):
            pid = info.pw_gecos.rsplit(" ", 1)[-1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                remove_user(info.pw_name)


def add_user(user, home):
    """A Unix user for a learner, as TLJH makes one (useradd), marked as this run's."""
    subprocess.run(["useradd", "--create-home", "--home-dir", str(home), "--comment",
                    f"{GECOS} {os.getpid()}", "--shell", "/bin/bash", "--user-group", user],
                   check=True, capture_output=True)


# ------------------------------------------------------------------ the hub

CONFIG = """\
# jupyterhub_config.py written by tests/hub_fixture.py
import json
cfg = json.loads({settings!r})
c.JupyterHub.bind_url = cfg["url"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = cfg["hub_port"]
c.ConfigurableHTTPProxy.command = [cfg["proxy"]]
c.ConfigurableHTTPProxy.api_url = cfg["proxy_api"]
c.ConfigurableHTTPProxy.auth_token = cfg["proxy_token"]
c.JupyterHub.db_url = "sqlite:///" + cfg["folder"] + "/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = cfg["folder"] + "/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = cfg["folder"] + "/jupyterhub.pid"
c.JupyterHub.cleanup_servers = True
c.JupyterHub.last_activity_interval = 2          # read the proxy's activity every 2 s
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = cfg["password"]
c.Authenticator.allowed_users = set(cfg["learners"])
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [cfg["python"], "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = cfg["timeout"]
c.Spawner.http_timeout = cfg["timeout"]
c.Spawner.environment = {{"JUPYTERHUB_ACTIVITY_INTERVAL": "2", **cfg["env"]}}


def _limits(spawner):
    for key, value in cfg["limits"].get(spawner.user.name.rsplit("-", 1)[0], {{}}).items():
        setattr(spawner, key, value)

c.Spawner.pre_spawn_hook = _limits
c.JupyterHub.services = [
    {{"name": "hub-test", "api_token": cfg["token"]}},
    {{"name": "idle-culler", "command": [cfg["hub_python"], "-m", "jupyterhub_idle_culler",
                                          "--timeout=%d" % cfg["cull_timeout"],
                                          "--cull-every=%d" % cfg["cull_every"]]}},
] + cfg["services"]
c.JupyterHub.load_roles = [
    {{"name": "hub-test", "services": ["hub-test"],
      "scopes": ["admin:users", "admin:servers", "tokens", "read:hub", "admin:auth_state"]}},
    {{"name": "idle-culler", "services": ["idle-culler"],
      "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}},
] + cfg["roles"]
"""


def make_learners(config, folder):
    """The config's learners as Unix users with homes in `folder`/home, under names of this
    run's own (another run may be going on beside it): ada-1a2b for ada."""
    tag = secrets.token_hex(2)
    learners = [Learner(f"{name}-{tag}", folder / "home" / name) for name in config.learners]
    (folder / "home").mkdir()
    os.chmod(folder / "home", 0o755)
    remove_leftovers()
    for learner in learners:
        add_user(learner.name, learner.home)
    return learners


def start_hub(config, folder, python, env, repo, learners):
    """Start jupyterhub with `config` in `folder`; the Hub, once its API answers."""
    port = _free_port()
    token = secrets.token_hex(16)
    settings = {
        "url": f"http://127.0.0.1:{port}", "hub_port": _free_port(),
        "proxy": configurable_http_proxy(), "proxy_api": f"http://127.0.0.1:{_free_port()}",
        "proxy_token": secrets.token_hex(16), "folder": str(folder), "password": PASSWORD,
        "learners": [learner.name for learner in learners],
        "python": str(python), "env": env, "hub_python": sys.executable, "timeout": READY_TIMEOUT,
        "token": token, "cull_timeout": config.cull_timeout, "cull_every": config.cull_every,
        "services": config.services, "roles": config.roles, "limits": config.limits,
    }
    text = CONFIG.format(settings=json.dumps(settings)) + config.extra_config
    (folder / "jupyterhub_config.py").write_text(text, encoding="utf-8")
    hub = Hub(url=settings["url"], api_url=settings["url"] + "/hub/api", token=token,
              learners=learners, repo=repo, folder=folder, python=str(python))
    launch(hub)
    return hub


def launch(hub):
    """Start jupyterhub on the configuration in hub.folder (hub.process); return once its API answers."""
    with open(hub.folder / "hub.log", "ab") as log:
        hub.process = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", "jupyterhub_config.py"],
                                       cwd=hub.folder, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
    deadline = time.monotonic() + READY_TIMEOUT
    import requests
    while time.monotonic() < deadline:
        if hub.process.poll() is not None:
            raise AssertionError(f"jupyterhub exited with {hub.process.returncode}:\n{hub.log()[-6000:]}")
        try:
            if hub.api("GET", "/").status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"jupyterhub did not answer in {READY_TIMEOUT} s:\n{hub.log()[-6000:]}")


def _descendants(pid):
    """{pid: start time} of every process under `pid` (the proxy and the managed services run in
    sessions of their own, out of reach of the hub's process group)."""
    parents, started = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            parents[int(entry.name)], started[int(entry.name)] = int(fields[1]), fields[19]
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found[child] = started[child]
                frontier.append(child)
    return found


def _kill_if_same(pid, started):
    """SIGKILL `pid` if it is still the process that started at `started` (not a reused id)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        if text[text.rindex(")") + 2:].split()[19] == started:
            os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


def end_hub_process(hub, under=None):
    """SIGTERM the hub, which stops its proxy, managed services and servers, then SIGKILL
    whatever of its processes (and of `under`) outlived it."""
    under = {**(under or {}), **_descendants(hub.process.pid)}
    if hub.process.poll() is None:
        hub.process.send_signal(signal.SIGTERM)
        try:
            hub.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            hub.process.kill()
            hub.process.wait()
    for pid, started in under.items():
        _kill_if_same(pid, started)


def stop_hub(hub):
    """Stop every learner's server, then the hub and whatever of its processes outlived it; the
    test's users' processes are stopped with the users (remove_user)."""
    under = _descendants(hub.process.pid)
    if hub.process.poll() is None:
        for learner in hub.learners:
            try:
                hub.api("DELETE", f"/users/{learner.name}/server")
            except Exception:  # the hub is going anyway; the users' processes are stopped later
                pass
    end_hub_process(hub, under)


@contextlib.contextmanager
def running_hub(config):
    """A running hub (a Hub) for the HubConfig, shut down with everything it started on exit."""
    folder = Path(tempfile.mkdtemp(prefix="course-hub-"))
    os.chmod(folder, 0o755)
    hub, learners, daemon = None, [], None
    try:
        python, env = shared_environment(folder, build_wheel(folder / "build"))
        repo, daemon = course_repository(folder)
        learners = make_learners(config, folder)
        hub = start_hub(config, folder, python, env, repo, learners)
        yield hub
    finally:
        if hub is not None:
            stop_hub(hub)
        if daemon is not None:
            daemon.terminate()
            daemon.wait()
        for learner in learners:
            remove_user(learner.name)
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------ a learner's browser

class Browser:
    """A learner in a browser: logged in through the hub's form, then on their own server its
    pages, its REST API and a kernel's websocket, with the cookies and XSRF token a browser
    sends (never a token of the hub's)."""

    def __init__(self, hub, learner):
        self.hub, self.learner = hub, learner
        self.session = hub.login(learner)
        self.base = f"{hub.url}/user/{learner.name}/"

    def spawn(self):
        """Start the learner's server from the hub's page, as the Start button does; wait for it."""
        self.session.get(f"{self.hub.url}/hub/spawn", timeout=60)
        self.hub.wait_ready(self.learner.name)
        self.get(self.base + "lab").raise_for_status()     # signs in to the server (OAuth)

    def get(self, url, **kwargs):
        return self.session.get(url, timeout=kwargs.pop("timeout", 120), **kwargs)

    def xsrf(self):
        """The server's XSRF token, from the cookie it set on a page (JupyterLab sends it back)."""
        path = self.base[len(self.hub.url):].rstrip("/")
        for cookie in self.session.cookies:
            if cookie.name == "_xsrf" and cookie.path.rstrip("/") == path:
                return cookie.value
        return ""

    def api(self, method, path, **kwargs):
        """A request to the learner's server's REST API (path after /user/NAME/api/)."""
        headers = {"X-XSRFToken": self.xsrf(), **kwargs.pop("headers", {})}
        return self.session.request(method, self.base + "api/" + path, headers=headers,
                                    timeout=120, **kwargs)

    def pull(self, link):
        """Follow an nbgitpuller link as a browser does: its page, then the pull its script
        starts (the event stream of /git-pull/api), then the page it sends the learner to.
        (the pull's events, the final page's response)."""
        import html
        import re
        from urllib.parse import unquote, urlencode
        page = self.get(link)
        assert page.status_code == 200, f"the link led to {page.status_code}: {page.url}\n{page.text[:2000]}"
        data = {k: unquote(html.unescape(v)) for k, v in re.findall(r'data-([a-z-]+)="([^"]*)"', page.text)}
        query = {"_xsrf": data.get("xsrf", ""), "repo": data["repo"], "targetpath": data["targetpath"]}
        for key in ("depth", "branch"):
            if key in data:
                query[key] = data[key]
        events = []
        with self.session.get(self.hub.url + data["base-url"] + "git-pull/api?" + urlencode(query),
                              stream=True, timeout=300) as stream:
            for line in stream.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                    if events[-1].get("phase") in ("finished", "error"):
                        break
        return events, self.get(self.hub.url + data["base-url"] + data["path"])

    def kernel(self, path):
        """A kernel for the notebook at `path` (relative to the learner's home), as JupyterLab
        starts one when the notebook is opened."""
        return Kernel(self, path)


class Kernel:
    """A kernel of a learner's server, driven over its websocket as JupyterLab drives it."""

    def __init__(self, browser, path):
        import asyncio
        from tornado.httpclient import HTTPRequest
        self.browser = browser
        made = browser.api("POST", "sessions", json={"path": path, "name": Path(path).name,
                                                      "type": "notebook", "kernel": {"name": "python3"}})
        assert made.status_code == 201, f"no kernel for {path}: {made.status_code} {made.text[:2000]}"
        self.session = made.json()
        self.id = self.session["kernel"]["id"]
        self.client_session = secrets.token_hex(8)
        cookies = "; ".join(f"{c.name}={c.value}" for c in browser.session.cookies)
        url = (browser.base.replace("http://", "ws://", 1)
               + f"api/kernels/{self.id}/channels?session_id={self.client_session}")
        self.loop = asyncio.new_event_loop()
        request = HTTPRequest(url, headers={"Cookie": cookies, "X-XSRFToken": browser.xsrf()},
                              request_timeout=120, connect_timeout=120)
        self.ws = self.loop.run_until_complete(self._connect(request))

    async def _connect(self, request):
        from tornado.websocket import websocket_connect
        return await websocket_connect(request)

    def run(self, code, timeout=600):
        """Execute `code`; its outputs as nbformat outputs (stream, execute_result, error, ...)."""
        return self.loop.run_until_complete(self._run(code, timeout))

    async def _run(self, code, timeout):
        import asyncio
        import uuid
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "username": self.browser.learner.name, "session": self.client_session,
                  "msg_type": "execute_request", "version": "5.3", "date": ""}
        await self.ws.write_message(json.dumps({
            "header": header, "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        outputs, deadline = [], time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the kernel did not finish in {timeout} s:\n{code[:500]}")
            raw = await asyncio.wait_for(self.ws.read_message(), left)
            if raw is None:
                raise AssertionError(f"the kernel's websocket closed while running:\n{code[:500]}")
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id or msg.get("channel") != "iopub":
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                return outputs
            if kind == "stream":
                outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
            elif kind in ("execute_result", "display_data"):
                outputs.append({"output_type": kind, "data": content["data"]})
            elif kind == "error":
                outputs.append({"output_type": "error", "ename": content["ename"], "evalue": content["evalue"],
                                "traceback": content["traceback"]})

    def close(self):
        async def close():
            self.ws.close()
        self.loop.run_until_complete(close())
        self.loop.close()
        self.browser.api("DELETE", f"sessions/{self.session['id']}")
