"""Attacks on a class graded in one job's sandbox, and on the grader that reads what a notebook left.

A class of lesson-00 notebooks is graded with one job, so every attacker and the victim after
them share one sandbox (`session.ForkedSandbox`), one notebook after another. Each attacker
leaves what it can of one kind (a SysV message queue, SysV shared memory, a POSIX message
queue, a file in /dev/shm, a file in /tmp, a disk filled to its quota) and says, in a cell that
prints what it made; the victim, graded last, looks for each and says what it saw.
What each cell said is read from the run the job's sandbox returned, never from a verdict, so
these tests hold whatever decides the verdicts. Then the grader's own reading of a copy (links,
huge files), names with control characters, and the course's own source handed in as an answer.
"""
import csv
import errno
import json
import os
import re

import nbformat
import pytest

from course_lib.grading import borrowed, gradebook, graded_copy, run, sandbox, session

from test_grading import (EXERCISE, LESSON, _replace_exercise, blank, exercise_source, toy_lessons,
                          with_cell)

FORKED = session.available() is None
needs_forked = pytest.mark.skipif(not FORKED, reason=f"no forked sandbox here: {session.available()}")
# The quota of the class below: small, so that filling it costs little memory and time.
QUOTA = 160 * 2 ** 20
KEY = 0x47524144           # the SysV key every attacker uses, which the victim tries
QUEUE = "/grading-left-for-the-next"  # the POSIX message queue's name

IPC = '''\
import ctypes, ctypes.util, errno, os, struct
_libc = ctypes.CDLL(None, use_errno=True)
try:
    _libc.mq_open
    _rt = _libc
except AttributeError:
    _rt = ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
_rt.mq_open.restype = ctypes.c_int
_libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]


def _call(result):
    """(result, errno name) of a libc call that returns -1 on failure."""
    return result, (errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "")
'''

ATTACKS = {
    "a1_sysv_queue": '''\
_id, _err = _call(_libc.msgget({key}, 0o1000 | 0o666))
_message = struct.pack("l", 1) + b"the grading seed is 42"
_sent, _ = _call(_libc.msgsnd(_id, _message, len(_message) - 8, 0))
_MADE = f"queue {{_id}} {{_err}}, message sent: {{_sent == 0}}"''',
    "a2_sysv_shared_memory": '''\
_id, _err = _call(_libc.shmget({key}, {half}, 0o1000 | 0o666))
_over, _over_err = _call(_libc.shmget({key} + 1, {half} + {page}, 0o1000 | 0o666))
_MADE = f"segment {{_id}} {{_err}} of {half} bytes, a second past the cap: {{_over}} {{_over_err}}"''',
    "a3_posix_queue": '''\
_q, _err = _call(_rt.mq_open({queue!r}.encode(), os.O_CREAT | os.O_WRONLY, 0o666, None))
_sent, _ = _call(_rt.mq_send(_q, b"hello", 5, 0)) if _q != -1 else (-1, "")
_MADE = f"queue {{_q}} {{_err}}, message sent: {{_sent == 0}}"''',
    "a4_dev_shm": '''\
with open("/dev/shm/left-by-a4", "wb") as f:
    f.write(b"x" * 4096)
os.chmod("/dev/shm/left-by-a4", 0o666)
_MADE = f"/dev/shm holds {{os.listdir('/dev/shm')}}"''',
    "a5_tmp": '''\
with open("/tmp/left-by-a5", "w") as f:
    f.write("for the next learner")
os.chmod("/tmp/left-by-a5", 0o666)
os.mkdir("/tmp/left-folder-by-a5", 0o777)
_MADE = f"/tmp holds {{sorted(n for n in os.listdir('/tmp') if n.startswith('left'))}}"''',
    "a6_disk_fill": '''\
_written, _stopped, _chunk = 0, "nothing", b"x" * 2 ** 22
for _i in range(10_000):  # far past the quota: into its copy, /tmp and /dev/shm in turn
    _place = (os.environ["HOME"], "/tmp", "/dev/shm")[_i % 3]
    try:
        with open(os.path.join(_place, f"fill-{{_i}}"), "wb") as f:
            f.write(_chunk)
        _written += len(_chunk)
    except OSError as e:
        _stopped = errno.errorcode.get(e.errno, str(e.errno))
        break
_MADE = f"wrote {{_written}} bytes, stopped by {{_stopped}}"''',
}

VICTIM = '''\
_seen = []
if _call(_libc.msgget({key}, 0))[1] != "ENOENT":
    _seen.append("a SysV message queue")
if _call(_libc.shmget({key}, 0, 0))[1] != "ENOENT":
    _seen.append("SysV shared memory")
for _kind in ("msg", "shm", "sem"):
    with open(f"/proc/sysvipc/{{_kind}}") as f:
        if f.read().splitlines()[1:]:
            _seen.append(f"/proc/sysvipc/{{_kind}}")
if _call(_rt.mq_open({queue!r}.encode(), os.O_RDONLY, 0, None))[1] != "ENOENT":
    _seen.append("a POSIX message queue")
if os.listdir("/dev/shm"):
    _seen.append(f"/dev/shm: {{os.listdir('/dev/shm')}}")
_tmp = [n for n in os.listdir("/tmp")  # its own kernel's files aside
        if os.lstat(os.path.join("/tmp", n)).st_uid != os.getuid() and not n.startswith("grading-job-")]
if _tmp:
    _seen.append(f"/tmp: {{_tmp}}")
_free = os.statvfs("/tmp").f_bavail * os.statvfs("/tmp").f_frsize
if _free < {quota} - 32 * 2 ** 20:
    _seen.append(f"only {{_free}} bytes free of the quota")
_MADE = "saw " + (", ".join(_seen) or "nothing")'''

SAY = 'print("said: " + _MADE)'


def _notebook(learner, cell):
    """The toy lesson's notebook answered right, with `cell` and a cell that prints what it made."""
    nb = with_cell(blank(), f"# learner: {learner}\n" + IPC + cell.format(
        key=KEY, half=QUOTA // 2, page=os.sysconf("SC_PAGE_SIZE"), queue=QUEUE, quota=QUOTA))
    nb = with_cell(nb, SAY)
    return _replace_exercise(nb, exercise_source("return ids[:-1], ids[1:]"))


class Watched(session.ForkedSandbox):
    """A job's sandbox that keeps each notebook's run (what its cells said), by learner."""
    made = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.runs_of = {}
        Watched.made.append(self)

    def run(self, copy, *args, **kwargs):
        learner = re.search(r"# learner: (\w+)", (copy / "notebooks" / LESSON).read_text()).group(1)
        self.runs_of[learner] = result = super().run(copy, *args, **kwargs)
        return result


def said(run_):
    """What the notebook's cell that says what it made printed ('' when it did not run)."""
    for cell in run_.cells.values():
        found = re.search(r"said: ([^\n]*)", str(cell.get("stdout") or ""))
        if found:
            return found.group(1)
    return ""


def _host_ipc():
    """What this machine's own IPC namespace and /dev/shm hold (the grader's)."""
    held = {}
    for kind in ("msg", "shm"):
        with open(f"/proc/sysvipc/{kind}") as f:
            held[kind] = f.read().splitlines()[1:]
    held["/dev/shm"] = sorted(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else []
    return held


@pytest.fixture(scope="module")
def attacked_class(tmp_path_factory):
    """Every attacker, then the victim, graded as one class with one job (so in one sandbox)."""
    base = tmp_path_factory.mktemp("attacks")
    folder, out = base / "class", base / "grades"
    for learner, cell in [*ATTACKS.items(), ("z_victim", VICTIM)]:
        (folder / learner).mkdir(parents=True)
        nbformat.write(_notebook(learner, cell), folder / learner / LESSON)
    before = _host_ipc()
    patch = pytest.MonkeyPatch()
    patch.setattr(gradebook, "ForkedSandbox", Watched)
    patch.setattr(session, "DISK_QUOTA", QUOTA)
    Watched.made.clear()
    lines = []
    try:
        rows, _ = gradebook.grade_class(folder, out, jobs=1, memory_gib=3, log=lines.append, html=False,
                                        sandbox=True, lessons=toy_lessons(base / "lessons"))
    finally:
        patch.undo()
    book = {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open()) if r["exercise"] == EXERCISE}
    return dict(jobs=list(Watched.made), book=book, host_before=before, host_after=_host_ipc(), lines=lines)


def _runs(attacked_class):
    (job,) = attacked_class["jobs"]  # one job's sandbox graded them all
    assert list(job.runs_of) == [*ATTACKS, "z_victim"]  # in this order, one after another
    return job.runs_of


@needs_forked
@pytest.mark.parametrize("learner, made", [
    ("a1_sysv_queue", r"queue \d+ , message sent: True"),
    ("a2_sysv_shared_memory", r"segment \d+  of \d+ bytes, a second past the cap: -1 ENOSPC"),
    ("a3_posix_queue", r"queue \d+ , message sent: True"),
    ("a4_dev_shm", r"/dev/shm holds \['left-by-a4'\]"),
    ("a5_tmp", r"/tmp holds \['left-by-a5', 'left-folder-by-a5'\]"),
    ("a6_disk_fill", r"wrote (\d+) bytes, stopped by ENOSPC"),
])
def test_each_attacker_made_what_it_leaves_and_got_a_verdict_in_words(attacked_class, learner, made):
    """Each attack took effect inside its own notebook (so the victim's seeing nothing means
    something): a queue with a message, shared memory up to its cap, files; the disk fill
    stopped at the quota, not before it; and its row says, in words, how it was graded."""
    runs = _runs(attacked_class)
    found = re.fullmatch(made, said(runs[learner]))
    assert found, (said(runs[learner]), runs[learner].output[-2000:])
    if learner == "a6_disk_fill":
        assert QUOTA - 48 * 2 ** 20 < int(found.group(1)) <= QUOTA
    row = attacked_class["book"][learner]
    assert row["status"] in ("passed", "failed", "not run") and len(row["feedback"].split()) >= 3, row
    assert "not empty" not in runs[learner].output, runs[learner].output[-2000:]


@needs_forked
def test_the_learner_graded_after_them_in_the_same_sandbox_sees_nothing(attacked_class):
    runs = _runs(attacked_class)
    assert said(runs["z_victim"]) == "saw nothing", runs["z_victim"].output[-2000:]
    assert attacked_class["book"]["z_victim"]["status"] == "passed", attacked_class["book"]["z_victim"]


@needs_forked
def test_nothing_of_the_attacks_reaches_the_grader_machine(attacked_class):
    assert attacked_class["host_after"] == attacked_class["host_before"]
    job = attacked_class["jobs"][0]
    assert not job.folder.exists()  # the job's folder, and the quota's file system in it, are gone
