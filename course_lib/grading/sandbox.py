"""Run a graded copy's process tree in a bubblewrap sandbox, under limits it cannot raise.

Inside the sandbox (bubblewrap, Flatpak's sandbox, run by the grader before any learner
line runs): a read-only view of the system (/usr, /etc, ...) and of Python (its prefix and
the virtual environment), a fresh /proc and /dev, an empty /tmp, and the graded copy at its
own path, writable but for its course_lib and data. Nothing else is mounted: not the class
folder, not --out, not other learners' files, not the instructor's checkout. No network (a
loopback of its own), its own PID namespace and session: it cannot see or signal the grader
or the kernels graded beside it, and every process it starts is killed when it ends, or
when the grader dies.

When the grader runs as root, the sandbox's processes run as a user id of their own, picked
afresh for each notebook: they cannot write the grader's files even where a mount would let
them, and the process-count limit counts their processes alone.

The limits (memory, CPU time, processes, core files) are set as hard limits by the first
process in the copy (LAUNCH, in run.py), before pytest, nbval or any learner code starts, so
nothing the learner runs can raise them.
"""
import functools
import os
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from course_lib.exercises import ROOT

CELL_TIMEOUT, NOTEBOOK_TIMEOUT, MEMORY_GIB = 120, 600, 4.0
# Seconds a kernel may take to start, with the libraries its lesson imports, before
# the learner's first cell: a busy machine's business, not the learner's, so a separate and
# generous limit, and a kernel that did not start is started again once.
STARTUP_TIMEOUT = 300
# Processes and threads a notebook may run at once (pytest, the kernel and their threads
# take about 40).
PROCESSES = 512
# How each row was graded (the gradebook's `sandbox` column).
SANDBOXED, UNSANDBOXED = "bubblewrap", "none"
# What of the system a sandbox sees, read-only, where it exists.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# The environment a sandboxed process gets: these, and nothing else of the grader's.
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
# What a notebook's run never gets of the grader's environment, unsandboxed too: pytest's own
# settings, and a JupyterHub's token and addresses (JPY_API_TOKEN is the token's older name) and
# the live view's settings, so that nothing run in a graded kernel can report to a hub as a learner
# (course_lib.checks.report) when the grader runs in an instructor's server on one.
NEVER_PASSED = ("PYTEST_", "JUPYTERHUB_", "JPY_API_TOKEN", "COURSE_LIVE")
# Bytes a notebook graded in a job's sandbox may write in all (its copy, /tmp and /dev/shm share
# one size-capped file system), and the most its SysV shared memory may hold besides: an honest
# notebook writes a few MB; an attack filled the disk.
DISK_QUOTA = 2 ** 30
# SysV message queues a notebook may make (the kernel's default, 32000 of 16 KiB, is 500 MB).
MESSAGE_QUEUES = 64
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = (
    1, 2, 4, 32, 4096, 16384, 1 << 18)
_CLONE_NEWNS, _CLONE_NEWIPC = 0x00020000, 0x08000000


def python_paths(root=ROOT):
    """The folders Python needs, read-only: its prefix, the environment's, and their site-packages.

    Only those: not whatever else is on the grader's sys.path (its working folder, a test's
    temporary folder), nor the instructor's checkout, though the environment may live in it.
    """
    root = Path(root).resolve()
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                Path(sys.executable).resolve().parent.parent}
    found = set(prefixes)
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if path.is_dir() and path.name in ("site-packages", "dist-packages") and path != root \
                and root not in path.parents:
            found.add(path)
    return sorted(p for p in found if not any(q in p.parents for q in found))


def kept_in_tmp(keep):
    """The folders under /tmp that a sandbox's /tmp keeps: the grader's `keep`, and the folders
    Python needs where they live under /tmp (a virtual environment in a checkout there)."""
    return [keep] + [str(p) for p in python_paths() if str(p).startswith("/tmp/")]


def in_kept(path, kept):
    """Whether /tmp's entry `path` is, or holds, one of the `kept` folders."""
    return any(k == path or k.startswith(path + "/") for k in kept)


def unprivileged_python():
    """Why a user other than root could not run this Python without a sandbox (None: it could).

    Each folder Python needs, and every folder above it, must be searchable by others (a
    Python installed under /root, mode 0700, is not)."""
    for path in python_paths():
        for folder in [path, *path.parents]:
            try:
                if not os.stat(folder).st_mode & stat.S_IXOTH:
                    return f"{folder} (above {path}) is not searchable by other users"
            except OSError as e:
                return f"{folder} could not be read ({e.strerror})"
    return None


def python_links():
    """{link: its target} for each link on the way to this Python's prefix and executable.

    A virtual environment reached through a link (`.venv` a link to a folder elsewhere) runs
    as that path: the sandbox binds the folder itself and makes the link again, or its Python
    would not be found there.
    """
    links = {}
    for start in (sys.prefix, os.path.dirname(sys.executable)):
        path = Path("/")
        for part in Path(os.path.abspath(start)).parts[1:]:
            path = path / part
            if path.is_symlink() and str(path) not in SYSTEM:
                links[path] = path.resolve()
                path = path.resolve()
    return links


def exposed(path, root=ROOT):
    """The folder of the sandbox's read-only view that holds `path`, or None when the sandbox cannot see it."""
    path = Path(path).resolve()
    for seen in [Path(p) for p in SYSTEM if os.path.isdir(p)] + python_paths(root):
        if path == seen or seen in path.parents:
            return seen
    return None


def sandbox_uid():
    """A user id for one notebook's processes when the grader is root (None otherwise)."""
    if os.geteuid() != 0:
        return None
    return 1_600_000_000 + secrets.randbelow(100_000_000)


def learner_uid(sandboxed):
    """The user id a notebook's code (its run, and its servers) runs as; None: the
    grader's own. A root grader gives it a user of its own: in a sandbox always, and without one
    where such a user can run this Python (unprivileged_python; the Gradescope autograder refuses
    to grade where it cannot)."""
    if sandboxed or (os.geteuid() == 0 and unprivileged_python() is None):
        return sandbox_uid()
    return None


def give_to(folder, uid):
    """Make everything under folder belong to uid (the sandbox's user), links not followed."""
    if uid is None:
        return
    os.lchown(folder, uid, uid)
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            os.lchown(os.path.join(top, name), uid, uid)


def bwrap_command(command, copy, writable, *, root=ROOT, readonly_parts=("course_lib", "data"),
                  readonly=(), capabilities=None):
    """The bwrap command line that runs `command` in a sandbox holding `copy`, the `writable` folders
    and the `readonly` ones. capabilities: as root, the first process's only ones (None: bwrap's)."""
    args = [shutil.which("bwrap") or "bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net",
            "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--hostname", "grading"]
    if os.geteuid() == 0 and capabilities is not None:
        args += ["--cap-drop", "ALL"] + [a for cap in capabilities for a in ("--cap-add", cap)]
    elif os.geteuid() == 0:
        # root: no user namespace; the first process drops to the notebook's own user id
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user"]
    system = [path for path in SYSTEM if os.path.isdir(path) and not os.path.islink(path)]
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif path in system:
            args += ["--ro-bind", path, path]
    copy = Path(copy).resolve()
    binds = [(p, "--ro-bind") for p in python_paths(root)] + [(copy, "--bind")]
    binds += [(Path(p).resolve(), "--bind") for p in writable]
    binds += [(Path(p).resolve(), "--ro-bind") for p in readonly]
    # /tmp: empty, and capped at DISK_QUOTA where bubblewrap can cap it (0.7 and later)
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777"]
    args += ["--size", str(DISK_QUOTA)] if _bwrap_has("--size") else []
    args += ["--tmpfs", "/tmp"]
    # the folders above each mount, made here as bwrap would (0700) but readable by the
    # sandbox's user, who would otherwise not get past /root to a Python installed there
    made = {Path("/"), Path("/tmp")}
    for path, _ in binds:
        for parent in reversed(path.parents):
            if parent not in made and not any(parent == Path(s) or Path(s) in parent.parents
                                              for s in system):
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
    for path, how in binds:
        args += [how, str(path), str(path)]
    for link, target in python_links().items():
        if any(p == link.parent or p in link.parent.parents for p, _ in binds):
            continue  # the bound folder shows the link itself
        for parent in reversed(link.parents):
            if parent not in made and not any(parent == Path(s) or Path(s) in parent.parents for s in system):
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        args += ["--symlink", str(target), str(link)]
    for part in readonly_parts:
        if (copy / part).exists():
            args += ["--ro-bind", str(copy / part), str(copy / part)]
    return args + ["--chdir", str(copy), "--", *command]


@functools.lru_cache(maxsize=None)
def _bwrap_has(option):
    """Whether this machine's bubblewrap knows `option` (its --help lists it)."""
    try:
        done = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in done.stdout + done.stderr


def sandbox_env(copy, extra=()):
    """The environment of a sandboxed process: a few of the grader's settings, none of its secrets."""
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(HOME=str(copy), TMPDIR="/tmp", MPLCONFIGDIR=str(Path(copy) / ".matplotlib"))
    env.update(extra)
    return env


def own_env(extra=()):
    """The environment of a notebook run as the grader's own user, without a sandbox: the grader's,
    less what it never passes on (`NEVER_PASSED`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(NEVER_PASSED)}
    env.update(extra)
    return env


@functools.lru_cache(maxsize=1)
def unavailable():
    """Why no sandbox can be made on this machine, or None when it can (tried once, then remembered)."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux, and this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian and Ubuntu: apt-get install bubblewrap)"
    import tempfile
    with tempfile.TemporaryDirectory(prefix="grading-sandbox-test-") as folder:
        uid = sandbox_uid()
        give_to(folder, uid)
        probe = ("import os, sys; uid = int(sys.argv[1]); "
                 "uid >= 0 and (os.setgroups([]), os.setresgid(uid, uid, uid), os.setresuid(uid, uid, uid)); "
                 "import ctypes, json; open('probe', 'w').write(json.dumps(os.getpid()))")
        command = bwrap_command([sys.executable, "-c", probe, str(-1 if uid is None else uid)], folder, [])
        try:
            done = subprocess.run(command, env=sandbox_env(folder), capture_output=True, text=True,
                                  timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"bubblewrap did not run ({type(e).__name__}: {e})"
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["no message"])[-1]
            if "execvp" in why:  # the sandbox was made, but this Python is not in it
                return (f"the sandbox could not find this Python ({why}): run the grader with the "
                        f"Python of the environment's own folder, {Path(sys.prefix).resolve() / 'bin' / 'python'}")
            return f"bubblewrap could not make a sandbox here ({why}; are user namespaces allowed?)"
        if not os.path.isfile(os.path.join(folder, "probe")):
            return "bubblewrap ran, but the sandbox could not write its own folder"
    return None


def process_limit():
    """The RLIMIT_NPROC for a notebook: PROCESSES of its own, or on top of the user's own when not root.

    The limit counts every process and thread of the user; a grader that is not root shares
    its user with the sandbox, so the sandbox gets PROCESSES more than the user runs now.
    """
    if os.geteuid() == 0 or not os.path.isdir("/proc"):
        return PROCESSES
    uid, tasks = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    tasks += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass
    return tasks + PROCESSES


# ---------------------------------------------------------------- inside a job's sandbox

def printable(text, lines=False):
    """`text` with every control character shown as its escape, for a terminal or a log.

    A learner's folder, file or exercise name may hold an escape sequence (which retitles a
    terminal or moves its cursor), a carriage return (which draws a line over another) or a
    newline (which starts a false one). lines: keep newlines (a log entry's own lines).
    """
    return "".join(c if c.isprintable() or (lines and c == "\n")
                   else c.encode("unicode_escape").decode("ascii") for c in str(text))


def _mount(source, target, fstype=None, flags=0, data=None):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    encode = (lambda v: None if v is None else str(v).encode())
    if libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def seal(keep, scratch, copy, lib, parts=("course_lib", "data"), shared_memory=DISK_QUOTA):
    """In a notebook's runner, still root, before anything of the notebook runs: namespaces of its own.

    - a new IPC namespace: the SysV message queues, shared memory and semaphores and the POSIX
      message queues it makes are its alone, and go when its last process ends; SysV shared
      memory is capped at `shared_memory` bytes in all, message queues at MESSAGE_QUEUES;
    - a new mount namespace in which /tmp and /dev/shm are the empty folders `scratch`/tmp and
      `scratch`/shm (on the job's size-capped file system, beside the copy: one quota for all
      it writes), with the grader's folder `keep` mounted back where it was under /tmp;
    - the copy's `parts` (course_lib, data): read-only mounts of `lib`'s, not links the notebook
      owns (it can neither write in them nor remove or rename them).
    Returns what of this it could not do, in words ([] when all), for the notebook's log.
    """
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare: {os.strerror(errno)}")
    _mount(None, "/", flags=_MS_REC | _MS_PRIVATE)   # nothing mounted here reaches the job's namespace
    pages, missing = shared_memory // os.sysconf("SC_PAGE_SIZE"), []
    for name, value in (("kernel/shmmax", shared_memory), ("kernel/shmall", pages),
                        ("kernel/msgmni", MESSAGE_QUEUES)):
        try:  # a kernel or sandbox that keeps /proc/sys read-only: its IPC is still its own alone
            with open(f"/proc/sys/{name}", "w") as f:
                f.write(str(value))
        except OSError as e:
            missing.append(f"the cap {name}={value} ({e.strerror}): its IPC objects are still its "
                           f"own, and freed when it ends, but not capped")
    for part in parts:
        target = os.path.join(copy, part)
        if os.path.isdir(target) and not os.path.islink(target):
            _mount(os.path.join(lib, part), target, flags=_MS_BIND | _MS_REC)
            _mount(None, target, flags=_MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    os.mkdir(scratch, 0o711)
    for name in ("tmp", "shm"):
        os.mkdir(os.path.join(scratch, name))
        os.chmod(os.path.join(scratch, name), 0o1777)
    # the grader's folder, and Python's where it lives under /tmp, are mounted back over the new /tmp
    kept = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in kept_in_tmp(keep)}
    try:
        _mount(os.path.join(scratch, "shm"), "/dev/shm", flags=_MS_BIND | _MS_NOSUID | _MS_NODEV)
        _mount(os.path.join(scratch, "tmp"), "/tmp", flags=_MS_BIND | _MS_NOSUID | _MS_NODEV)
        for path, fd in kept.items():
            if path.startswith("/tmp/"):
                os.makedirs(path, 0o755)
                _mount(f"/proc/self/fd/{fd}", path, flags=_MS_BIND | _MS_REC)
                if path != keep:
                    _mount(None, path, flags=_MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    finally:
        for fd in kept.values():
            os.close(fd)
    return missing


def mount_quota(folder, size=DISK_QUOTA):
    """Mount an empty file system of `size` bytes at `folder` (the grader, root, on its own machine)."""
    _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV,
           f"size={int(size)},nr_inodes=200000,mode=0711")


def unmount(folder):
    import ctypes
    ctypes.CDLL(None, use_errno=True).umount2(str(folder).encode(), 2)  # MNT_DETACH
