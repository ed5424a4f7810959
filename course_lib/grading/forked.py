"""Inside one grading job's sandbox: a process that imports the libraries once and forks a run per notebook.

`session` starts this *zygote* in a bubblewrap sandbox, as root there with only the capabilities
to change user, kill and clear files. It runs no learner code, ever. It imports torch, numpy,
matplotlib, IPython, ipykernel, pytest and nbval, then serves one notebook at a time:

- on stdin (fd 0) `{"run": ...}`: the graded copy, its user id and limits. It forks the
  notebook's *runner*, which seals namespaces of its own (`sandbox.seal`: IPC, /tmp, /dev/shm on
  the job's capped file system, a read-only course_lib), sets hard limits, becomes the notebook's
  user (no capability left) and forks the *kernel-to-be* before it reads, from fd 3, the key
  that signs its records; then runs pytest with nbval, whose kernel is the kernel-to-be
  (`_use_kernel`): the graded kernel (`kernel.run_kernel`), holding the server's pipes (fds 5-9);
- when the runner ends, the zygote kills every process of the notebook but the one carrying the
  mark (`kernel.keep_server`) and says `serving <pid>` or `unserved <why>` on fd 4; the grader
  calls the notebook's functions (`remote`), and sends `stop`;
- on `stop` it kills every process but itself, removes the notebook's /tmp and /dev/shm, reports
  what is left (`left <hex of a JSON list>`) and `done <status> <its CPU seconds>`.

So each notebook starts from memory no other touched (a fork of the zygote), as a user id no
other has, and finds nothing of the one before.
"""
import gc
import json
import os
import random
import resource
import select
import shutil
import signal
import sys
import time

CONTROL, KEYS, STATUS = 0, 3, 4
SERVER = (5, 6, 7, 8, 9)   # the server's ends of CTL, REQ, REP, FLAG and CST (`kernel`), for the kernel
# What the zygote imports once (a notebook's own `import` then finds them loaded).
LIBRARIES = ("numpy", "torch", "matplotlib.pyplot", "IPython", "ipykernel.kernelapp",
             "ipykernel.ipkernel", "jupyter_client", "nbformat", "pytest", "nbval.plugin",
             "course_lib.grading.plugin", "course_lib.grading.kernel", "course_lib.checks")
_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36


def _prctl(option, value):
    import ctypes
    ctypes.CDLL(None).prctl(option, value, 0, 0, 0)


def _read_line(fd):
    """One line from fd, read a byte at a time so that nothing after it is taken (b'' at its end)."""
    data = b""
    while not data.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            return data
        data += byte
    return data


def _threads():
    return len(os.listdir("/proc/self/task"))


# ---------------------------------------------------------------- the kernel-to-be

class ForkedKernel:
    """The kernel-to-be as jupyter_client's provisioner sees it: what it uses of a Popen."""
    stdin = stdout = stderr = None

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        import subprocess
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("kernel", timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def _become_kernel(read_end, std_path, config):
    """In the kernel-to-be: wait for nbval's launch, then run the graded kernel (`kernel.run_kernel`,
    given `config`) as `python -m ipykernel_launcher` would run ipykernel."""
    try:
        os.setpgid(0, 0)             # its own process group, which the runner signals
    except OSError:                  # the runner made it so first
        pass
    message = b""
    while chunk := os.read(read_end, 65536):
        message += chunk
    os.close(read_end)
    if not message:  # the runner ended without a kernel
        os._exit(0)
    launch = json.loads(message)
    cmd, env = launch["cmd"], launch["env"]
    if cmd[1:3] != ["-m", "ipykernel_launcher"]:
        os._exit(3)
    _prctl(_PR_SET_DUMPABLE, 1)       # as after exec: nothing secret is in this process
    if launch.get("stderr_devnull"):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
    os.chdir(launch["cwd"] or ".")
    os.environ.clear()
    os.environ.update(env)
    # the path a fresh `python -m` would have: its folder, PYTHONPATH, then the system's
    sys.path[:] = [os.getcwd()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + std_path
    # course_lib stays imported: the zygote read it from the read-only folder that the copy's
    # copy's course_lib is a read-only mount of, so the notebook's `import course_lib` finds the same files
    sys.path_importer_cache.clear()
    import importlib
    importlib.invalidate_caches()
    random.seed()               # a fresh process's seeds, not the zygote's
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    sys.argv = [sys.modules["ipykernel"].__file__.replace("ipykernel/__init__.py", "ipykernel_launcher.py"),
                *cmd[3:]]
    code = 0
    try:
        # what ipykernel_launcher does, but for the runner's pid, which ipykernel read from the
        # environment when the zygote imported it: a kernel ends when its runner does
        del sys.path[0]
        from course_lib.grading.kernel import run_kernel
        run_kernel(sys.argv[1:], dict(config, fds=list(SERVER)),
                   parent_handle=int(env.get("JPY_PARENT_PID") or 0))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    _exit(code)


def _exit(code):
    """End a forked process as an interpreter would, without returning into its parent's code."""
    import atexit
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


# ---------------------------------------------------------------- the notebook's runner

def _run_notebook(order, std_path):
    """In the runner: limits, the notebook's user, the kernel-to-be, then the key and pytest (never returns)."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, CONTROL)            # the grader's orders are the zygote's alone
    os.close(null)
    os.close(STATUS)
    from course_lib.grading.sandbox import seal
    # IPC and mount namespaces of its own (/tmp, /dev/shm, a read-only course_lib), made as root
    missing = []
    if "scratch" in order:
        missing = seal(order["keep"], order["scratch"], order["folder"], order["lib"], shared_memory=order["quota"])
    for name, value in order["limits"].items():
        if value is not None and hasattr(resource, name):
            soft, hard = value if isinstance(value, list) else (value, value)
            resource.setrlimit(getattr(resource, name), (soft, hard))
    uid = order["uid"]
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)       # every capability goes with root
    _prctl(_PR_SET_DUMPABLE, 0)       # no process of this user may read this one's memory
    folder = order["folder"]
    os.environ.clear()               # the notebook's environment, which its kernel inherits
    os.environ.update(order["env"])
    log = os.open(order["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    for what in missing:  # a protection this machine lacks: said, never passed over in silence
        os.write(1, f"grading sandbox: this notebook ran without {what}\n".encode())
    os.chdir(folder)
    read_end, write_end = os.pipe()
    if _threads() != 1:
        raise RuntimeError("the runner has more than one thread: a fork would copy a lock held by another")
    kernel = os.fork()
    if kernel == 0:
        os.close(KEYS)
        os.close(write_end)
        _become_kernel(read_end, std_path, order["kernel"])
    try:
        os.setpgid(kernel, kernel)   # before jupyter_client reads its group, whichever runs first
    except OSError:
        pass
    os.close(read_end)
    for fd in SERVER:                 # the server's pipes are the kernel's alone
        os.close(fd)
    while True:  # the key: lines for other runs (one that ended before reading its own) are skipped
        line = _read_line(KEYS)
        if not line:
            os._exit(5)
        setup = json.loads(line)
        if setup["id"] == order["id"]:
            break
    os.close(KEYS)
    import course_lib.grading.plugin as g
    g._RECORD = setup["record"]
    _use_kernel(kernel, write_end)
    os.environ.update(PYTHONPATH=folder, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    import pytest
    # (nbval was imported by the zygote, too early for pytest to rewrite its asserts: it has none)
    status = pytest.main(["-p", "nbval.plugin", "-W", "ignore::pytest.PytestAssertRewriteWarning",
                          f"notebooks/{order['lesson']}"])
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    runner, kernel = (round(u.ru_utime + u.ru_stime, 2) for u in used)
    g._record({"cpu_seconds": round(runner + kernel, 2), "cpu_runner": runner, "cpu_kernel": kernel})
    _exit(int(status))


def _use_kernel(pid, write_end):
    """Make jupyter_client's first kernel launch start the kernel-to-be instead of a new process."""
    from jupyter_client.provisioning import local_provisioner
    real = local_provisioner.launch_kernel
    state = {"used": False}

    def launch_kernel(cmd, stdin=None, stdout=None, stderr=None, env=None, cwd=None, **kwargs):
        if state["used"]:  # a restart: a process of its own, as jupyter_client makes one
            return real(cmd, stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd, **kwargs)
        state["used"] = True
        env = dict(env or os.environ, JPY_PARENT_PID=str(os.getpid()))  # as jupyter_client's launch sets it
        message = {"cmd": list(cmd), "env": env, "cwd": cwd,
                   "stderr_devnull": getattr(stderr, "name", None) == os.devnull}
        os.write(write_end, json.dumps(message).encode())
        os.close(write_end)
        return ForkedKernel(pid)

    local_provisioner.launch_kernel = launch_kernel


# ---------------------------------------------------------------- the zygote

def _others():
    """The processes of this sandbox besides itself and bubblewrap's first (pid 1)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _clear(keep, scratch=None):
    """Kill every process but this one, remove the notebook's `scratch` (its /tmp and /dev/shm) and
    empty /tmp but for `keep` (the grader's folders, mounted there); then look: what is left
    (processes, files, IPC objects), in words, or [] when the sandbox is as empty as it began."""
    for _ in range(1000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap()
        if not _others():
            break
        time.sleep(0.005)
    from course_lib.grading.sandbox import in_kept, kept_in_tmp
    kept = kept_in_tmp(keep)
    for name in os.listdir("/tmp"):
        path = os.path.join("/tmp", name)
        if in_kept(path, kept):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    return _left(keep, scratch)


def _left(keep, scratch):
    """What a notebook left in the job's sandbox after `_clear`, in words ([] when nothing)."""
    left = [f"process {pid}" for pid in _others()]
    from course_lib.grading.sandbox import in_kept, kept_in_tmp
    kept = kept_in_tmp(keep)
    left += [f"file /tmp/{name}" for name in os.listdir("/tmp") if not in_kept(f"/tmp/{name}", kept)]
    if scratch is not None and os.path.lexists(scratch):
        left.append(f"its /tmp and /dev/shm ({scratch})")
    for kind in ("msg", "shm", "sem"):  # the job's IPC namespace (each notebook had its own)
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                left += [f"SysV {kind} {line.split()[1]}" for line in f.read().splitlines()[1:]]
        except OSError:
            pass
    for folder in ("/dev/shm", "/dev/mqueue"):
        if os.path.isdir(folder):
            left += [f"{folder}/{name}" for name in os.listdir(folder)]
    return left


def _watch_mqueue():
    """Mount the job's POSIX message queues at /dev/mqueue, so `_left` can see any there."""
    from course_lib.grading.sandbox import _mount
    try:
        os.makedirs("/dev/mqueue", exist_ok=True)
        _mount("mqueue", "/dev/mqueue", "mqueue", 2 | 4 | 8)
    except OSError:
        pass


def _verify(marked):
    """After the runner: the notebook's server alone left (`kernel.keep_server`), reaped."""
    from course_lib.grading.kernel import keep_server
    _reap()
    server, why = keep_server(_others(), marked)
    for _ in range(1000):
        _reap()
        if all(pid == server for pid in _others()):
            break
        time.sleep(0.005)
    return server, why


def _wait(runner):
    """Wait for the runner, or for the grader's `stop`; its status (a negative signal number when killed)."""
    while True:
        ready, _, _ = select.select([CONTROL], [], [], 0.2)
        if ready:
            line = _read_line(CONTROL)
            if not line or json.loads(line).get("stop"):
                os.kill(runner, signal.SIGKILL)
                return -signal.SIGKILL if line else None
        pid, status = os.waitpid(runner, os.WNOHANG)
        if pid:
            return os.waitstatus_to_exitcode(status)


def _wait_for_stop(server):
    """Wait, while the grader calls the notebook's server, for its `stop`; False when stdin ended.

    The server's end is said at once, on its own report pipe (CST): `gone <status>`."""
    pidfd = os.pidfd_open(server) if server else None
    while True:
        ready, _, _ = select.select([CONTROL] + ([pidfd] if pidfd is not None else []), [], [])
        if pidfd in ready:
            _, status = os.waitpid(server, 0)
            os.write(SERVER[4], f"gone {os.waitstatus_to_exitcode(status)}\n".encode())
            os.close(pidfd)
            pidfd = None
            continue
        line = _read_line(CONTROL)
        if not line or json.loads(line).get("stop"):
            if pidfd is not None:
                os.close(pidfd)
            return bool(line)


def serve():
    """The zygote's loop: import once, then fork a runner per `run` order until stdin ends."""
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)   # what a notebook leaves running comes back here to be reaped
    setup = json.loads(_read_line(CONTROL))
    import fcntl  # onto fds 3 and 4, whatever they were: by way of numbers above both
    given = [setup["keys"], setup["status"], *setup["server"]]
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 20) for fd in given]
    for fd in given:
        os.close(fd)
    for fd, number in zip(moved, (KEYS, STATUS, *SERVER)):
        os.dup2(fd, number)
        os.close(fd)
    std_path = [p for p in sys.path if p and p not in setup["python_path"]]
    sys.modules["rfc3987_syntax"] = None
    sys.modules["debugpy"] = None    # a kernel starts without its debugger (about 0.1 s of CPU)
    for name in LIBRARIES:
        __import__(name)
    sys.modules["course_lib.checks"].load_checkers()  # every lesson's (each loads on first use)
    nbformat = sys.modules["nbformat"]  # nbval validates the notebook it reads: compile that schema once
    nbformat.reads(nbformat.writes(nbformat.v4.new_notebook()), as_version=4)
    sys.modules.pop("debugpy", None)   # a notebook that imports it gets the real one
    del sys.modules["rfc3987_syntax"]
    # what was made so far lives as long as the zygote: the garbage collector of each fork
    # (the runner's pytest collects at its end, the kernel as it runs) need not walk it
    gc.collect()
    gc.freeze()
    _watch_mqueue()
    from course_lib.grading.kernel import filters
    marked = None if filters() is None else filters() + 2   # the kernel's filter, then the server's mark
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    reported = cpu.ru_utime + cpu.ru_stime
    os.write(STATUS, f"ready {reported:.3f}\n".encode())
    while True:
        line = _read_line(CONTROL)
        if not line:
            break
        message = json.loads(line)
        order = message.get("run")
        if order is None:   # a `stop` for a run that has already ended
            continue
        if _threads() != 1:
            raise RuntimeError("the zygote has more than one thread: it cannot fork safely")
        runner = os.fork()
        if runner == 0:
            try:
                _run_notebook(order, std_path)
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                os._exit(4)
        status = _wait(runner)
        if status is not None and status != -signal.SIGKILL:   # the run ended: its server, if any
            server, why = _verify(marked)
            os.write(STATUS, (f"serving {server}\n" if server else f"unserved {why}\n").encode())
            served = _wait_for_stop(server)
            status = status if served else None
        left = _clear(setup["keep"], order.get("scratch"))
        if left:  # said in the notebook's log by the grader (hex: one word on the report line)
            os.write(STATUS, f"left {json.dumps(left).encode().hex()}\n".encode())
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        os.write(STATUS, f"done {status} {cpu.ru_utime + cpu.ru_stime - reported:.3f}\n".encode())
        reported = cpu.ru_utime + cpu.ru_stime
        if status is None:
            break
