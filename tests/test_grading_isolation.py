"""One grading job's sandbox serves many notebooks: nothing of one learner reaches the next.

`grade_class` grades each job's notebooks in one sandbox, each forked from a process that has
imported the libraries once (`course_lib.grading.session`, `forked`). Here one job grades two
learners, one after the other, from the same process. The first leaves everything it can: a
global, a builtin, an import, numpy and course_lib patched, an environment variable, files in
its copy and in /tmp; and it tries to start a process that would run on, and to signal and read the
process that forks it. Its answer is right only if each of those took effect (and the process,
signals and reads were refused), so its pass says it really did them. The second's answer is
right only if it finds none of them, so its pass says it looked and saw nothing. Their answers
read a global a cell made: the grader calls each function with the namespace its notebook's
run made.
"""
import csv

import nbformat
import pytest

from course_lib.grading import gradebook, session

from test_grading import (EXERCISE, LESSON, MARKER, PASS, _replace_exercise, blank, exercise_source,
                          processes_with, toy_lessons, with_cell)

FORKED = session.available() is None
pytestmark = pytest.mark.skipif(not FORKED, reason=f"no forked sandbox here: {session.available()}")

LEAVES = f"""\
_WHY = "the cell stopped before its end"
import builtins, os, signal, subprocess, sys, wave
import numpy, course_lib.checks
_home = os.environ["HOME"]
LEAKED_GLOBAL = 1
builtins.LEAKED_BUILTIN = 1
numpy.allclose = lambda *args, **kwargs: True
course_lib.checks.LEAKED_PATCH = 1
os.environ["LEAKED_ENV"] = "1"
for _path in (os.path.join(_home, "left.txt"), "/tmp/left.txt"):
    with open(_path, "w") as f:
        f.write("left by the first learner")
try:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # {MARKER}"], start_new_session=True)
    _spawned = True
except PermissionError:   # the graded kernel starts no program
    _spawned = False


def _real_uid(pid):
    with open(f"/proc/{{pid}}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))


_roots = [int(p) for p in os.listdir("/proc") if p.isdigit() and _real_uid(p) == 0]
_refused = []
for _pid in _roots:  # the sandbox's first process and the zygote, both root
    try:
        os.kill(_pid, signal.SIGKILL)
    except PermissionError:
        try:
            open(f"/proc/{{_pid}}/environ").read()
        except PermissionError:
            _refused.append(_pid)
with open("/proc/self/status") as f:
    _caps = [line.split()[1] for line in f if line.startswith(("CapEff", "CapPrm"))]
_made = {{"numpy patched": numpy.allclose(1, 2), "files": os.path.exists("/tmp/left.txt"),
         "process refused": not _spawned, "no capabilities": set(_caps) == {{"0000000000000000"}},
         "root processes found and refused": len(_roots) >= 2 and _refused == _roots,
         "not root": os.getuid() != 0, "in a job's sandbox": "/grading-job-" in _home}}
_WHY = ", ".join(k for k, done in _made.items() if not done)"""

LOOKS = f"""\
_WHY = "the cell stopped before its end"
import builtins, os, sys
import numpy, course_lib.checks
_home = os.environ["HOME"]


def _cmdlines():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as f:
                yield f.read().decode(errors="replace")
        except OSError:
            pass


def _uids():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{pid}}/status") as f:
                yield next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except OSError:
            pass


_seen = {{"a global": "LEAKED_GLOBAL" in globals(), "a builtin": hasattr(builtins, "LEAKED_BUILTIN"),
         "an import": "wave" in sys.modules, "numpy patched": numpy.allclose(1, 2),
         "course_lib patched": hasattr(course_lib.checks, "LEAKED_PATCH"),
         "an environment variable": "LEAKED_ENV" in os.environ,
         "a file in /tmp": os.path.exists("/tmp/left.txt") or {{os.stat(os.path.join("/tmp", n)).st_uid
                                                                for n in os.listdir("/tmp")}} - {{0, os.getuid()}},
         "a process": any({MARKER!r} in c for c in _cmdlines()),
         "another user's process": set(_uids()) - {{0, os.getuid()}} != set(),
         "not in a job's sandbox": "/grading-job-" not in _home}}
try:
    os.listdir(os.path.dirname(_home))
    _seen["the other copies' folder"] = True
except PermissionError:
    pass
_WHY = ", ".join(k for k, there in _seen.items() if there)"""

ANSWER = exercise_source("""\
if _WHY:
    raise ValueError("isolation: " + _WHY)
return ids[:-1], ids[1:]""")


class Watched(session.ForkedSandbox):
    """A job's sandbox that notes who it graded, in order, and what was left in its folder."""
    made = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.order, self.left = [], []
        Watched.made.append(self)

    def new_copy(self):
        self.left.append(sorted(p.name for p in self.work.iterdir()))
        return super().new_copy()

    def run(self, copy, *args, **kwargs):
        self.order.append("leaves" if "_spawned" in (copy / "notebooks" / LESSON).read_text() else "looks")
        return super().run(copy, *args, **kwargs)


def test_one_learners_globals_imports_patches_files_and_processes_are_invisible_to_the_next(
        tmp_path, monkeypatch):
    folder, out = tmp_path / "class", tmp_path / "grades"
    for learner, cell in (("a_leaves", LEAVES), ("b_looks", LOOKS)):
        (folder / learner).mkdir(parents=True)
        nbformat.write(_replace_exercise(with_cell(blank(), cell), ANSWER), folder / learner / LESSON)
    monkeypatch.setattr(gradebook, "ForkedSandbox", Watched)
    Watched.made.clear()
    rows, problems = gradebook.grade_class(folder, out, jobs=1, memory_gib=3, log=lambda line: None,
                                           html=False, sandbox=True, lessons=toy_lessons(tmp_path / "lessons"))
    book = {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open()) if r["exercise"] == EXERCISE}
    assert [s.order for s in Watched.made] == [["leaves", "looks"]]  # one process forked both, in turn
    assert Watched.made[0].left == [[], []]  # the first's copy was gone before the second's was made
    for learner in ("a_leaves", "b_looks"):
        assert (book[learner]["status"], book[learner]["feedback"]) == (
            "passed", PASS), (learner, book[learner]["feedback"])
        assert book[learner]["sandbox"] == "bubblewrap"
    assert processes_with(MARKER) == []  # and the process it left is gone from the machine too


def test_a_job_whose_sandbox_ended_starts_a_new_one_for_its_next_notebook(tmp_path):
    """The zygote is the grader's, not the learner's (which cannot signal it), but it can still
    end (a bug, the machine's memory): the next notebook gets a fresh sandbox, and passes."""
    import os
    import signal

    from course_lib.grading import run
    lessons = toy_lessons(tmp_path / "lessons")
    notebook = tmp_path / LESSON
    nbformat.write(_replace_exercise(blank(), exercise_source("return ids[:-1], ids[1:]")), notebook)
    with session.ForkedSandbox() as job:
        first = run.grade(notebook, lessons=lessons, sandbox=True, session=job, memory_gib=3)
        ended = job.proc.pid
        os.killpg(ended, signal.SIGKILL)
        job.proc.wait()
        second = run.grade(notebook, lessons=lessons, sandbox=True, session=job, memory_gib=3)
        assert job.proc.pid != ended
    for graded in (first, second):
        status = {r.exercise: r.status for r in graded.results}
        assert status[EXERCISE] == "passed", graded.log
        assert graded.retried is None


def test_a_copy_cannot_replace_its_course_lib_which_is_a_read_only_mount(tmp_path):
    """In a job's sandbox a copy's course_lib and data are read-only mounts of the job's (they
    were links the notebook owned, and one replaced its course_lib by a copy of its own whose
    checker printed the pass line for a wrong answer). Removing, renaming or writing into them
    is refused, so the wrong answer fails with its checker's own hint."""
    from course_lib.grading import run
    replace = '''\
import os, shutil
_tried = []
_lib = os.path.join(os.path.dirname(os.getcwd()), "course_lib")
for _what, _how in (("remove", lambda: os.remove(_lib)), ("rmtree", lambda: shutil.rmtree(_lib)),
                    ("rename", lambda: os.rename(_lib, _lib + "-old")),
                    ("write", lambda: open(os.path.join(_lib, "checks", "lesson00.py"), "a").write("#")),
                    ("link", lambda: os.symlink("/etc", os.path.join(_lib, "host"))),
                    ("data", lambda: os.rename(os.path.join(os.path.dirname(_lib), "data"), _lib + "-d"))):
    try:
        _how()
        _tried.append(_what)
    except OSError:
        pass
print("done: " + (", ".join(_tried) or "nothing"))'''
    notebook = tmp_path / LESSON
    nbformat.write(_replace_exercise(with_cell(blank(), replace), exercise_source("return ids[:-1], ids")),
                   notebook)
    runs = []
    with session.ForkedSandbox() as job:
        real = job.run
        job.run = lambda *args, **kwargs: runs.append(real(*args, **kwargs)) or runs[-1]
        graded = run.grade(notebook, lessons=toy_lessons(tmp_path / "lessons"), sandbox=True, session=job,
                           memory_gib=3)
    printed = "".join(str(cell.get("stdout") or "") for cell in runs[0][0].cells.values())
    assert "done: nothing" in printed, (printed, graded.log)
    result = next(r for r in graded.results if r.exercise == EXERCISE)
    assert result.status == "failed"
    assert "checks passed" not in result.feedback and "changed the grading copy" not in result.feedback
    assert "targets" in result.feedback.lower(), result.feedback  # the checker's own diagnosis
