"""The suite's Jupyter kernels, forked from one process per test worker that imported the lessons' libraries once.

`make test` runs about twenty notebooks in kernels of their own: each lesson under nbval, and
the toy lessons of tests/test_exercise_notebooks.py under nbclient. A kernel started the usual
way (`python -m ipykernel_launcher`) spends about 3 s of CPU importing torch, numpy, matplotlib
and ipykernel before the notebook's first cell does anything. Here each test worker starts, on
its first kernel, one *zygote*: a process that imports those once and then, for every kernel
jupyter_client launches, forks a child that becomes that kernel (docs/maintainers.md, "How the
suite runs"). The class grader does the same in its sandbox (course_lib/grading/forked.py).

What a forked kernel shares with a fresh one, and what it does not
(tests/test_kernel_zygote.py checks both against a kernel started the usual way):

- the same: its user namespace (empty), working directory, environment, `sys.path` and
  `sys.argv`, torch's thread count and matplotlib's backend; the seeds of Python's `random`,
  numpy's global generator and torch's are drawn afresh, as at a fresh start; nothing one kernel does reaches the next, which is forked from the zygote,
  where no notebook's code ever runs;
- not the same: torch, numpy, matplotlib.pyplot, IPython and ipykernel are already in
  `sys.modules`, so a lesson that uses `matplotlib.pyplot` after only `import matplotlib`
  would pass here; and every kernel of one worker has the zygote's string-hash seed. The
  browser test (`make test-browser`, run by CI) runs every lesson in a kernel started the
  usual way, so neither hides a fault from CI.

A kernel whose environment would import these differently (another thread count, backend or
hash seed), a command that is not `python -m ipykernel_launcher`, or a zygote that cannot
fork safely gets a kernel started the usual way instead. COURSE_FRESH_KERNELS=1 turns the
zygote off for a whole run.
"""
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading

from course_lib.grading import forked   # its ForkedKernel and _exit serve this zygote's kernels too

# What the zygote imports once; a notebook's own `import` then finds them loaded.
LIBRARIES = ("numpy", "torch", "matplotlib", "matplotlib.pyplot", "IPython",
             "ipykernel.kernelapp", "ipykernel.ipkernel", "matplotlib_inline.backend_inline")
INLINE = "module://matplotlib_inline.backend_inline"    # what ipykernel sets when MPLBACKEND is unset
# Read when a library is imported or the interpreter starts: a kernel whose environment differs
# from the zygote's in one of these would not be what a fresh kernel is.
AT_IMPORT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED", "MPLBACKEND", "MPLCONFIGDIR",
             "COURSE_THREADS", "PYTHONDONTWRITEBYTECODE")


def _import_time_env(env):
    return {name: (env.get(name) or (INLINE if name == "MPLBACKEND" else None)) for name in AT_IMPORT}


# ---------------------------------------------------------------- in the zygote

def _become_kernel(request, std_path, answers):
    """In a forked child: become the ipykernel kernel `python -m ipykernel_launcher` would start."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)    # the zygote's setting is not a fresh process's
    os.close(answers)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)                                 # the zygote's orders are its own
    os.dup2(null if request["stdout_devnull"] else 2, 1)   # fd 1 was the zygote's answers
    if request["stderr_devnull"]:
        os.dup2(null, 2)
    os.close(null)
    os.chdir(request["cwd"] or ".")
    os.environ.clear()
    os.environ.update(request["env"])
    env = request["env"]
    # as ipykernel_launcher leaves it: PYTHONPATH, then the system's (IPython adds '' itself)
    sys.path[:] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + std_path
    import importlib
    import random
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    random.seed()                          # a fresh process's seeds, not the zygote's
    sys.modules["numpy"].random.seed()
    sys.modules["torch"].seed()
    import ipykernel
    sys.argv = [os.path.join(os.path.dirname(os.path.dirname(ipykernel.__file__)),
                             "ipykernel_launcher.py"), *request["cmd"][3:]]
    code = 0
    try:
        from ipykernel.kernelapp import IPKernelApp
        # the kernel ends when its parent, the zygote, does (which ends when its worker does)
        IPKernelApp.launch_instance(parent_handle=os.getppid())
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    forked._exit(code)


def serve():
    """The zygote: import once, then fork a kernel for each request on stdin until it ends."""
    # the path after a fresh `python -m`'s first entry and PYTHONPATH's: this file's folder and
    # the zygote's own PYTHONPATH left out (a kernel gets its own request's)
    own = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    std_path = [p for p in sys.path[1:] if p not in own]
    os.environ.setdefault("MPLBACKEND", INLINE)
    for name in LIBRARIES:
        __import__(name)
    # this file's own import of course_lib.grading.forked is not a fresh kernel's: a kernel's
    # `import course_lib` reads it from the folders of its own path
    for name in [m for m in sys.modules if m == "course_lib" or m.startswith("course_lib.")]:
        del sys.modules[name]
    import gc
    gc.collect()
    gc.freeze()                            # what is made so far lives as long as the zygote
    # kernels are reaped as they end (so their CPU time counts as the zygote's children's)
    signal.signal(signal.SIGCHLD, lambda signum, frame: forked._reap())
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    answers.write(json.dumps({"ready": _import_time_env(os.environ)}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        threads = len(os.listdir("/proc/self/task"))
        if threads != 1:
            answers.write(json.dumps({"error": f"the zygote has {threads} threads"}) + "\n")
            continue
        pid = os.fork()
        if pid == 0:
            try:
                _become_kernel(request, std_path, answers.fileno())
            finally:
                os._exit(4)
        try:
            os.setpgid(pid, pid)           # its own group, before jupyter_client reads it
        except OSError:                    # the child made it so first
            pass
        answers.write(json.dumps({"pid": pid}) + "\n")


# ---------------------------------------------------------------- in the test worker

class ForkedKernel(forked.ForkedKernel):
    """A forked kernel as jupyter_client uses a Popen. It is the zygote's child, not this
    process's, so its end is seen through a pidfd and its exit status is not known (None
    until it ends, then 0)."""

    def __init__(self, pid):
        super().__init__(pid)
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:         # it has ended already
            self._pidfd, self.returncode = None, 0

    def poll(self):
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            os.close(self._pidfd)
            self.returncode = 0
        return self.returncode


class Zygote:
    """This worker's zygote, started on first use; launch() forks a kernel or says None."""

    def __init__(self):
        self._lock = threading.Lock()
        self._process = None
        self._env = None
        self.forked = 0      # kernels forked so far
        self.off = False     # True: every kernel the usual way (see fresh_kernels)

    def _start(self):
        self._process = subprocess.Popen([sys.executable, __file__, "serve"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, bufsize=1)
        self._env = json.loads(self._process.stdout.readline())["ready"]

    def launch(self, cmd, env, cwd, stdout, stderr):
        if (self.off or list(cmd[1:3]) != ["-m", "ipykernel_launcher"]
                or os.path.abspath(cmd[0]) != os.path.abspath(sys.executable)):
            return None
        with self._lock:
            try:
                if self._process is None:
                    self._start()
                if _import_time_env(env) != self._env:
                    return None
                request = {"cmd": list(cmd), "env": dict(env), "cwd": cwd,
                           "stdout_devnull": getattr(stdout, "name", None) == os.devnull,
                           "stderr_devnull": getattr(stderr, "name", None) == os.devnull}
                self._process.stdin.write(json.dumps(request) + "\n")
                answer = json.loads(self._process.stdout.readline())
            except (OSError, ValueError, KeyError):   # a zygote that died: the usual way
                return None
        if "pid" not in answer:
            return None
        self.forked += 1
        return ForkedKernel(answer["pid"])

    def stop(self):
        if self._process is not None:
            self._process.stdin.close()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()


ZYGOTE = Zygote()


@contextlib.contextmanager
def fresh_kernels():
    """Within it, kernels start the usual way, as a new `python -m ipykernel_launcher`."""
    ZYGOTE.off, was = True, ZYGOTE.off
    try:
        yield
    finally:
        ZYGOTE.off = was


def use_zygote():
    """Make jupyter_client launch kernels through this worker's zygote where it can."""
    from jupyter_client.provisioning import local_provisioner
    real = local_provisioner.launch_kernel

    def launch_kernel(cmd, stdin=None, stdout=None, stderr=None, env=None, cwd=None, **kwargs):
        kernel = ZYGOTE.launch(cmd, env if env is not None else os.environ, cwd, stdout, stderr)
        if kernel is None:
            return real(cmd, stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd, **kwargs)
        return kernel

    local_provisioner.launch_kernel = launch_kernel


def pytest_configure(config):
    if os.environ.get("COURSE_FRESH_KERNELS") != "1":
        use_zygote()


def pytest_unconfigure(config):
    ZYGOTE.stop()


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    serve()
