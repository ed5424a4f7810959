"""The graded kernel: the learner's notebook runs here, and only here do the grader's calls run its functions.

The grader's checkers never run in this process; they call in from the grader's own with data
(`wire`). What answers them is set up by `install`, between ipykernel's start-up and its first
cell, where Python code cannot change it:

1. Seccomp (`KERNEL_FILTER`): no exec, ptrace, other processes' memory, memfd.
2. An audit hook (it cannot be removed), the code of `_hook` with its configuration baked into
   its constants; no other function may have that code, so a frame running it is the hook's.
   It refuses (PermissionError, saying why) ctypes but its own, gc's object walks,
   sys._current_frames, another hook, exec, spawn, fork but its own, new code objects, marshal
   but importlib's, native modules and bytecode from outside Python's and the course's
   read-only roots, /proc/*/mem, changing its functions; `_posixsubprocess.fork_exec` is replaced.
3. The graded copy's last cell (`TRIGGER_CELL`) raises TRIGGER with the notebook's globals: the
   hook forks the server C, which (in the hook's code alone) resets signals, tracing and gc
   callbacks, checks its pipes by inode, closes every other fd, adds one filter more (no
   threads: the *mark*) and serves the grader's commands (CTL, reports on CST): per exercise a
   server S, forked by libc (no Python at-fork handler runs), which adds a last filter (no
   fork), quiets print, display() and input, sets the *watch* (a profile function, the hook's
   code too) and answers calls (REQ, replies on REP, `serve_calls`). The watch reports on FLAG
   (`F <label>`) calls of the course's answer to the exercise (any course_lib function of its
   name), of the checkers' or grader's code or a copy of it, of what the lesson's checkers name,
   and of what would switch it off or start a thread.

The trusted side (a job's zygote, or the runner of a sandbox of its own) kills every process of
the notebook but the one carrying the mark (`keep_server`) before the grader sends anything.
"""
import os
import sys

from course_lib.grading import wire

TRIGGER = "course_lib.serve"
TRIGGER_CELL = ('# Added by the grader: from here, its checks call your functions.\n'
                'import sys\nsys.audit("course_lib.serve", globals())')


# ---------------------------------------------------------------- seccomp

# Per architecture: (AUDIT_ARCH, {syscall name: number}).
_ARCHS = {
    "x86_64": (0xC000003E, {"execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310,
                            "process_vm_writev": 311, "memfd_create": 319, "userfaultfd": 323, "clone": 56,
                            "clone3": 435, "fork": 57, "vfork": 58, "seccomp": 317, "prctl": 157}),
    "aarch64": (0xC00000B7, {"execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
                             "process_vm_writev": 271, "memfd_create": 279, "userfaultfd": 282,
                             "clone": 220, "clone3": 435, "seccomp": 277, "prctl": 167}),
}
_EPERM, _ENOSYS, _CLONE_THREAD, _PR_SET_SECCOMP = 1, 38, 0x10000, 22
# (syscall, errno, arg0 test): test None denies the call, ("set", m) when arg0 & m, ("eq", v) when arg0 == v
KERNEL_FILTER = [("execve", _EPERM, None), ("execveat", _EPERM, None), ("ptrace", _EPERM, None),
                 ("process_vm_readv", _EPERM, None), ("process_vm_writev", _EPERM, None),
                 ("memfd_create", _EPERM, None), ("userfaultfd", _EPERM, None)]
MARK_FILTER = [("clone", _EPERM, ("set", _CLONE_THREAD)), ("clone3", _ENOSYS, None)]
SERVER_FILTER = [("clone", _EPERM, None), ("clone3", _ENOSYS, None), ("fork", _EPERM, None),
                 ("vfork", _EPERM, None), ("seccomp", _EPERM, None), ("prctl", _EPERM, ("eq", _PR_SET_SECCOMP))]


def bpf(rules, machine=None):
    """The classic-BPF program (bytes) of a seccomp filter denying `rules`; None on an unknown machine."""
    import struct
    arch, numbers = _ARCHS.get(machine or os.uname().machine, (None, None))
    if arch is None:
        return None
    code = []

    def op(kind, jt, jf, k):
        code.append(struct.pack("HBBI", kind, jt, jf, k & 0xFFFFFFFF))
    load, jeq, jset, ret, jge = 0x20, 0x15, 0x45, 0x06, 0x35
    op(load, 0, 0, 4)                       # the architecture
    op(jeq, 1, 0, arch)
    op(ret, 0, 0, 0x80000000)               # another one (a 32-bit ABI): kill
    op(load, 0, 0, 0)                       # the syscall's number
    op(jge, 0, 1, 0x40000000)               # x32's numbers
    op(ret, 0, 0, 0x00050000 | _EPERM)
    for name, errno, test in rules:
        if name not in numbers:
            continue
        deny = 0x00050000 | errno
        if test is None:
            op(jeq, 0, 1, numbers[name])
            op(ret, 0, 0, deny)
        else:
            op(jeq, 0, 3, numbers[name])
            op(load, 0, 0, 16)              # arg0, its low 32 bits
            op(jset if test[0] == "set" else jeq, 0, 1, test[1])
            op(ret, 0, 0, deny)
            op(load, 0, 0, 0)
    op(ret, 0, 0, 0x7FFF0000)               # allow
    return b"".join(code)


def filters(pid="self"):
    """The seccomp filter count of process `pid` (None when it is gone or not said)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Seccomp_filters:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


NO_SERVER = "the notebook's run did not reach the grader's last cell, so nothing of it can be called"


def descendants(pid):
    """The pids of the processes under `pid` (its children's, and theirs), from /proc."""
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        try:
            children = [int(c) for task in os.listdir(f"/proc/{here}/task")
                        for c in open(f"/proc/{here}/task/{task}/children").read().split()]
        except (OSError, ValueError):
            children = []
        found += children
        todo += children
    return found


def keep_server(pids, marked):
    """Kill every process of `pids` (a notebook's) but the one with `marked` seccomp filters (its
    server); (its pid, None) when there was exactly one, else (None, why there is no server)."""
    import signal
    found = [pid for pid in pids if filters(pid) == marked]
    server = found[0] if len(found) == 1 and marked is not None else None
    for pid in pids:
        if pid != server:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    if server is not None:
        return server, None
    if marked is None:
        return None, "this machine's kernel has no seccomp, so the grader cannot tell its server from another process"
    return None, NO_SERVER if not found else (f"{len(found)} processes claimed to be the grader's server "
                                               f"(the notebook served twice)")


# ---------------------------------------------------------------- the hook (a template)

COPY_SIZE = 64   # bytes of instructions (`_shape`) below which a function's copy is not told from anyone's own
TRUSTED_NAME = "<the grader's hook (course_lib.grading.kernel)>"   # every baked code object's file name


def _hook(event, args):
    """The audit hook's code, baked by `install`: each "<<...>>" string becomes a constant.

    No name here is global or builtin: every one comes from the kit, a tuple of immutable
    values and C functions baked into the code, so nothing a notebook rebinds changes it."""
    if event not in "<<EVENTS>>":
        return
    (getpid, fork, setsid, exit_, write, read, fstat, close, closerange, dup2, open_, kill, waitpid,
     pidfd_open, exitcode, select_, RDWR, RDONLY, pipe) = "<<OS>>"
    (getframe, settrace, setprofile, getprofile, setrecursionlimit, start_thread, gc_disable, gc_callbacks,
     signal_, signals) = "<<SYS>>"
    (id_, type_, str_, int_, len_, dict_, bytes_, tuple_, frozenset_, PermissionError_, BaseException_,
     RuntimeError_, OSError_, function_type, code_type) = "<<PY>>"
    (kernel_pid, channels, keep, sorted_keep, null_path, counts, serve_calls, calls_kit, importlib_code,
     roots) = "<<STATE>>"
    me = getframe(0)
    caller = me.f_back
    own = caller is not None and caller.f_code is me.f_code     # an audited call made by this hook itself
    trusted = me.f_code.co_filename

    def refuse(why, PermissionError_=PermissionError_):
        raise PermissionError_(f"the graded kernel does not allow {why}")

    def trusted_file(path, roots=roots, str_=str_, type_=type_):
        """Whether `path` is a plain absolute path (no `..`, no `//`) under a read-only root of Python's or the course's."""
        if type_(path) is not str_ or not path.startswith("/") or "/../" in path or "//" in path \
                or path.endswith("/..") or "/./" in path:
            return False
        for root in roots:
            if path.startswith(root):
                return True
        return False

    def count(open_=open_, read=read, close=close, int_=int_, RDONLY=RDONLY):
        fd = open_("/proc/self/status", RDONLY)
        data = read(fd, 1 << 16)
        close(fd)
        at = data.find(b"Seccomp_filters:")
        return -1 if at < 0 else int_(data[at + 16:data.find(b"\n", at)].strip())

    if event == "exec" or event == "function.__new__":
        if type_(args[0]) is code_type and args[0].co_filename == trusted:
            refuse("running the grader's own code")
        return
    if event == "os.fork" or event == "os.forkpty":
        if not own:
            refuse("os.fork: a notebook graded here runs in one process (no multiprocessing)")
        return
    if event[:7] == "ctypes.":
        if not own:
            refuse(f"ctypes ({event}): native code would get round the grader's protections")
        return
    if event == "sys.setprofile" or event == "sys.settrace":
        if not own and getpid() != kernel_pid:
            refuse(f"{event} while the grader calls your functions")
        return
    if event == "object.__setattr__":
        target = args[0]
        if type_(target) is function_type and target.__code__.co_filename == trusted:
            refuse("changing the grader's own functions")
        return
    if event == "marshal.loads" or event == "marshal.load":
        # only importlib's, of a module's bytecode on Python's or the course's read-only files
        if caller is None or caller.f_code is not importlib_code or not trusted_file(caller.f_locals.get("bytecode_path")):
            refuse("marshal here: only Python's own and the course's modules load from bytecode (its bytes could be "
                   "crafted to get round the grader's protections)")
        return
    if event == "open":
        path = args[0]
        if type_(path) is bytes_:
            path = path.decode("latin-1")
        if type_(path) is str_ and (path == "mem" or path.endswith("/mem") or path.endswith("/pagemap")):
            refuse(f"opening {path}: a process's memory")
        return
    if event == "import":
        path = args[1] if len_(args) > 1 else None
        if path is not None and not (type_(path) is str_ and path.endswith(".py")) and not trusted_file(path):
            refuse(f"the native module {path}: only Python's own and the course's load here")
        return
    if event != "<<TRIGGER>>":
        refuse(event)
    # ------------------------------------------------ the trigger: fork the server C
    if not channels:
        return                     # nobody to serve: a copy run by hand
    if getpid() != kernel_pid:
        refuse("a second server")
    namespace = args[0] if len_(args) == 1 else None
    if type_(namespace) is not dict_:
        refuse("a trigger without the notebook's globals")
    (ctl, ctl_id), (req, req_id), (rep, rep_id), (flag, flag_id), (cst, cst_id) = channels
    (mark, server_filter, raw_fork, leave_tracing, get_state, undumpable) = "<<CTYPES>>"
    (expected_mark, expected_server) = counts
    said, say = pipe()
    pid = fork()
    if pid != 0:                   # the kernel: the cell ends once C is set up (or gone)
        close(say)
        read(said, 1)
        close(said)
        return
    try:   # ------------------------------------------------ in C: the hook's code only, from here on
        close(said)
        setsid()
        setrecursionlimit(10000)
        settrace(None)
        setprofile(None)
        for number, handler in signals:
            signal_(number, handler)
        gc_disable()
        gc_callbacks.clear()
        null = open_(null_path, RDWR)
        dup2(null, 0)
        dup2(null, 1)
        dup2(null, 2)
        for fd, ident in channels:
            info = fstat(fd)
            if (info.st_dev, info.st_ino) != ident:
                exit_(73)
        dup2(say, keep[0])         # where the kernel hears that C is set up; kept with the channels
        start = 3
        for fd in sorted_keep:     # every other fd closed (the last is past any fd)
            if fd > start:
                closerange(start, fd)
            start = fd + 1
        if mark is not None:
            function, arguments, buffer, program = mark
            if bytes_(buffer) != program or function(*arguments) != 0 or count() != expected_mark:
                write(cst, b"refused the mark (a seccomp filter) could not be added\n")
                exit_(74)
            try:
                start_thread(int_, ())
                exit_(75)          # a thread started: the mark does not hold
            except RuntimeError_:
                pass
        undumpable[0](*undumpable[1])
        write(cst, b"ready\n")
        write(keep[0], b"1")
        close(keep[0])
    except BaseException_:
        exit_(71)
    def reap(child, pidfd, current, first, kill=kill, waitpid=waitpid, close=close, write=write, cst=cst,
             str_=str_, exitcode=exitcode):
        """Kill S if `first`, wait for it, say on CST how it ended; 0 (no S now)."""
        if first:
            kill(child, 9)
        status = waitpid(child, 0)[1]
        close(pidfd)
        write(cst, b"ended " + current + b" " + str_(exitcode(status)).encode() + b"\n")
        return 0

    buffer, child, pidfd, current, words, reset = b"", 0, -1, b"", [], False
    while True:   # ------------------------------------------------ C's loop
        try:
            ready = select_([ctl] if child == 0 else [ctl, pidfd], [], [], None)[0]
            if child != 0 and pidfd in ready:
                child = reap(child, pidfd, current, False)
                continue
            chunk = read(ctl, 65536)
        except BaseException_:
            exit_(76)
        if not chunk:
            if child != 0:
                kill(child, 9)
            exit_(0)
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            words = line.split(b" ")
            reset = reset or words[0] == b"reset"
            if not reset:
                continue           # left in the pipe from before this server: not the grader's now
            if words[0] in (b"kill", b"reset") and child != 0:
                child = reap(child, pidfd, current, True)
            if words[0] == b"reset" and len_(words) == 2:
                write(cst, b"reset " + words[1] + b"\n")
            if words[0] != b"serve" or len_(words) != 3 or child != 0:
                continue
            current = words[1]
            child = raw_fork()
            if child < 0:
                write(cst, b"ended " + current + b" fork\n")
                child = 0
                continue
            if child == 0:
                break
            pidfd = pidfd_open(child)
            write(cst, b"started " + current + b"\n")
        else:
            continue
        break
    # ------------------------------------------------ in S: the server of one exercise
    try:
        close(ctl)
        close(cst)
        if server_filter is not None:
            function, arguments, buffer, program = server_filter
            if bytes_(buffer) != program or function(*arguments) != 0 or count() != expected_server:
                exit_(77)
        name = words[2].decode("ascii")
        nonce = words[1]

        def watch(frame, event, arg, W="<<WATCH>>", name=name, memo=dict_()):
            """The watch (see the module's docstring): reports on FLAG, never raises."""
            (lib, lib_len, trusted, skip, wanted, py_table, c_table, shape, copies,
             flag, ident, fstat, write, exit_, id_, len_, BaseException_, roots) = W
            if event == "call":
                code = frame.f_code
                path = code.co_filename
                if path == trusted or id_(code) in skip:
                    return
                if path.startswith(lib):
                    rel = path[lib_len:-3].replace("/", ".")
                    if rel.endswith(".__init__"):
                        rel = rel[:-9]
                    label = "course_lib." + rel + "." + code.co_qualname
                    if not (code.co_name == name or label in wanted or rel.startswith("checks")
                            or rel.startswith("grading")):
                        return
                else:
                    label = py_table.get(id_(code))
                    if label is None and not path.startswith(roots):
                        seen = memo.get(id_(code))
                        if seen is None or seen[0] is not code:   # (the code kept: its id is not reused)
                            ops, names, consts = shape(code)   # the course's answer: its docstring set aside
                            seen = memo[id_(code)] = (code, copies.get((ops, names, consts))
                                                      or copies.get((ops, names, consts[1:], 0)))
                        label = seen[1]
                    if label is None:
                        return
            elif event == "c_call":
                label = c_table.get(id_(arg))
                if label is None or frame.f_code.co_filename == trusted or id_(frame.f_code) in skip:
                    return
            else:
                return
            try:
                info = fstat(flag)
                if (info.st_dev, info.st_ino) != ident:
                    exit_(72)
                write(flag, b"F " + label.encode() + b"\n")
            except BaseException_:
                exit_(72)

        def send(data, flag=False, W="<<SEND>>"):
            """Write `data` whole on REP (on FLAG with flag=True), once checked to be the grader's pipe still."""
            (rep, flag_fd, ident, flag_ident, fstat, write, exit_, memoryview_, BaseException_) = W
            fd, ident = (flag_fd, flag_ident) if flag else (rep, ident)
            try:
                info = fstat(fd)
                if (info.st_dev, info.st_ino) != ident:
                    exit_(72)
                view = memoryview_(data)
                while view:
                    view = view[write(fd, view):]
            except BaseException_:
                exit_(72)

        def watched(getprofile=getprofile, watch=watch, send=send):
            """Whether the watch is still this process's profile; when not, say so on FLAG."""
            if getprofile() is watch:
                return True
            send(b"F tamper:the watch was switched off\n", True)
            return False
    except BaseException_:
        exit_(78)
    settrace(None)
    setprofile(watch)
    leave_tracing(get_state())
    try:
        serve_calls(namespace, name, nonce, req, send, watched, calls_kit)
    except BaseException_:
        pass
    exit_(0)


# ---------------------------------------------------------------- install

def _bake(code, constants):
    """`code` with each "<<...>>" constant replaced from `constants` (nested code too), its file TRUSTED_NAME."""
    import types

    def baked(c):
        if type(c) is str and c in constants:
            return constants[c]
        if isinstance(c, types.CodeType):
            return _bake(c, constants)
        if type(c) is tuple:        # defaults that are all constants are folded into one
            return tuple(baked(x) for x in c)
        return c
    return code.replace(co_consts=tuple(baked(c) for c in code.co_consts), co_filename=TRUSTED_NAME)


def _codes(obj, found):
    """Every code object of a function or a class (methods, properties, nested code), into `found` by id."""
    import types
    todo = []
    if isinstance(obj, types.FunctionType):
        todo.append(obj.__code__)
    elif isinstance(obj, types.CodeType):
        todo.append(obj)
    elif isinstance(obj, type):
        for value in vars(obj).values():
            value = getattr(value, "__func__", value)
            if isinstance(value, types.FunctionType):
                todo.append(value.__code__)
            elif isinstance(value, property):
                todo += [f.__code__ for f in (value.fget, value.fset, value.fdel) if f is not None]
            elif isinstance(value, type) and value.__module__ == obj.__module__:
                _codes(value, found)
    while todo:
        code = todo.pop()
        found[id(code)] = code
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


def _shape(code):
    """What a copy of `code` shares with it however it was compiled (a module's `np.f()` loads f
    as an attribute, a cell's as a method): its instructions less caches, EXTENDED_ARG, jump
    targets and LOAD_GLOBAL's NULL bit; its names; its plain constants (a code object as True)."""
    (cache, extended, method, attr, low_bit, jumps, plain, code_type, bytearray_, bytes_, tuple_, type_,
     len_) = "<<SHAPE>>"
    raw, ops, i = code.co_code, bytearray_(), 0
    while i < len_(raw):
        op, arg = raw[i], raw[i + 1]
        i += 2
        if op != cache and op != extended:
            ops.append(attr if op == method else op)
            ops.append(0 if op in jumps else arg >> 1 if op in low_bit else arg)
    consts = []
    for c in code.co_consts:
        consts.append(c if type_(c) in plain else type_(c) is code_type)
    return bytes_(ops), code.co_names, tuple_(consts)


_SHAPE = []


def copy_key(code, docstring=True):
    """What a copy of `code` shares with it, made by FunctionType or code.replace, by exec of its
    source, or pasted (its names renamed, its comments and annotations changed; and its docstring,
    with docstring=False, for the course's answers: a checker's helper may be a lesson's solution)."""
    if not _SHAPE:   # `_shape` baked, as the watch has it
        import dis
        import types
        op = dis.opmap
        kit = (op["CACHE"], op["EXTENDED_ARG"], op.get("LOAD_METHOD", -1), op["LOAD_ATTR"],
               frozenset({op["LOAD_GLOBAL"]} | ({op["LOAD_ATTR"]} if "LOAD_METHOD" not in op else set())),
               frozenset(dis.hasjrel + dis.hasjabs), frozenset({str, int, float, bool, bytes, type(None), type(...)}),
               types.CodeType, bytearray, bytes, tuple, type, len)
        _SHAPE.append(types.FunctionType(_bake(_shape.__code__, {"<<SHAPE>>": kit}), {"__builtins__": {}}, "shape"))
    ops, names, consts = _SHAPE[0](code)
    return (ops, names, consts) if docstring else (ops, names, consts[1:], 0)


def _tables(checks_modules, lib, learner_side):
    """The watch's tables: what it skips, the course functions the lesson's checkers name, the
    functions outside course_lib they name (by code and by identity), and copies' keys."""
    import importlib
    import types

    import course_lib.grading.wire as wire_module
    from course_lib.checks import core
    skip = {}
    for module in (sys.modules[__name__], wire_module):
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) == module.__name__:
                _codes(value, skip)
    for fn in learner_side.values():
        _codes(getattr(fn, "__wrapped__", fn), skip)
    torch = sys.modules.get("torch")
    if torch is not None:   # torch's own handling of a TorchFunctionMode (a checker's `around`) takes it
        for name in ("_pop_mode", "_push_mode"):   # off its stack for each call and puts it back
            fn = getattr(torch.overrides, name, None)
            if fn is not None:
                _codes(fn, skip)
    named = {}
    for module in checks_modules:
        named.update(core.watched_functions(importlib.import_module(module)))
    named.update(_tampering())
    wanted, py_table, c_table, keep = set(), {}, {}, []
    for label, fn in named.items():
        fn = getattr(fn, "__wrapped__", fn)
        code = getattr(fn, "__code__", None)
        if isinstance(code, types.CodeType) and code.co_filename.startswith(lib):
            wanted.add(core.label_of(fn))
        elif isinstance(code, types.CodeType):
            py_table[id(code)] = label
        else:
            c_table[id(fn)] = label
        keep.append(fn)
    copies, names = {}, core.exercise_names()
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("course_lib.") or module_name.startswith("course_lib.grading"):
            continue
        in_checks = module_name.startswith("course_lib.checks")
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) != module_name:
                continue
            for code in _codes(value, {}).values():
                if (id(code) in skip or not code.co_filename.startswith(lib) or code.co_name.startswith("<")
                        or len(copy_key(code)[0]) < COPY_SIZE or not (in_checks or code.co_name in names)):
                    continue   # (a library's code a course function was wrapped in is not the course's,
                               # and a comprehension or a line or two is anyone's)
                rel = os.path.relpath(code.co_filename, lib)[:-3].replace(os.sep, ".").removesuffix(".__init__")
                copies[copy_key(code, docstring=in_checks)] = f"copy:course_lib.{rel}.{code.co_qualname}"
                keep.append(code)
    keep.extend(skip.values())
    return (frozenset(skip), frozenset(wanted), py_table, c_table, copies), keep


def _tampering():
    """{label: function} of what would switch the watch off, look around it, or start a thread."""
    import _thread
    import gc
    import signal
    import threading
    found = {f"tamper:sys.{n}": getattr(sys, n) for n in ("setprofile", "getprofile", "settrace", "gettrace",
                                                          "_current_frames", "addaudithook")}
    found.update({f"tamper:threading.{n}": getattr(threading, n) for n in ("setprofile", "settrace")})
    found.update({f"tamper:signal.{n}": getattr(signal, n) for n in ("signal", "setitimer", "alarm")})
    found.update({f"tamper:gc.{n}": getattr(gc, n) for n in ("get_objects", "get_referrers", "get_referents")})
    found["tamper:a thread (_thread.start_new_thread)"] = _thread.start_new_thread
    found["tamper:a thread (threading.Thread.start)"] = threading.Thread.start
    torch = sys.modules.get("torch")
    for n in ("_pop_torch_function_stack", "_push_on_torch_function_stack", "_get_function_stack_at",
              "_set_torch_function_state", "_len_torch_function_stack"):
        if torch is not None and hasattr(torch._C, n):   # what would take the server's observer off
            found[f"tamper:torch._C.{n}"] = getattr(torch._C, n)
    return found


def _filter(rules):
    """(function, arguments, buffer, program) that add the seccomp filter of `rules` to this process
    when called as function(*arguments) (0 when added), made now; None where none can be made."""
    import ctypes
    program = bpf(rules)
    number = {"x86_64": 317, "aarch64": 277}.get(os.uname().machine)
    if program is None or number is None:
        return None
    buffer = ctypes.create_string_buffer(program, len(program))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    prog = Program(len(program) // 8, ctypes.addressof(buffer))
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    arguments = (ctypes.c_long(number), ctypes.c_long(1), ctypes.c_long(1), ctypes.byref(prog))  # FILTER, TSYNC
    _KEPT.append((prog, Program))
    return (syscall, arguments, buffer, program)


_KEPT = []   # what the installed hook's ctypes objects point into, kept alive


def install(config):
    """Protect this process before any learner code runs; returns what could not be done, in words.

    config: {"fds": [ctl, req, rep, flag, cst] or None (serve nothing), "checks": the lesson's
    checker modules}. Call it once, after ipykernel started its own threads (IPKernelApp.initialize)
    and before the first cell.
    """
    import ctypes
    import gc
    import importlib
    import importlib._bootstrap_external as bootstrap
    import select
    import signal
    import types
    import _thread
    from types import MappingProxyType as frozen

    import course_lib
    from course_lib.checks import core
    from course_lib.grading import wire
    missing = []
    checks = config.get("checks") or ["course_lib.checks.core"]
    checks = [checks] if isinstance(checks, str) else list(checks)
    for module in checks:                 # their learner_side functions register themselves
        importlib.import_module(module)
    lib = os.path.dirname(os.path.abspath(course_lib.__file__)) + os.sep
    learner_side = dict(core.LEARNER_SIDE)
    (skip, wanted, py_table, c_table, copies), keep = _tables(checks, lib, learner_side)
    libc = ctypes.CDLL(None)
    libc.prctl(38, 1, 0, 0, 0)            # PR_SET_NO_NEW_PRIVS (bubblewrap sets it too)
    kernel = _filter(KERNEL_FILTER)
    before = filters()
    if kernel is None or kernel[0](*kernel[1]) != 0 or filters() != (before or 0) + 1:
        missing.append("seccomp (no filter could be added here): nothing stops exec, ptrace or threads, "
                       "and the grader cannot tell its server from another process")
        counts, mark, server = (-1, -1), None, None
    else:
        counts, mark, server = (before + 2, before + 3), _filter(MARK_FILTER), _filter(SERVER_FILTER)
    libc.prctl(4, 0, 0, 0, 0)             # PR_SET_DUMPABLE, 0: its memory is root's to read
    pydll = ctypes.PyDLL(None)
    raw_fork = pydll.fork
    raw_fork.restype, raw_fork.argtypes = ctypes.c_int, ()
    leave = ctypes.pythonapi.PyThreadState_LeaveTracing
    leave.restype, leave.argtypes = None, (ctypes.c_void_p,)
    get_state = ctypes.pythonapi.PyThreadState_Get
    get_state.restype, get_state.argtypes = ctypes.c_void_p, ()
    fds = config.get("fds")
    channels = tuple((fd, (os.fstat(fd).st_dev, os.fstat(fd).st_ino)) for fd in fds) if fds else ()
    said = max([fd for fd, _ in channels] + [2]) + 1        # C's "set up" to the kernel, on this fd
    keep_fds = (said,) + tuple(fd for fd, _ in channels)
    handlers = tuple((s, signal.SIG_IGN if s in (signal.SIGPIPE, signal.SIGHUP) else signal.SIG_DFL)
                     for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)
                     and s < getattr(signal, "SIGRTMIN", 32))
    flag = channels[3] if channels else (-1, (0, 0))
    rep = channels[2] if channels else (-1, (0, 0))
    roots = tuple(config.get("roots") or trusted_roots())
    constants = {
        "<<EVENTS>>": frozenset({
            TRIGGER, "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
            "subprocess.Popen", "pty.spawn", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
            "sys._current_frames", "sys.addaudithook", "sys.setprofile", "sys.settrace", "object.__setattr__",
            "function.__new__", "code.__new__", "exec", "marshal.loads", "marshal.load", "open", "import",
            "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function", "ctypes.cdata",
            "ctypes.cdata/buffer", "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at", "ctypes.get_errno",
            "ctypes.set_errno", "ctypes.create_string_buffer", "ctypes.create_unicode_buffer",
            "ctypes.call_cdeclfunction"}),
        "<<TRIGGER>>": TRIGGER,
        "<<OS>>": (os.getpid, os.fork, os.setsid, os._exit, os.write, os.read, os.fstat, os.close, os.closerange,
                   os.dup2, os.open, os.kill, os.waitpid, os.pidfd_open, os.waitstatus_to_exitcode, select.select,
                   os.O_RDWR, os.O_RDONLY, os.pipe),
        "<<SYS>>": (sys._getframe, sys.settrace, sys.setprofile, sys.getprofile, sys.setrecursionlimit,
                    _thread.start_new_thread, gc.disable, gc.callbacks, signal.signal, handlers),
        "<<PY>>": (id, type, str, int, len, dict, bytes, tuple, frozenset, PermissionError, BaseException,
                   RuntimeError, OSError, types.FunctionType, types.CodeType),
        "<<STATE>>": (os.getpid(), channels, keep_fds, tuple(sorted(keep_fds)) + (1 << 20,), os.devnull, counts,
                      serve_calls,
                      (frozen({**wire.course_classes(), **learner_side}), frozen(learner_side)),
                      bootstrap._compile_bytecode.__code__, roots),
        "<<CTYPES>>": (mark, server, raw_fork, leave, get_state, (libc.prctl, (4, 0, 0, 0, 0))),
        "<<WATCH>>": (lib, len(lib), TRUSTED_NAME, skip, wanted, frozen(py_table), frozen(c_table), _SHAPE[0],
                      frozen(copies), flag[0], flag[1], os.fstat, os.write, os._exit, id, len, BaseException, roots),
        "<<SEND>>": (rep[0], flag[0], rep[1], flag[1], os.fstat, os.write, os._exit, memoryview, BaseException),
    }
    code = _bake(_hook.__code__, constants)
    hook = types.FunctionType(code, {"__builtins__": {}}, "grading_hook")
    _KEPT.append((constants, keep, hook))
    _no_fork_exec()
    _quiet_monitors()
    sys.addaudithook(hook)
    return missing


def trusted_roots():
    """The folders (each ending with /) whose code the kernel may load as bytecode or native code:
    Python's (its prefix, the environment's) and course_lib's, read-only in a sandbox."""
    import course_lib
    from course_lib.grading.sandbox import python_paths
    lib = os.path.dirname(os.path.abspath(course_lib.__file__))
    return sorted({os.path.join(str(p), "") for p in python_paths()} | {os.path.join(lib, "")})


def _no_fork_exec():
    """Replace _posixsubprocess.fork_exec, which forks and execs without an audit event."""
    try:
        import _posixsubprocess
    except ImportError:
        return

    def fork_exec(*args, **kwargs):
        raise PermissionError("the graded kernel does not allow starting programs")
    _posixsubprocess.fork_exec = fork_exec


def _quiet_monitors():
    """No library may need a thread of its own later: tqdm's monitor is off."""
    try:
        import tqdm
        tqdm.tqdm.monitor_interval = 0
    except ImportError:
        pass


# ---------------------------------------------------------------- the server's loop (in S)

def _quiet():
    """Make print, display(), input and a logger made at the top safe without the kernel's threads."""
    import builtins
    streams = (sys.stdout, sys.stderr)   # the kernel's: a handler made at the top holds them
    sys.stdout = sys.stderr = open(os.devnull, "w")    # what the function prints while it is checked
    try:
        from ipykernel.iostream import OutStream
        OutStream.write = lambda self, text: len(text)
        OutStream.writelines = lambda self, lines: None
        OutStream.flush = lambda self: None
        for stream in streams:   # IPython's run_cell tees each stream through an attribute of its own
            if isinstance(stream, OutStream):
                for attr in ("write", "writelines", "flush"):
                    vars(stream).pop(attr, None)
    except Exception:
        pass
    try:
        from IPython import get_ipython
        shell = get_ipython()
        if shell is not None:
            shell.display_pub.publish = lambda *a, **k: None
            shell.display_pub.clear_output = lambda *a, **k: None
    except Exception:
        pass

    def no_input(*args, **kwargs):
        raise EOFError("the grader's calls give your function no input()")
    builtins.input = no_input
    _quiet_monitors()


def serve_calls(namespace, name, nonce, requests, send, watched, calls_kit):
    """S's loop: say what `name` is bound to, then answer each call and follow-up (C ends it)."""
    import inspect
    classes, learner_side = calls_kit
    nonce = nonce.decode("ascii")
    _quiet()
    fn = namespace.get(name)
    ready = {"n": nonce, "ready": name, "defined": name in namespace, "callable": callable(fn),
             "kind": type(fn).__name__}
    try:
        ready["params"] = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        ready["params"] = None
    watched()
    send(wire.message(ready))
    reader, last = wire.Reader(requests), None
    resolve = wire.resolver(classes)
    while True:
        try:
            header, blob = reader.next()
        except (EOFError, OSError):
            return
        except wire.WireError:
            continue
        if header.get("n") != nonce:
            continue           # not this exercise's: left over from before
        op = header.get("op")
        out = wire.Encoder(learner_side)
        try:
            if op == "call":
                reply, last = _call(fn, header, wire.Decoder(blob, resolve), out)
            elif op == "observe" and last is not None:
                reply = _observe(last, header, wire.Decoder(blob, resolve), out)
            else:
                reply = {"error": f"an unknown request {op!r}"}
        except wire.WireError as e:
            reply, out = {"error": f"{e}"}, wire.Encoder()
        watched()
        try:
            data = wire.message(dict(reply, n=nonce), out.blob())
        except wire.WireError as e:
            data = wire.message({"n": nonce, "error": f"the reply could not be sent: {e}"})
        send(data)


def _call(fn, header, decoder, out):
    """Run fn on the request's arguments: (the reply, (result, arguments) for follow-ups)."""
    args = decoder.arguments(header.get("args", []))
    kwargs = decoder.decode(header.get("kwargs", {"dict": []}))
    around = decoder.resolve(str(header["around"]))() if header.get("around") else None
    result, raised = None, None
    torch = sys.modules.get("torch")
    mode = torch is not None and isinstance(around, torch.overrides.TorchFunctionMode)
    try:
        if mode:   # put on torch's stack from here, the grader's code, which the watch lets do so
            depth = torch._C._len_torch_function_stack()
            torch._C._push_on_torch_function_stack(around)
            try:
                result = fn(*args, **kwargs)
            finally:
                kept = (torch._C._len_torch_function_stack() == depth + 1
                        and torch._C._get_function_stack_at(depth) is around)
                while torch._C._len_torch_function_stack() > depth:
                    torch._C._pop_torch_function_stack()
            if not kept:   # the function took the grader's observer off, or left one of its own
                raise PermissionError("your function changed torch's stack of function modes, "
                                      "where the grader watches what it calls")
        elif around is not None:
            with around:
                result = fn(*args, **kwargs)
        else:
            result = fn(*args, **kwargs)
    except BaseException as e:   # the learner's exception (SystemExit too), as data
        raised = e
    reply = {"after": [out.encode(args[i]) if 0 <= i < len(args) else None for i in header.get("after", [])],
             "kw_after": {k: out.encode(v) for k, v in kwargs.items() if k in header.get("after_kw", [])}}
    if around is not None:
        reply["around"] = _report(lambda: around.report(), out)
    if raised is not None:
        reply["raised"] = wire.exception_data(raised)
        if isinstance(raised, NotImplementedError):
            reply["not_implemented"] = True
    else:
        reply["result"] = out.encode(result)
    if header.get("observe"):
        observer = decoder.resolve(str(header["observe"]))
        reply["observed"] = _report(lambda: observer(result, *args), out)
    return reply, (result, args)


def _observe(last, header, decoder, out):
    """A follow-up: a checker's learner_side observer run on the last call's result and arguments."""
    result, args = last
    observer = decoder.resolve(str(header.get("name")))
    data = decoder.decode(header["data"]) if header.get("data") is not None else {}
    return {"observed": _report(lambda: observer(result, *args, **data), out)}


def _report(thunk, out):
    """{"value": thunk() as data}, or {"raised": what it raised, as data}."""
    try:
        return {"value": out.encode(thunk())}
    except Exception as e:
        return {"raised": wire.exception_data(e)}


# ---------------------------------------------------------------- a kernel process

def run_kernel(argv, config, **app):
    """Start ipykernel as `python -m ipykernel_launcher` would, with `install(config)` before its first cell.

    It imports first what its lesson does (config's "preload": their import counts as the kernel's
    start-up), keeps its input history in memory (In, Out and %history work, with no database to
    write) and starts without its debugger (about 0.1 s of CPU); a notebook that imports debugpy
    gets the real one. Whatever launched it, it keeps nothing of `sandbox.NEVER_PASSED` in its
    environment: no hub's token, no live view's address."""
    from course_lib.grading.sandbox import NEVER_PASSED
    for key in [k for k in os.environ if k.startswith(NEVER_PASSED)]:
        del os.environ[key]
    for name in config.get("preload") or ():
        try:
            __import__(name)
        except Exception:   # the learner's own import says what is wrong
            pass
    from traitlets.config import Config
    sys.modules.setdefault("debugpy", None)
    from ipykernel.kernelapp import IPKernelApp
    from tornado import ioloop
    settings = Config()
    settings.HistoryManager.hist_file = ":memory:"
    kernel_app = IPKernelApp.instance(config=settings, **app)
    kernel_app.initialize(argv)
    if sys.modules.get("debugpy", 0) is None:
        del sys.modules["debugpy"]
    if kernel_app.poller is not None:     # IPKernelApp.start, with the protections installed once
        kernel_app.poller.start()         # ipykernel has started the last of its threads
    kernel_app.kernel.start()
    for what in install(config):
        print(f"grading: this kernel runs without {what}", file=sys.__stderr__)
    kernel_app.io_loop = ioloop.IOLoop.current()
    try:
        kernel_app.io_loop.start()
    except KeyboardInterrupt:
        pass


def main():
    """`python -c "from course_lib.grading.kernel import main; main()" GRADING.json -f CONNECTION`: a graded
    copy's kernel (imported, not run as __main__: one copy of the hook's code), the server's fds in
    COURSE_GRADING_SERVER (`run.LAUNCH` starts it so)."""
    import json
    with open(sys.argv[1], encoding="utf-8") as f:
        config = dict(json.load(f).get("kernel") or {})
    config["fds"] = json.loads(os.environ.pop("COURSE_GRADING_SERVER", "null"))
    del sys.path[0]     # as ipykernel_launcher: not the working folder
    run_kernel(sys.argv[2:], config)
