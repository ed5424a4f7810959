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
    "a7_through_the_probe": '_MADE = "its function leaves a queue and a file each time the grader probes it"',
}
# What the grader's probe of a7's function leaves (its process runs the learner's function), and
# the victim's function, which answers wrong if it finds any of it when probed.
PROBED_LEAVES = f"""\
import ctypes
ctypes.CDLL(None).msgget({KEY + 7}, 0o1000 | 0o666)
with open("/tmp/left-by-a7-probe", "w") as f:
    f.write("x")
return ids[:-1], ids[1:]"""
PROBED_LOOKS = f"""\
import ctypes, os
seen = ctypes.CDLL(None).msgget({KEY + 7}, 0) != -1 or os.path.exists("/tmp/left-by-a7-probe")
return (ids, ids) if seen else (ids[:-1], ids[1:])"""

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
_python = [__import__("sys").prefix, __import__("sys").base_prefix]  # a venv under /tmp, mounted back
_tmp = [n for n in os.listdir("/tmp")  # its own kernel's files aside
        if os.lstat(os.path.join("/tmp", n)).st_uid != os.getuid() and not n.startswith("grading-job-")
        and not any(p.startswith(os.path.join("/tmp", n) + "/") for p in _python)]
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
    body = {"a7_through_the_probe": PROBED_LEAVES, "z_victim": PROBED_LOOKS}.get(learner,
                                                                             "return ids[:-1], ids[1:]")
    return _replace_exercise(nb, exercise_source(body))


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
    ("a7_through_the_probe", r"its function leaves a queue and a file each time the grader probes it"),
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
    # its function, probed by the grader after every attacker's was, found nothing either
    assert attacked_class["book"]["z_victim"]["status"] == "passed", attacked_class["book"]["z_victim"]
    assert attacked_class["book"]["a7_through_the_probe"]["status"] == "passed"
    for learner, run_ in runs.items():  # and the sandbox was empty after each, probe included
        assert "not empty" not in run_.output, (learner, run_.output[-2000:])


@needs_forked
def test_nothing_of_the_attacks_reaches_the_grader_machine(attacked_class):
    assert attacked_class["host_after"] == attacked_class["host_before"]
    job = attacked_class["jobs"][0]
    assert not job.folder.exists()  # the job's folder, and the quota's file system in it, are gone


# ---------------------------------------------------------------- what the grader reads of a copy

def _host_folder(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "__host-secret-name.txt").write_text("the instructor's")  # first of the names it would give
    return host


def test_the_grader_does_not_walk_a_link_swapped_for_the_copys_course_lib(tmp_path):
    """tree_hash counts a course_lib that is a link by its kind, without walking where it points."""
    host, copy_root = _host_folder(tmp_path), tmp_path / "copy"
    (copy_root / "course_lib").mkdir(parents=True)
    (copy_root / "course_lib" / "attention.py").write_text("x = 1\n")
    before = graded_copy.tree_hash(copy_root, ("course_lib",))
    (copy_root / "course_lib" / "attention.py").unlink()
    (copy_root / "course_lib").rmdir()
    (copy_root / "course_lib").symlink_to(host, target_is_directory=True)
    after = graded_copy.tree_hash(copy_root, ("course_lib",))
    assert list(after) == ["course_lib"] and after["course_lib"].startswith("not a folder (mode l")
    assert graded_copy.changed(before, after) == ["course_lib", "course_lib/attention.py"]
    assert "host-secret-name" not in json.dumps(after)


def test_a_notebook_that_swaps_its_course_lib_for_a_link_is_failed_without_naming_a_host_file(tmp_path):
    """Graded without a sandbox (where nothing stops the swap), the grader says the copy's course_lib
    changed and names no file of the folder the link points to."""
    host = _host_folder(tmp_path)
    swap = f'''\
import os, shutil
_lib = os.path.join(os.path.dirname(os.getcwd()), "course_lib")
shutil.rmtree(_lib)
os.symlink({str(host)!r}, _lib)'''
    notebook = tmp_path / LESSON
    nbformat.write(_replace_exercise(with_cell(blank(), swap), exercise_source("return ids[:-1], ids[1:]")),
                   notebook)
    graded = run.grade(notebook, lessons=toy_lessons(tmp_path / "lessons"), sandbox=False, memory_gib=3)
    result = next(r for r in graded.results if r.exercise == EXERCISE)
    assert result.status == "failed" and "changed the grading copy of course_lib (course_lib" in result.feedback, \
        (result, graded.log)
    assert "host-secret-name" not in result.feedback + graded.log


def test_a_link_to_a_huge_file_is_refused_with_a_reason_and_never_read(tmp_path):
    huge = tmp_path / "huge"
    with open(huge, "wb") as f:
        f.truncate(64 * 2 ** 30)  # sparse: 64 GiB that no disk holds
    link = tmp_path / "record.json"
    link.symlink_to(huge)
    with pytest.raises(ValueError, match="it is a symbolic link"):
        graded_copy.read_regular(link, 2 ** 20)
    with pytest.raises(ValueError, match=r"it is 65536 MB, over the 1 MB limit"):
        graded_copy.read_regular(huge, 2 ** 20)
    (tmp_path / "course_lib").mkdir()
    (tmp_path / "course_lib" / "big.py").symlink_to(huge)
    assert graded_copy.tree_hash(tmp_path, ("course_lib",)) == {
        "course_lib/big.py": "not a regular file (mode lrwxrwxrwx)"}


# ---------------------------------------------------------------- names are text

EVIL = "evil\x1b]0;owned\x07\r[9:9] zoe: 10 of 10 points\x1b[2J"


def test_control_characters_in_a_learners_names_are_escaped_in_the_output_and_the_log(tmp_path, capsys):
    folder, out = tmp_path / "class", tmp_path / "grades"
    (folder / EVIL).mkdir(parents=True)
    (folder / EVIL / LESSON).write_text("{ not json")          # refused, so it goes to grading.log
    (folder / EVIL / "notes\x1b[31m.ipynb").write_text("{}")    # a file no lesson is named
    lines = []
    gradebook.grade_class(folder, out, jobs=1, log=lines.append, html=False, sandbox=False,
                          lessons=toy_lessons(tmp_path / "lessons"))
    log = (out / "grading.log").read_text(encoding="utf-8")
    shown = "\n".join(lines)
    for text in (shown, log):
        assert not set(text) & {"\x1b", "\x07", "\r"}, text
    assert r"evil\x1b]0;owned\x07\r[9:9] zoe: 10 of 10 points\x1b[2J" in shown
    assert r"evil\x1b]0;owned\x07\r[9:9]" in log
    from course_lib.grading import cli
    cli.main([str(folder / EVIL / "notes\x1b[31m.ipynb")])
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and r"notes\x1b[31m.ipynb" in printed, printed


def test_printable_escapes_every_control_character_and_keeps_text():
    assert sandbox.printable("a\tb\nc\x7f\x9b\u202eé") == r"a\tb\nc\x7f\x9b\u202eé"
    assert sandbox.printable("one\ntwo\r", lines=True) == "one\ntwo\\r"


# ---------------------------------------------------------------- the course's own source as an answer

def _lesson_01(**cells):
    """Lesson 01's exercise notebook answered with the reference, its softmax cell replaced by `softmax`."""
    from answers import REFERENCE
    from notebook_tools import ROOT, fill, read
    nb = fill(read(ROOT / "exercises" / "01_attention_by_hand.ipynb"), REFERENCE)
    index = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "def softmax(" in c.source)
    nb.cells[index].source = cells["softmax"]
    return nb


def _pasted_softmax():
    """course_lib.attention.softmax as a learner would paste it: locals and arguments renamed,
    docstring dropped, a comment added."""
    import ast
    import inspect

    from course_lib import attention
    tree = ast.parse(inspect.getsource(attention.softmax))
    function = tree.body[0]
    function.body = function.body[1:]   # the docstring
    renamed = {a.arg for a in function.args.args} | {
        n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id in renamed:
            node.id += "_mine"
        elif isinstance(node, ast.arg):
            node.arg += "_mine"
    return "# my own softmax\n" + ast.unparse(tree)


@pytest.mark.parametrize("source, reason", [
    ("import inspect, course_lib.attention\nexec(inspect.getsource(course_lib.attention.softmax))",
     "it runs the course's own source of course_lib.attention.softmax (exec of inspect.getsource)"),
    ("from inspect import getsource\nfrom course_lib import attention as A\n"
     "exec(getsource(A.softmax).replace('def softmax', 'def _theirs'))\n\n\n"
     "def softmax(x, axis=-1):\n    return _theirs(x, axis)",
     "it runs the course's own source of course_lib.attention.softmax (exec of inspect.getsource)"),
    (None, "its softmax is a copy of the course's own course_lib.attention.softmax"),
    ("wrapper", "its softmax calls _helper, which is a copy of the course's own course_lib.attention.softmax"),
])
def test_the_courses_own_source_pasted_or_execd_gets_no_credit_with_the_reason(source, reason):
    from course_lib.grading.verdicts import Result
    if source is None:
        source = _pasted_softmax()
    elif source == "wrapper":
        source = (_pasted_softmax().replace("def softmax(", "def _helper(")
                  + "\n\n\ndef softmax(x, axis=-1):\n    return _helper(x, axis)")
    nb = _lesson_01(softmax=source)
    assert borrowed.copied(nb, "softmax") == reason
    (result,) = borrowed.no_credit([Result("softmax", "passed", "softmax: 9 checks passed", 1, 1)], nb)
    assert (result.status, result.points) == ("failed", 0)
    assert result.feedback == f"no credit: {reason} (the implementation this exercise asks you to write); " \
                              f"write it yourself"


def test_the_lessons_own_answers_and_short_course_functions_are_not_called_copies():
    """Every lesson's solution (which solution() shows), and the tests' reference answers, are the
    learners' to write the way the lesson does; a course function under COPY_NODES nodes may be
    written the same way by anyone, so a copy of it is not named."""
    from answers import REFERENCE
    from notebook_tools import LESSONS, ROOT, fill, read
    from course_lib.exercises import exercises
    for path in LESSONS:
        for nb in (read(path), fill(read(ROOT / "exercises" / path.name), REFERENCE)):
            for name, _, _ in exercises(nb):
                assert borrowed.copied(nb, name) is None, (path.name, name)
    import inspect

    from course_lib import costs
    short = inspect.getsource(costs.count_params)
    assert sum(1 for _ in __import__("ast").walk(__import__("ast").parse(short))) < borrowed.COPY_NODES + 2
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(short)])
    assert borrowed.copied(nb, "count_params") is None


# ---------------------------------------------------------------- the environment through a link

@pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}")
def test_a_virtual_environment_reached_through_a_link_runs_in_the_sandbox(tmp_path):
    """A `.venv` that is a link: its Python, run by that path, is found in the sandbox (the link is
    made there again), where it once failed with 'are user namespaces allowed?'."""
    import subprocess
    import sys
    link = tmp_path / "venv-link"
    link.symlink_to(os.path.realpath(sys.prefix), target_is_directory=True)
    code = ("import sys; from course_lib.grading import sandbox; "
            "print(sys.prefix); print(sandbox.python_links()); print(sandbox.unavailable())")
    done = subprocess.run([str(link / "bin" / "python"), "-c", code], capture_output=True, text=True,
                          cwd=sandbox.ROOT, timeout=120)
    prefix, links, why = done.stdout.splitlines()[-3:]
    assert prefix == str(link) and str(link) in links, done.stdout + done.stderr
    assert why == "None", done.stdout + done.stderr


@pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}")
def test_a_sandbox_of_its_own_holds_tmp_to_the_quota(tmp_path, monkeypatch):
    """A notebook graded in a sandbox of its own (one notebook, or a grader that is not root) fills
    its /tmp only to DISK_QUOTA."""
    import subprocess
    import sys
    monkeypatch.setattr(sandbox, "DISK_QUOTA", 8 * 2 ** 20)
    fill = ("import errno\nwritten = 0\ntry:\n    with open('/tmp/fill', 'wb') as f:\n"
            "        for _ in range(64):\n            f.write(b'x' * 2 ** 20)\n            f.flush()\n"
            "            written += 2 ** 20\nexcept OSError as e:\n    print(written, errno.errorcode[e.errno])")
    done = subprocess.run(sandbox.bwrap_command([sys.executable, "-c", fill], tmp_path, []),
                          env=sandbox.sandbox_env(tmp_path), capture_output=True, text=True, timeout=120)
    written, why = done.stdout.split()
    assert why == "ENOSPC" and 6 * 2 ** 20 <= int(written) <= 8 * 2 ** 20, done.stdout + done.stderr


def test_the_instructors_guide_names_tests_that_exist():
    """Every test docs/instructors.md §4 names, in the file it names, is a test there."""
    from notebook_tools import ROOT
    text = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    section = text[text.index("## 4. The sandbox"):text.index("## 5.")]
    named = 0
    for row in (line for line in section.splitlines() if line.startswith("|")):
        source = None
        for token in re.findall(r"`([^`]+)`", row.split("|")[-2]):
            if token.endswith(".py"):
                source = (ROOT / "tests" / token).read_text(encoding="utf-8")
            elif token.startswith("test_"):
                assert source is not None and f"def {token}(" in source, (token, row)
                named += 1
    assert named >= 15


def test_a_grader_that_cannot_mount_the_quota_says_why_its_jobs_cannot_share_one_sandbox(
        monkeypatch):
    def refused(folder, size):
        raise OSError(1, "Operation not permitted")
    monkeypatch.setattr(session, "mount_quota", refused)
    monkeypatch.setattr(session, "unavailable", lambda: None)
    monkeypatch.setattr(session.os, "geteuid", lambda: 0)
    session._no_quota.cache_clear()
    try:
        assert session.available() == ("the grader cannot mount a size-capped file system for a job's "
                                       "notebooks ([Errno 1] Operation not permitted)")
    finally:
        session._no_quota.cache_clear()


def test_no_graded_copy_or_probe_holds_the_reference_answers(tmp_path):
    """solution()'s answers (course_lib/checks/solutions.json) stay out of every course_lib a
    learner's code can reach when graded: the copy's own, the job's and the probe's bytecode tree."""
    from course_lib.exercises import SOLUTIONS
    assert SOLUTIONS.is_file()
    (tmp_path / "copy").mkdir()
    graded_copy.write_copy(tmp_path / "copy", nbformat.v4.new_notebook(), "00_start_here.ipynb",
                           [], 60, 2**30, 60)
    assert (tmp_path / "copy" / "course_lib" / "checks" / "lesson01.py").is_file()
    assert not list((tmp_path / "copy").rglob("solutions.json"))
    assert not list(graded_copy.compiled_tree().rglob("solutions.json"))
    assert "solutions.json" in graded_copy.NOT_COPIED(str(SOLUTIONS.parent), [SOLUTIONS.name, "lesson01.py"])


def test_a_python_under_tmp_stays_in_reach_of_each_notebooks_own_tmp(monkeypatch):
    """Each notebook's /tmp is a folder of its own mounted over the job's; a virtual environment
    in a checkout under /tmp (a fresh clone in a temporary folder) is mounted back, and _clear
    neither empties it nor counts it as left behind (it did: pytest could not import)."""
    monkeypatch.setattr(sandbox, "python_paths", lambda root=None: [
        __import__("pathlib").Path("/usr"), __import__("pathlib").Path("/tmp/clone/.venv")])
    kept = sandbox.kept_in_tmp("/tmp/grading-job-1")
    assert kept == ["/tmp/grading-job-1", "/tmp/clone/.venv"]
    assert sandbox.in_kept("/tmp/clone", kept) and sandbox.in_kept("/tmp/grading-job-1", kept)
    assert not sandbox.in_kept("/tmp/left-by-a5", kept) and not sandbox.in_kept("/tmp/clo", kept)
