"""The graded kernel's pieces, without Jupyter: its protections, its trigger, the server's mark and watch.

A child process plays the kernel: it installs the protections (`kernel.install`), tries what
a notebook might try (each refusal is printed as data), defines a notebook's functions and
raises the trigger; this test process plays the grader: it finds the server by its mark,
checks exercises with lesson 00's own checkers through it (`remote.Served`), and reads what
the watch saw. One child serves every test of the module (module fixture).
"""
import dis
import json
import os
import subprocess
import sys
import time
import types

import pytest

from course_lib.checks import lesson00
from course_lib.grading import kernel, remote

KERNEL = r'''
import json, os, sys
config = json.loads(sys.argv[1])
from course_lib.grading import kernel
missing = kernel.install(config)
tried = {}

def attempt(name, thunk):
    try:
        thunk()
        tried[name] = "allowed"
    except Exception as e:
        tried[name] = f"{type(e).__name__}: {e}"

import ctypes, gc, marshal, threading, types, _posixsubprocess, subprocess
attempt("ctypes", lambda: ctypes.CDLL(None))
attempt("gc.get_objects", gc.get_objects)
attempt("gc.get_referrers", lambda: gc.get_referrers(kernel))
attempt("sys._current_frames", sys._current_frames)
hooked = []
sys.addaudithook(lambda event, args: hooked.append(event))   # refused: Python then says nothing
sys.audit("course_lib.test")
tried["sys.addaudithook"] = "added" if hooked else "not added"
attempt("os.fork", os.fork)
attempt("subprocess", lambda: subprocess.run(["true"]))
attempt("fork_exec", lambda: _posixsubprocess.fork_exec(*([None] * 23)))
attempt("code.replace", lambda: attempt.__code__.replace(co_name="x"))
attempt("marshal.loads", lambda: marshal.loads(marshal.dumps(attempt.__code__)))
attempt("/proc/self/mem", lambda: open("/proc/self/mem", "rb"))
attempt("a thread", lambda: (lambda t: (t.start(), t.join()))(threading.Thread(target=len, args=([],))))
attempt("exec", lambda: exec("x = 1", {}))
attempt("sys.settrace", lambda: (sys.settrace(lambda *a: None), sys.settrace(None)))
print(json.dumps({"missing": missing, "tried": tried}), flush=True)
namespace = {"__name__": "__main__"}
exec(compile(sys.argv[2], "<cell>", "exec"), namespace)
os.dup2(os.open(os.devnull, os.O_RDONLY), 60)     # a kernel's fd above the pipes (as ipykernel's sockets)
sys.audit(kernel.TRIGGER, namespace)
print("the cell goes on", flush=True)
sys.stdin.read()
'''

NOTEBOOK = r'''
import logging, os, sys, torch
import torch.nn.functional as F
log = logging.getLogger("mine")                  # made at the top, used inside: an honest habit

def next_token_targets(ids):
    log.warning("shifting %s", ids)
    print("shifting", ids)
    return ids[:-1], ids[1:]

def text_to_ids(text):                           # wrong: latin-1
    return torch.tensor(list(text.encode("latin-1", "replace")), dtype=torch.int64)

from course_lib.checks.lesson00 import _mean_nll as my_loss   # the checker's own reference

def next_byte_loss(logits, targets):
    return my_loss(logits, targets)

def with_a_thread(logits, targets):
    from concurrent.futures import ThreadPoolExecutor
    return ThreadPoolExecutor(1).submit(F.cross_entropy, logits.reshape(-1, logits.shape[-1]),
                                        targets.reshape(-1)).result()

def profiler_off(logits, targets):
    sys.setprofile(None)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

def walks_frames(ids):
    found, frame = [], sys._getframe()
    while frame is not None:                     # nothing worth taking: no seed, no checker
        found += [k for k in list(frame.f_locals) + list(frame.f_globals) if "seed" in k.lower()]
        frame = frame.f_back
    for fd in sorted(map(int, os.listdir("/proc/self/fd")), reverse=True)[:-3]:   # forged answers on every fd
        try:
            os.write(fd, b"\x00" * 16 + b'{"n": "x", "result": 1}\nF tamper:none\n')
        except OSError:
            pass
    assert not found, found
    return ids, ids

def exits(ids):
    os._exit(3)
'''


@pytest.fixture(scope="module")
def served():
    theirs, mine = remote.server_pipes()
    config = {"fds": theirs, "checks": ["course_lib.checks.lesson00"]}
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", KERNEL, json.dumps(config), NOTEBOOK], pass_fds=theirs,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    for fd in theirs:
        os.close(fd)
    said = json.loads(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "the cell goes on"
    children = [int(p) for p in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()]
    server = remote.Served(*mine, deadline=time.monotonic() + 300, call_timeout=30)
    server.reset()
    found = {"said": said, "kernel": proc.pid, "children": children, "outcomes": {}, "theirs": theirs}

    def check(name, fn_name=None):
        outcome = server.check(fn_name or name, getattr(lesson00, f"check_{name}"), 7, lesson00_line(name))
        found["outcomes"][fn_name or name] = outcome
        return outcome
    found["check"] = check
    yield found
    proc.stdin.close()
    proc.wait(timeout=60)
    for fd in mine:
        os.close(fd)


def lesson00_line(name):
    from course_lib.grading.lessons import LESSONS, lesson_exercises
    import nbformat
    lesson = nbformat.read(LESSONS / "00_start_here.ipynb", as_version=4)
    return next("".join(o["text"] for o in e.pass_output).strip() for e in lesson_exercises(lesson) if e.name == name)


def test_the_kernel_refuses_what_would_get_round_the_grader_and_allows_what_a_lesson_uses(served):
    assert served["said"]["missing"] == []
    tried = served["said"]["tried"]
    assert tried["sys.addaudithook"] == "not added"
    for name in ("ctypes", "gc.get_objects", "gc.get_referrers", "sys._current_frames",
                 "os.fork", "subprocess", "fork_exec", "code.replace", "marshal.loads", "/proc/self/mem"):
        assert tried[name].startswith("PermissionError: the graded kernel does not allow"), (name, tried[name])
    for name in ("a thread", "exec", "sys.settrace"):
        assert tried[name] == "allowed", (name, tried[name])


def test_the_server_carries_the_mark_and_the_kernel_does_not(served):
    (server,) = served["children"]   # the trigger forked it, and it was set up before the cell went on
    assert kernel.filters(server) == kernel.filters(served["kernel"]) + 1
    assert kernel.filters(served["kernel"]) == (kernel.filters() or 0) + 1
    held = sorted(int(fd) for fd in os.listdir(f"/proc/{server}/fd"))   # its pipes and /dev/null alone
    assert held == [0, 1, 2] + sorted(served["theirs"]), held


def test_a_right_answer_with_a_logger_and_prints_passes_and_a_wrong_one_gets_its_hint(served):
    ok = served["check"]("next_token_targets")
    assert (ok.status, ok.feedback, ok.flagged) == ("passed", lesson00_line("next_token_targets"), [])
    wrong = served["check"]("text_to_ids")
    assert wrong.status == "failed" and "utf-8" in wrong.feedback.lower(), wrong


def test_the_checkers_own_reference_under_another_name_earns_no_credit(served):
    got = served["check"]("next_byte_loss")
    assert got.status == "failed" and got.feedback.startswith("no credit: your function called "
                                                             "course_lib.checks.lesson00._mean_nll"), got


@pytest.mark.parametrize("fn_name, seen", [("with_a_thread", "a thread"), ("profiler_off", "sys.setprofile")])
def test_a_thread_or_the_profiler_switched_off_is_flagged(served, fn_name, seen):
    got = served["check"]("next_byte_loss", fn_name)
    assert got.status == "failed" and any(seen in f and "flagged for the instructor" in f for f in got.flagged), got


def test_frame_walking_finds_nothing_and_forged_writes_decide_nothing(served):
    got = served["check"]("next_token_targets", "walks_frames")
    assert got.status == "failed" and "AssertionError" in got.feedback and "seed" not in got.feedback, got
    assert any("something else wrote on the grader's flag pipe" in f for f in got.flagged), got


def test_a_function_that_ends_its_process_is_noticed_at_once_and_the_next_exercise_is_still_checked(served):
    began = time.monotonic()
    got = served["check"]("next_token_targets", "exits")
    assert time.monotonic() - began < 10
    assert got.status == "failed" and "ended the grader's process" in got.feedback, got
    assert served["check"]("next_token_targets").status == "passed"


def test_the_hooks_code_reads_no_global_name():
    """Every code object of the installed hook (the watch's included) names nothing global or
    builtin: a notebook that rebinds a module's name or a builtin cannot change what it does."""
    baked = kernel._bake(kernel._hook.__code__, {})
    todo, seen = [baked], 0
    while todo:
        code = todo.pop()
        seen += 1
        assert code.co_filename == kernel.TRUSTED_NAME
        bad = [i.argval for i in dis.get_instructions(code)
               if i.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "STORE_NAME", "IMPORT_NAME", "DELETE_GLOBAL")]
        assert not bad, (code.co_name, bad)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    assert seen >= 5


def test_the_seccomp_programs_are_whole_instructions_for_each_machine():
    for machine in ("x86_64", "aarch64"):
        for rules in (kernel.KERNEL_FILTER, kernel.MARK_FILTER, kernel.SERVER_FILTER):
            program = kernel.bpf(rules, machine)
            assert program and len(program) % 8 == 0 and len(program) // 8 < 256
    assert kernel.bpf(kernel.KERNEL_FILTER, "sparc") is None
