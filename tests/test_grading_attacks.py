"""Attacks on a class graded in one job's sandbox, and on the grader that reads what a notebook left.

A class of lesson-00 notebooks is graded with one job, so every attacker and the victim after
them share one sandbox (`session.ForkedSandbox`), one notebook after another. Each attacker
leaves what it can of one kind (POSIX shared memory, a file in /dev/shm, a file in /tmp, a disk
filled to its quota, files left by its server; SysV IPC and POSIX queues need ctypes, which the
graded kernel refuses) and says, in a cell that prints what it made; the victim, graded last,
looks for each and says what it saw.
What each cell said is read from the run the job's sandbox returned, never from a verdict, so
these tests hold whatever decides the verdicts. Then the grader's own reading of a copy (links,
huge files), names with control characters; then the attacks of issue 40 and the honest habits.
"""
import csv
import errno
import json
import os
import re

import nbformat
import pytest

from course_lib.grading import gradebook, graded_copy, run, sandbox, session

from notebook_tools import pass_line
from test_grading import (EXERCISE, LESSON, PASS as TARGETS_PASS, _replace_exercise, blank, exercise_source,
                          toy_lessons, with_cell)

FORKED = session.available() is None
needs_forked = pytest.mark.skipif(not FORKED, reason=f"no forked sandbox here: {session.available()}")
# The quota of the class below: small, so that filling it costs little memory and time.
QUOTA = 160 * 2 ** 20

IPC = '''\
import errno, os


def _native():
    """What the kernel says to ctypes, which SysV IPC and POSIX message queues would need."""
    try:
        import ctypes
        ctypes.CDLL(None)
        return "ctypes allowed"
    except PermissionError as e:
        return f"refused: {e}"
'''

ATTACKS = {
    "a1_native_ipc": '_MADE = _native()',
    "a2_posix_shared_memory": '''\
import _posixshmem
_fd = _posixshmem.shm_open("/left-by-a2", os.O_CREAT | os.O_RDWR, 0o666)
os.ftruncate(_fd, 4096)
os.write(_fd, b"the grading seed is 42")
_MADE = f"/dev/shm holds {{os.listdir('/dev/shm')}}"''',
    "a3_dev_shm": '''\
with open("/dev/shm/left-by-a3", "wb") as f:
    f.write(b"x" * 4096)
os.chmod("/dev/shm/left-by-a3", 0o666)
_MADE = f"/dev/shm holds {{os.listdir('/dev/shm')}}"''',
    "a4_tmp": '''\
with open("/tmp/left-by-a4", "w") as f:
    f.write("for the next learner")
os.chmod("/tmp/left-by-a4", 0o666)
os.mkdir("/tmp/left-folder-by-a4", 0o777)
_MADE = f"/tmp holds {{sorted(n for n in os.listdir('/tmp') if n.startswith('left'))}}"''',
    "a5_disk_fill": '''\
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
    "a6_through_the_server": '_MADE = "its function leaves files each time the grader calls it"',
}
# What the grader's calls of a6's function leave (its server runs the learner's function), and
# the victim's function, which answers wrong if it finds any of it when called.
CALLED_LEAVES = """\
import _posixshmem, os
os.close(_posixshmem.shm_open("/left-by-a6-server", os.O_CREAT | os.O_RDWR, 0o666))
with open("/tmp/left-by-a6-server", "w") as f:
    f.write("x")
return ids[:-1], ids[1:]"""
CALLED_LOOKS = """\
import os
seen = os.path.exists("/dev/shm/left-by-a6-server") or os.path.exists("/tmp/left-by-a6-server")
return (ids, ids) if seen else (ids[:-1], ids[1:])"""

VICTIM = '''\
_seen = []
for _kind in ("msg", "shm", "sem"):
    with open(f"/proc/sysvipc/{{_kind}}") as f:
        if f.read().splitlines()[1:]:
            _seen.append(f"/proc/sysvipc/{{_kind}}")
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
    nb = with_cell(blank(), f"# learner: {learner}\n" + IPC + cell.format(quota=QUOTA))
    nb = with_cell(nb, SAY)
    body = {"a6_through_the_server": CALLED_LEAVES, "z_victim": CALLED_LOOKS}.get(learner,
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
    for cell in run_[0].cells.values():
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
    ("a1_native_ipc", r"refused: the graded kernel does not allow ctypes \(ctypes.dlopen\): native code would "
                      r"get round the grader's protections"),
    ("a2_posix_shared_memory", r"/dev/shm holds \['left-by-a2'\]"),
    ("a3_dev_shm", r"/dev/shm holds \['left-by-a3'\]"),
    ("a4_tmp", r"/tmp holds \['left-by-a4', 'left-folder-by-a4'\]"),
    ("a5_disk_fill", r"wrote (\d+) bytes, stopped by ENOSPC"),
    ("a6_through_the_server", r"its function leaves files each time the grader calls it"),
])
def test_each_attacker_made_what_it_leaves_and_got_a_verdict_in_words(attacked_class, learner, made):
    """Each attack took effect inside its own notebook (so the victim's seeing nothing means
    something), or was refused (SysV IPC and POSIX queues need ctypes, which the graded kernel
    refuses): POSIX shared memory, files; the disk fill stopped at the quota, not before it; and
    its row says, in words, how it was graded."""
    runs = _runs(attacked_class)
    found = re.fullmatch(made, said(runs[learner]))
    assert found, (said(runs[learner]), runs[learner][0].output[-2000:])
    if learner == "a5_disk_fill":
        assert QUOTA - 48 * 2 ** 20 < int(found.group(1)) <= QUOTA
    row = attacked_class["book"][learner]
    assert row["status"] in ("passed", "failed", "not run") and len(row["feedback"].split()) >= 3, row
    assert "not empty" not in runs[learner][0].output, runs[learner][0].output[-2000:]


@needs_forked
def test_the_learner_graded_after_them_in_the_same_sandbox_sees_nothing(attacked_class):
    runs = _runs(attacked_class)
    assert said(runs["z_victim"]) == "saw nothing", runs["z_victim"][0].output[-2000:]
    # its function, called by the grader after every attacker's was, found nothing either
    assert attacked_class["book"]["z_victim"]["status"] == "passed", attacked_class["book"]["z_victim"]
    assert attacked_class["book"]["a6_through_the_server"]["status"] == "passed"
    for learner, run_ in runs.items():  # and the sandbox was empty after each, its server included
        assert "not empty" not in run_[0].output, (learner, run_[0].output[-2000:])


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


def test_no_graded_copy_holds_the_reference_answers(tmp_path):
    """solution()'s answers (course_lib/checks/solutions.json) stay out of every course_lib a
    learner's code can reach when graded: the copy's own, the job's and the bytecode tree."""
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


# ---------------------------------------------------------------- the third design (issue 40)
#
# A class graded once, as an instructor grades one (`--class` in a job's sandbox, as root with
# bubblewrap): each learner one attack kind of the issue, aimed at three exercises at once
# (lesson 00's next_token_targets and next_byte_loss, lesson 01's softmax), or one honest habit
# that a checker of definitions alone used to fail. The tests read its rows.

THREE = "00_start_here.ipynb"   # a lesson of its own, named as lesson 00 (the grader reads its blank)


def three_lesson():
    """A lesson of three exercises: next_token_targets and next_byte_loss of lesson 00, softmax of 01."""
    from notebook_tools import ROOT, read

    from course_lib.exercises import exercises
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Three exercises"), nbformat.v4.new_code_cell(
        "import math\nimport numpy as np\nimport torch\n\n"
        "from course_lib.checks import check_next_byte_loss, check_next_token_targets, check_softmax")]
    for stem, name in (("00_start_here", "next_token_targets"), ("00_start_here", "next_byte_loss"),
                       ("01_attention_by_hand", "softmax")):
        lesson = read(ROOT / "notebooks" / f"{stem}.ipynb")
        _, i, j = next(e for e in exercises(lesson) if e[0] == name)
        nb.cells += [nbformat.from_dict(lesson.cells[k]) for k in (i - 1, i, j)]
    return nb


PASS = {name: pass_line(name) for name in ("next_token_targets", "next_byte_loss", "softmax")}
RIGHT = {"next_token_targets": "return ids[:-1], ids[1:]",
         "next_byte_loss": "logp = torch.log_softmax(logits, dim=-1)\nreturn -logp.gather(-1, targets[..., None]).mean()",
         "softmax": ("x = np.asarray(x)\nwork = x.astype(np.float32) if x.dtype == np.float16 else x\n"
                     "e = np.exp(work - work.max(axis=axis, keepdims=True))\n"
                     "return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)")}


def three(bodies=(), cells=(), later=()):
    """The three-exercise notebook as a learner hands it in: `bodies` answer exercises (the rest
    stay stubs), `cells` go before the first exercise and `later` just before the last check
    (after every exercise's cell: what the grader's copy keeps of a notebook's later cells)."""
    from course_lib.exercises import blank as make_blank, exercises
    from notebook_tools import fill
    nb = fill(make_blank(three_lesson()), dict(bodies))
    last_check = max(j for _, _, j in exercises(nb))
    first = min(i for _, i, _ in exercises(nb)) - 1
    nb.cells[last_check:last_check] = [nbformat.v4.new_code_cell(c) for c in later]
    nb.cells[first:first] = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


HOOKS = '''\
import dataclasses, functools
from course_lib import attention as _course
from course_lib.checks.lesson00 import _mean_nll


def _hook(*_):                    # rebinds the exercises, while a "constant" is computed
    globals()["next_byte_loss"] = lambda logits, targets: _mean_nll(logits, targets)
    globals()["softmax"] = lambda x, axis=-1: _course.softmax(x, axis=axis)
    return 0


def _settings(_=sorted([0], key=_hook)):           # a pure builtin called with a notebook function
    pass


@functools.lru_cache(maxsize=max([8], key=_hook))  # a decorator's argument
def _cached(x):
    return x


class _Markers:
    markers = list(map(_hook, [0]))               # a class attribute


@dataclasses.dataclass
class _Field:
    x: int = dataclasses.field(default=_hook(0))  # a dataclass field


class _Base:
    __init_subclass__ = classmethod(_hook)        # an assignment, not a definition


class _Sub(_Base):
    pass'''

WALKS_FRAMES = '''\
import os, stat, sys
found, frame = [], sys._getframe()
while frame is not None:                          # what its callers hold: no seed, no checker, no record
    found += [k for k in list(frame.f_locals) + list(frame.f_globals)
              if any(w in k.lower() for w in ("seed", "record", "check"))]
    frame = frame.f_back
for fd in range(64, 2, -1):                       # and answers forged on every pipe it holds
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b"\\x00" * 8 + b"{}" * 4 + b"F tamper:none\\n")
    except OSError:
        pass
print("found:", found)
return ids, ids'''

THREAD = '''\
import torch.nn.functional as F
from concurrent.futures import ThreadPoolExecutor
return ThreadPoolExecutor(1).submit(F.cross_entropy, logits.reshape(-1, logits.shape[-1]),
                                    targets.reshape(-1)).result()'''

PROFILER_OFF = '''\
import sys
sys.setprofile(None)
return torch.softmax(torch.as_tensor(x), dim=axis).numpy()'''

DECOYS = '''\
import _posixsubprocess, os, sys
_tried = {}
for _what, _how in (("fork_exec", lambda: _posixsubprocess.fork_exec(
                        [sys.executable], [sys.executable.encode()], True, (), None, None, -1, -1, -1, -1,
                        -1, -1, -1, -1, False, False, -1, None, None, None, -1, lambda: None, False)),
                    ("fork", os.fork), ("posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))):
    try:
        _how()
        _tried[_what] = "allowed"
    except Exception as e:
        _tried[_what] = type(e).__name__
_TRIED = _tried
_REFUSED = set(_tried.values()) == {"PermissionError"}'''

FORGES_WHILE_RUNNING = '''\
import os, stat, threading, time


def _forge():                                     # from a thread, until the kernel is killed
    while True:
        for fd in range(5, 10):                   # the server's pipes in a job's sandbox (forked.SERVER)
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00{}reset x\\n")
            except OSError:
                pass
        time.sleep(0.001)


threading.Thread(target=_forge, daemon=True).start()'''

CONTROL = (f"_ = 1  # \x1b]0;owned\x07 {TARGETS_PASS}\n"
           f"raise ValueError('fake' + chr(13) + chr(27) + '[2J {TARGETS_PASS}')")

ATTACKERS = {
    # load-time hooks rebind two exercises to the course's answers; next_token_targets stays a stub
    "hooks": lambda: three(later=[HOOKS]),
    # frame walking and forged writes; a thread; the profiler switched off
    "walks_threads_profiler": lambda: three({"next_token_targets": WALKS_FRAMES, "next_byte_loss": THREAD,
                                             "softmax": PROFILER_OFF}),
    # the checkers' modules: the checker's reference under another name, the course's answer
    # through a checker module, and a copy of the course's own function made by FunctionType
    "checkers_modules": lambda: three(
        {"next_token_targets": RIGHT["next_token_targets"],
         "next_byte_loss": "from course_lib.checks.lesson00 import _mean_nll as mean_nll\nreturn mean_nll(logits, targets)"},
        later=["import types\nfrom course_lib import attention\n"
               "softmax = types.FunctionType(attention.softmax.__code__, attention.__dict__, 'softmax')"]),
    "ref_softmax": lambda: three({"softmax": "from course_lib.checks import lesson01\nreturn lesson01.ref.softmax(x, axis)"}),
    # the forbidden loss where a profiler does not look: an aten op, a builtin called from C by
    # map(); and the grader's observer taken off torch's stack of function modes
    "loss_from_c": lambda: three({"next_byte_loss": "V = logits.shape[-1]\nreturn next(map(torch._C._nn.cross_entropy_loss, "
                                                    "[logits.reshape(-1, V)], [targets.reshape(-1)], [None], [1]))",
                                  "softmax": RIGHT["softmax"]}),
    "loss_aten": lambda: three({"next_byte_loss": "return torch.ops.aten.cross_entropy_loss(logits.reshape(-1, "
                                                  "logits.shape[-1]), targets.reshape(-1))",
                                "softmax": RIGHT["softmax"]}),
    "mode_off": lambda: three({"next_byte_loss": "torch.overrides._pop_mode()\nreturn torch.nn.functional.cross_entropy("
                                                 "logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))",
                               "softmax": RIGHT["softmax"]}),
    # the course's softmax pasted (its names renamed, its docstring dropped, a comment added), and
    # its source exec'd, renamed, behind a wrapper
    "pasted": lambda: _with_softmax(three(RIGHT), _pasted_softmax()),
    "execs_source": lambda: _with_softmax(three(RIGHT), (
        "from inspect import getsource\nfrom course_lib import attention as A\n"
        "exec(getsource(A.softmax).replace('def softmax', 'def _theirs'))\n\n\n"
        "def softmax(x, axis=-1):\n    return _theirs(x, axis)")),
    # a function that ends its process; the exercises after it are still checked
    "dies": lambda: three({"next_token_targets": "import os\nos._exit(0)", "next_byte_loss": RIGHT["next_byte_loss"],
                           "softmax": RIGHT["softmax"]}),
    # decoys refused (its answer is right only if all were); a thread writing forged replies and
    # flags until the kernel is killed; a wrong answer
    "decoys_forgers": lambda: three({"next_token_targets": "assert _REFUSED, _TRIED\nreturn ids[:-1], ids[1:]",
                                     "next_byte_loss": "return logits.sum() * 0"},
                                    cells=[DECOYS, FORGES_WHILE_RUNNING]),
    # the trigger raised early by the notebook: two servers, so none is believed
    "serves_twice": lambda: three(RIGHT, cells=['import sys\nsys.audit("course_lib.serve", globals())']),
    # control characters in a cell that stops, quoted beside the grade of what was served
    "control_characters": lambda: three({"next_token_targets": "return ids, ids"}, cells=[CONTROL]),
}

def _with_softmax(nb, source):
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "def softmax(" in c.source)
    nb.cells[at].source = source
    return nb


def _pasted_softmax():
    """course_lib.attention.softmax as a learner would paste it into the exercise's cell, under its
    own signature: locals renamed, docstring dropped, a comment added."""
    import ast
    import inspect

    from course_lib import attention
    tree = ast.parse(inspect.getsource(attention.softmax))
    function = tree.body[0]
    function.body = function.body[1:]   # the docstring
    renamed = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    renamed -= {a.arg for a in function.args.args}   # the exercise's signature stays (a checker calls by keyword)
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id in renamed:
            node.id += "_mine"
    return "# my own softmax\n" + ast.unparse(tree)


HABITS_OF_THE_TOP = {
    "logger_device_module": (
        ['import logging\nlog = logging.getLogger("mine")\n'
         'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
         'log_softmax = torch.nn.LogSoftmax(dim=-1)'],
        {"next_token_targets": 'log.warning("shifting %d ids", len(ids))\nreturn ids[:-1], ids[1:]',
         "next_byte_loss": ("logp = log_softmax(logits.to(device)).to(logits.device)\n"
                            "return -logp.gather(-1, targets[..., None]).mean()"),
         "softmax": RIGHT["softmax"]}, []),
    "lambda_partial_constants": (
        ['import functools\nscale = lambda d: 1 / math.sqrt(d)\nTINY = float(np.finfo(np.float32).tiny)\n'
         'BYTES = [bytes([i]) for i in range(256)]\nrow_max = functools.partial(np.max, axis=-1, keepdims=True)'],
        {"next_token_targets": "assert len(BYTES) == 256 and scale(4) == 0.5\nreturn ids[:-1], ids[1:]",
         "next_byte_loss": RIGHT["next_byte_loss"],
         "softmax": ("x = np.asarray(x)\nwork = x.astype(np.float32) if x.dtype == np.float16 else x\n"
                     "e = np.exp(work - work.max(axis=axis, keepdims=True))\n"
                     "return (e / np.maximum(e.sum(axis=axis, keepdims=True), TINY)).astype(x.dtype)")}, []),
    "later_helper_prints_displays": (
        [],
        {"next_token_targets": ('from IPython.display import display\nprint("targets of", ids)\n'
                                'display({"n": len(ids)})\nreturn ids[:-1], _shifted(ids)'),
         "next_byte_loss": RIGHT["next_byte_loss"], "softmax": RIGHT["softmax"]},
        "helper"),
}


def _three_class(base, learners, **limits):
    folder, out = base / "class", base / "grades"
    lessons = base / "lessons"
    lessons.mkdir(parents=True)
    nbformat.write(three_lesson(), lessons / THREE)
    for learner, nb in learners.items():
        (folder / learner).mkdir(parents=True)
        nbformat.write(nb, folder / learner / THREE)
    lines = []
    rows, problems = gradebook.grade_class(folder, out, jobs=1, memory_gib=3, log=lines.append, sandbox=True,
                                           lessons=lessons, **limits)
    book = {}
    for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8")):
        book.setdefault(r["learner"], {})[r["exercise"]] = r
    return dict(book=book, out=out, lines=lines, folder=folder, problems=problems)


@pytest.fixture(scope="module")
def third_class(tmp_path_factory):
    learners = {name: make() for name, make in ATTACKERS.items()}
    for name, (top, bodies, helper) in HABITS_OF_THE_TOP.items():
        learners[name] = three(bodies, cells=top)
        if helper:   # defined in the cell after the function's, before its check runs
            at = next(i for i, c in enumerate(learners[name].cells) if "def next_token_targets" in c.source)
            learners[name].cells.insert(at + 1, nbformat.v4.new_code_cell("def _shifted(ids):\n    return ids[1:]"))
    return _three_class(tmp_path_factory.mktemp("third"), learners, cell_timeout=60, notebook_timeout=240)


def _grade(third_class, learner):
    return {e: (r["status"], r["feedback"]) for e, r in third_class["book"][learner].items() if e in PASS}


FLAGGED = "flagged for the instructor's look"


@needs_forked
def test_load_time_hooks_that_rebind_exercises_to_the_courses_answers_earn_no_credit(third_class):
    got = _grade(third_class, "hooks")
    assert got["next_byte_loss"][0] == "failed" and got["next_byte_loss"][1].startswith(
        "no credit: your function called course_lib.checks.lesson00._mean_nll, the grader's own code"), got
    assert got["softmax"][0] == "failed" and "course_lib.attention.softmax, the course's own softmax" in \
        got["softmax"][1] and FLAGGED in got["softmax"][1], got
    assert got["next_token_targets"][0] == "failed" and "write your solution here" in got["next_token_targets"][1]


@needs_forked
@pytest.mark.parametrize("learner, said", [("loss_from_c", "calls F.cross_entropy, which this exercise"),
                                           ("loss_aten", "calls F.cross_entropy, which this exercise"),
                                           ("mode_off", "changed torch's stack of function modes")])
def test_a_forbidden_loss_reached_from_c_or_an_aten_op_or_with_the_observer_off_fails(third_class, learner, said):
    got = _grade(third_class, learner)
    assert got["next_byte_loss"][0] == "failed" and said in got["next_byte_loss"][1], got
    assert got["softmax"] == ("passed", PASS["softmax"]), got


@needs_forked
def test_frame_walking_a_worker_thread_and_the_profiler_switched_off(third_class):
    got = _grade(third_class, "walks_threads_profiler")
    # what it wrote broke its own replies off, or was read as junk: no credit either way, and said
    assert got["next_token_targets"][0] == "failed", got
    assert "something else wrote on the grader's flag pipe" in got["next_token_targets"][1], got
    assert got["next_byte_loss"][0] == "failed" and "a thread" in got["next_byte_loss"][1] \
        and FLAGGED in got["next_byte_loss"][1], got
    assert got["softmax"][0] == "failed" and "sys.setprofile" in got["softmax"][1] and FLAGGED in got["softmax"][1], got


@needs_forked
def test_the_checkers_modules_and_copies_of_the_courses_code_earn_no_credit(third_class):
    got = _grade(third_class, "checkers_modules")
    assert got["next_token_targets"] == ("passed", PASS["next_token_targets"]), got
    assert got["next_byte_loss"][0] == "failed" and "course_lib.checks.lesson00._mean_nll" in got["next_byte_loss"][1]
    assert got["softmax"][0] == "failed" and "course_lib.attention.softmax" in got["softmax"][1] \
        and FLAGGED in got["softmax"][1], got
    ref = _grade(third_class, "ref_softmax")["softmax"]
    assert ref[0] == "failed" and "course_lib.attention.softmax, the course's own softmax" in ref[1], ref


@needs_forked
@pytest.mark.parametrize("learner", ["pasted", "execs_source"])
def test_the_courses_own_source_pasted_or_execd_earns_no_credit(third_class, learner):
    got = _grade(third_class, learner)["softmax"]
    assert got[0] == "failed" and got[1].startswith("no credit: your function called a copy of "
                                                    "course_lib.attention.softmax, the course's own softmax"), got


def test_the_lessons_own_solutions_and_short_course_functions_are_not_taken_for_copies():
    """Every lesson's solution (which solution() shows) is the learners' to write the way the lesson
    does: none is a copy of the course's answer as the watch tells copies; nor is a function of
    fewer than COPY_SIZE bytes of bytecode, which anyone may write the same way."""
    import os
    import types

    import course_lib
    from course_lib import checks
    from course_lib.checks import core
    from course_lib.exercises import exercises
    from course_lib.grading import kernel
    from notebook_tools import LESSONS, read
    checks.load_checkers()
    lib = os.path.dirname(os.path.abspath(course_lib.__file__)) + os.sep
    modules = [f"course_lib.checks.{m}" for m in checks._MODULES if m.startswith("lesson")]
    (_, _, _, _, copies), _ = kernel._tables(modules, lib, dict(core.LEARNER_SIDE))
    assert copies and all(len(k[0]) >= kernel.COPY_SIZE for k in copies)
    for path in LESSONS:
        nb = read(path)
        for name, i, _ in exercises(nb):
            code = compile(nb.cells[i].source, "<cell>", "exec")
            for function in (c for c in code.co_consts if isinstance(c, types.CodeType)):
                for inner in kernel._codes(function, {}).values():
                    assert kernel.copy_key(inner) not in copies, (path.name, name, copies[kernel.copy_key(inner)])
                    assert kernel.copy_key(inner, docstring=False) not in copies, (path.name, name)


@needs_forked
def test_a_function_that_ends_its_process_is_noticed_at_once_and_the_rest_still_graded(third_class):
    got = _grade(third_class, "dies")
    assert got["next_token_targets"][0] == "failed", got
    assert "your function ended the grader's process while it was checked: it exited with status 0" in \
        got["next_token_targets"][1], got
    assert (got["next_byte_loss"], got["softmax"]) == (("passed", PASS["next_byte_loss"]), ("passed", PASS["softmax"]))


@needs_forked
def test_decoys_are_refused_and_forged_replies_before_serving_decide_nothing(third_class):
    got = _grade(third_class, "decoys_forgers")
    # right only if every way of starting a process was refused: so they were
    assert got["next_token_targets"] == ("passed", PASS["next_token_targets"]), got
    assert got["next_byte_loss"][0] == "failed" and "Exercise 'next_byte_loss'" in got["next_byte_loss"][1], got
    assert got["softmax"][0] == "failed" and "write your solution here" in got["softmax"][1], got


@needs_forked
def test_a_notebook_that_serves_twice_gets_no_server_believed(third_class):
    got = _grade(third_class, "serves_twice")
    assert {s for s, _ in got.values()} == {"not run"}, got
    assert all("2 processes claimed to be the grader's server" in f for _, f in got.values()), got


@needs_forked
def test_control_characters_in_a_reason_are_escaped_everywhere(third_class):
    got = _grade(third_class, "control_characters")
    feedback = got["next_token_targets"][1]
    assert got["next_token_targets"][0] == "failed" and "(your notebook: cell " in feedback, got
    assert "\\x1b" in feedback and "\\r" in feedback, feedback
    out = third_class["out"]
    texts = [(out / name).read_text(encoding="utf-8") for name in ("gradebook.csv", "report.html", "grading.log")]
    texts.append("\n".join(third_class["lines"]))
    for text in texts:
        assert not set(text) & {"\x1b", "\x07", "\r"}, text[:3000]


@needs_forked
@pytest.mark.parametrize("learner", HABITS_OF_THE_TOP)
def test_honest_habits_at_the_top_pass_as_their_notebooks_own_checks_say(third_class, learner):
    """The grade of each honest habit equals what the notebook's own check cells said when run."""
    from notebook_tools import first_error
    got = _grade(third_class, learner)
    assert got == {e: ("passed", line) for e, line in PASS.items()}, got
    nb = nbformat.read(third_class["folder"] / learner / THREE, as_version=4)
    assert first_error(nb, cwd=third_class["folder"] / learner) is None


@needs_forked
def test_a_notebook_whose_calls_sleep_is_held_to_its_time_limit(tmp_path):
    """The notebook's limit covers its run and every call of its functions: a function that sleeps
    at each call is stopped at the limit, and the whole grading fits in it."""
    import time
    sleepy = three({"next_token_targets": "import time\nif len(ids) != 3:\n    time.sleep(4)\nreturn ids[:-1], ids[1:]",
                    "next_byte_loss": RIGHT["next_byte_loss"]})   # (its own cells call it on 3 ids: quick)
    began = time.monotonic()
    graded = _three_class(tmp_path, {"sleepy": sleepy}, cell_timeout=60, notebook_timeout=8)
    took = time.monotonic() - began
    got = _grade(graded, "sleepy")
    assert got["next_token_targets"][0] == "failed" and "ran past the notebook's time limit" in \
        got["next_token_targets"][1], got
    assert got["next_byte_loss"][0] in ("failed", "not run"), got
    assert took < 8 + 60, took   # the limit, and the job's sandbox's start-up
