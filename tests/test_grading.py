"""Grading: nbval runs a graded copy, the grader's checks call its functions, a class at scale.

One class is graded once (module fixture), each learner one way a notebook can go wrong in one
exercise, next_token_targets; the tests then read that exercise's rows. What those tests test is
the grader's handling of each habit, not the lesson, so the class hands in a toy lesson: lesson
00 cut down to that exercise, its check (the real checker, which the grader runs in its own
process on the function in the notebook's server) and one question. The learners whose notebooks must run into the per-cell time
limit are graded beside it, in a class of their own with a short limit, so that no test waits
out the shared class's. The forgeries that need three exercises in one notebook, and a few
single gradings, run the real lesson 00 end to end.
"""
import copy
import csv
import hashlib
import html
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from course_lib.grading import cli, feedback, gradebook, graded_copy, lessons, plugin, report, run, sandbox, verdicts
from course_lib.exercises import blank as make_exercise_notebook
from course_lib.exercises import exercises, tags
from course_lib.grading.questions import is_question, lesson_questions

from answers import REFERENCE, WRONG
from notebook_tools import LESSONS, ROOT, fill, function_from, pass_line, read

LESSON = "00_start_here.ipynb"
EXERCISE = "next_token_targets"
UNSHIFTED = next(w for w in WRONG if w.exercise == EXERCISE and w.inject)
LOSS_WRONG = next(w for w in WRONG if w.exercise == "next_byte_loss" and w.inject)
# The pass lines lesson 00's saved run printed: what a pass shows, and what a forgery prints.
PASS, LOSS_PASS, IDS_PASS = (pass_line(name) for name in (EXERCISE, "next_byte_loss", "text_to_ids"))
# Seconds per cell in the shared class. Lesson 00's cells take about 2 s on a quiet machine; the
# limit leaves room for a fresh clone's first imports while the other test process runs lessons.
TIMEOUT = 60
# Seconds per cell for the learners whose notebooks must run into the limit (TIMED_LEARNERS),
# graded in a class of their own so that no test waits out TIMEOUT for them. Each limit counts
# from when nbval sends the cell; the kernel's start-up, in which it imports torch, has a limit
# of its own (sandbox.STARTUP_TIMEOUT). What those notebooks run before the cell that loops is
# the toy lesson's first code cell (importing course_lib.checks once torch is in: about 0.2 s of
# CPU) and definitions: far inside this limit on a busy machine.
SHORT_TIMEOUT = 12


# The toy lesson's first code cell: what its exercise, check and question need (torch, which
# every lesson imports, so the kernel imports it while it starts, as for a real lesson).
TOY_IMPORTS = "import torch\n\nfrom course_lib.checks import answer, check_next_token_targets"


def toy_lesson():
    """Lesson 00 with one exercise (next_token_targets), its check cell and one question cell."""
    lesson = read(ROOT / "notebooks" / LESSON)
    _, i, j = next(e for e in exercises(lesson) if e[0] == EXERCISE)
    question = next(k for k, c in enumerate(lesson.cells) if "question" in tags(c))
    nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(lesson.metadata))
    nb.cells = [copy.deepcopy(lesson.cells[0]), nbformat.v4.new_code_cell(TOY_IMPORTS)] + [
        copy.deepcopy(lesson.cells[k]) for k in (i - 1, i, j, question)]
    return nb


def toy_lessons(folder):
    """A lessons folder: the toy lesson 00, and the real lesson 01 (for a notebook saved under 00's name)."""
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(toy_lesson(), folder / LESSON)
    nbformat.write(read(LESSONS[1]), folder / LESSONS[1].name)
    return folder


def blank():
    """The toy lesson's exercise notebook, as a learner gets it."""
    return make_exercise_notebook(toy_lesson())


def real_blank():
    return read(ROOT / "exercises" / LESSON)


def exercise_index(nb):
    return next(i for name, i, _ in exercises(nb) if name == EXERCISE)


N_EXERCISES = len(exercises(toy_lesson()))   # in the class fixture's lesson
N_QUESTIONS = len(lesson_questions(toy_lesson()))  # a row each too
REAL_EXERCISES = len(exercises(read(ROOT / "notebooks" / LESSON)))


def checks_of(results):
    """The exercises' results among a notebook's results (its questions' come after them)."""
    return [r for r in results if not is_question(r.exercise)]


def with_cell(nb, source, before_exercise=True, at=None):
    """A copy of nb with a code cell inserted before the exercise cell (or at index `at`)."""
    nb = nbformat.from_dict(nb)
    index = at if at is not None else exercise_index(nb) if before_exercise else len(nb.cells)
    nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb


def wrong():
    return fill(blank(), {EXERCISE: UNSHIFTED.body})


def real_wrong():
    return fill(real_blank(), {EXERCISE: UNSHIFTED.body})


def exercise_source(body):
    """The lesson's exercise cell with `body` as its answer."""
    nb = fill(blank(), {EXERCISE: body})
    return nb.cells[exercise_index(nb)].source


LOOP_FOREVER = "import time\nwhile True:\n    time.sleep(0.01)"

# What a busy machine did to a correct notebook: the kernel, having replied that a cell was
# done, got no CPU for some seconds before it sent the cell's last message, and nbval (which
# waits 5 s for it) stopped the kernel, so the check came out "not run". Here the kernel's
# stderr sleeps 7 s on its second flush, which ipykernel makes just after the reply.
STALL = """\
import sys, time


class _Stalled:
    def __init__(self, stream):
        self.stream, self.flushes = stream, 0

    def __getattr__(self, name):
        return getattr(self.stream, name)

    def flush(self):
        self.flushes += 1
        if self.flushes == 2:
            time.sleep(7)
            sys.stderr = self.stream
        return self.stream.flush()


sys.stderr = _Stalled(sys.stderr)"""

LEARNERS = {
    "blank": blank,
    # a wrong answer, with the check cell edited to print a pass line
    "edited": lambda: _edit_checks(wrong(), f"print({PASS!r})"),
    "exits": lambda: with_cell(blank(), "import os\nos._exit(3)", at=1),
    "sigkill": lambda: with_cell(blank(), "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", at=1),
    "segfault": lambda: fill(blank(), {EXERCISE: "import faulthandler\nfaulthandler._sigsegv()"}),
    "redefines": lambda: with_cell(wrong(), f"""\
def check_next_token_targets(fn):
    print({PASS!r})"""),
    "patches": lambda: with_cell(wrong(), f"""\
import course_lib.checks as checks, course_lib.checks.core as core, course_lib.checks.lesson00 as lesson
core.Checker.fail = lambda self, *args, **kwargs: None
fake = lambda fn: print({PASS!r})
checks.check_next_token_targets = lesson.check_next_token_targets = fake"""),
    "custom_exc": lambda: with_cell(wrong(), f"""\
def _quiet(shell, etype, value, tb, tb_offset=None):
    print({PASS!r})
get_ipython().set_custom_exc((BaseException,), _quiet)"""),
    "transformer": lambda: with_cell(wrong(), """\
get_ipython().input_transformers_post.append(
    lambda lines: [line for line in lines if "check" not in line])"""),
    # the stub cell copied: the copy, further down, holds the answer
    "copied": lambda: with_cell(blank(), exercise_source("return ids[:-1], ids[1:]"),
                                before_exercise=False, at=exercise_index(blank()) + 2),
    # a helper defined before the function; the answer also checks the kernel's limits
    "helper": lambda: _replace_exercise(blank(), """\
def _shift(ids):
    return ids[1:]


""" + exercise_source("""\
import os, resource
assert os.environ["OMP_NUM_THREADS"] == "1" and torch.get_num_threads() == 1
assert resource.getrlimit(resource.RLIMIT_AS) == (3 * 2 ** 30,) * 2  # hard: it cannot be raised
assert resource.getrlimit(resource.RLIMIT_NPROC)[1] != resource.RLIM_INFINITY
return ids[:-1], _shift(ids)""")),
    "syntax": lambda: fill(blank(), {EXERCISE: "return ids[:-1], ids[1:"}),
    # forged pass lines: a stub's message that draws the pass line over itself, and an
    # exception class named after the exercise whose message is the rest of the pass line
    "cr_forgery": lambda: fill(blank(), {EXERCISE: f'raise NotImplementedError("\\r{PASS}")'}),
    "named_forgery": lambda: fill(blank(), {EXERCISE: f"""\
raise type("next_token_targets", (NotImplementedError,), {{}})({PASS.split(": ")[1]!r})"""}),
    # honest habits, each of which must pass
    "habits": lambda: fill(blank(), {EXERCISE: HABITS}),
    # a logger with a handler on the kernel's stdout, made at the top (IPython tees that stream
    # while a cell runs, the grader's last one too): it logs from the function and must pass
    "log_handler": lambda: with_cell(fill(blank(), {EXERCISE: 'log.info("the ids %s", ids)\n'
                                                               'log.warning("a warning")\n'
                                                               'return ids[:-1], ids[1:]'}),
                                     "import logging, sys\nlogging.basicConfig(level=logging.INFO)\n"
                                     "log = logging.getLogger('mine')\n"
                                     "log.addHandler(logging.StreamHandler(sys.stdout))", at=1),
    "later_helper": lambda: with_cell(fill(blank(), {EXERCISE: "return ids[:-1], _shift(ids)"}),
                                      "def _shift(ids):\n    return ids[1:]", at=exercise_index(blank()) + 1),
    "exec_answer": lambda: with_cell(blank(), "exec('def next_token_targets(ids):\\n    return ids[:-1], ids[1:]')",
                                     at=exercise_index(blank()) + 1),
    "globals_answer": lambda: with_cell(blank(), "globals()['next_token_targets'] = lambda ids: (ids[:-1], ids[1:])",
                                        at=exercise_index(blank()) + 1),
    # a transformer that drops the grader's last cell: no server, so nothing passes
    "drops_trigger": lambda: with_cell(fill(blank(), REFERENCE), """\
get_ipython().input_transformers_post.append(lambda lines: [line for line in lines if "audit" not in line])"""),
    "never_run": lambda: _never_run(fill(blank(), REFERENCE)),
    # a right answer in a notebook one of whose cells raised: passed, and where it stopped is said
    "stops": lambda: with_cell(fill(blank(), REFERENCE), "raise ValueError('a typo of mine \\x1b[2J')", at=1),
    "stalls": lambda: with_cell(fill(blank(), REFERENCE), STALL, at=1),
    "writes": lambda: with_cell(wrong(), f"""\
import course_lib, pathlib
checks = pathlib.Path(course_lib.__file__).parent / "checks" / "lesson00.py"
with open(checks, "a") as f:
    f.write("\\ncheck_next_token_targets = lambda fn: print({PASS!r})\\n")
with open("../notebooks/" + "stray.txt", "w") as f:
    f.write("written by a learner")
with open("../data/shakespeare.txt", "a") as f:
    f.write("more")"""),
}


# Learners whose notebooks run until the per-cell time limit stops them: graded in a class of
# their own (the `timed_class` fixture), at SHORT_TIMEOUT.
TIMED_LEARNERS = {
    "swallows": lambda: with_cell(blank(), """\
import time
while True:
    try:
        time.sleep(0.05)
    except KeyboardInterrupt:
        pass""", at=1),
    "endless": lambda: fill(blank(), {EXERCISE: LOOP_FOREVER}),
}


# Forgeries that need lesson 00's three exercises in one notebook: graded in a class of their own,
# on the real lesson 00 (the `real_class` fixture).
REAL_LEARNERS = {
    # the kernel's checker, numpy, getattr, import_module, print and sys.stdout patched; three wrong answers
    "kernel_patches": lambda: with_cell(fill(real_blank(), {"text_to_ids": text_to_ids_wrong().body,
                                                            EXERCISE: UNSHIFTED.body,
                                                            "next_byte_loss": LOSS_WRONG.body}), KERNEL_PATCHES, at=1),
    # SystemExit with the pass text, an always-true tensor, and a right answer beside them
    "forgeries": lambda: fill(real_blank(), {"text_to_ids": f'raise SystemExit("{IDS_PASS}")',
                                             EXERCISE: ALWAYS_TRUE, "next_byte_loss": REFERENCE["next_byte_loss"]}),
    "forged_records": lambda: after_check(after_check(with_cell(
        fill(real_blank(), {"text_to_ids": REFERENCE["text_to_ids"], EXERCISE: UNSHIFTED.body,
                            "next_byte_loss": REFERENCE["next_byte_loss"]}), PLANTS_A_LINK, at=1),
        "text_to_ids", MAKES_HUGE), EXERCISE, FORGES_RECORD),
    "faked_cells": lambda: _faked_cells(),
    # the first exercise's function crashes its server; the two exercises after it are still checked
    "segfault_first": lambda: fill(real_blank(), {"text_to_ids": 'import faulthandler\nif text == "":\n'
                                                                 '    faulthandler._sigsegv()\n' + REFERENCE["text_to_ids"],
                                                  EXERCISE: REFERENCE[EXERCISE],
                                                  "next_byte_loss": REFERENCE["next_byte_loss"]}),
}


# Forgeries that the kernel can make, grouped three to a notebook (one per exercise of lesson
# 00): the verdicts are the grader's own checks of each function, so what the notebook does to
# its kernel's checkers decides nothing. Each wrong answer fails with a reason in words.
KERNEL_PATCHES = f"""\
import builtins, importlib, sys, types
import numpy as np
import course_lib.checks.core as _core
_core.Checker.close = lambda self, *args, **kwargs: None   # the kernel's checker passes anything
np.allclose = lambda *args, **kwargs: True                 # and so does the fresh one's numpy
_real_getattr = builtins.getattr


def _getattr(obj, name, *default):   # the check cell looks its checker up with getattr
    if name == "check_text_to_ids":
        return lambda fn: print({IDS_PASS!r})
    return _real_getattr(obj, name, *default)


builtins.getattr = _getattr
_real_import = importlib.import_module


def _import(name, *args):            # ...and loads its module with import_module
    module = _real_import(name, *args)
    if name == "course_lib.checks.lesson00":
        fake = types.ModuleType(name)
        fake.__dict__.update(module.__dict__)
        fake.check_next_byte_loss = lambda fn: print({LOSS_PASS!r})
        return fake
    return module


importlib.import_module = _import
_real_print = builtins.print


def _print(*args, **kwargs):         # every line about next_token_targets printed as its pass line
    text = " ".join(map(str, args))
    _real_print({PASS!r} if "next_token_targets" in text else text, **kwargs)


builtins.print = _print


class _Out:
    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        return self.stream.write({PASS + chr(10)!r} if "next_token_targets" in text else text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


sys.stdout = _Out(sys.stdout)"""

# next_token_targets' answer: unshifted, in tensors that say they equal anything
ALWAYS_TRUE = """\
class _Yes(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.equal, torch.allclose, torch.Tensor.equal, torch.Tensor.allclose):
            return True
        if func in (torch.Tensor.__eq__, torch.eq, torch.isclose):
            return torch.ones(args[0].shape, dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})
return ids[:-1].as_subclass(_Yes), ids[:-1].as_subclass(_Yes)"""

# Records written by the learner's code: text_to_ids' made huge after its check, next_token_targets'
# replaced by the right answer's record with its results shifted (plausible values), and
# next_byte_loss' saved through a link, by an open() that plants one. The answers to text_to_ids
# and next_byte_loss are right: only the tampering fails them.
PLANTS_A_LINK = """\
import builtins, os
_real_open = builtins.open


def _open(path, mode="r", *args, **kwargs):
    if isinstance(path, str) and path.endswith(os.path.join("records", "next_byte_loss.json")) \\
            and "w" in mode and not os.path.islink(path):
        os.symlink(os.path.abspath("decoy.json"), path)
    return _real_open(path, mode, *args, **kwargs)


builtins.open = _open"""
MAKES_HUGE = 'import os\nos.truncate("../grading.json", 100 * 2 ** 20)'
FORGES_RECORD = """\
import json, os, stat, struct
_text = json.dumps({"n": "?", "ready": "next_token_targets", "defined": True, "callable": True}).encode()
for _fd in range(3, 64):   # a server's reply, forged on every pipe the kernel holds
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
            os.write(_fd, struct.pack(">QQ", len(_text), 0) + _text + b"F tamper:none\\n")
    except OSError:
        pass"""


def after_check(nb, name, source):
    """nb with a code cell right after the learner's own check cell of exercise `name`."""
    at = next(j for n, _, j in exercises(nb) if n == name)
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(source))
    return nb


def text_to_ids_wrong():
    return next(w for w in WRONG if w.exercise == "text_to_ids" and w.inject)


def _faked_cells():
    """Wrong answers, each with a check that says it passed, its stored output the pass line and its
    id the lesson's check cell's: the learner's check cell edited; one tagged as a restored check,
    its exercise in the metadata; one untagged, its exercise in the metadata."""
    nb = fill(real_blank(), {"text_to_ids": text_to_ids_wrong().body, EXERCISE: UNSHIFTED.body,
                             "next_byte_loss": LOSS_WRONG.body})
    lesson = read(ROOT / "notebooks" / LESSON)
    theirs = {n: lesson.cells[j] for n, _, j in exercises(lesson)}
    for name, _, j in exercises(nb):
        line = "".join(o["text"] for o in theirs[name].outputs)
        cell = nb.cells[j]
        cell.source = f"print({line.strip()!r})"
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line)]
        cell.execution_count = 1
        if name == EXERCISE:
            cell.metadata = {"tags": ["check", "nbval-check-output"], "grading": {"exercise": name}}
        elif name == "next_byte_loss":
            cell.metadata = {"tags": [], "grading": {"exercise": name}}
        if theirs[name].get("id"):
            cell["id"] = theirs[name]["id"]
    return nb


# A notebook that tries to reach outside its sandbox. Its cell sets _WORKED to what the attack
# got (None when it was stopped) and _WHY to what stopped it; its answer is right only when the
# attack worked, so a sandbox that lets it through shows as a pass, and one that stops it as a
# failure whose feedback says what stopped it.
ATTACK_ANSWER = exercise_source("""\
if _WORKED is None:
    raise ValueError("attack blocked: " + _WHY)
return ids[:-1], ids[1:]""")


def attack(cell):
    return _replace_exercise(with_cell(blank(), "_WORKED, _WHY = None, ''\n" + cell), ATTACK_ANSWER)


ATTACKS = {
    # takes the answers in a classmate's notebook
    "reads": lambda c: attack(f"""\
try:
    _WORKED = open({str(c["folder"] / "helper" / LESSON)!r}).read()
except OSError as e:
    _WHY = repr(e)"""),
    # overwrites a classmate's submission, and writes into the class folder and --out
    "overwrites": lambda c: attack(f"""\
for _path in ({str(c["folder"] / "blank" / LESSON)!r}, {str(c["folder"] / "planted.txt")!r},
              {str(c["out"] / "gradebook.csv")!r}, {str(c["out"] / "planted.txt")!r}):
    try:
        with open(_path, "w") as f:
            f.write("planted")
        _WORKED = _path
    except OSError as e:
        _WHY += repr(e) + "; "
"""),
    # looks for the grader, and the kernels graded beside it, in /proc, and signals them
    "signals": lambda c: attack(f"""\
import os, signal
_mine = os.environ["HOME"]
for _pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        _cmd = open(f"/proc/{{_pid}}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        continue
    if "test_grading" in _cmd or ("grade-00_start_here-" in _cmd and _mine not in _cmd):
        _WORKED = _cmd
_WHY = "no foreign process in /proc; "
try:
    os.kill({c["grader"]}, 0)
    _WORKED = _WORKED or "the grader can be signalled"
except OSError as e:
    _WHY += repr(e)"""),
    # leaves a process behind that would run on after grading
    "outlives": lambda c: attack(f"""\
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)  # {c["marker"]}"],
                 start_new_session=True)
# and one that rewrites the gradebook, again and again, once the grader is done
subprocess.Popen([sys.executable, "-c", '''
import time  # {c["marker"]}
for _ in range(1800):
    time.sleep(0.5)
    try:
        open({str(c["out"] / "gradebook.csv")!r}, "w").write("planted")
    except OSError:
        pass'''], start_new_session=True)
_WHY = "left a process running"
"""),
    # raises its own limits, and starts more processes than it may. Each child (a small program,
    # started by posix_spawn, so a busy machine starts hundreds quickly) waits on a pipe until
    # the attack ends: none exits early to free its place, so what stops the spawning is the
    # process limit, however slowly the machine runs, and the feedback names that limit.
    "limits": lambda c: attack("""\
import os, resource
try:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    _WORKED = "raised its memory limit"
except (ValueError, OSError) as e:
    _WHY = repr(e) + "; "
_hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
_children, (_wait, _hold) = [], os.pipe()
try:
    for _ in range(100_000):
        _children.append(os.posix_spawn("/bin/cat", ["cat"], {}, file_actions=[
            (os.POSIX_SPAWN_DUP2, _wait, 0), (os.POSIX_SPAWN_CLOSE, _hold)]))
    _WORKED = _WORKED or f"started {len(_children)} processes"
except OSError as e:
    _WHY += f"{e!r} after {len(_children)} processes (process limit {_hard})"
os.close(_hold)
for _pid in _children:
    os.waitpid(_pid, 0)"""),
}


# Files that are not what they seem, each refused without being opened (learner: (make, reason)).
HAZARDS = {
    "links_solution": (lambda f, p: p.symlink_to(ROOT / "notebooks" / LESSON), "symbolic link"),
    "links_classmate": (lambda f, p: p.symlink_to(f / "helper" / LESSON), "symbolic link"),
    "devzero": (lambda f, p: p.symlink_to("/dev/zero"), "symbolic link (to /dev/zero)"),
    "fifo": (lambda f, p: os.mkfifo(p), "a FIFO (named pipe), not a regular file"),
    # sparse: 101 MB long, no disk used, and refused by its size alone
    "huge": (lambda f, p: (p.write_bytes(b""), os.truncate(p, 101 * 2 ** 20)), "101 MB, over the 100 MB"),
}


# What an honest learner leaves in a function: prints, display(), logging and warnings.
HABITS = """\
print("computing the targets of", ids)
from IPython.display import display
display({"ids": ids.tolist()})
import logging, warnings
logging.basicConfig()
logging.getLogger("mine").warning("a log line")
warnings.warn("a warning of my own")
import debugpy  # a library the graded kernel started without: the real one, all the same
assert debugpy.__file__.endswith("__init__.py")
import os  # the grader runs under a hub here (graded_class): its token and address never reach us
assert not [k for k in os.environ if k.startswith(("JUPYTERHUB_", "JPY_API_TOKEN", "COURSE_LIVE"))], "hub settings"
return ids[:-1], ids[1:]"""
HONEST = ["habits", "log_handler", "later_helper", "never_run", "v3", "subfolder", "exec_answer", "globals_answer"]


def _never_run(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def _edit_checks(nb, source):
    for cell in nb.cells:
        if "check" in tags(cell):
            cell.source = source
    return nb


def _replace_exercise(nb, source):
    nb.cells[exercise_index(nb)].source = source
    return nb


def folder_hash(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Grade one class: every learner above, plus the notebooks that cannot be graded."""
    base = tmp_path_factory.mktemp("grading")
    folder, out = base / "class", base / "grades"
    lessons_folder = toy_lessons(base / "lessons")
    for learner, make in LEARNERS.items():
        (folder / learner).mkdir(parents=True)
        nbformat.write(make(), folder / learner / LESSON)
    other = LESSONS[1]
    (folder / "renamed").mkdir()
    nbformat.write(fill(read(ROOT / "exercises" / other.name), REFERENCE), folder / "renamed" / LESSON)
    (folder / "misnamed").mkdir()
    nbformat.write(fill(blank(), REFERENCE), folder / "misnamed" / "00_start_here (1).ipynb")
    (folder / "unreadable").mkdir()
    (folder / "unreadable" / LESSON).write_text("{ not json")
    (folder / "nobody").mkdir()
    for learner, (make, _) in HAZARDS.items():
        (folder / learner).mkdir()
        make(folder, folder / learner / LESSON)
    (folder / "linked").symlink_to(folder / "helper")  # a learner folder that is a link
    (folder / "v3").mkdir()  # a notebook saved in nbformat 3
    (folder / "v3" / LESSON).write_text(nbformat.writes(nbformat.convert(fill(blank(), REFERENCE), 3), version=3))
    (folder / "subfolder" / "week1").mkdir(parents=True)
    nbformat.write(fill(blank(), REFERENCE), folder / "subfolder" / "week1" / LESSON)
    (folder / ".hidden").mkdir()  # a hidden folder: a warning, never silence
    nbformat.write(fill(blank(), REFERENCE), folder / ".hidden" / LESSON)
    if SANDBOXED:
        context = dict(folder=folder, out=out, grader=os.getpid(), marker=MARKER)
        for learner, make in ATTACKS.items():
            (folder / learner).mkdir()
            nbformat.write(make(context), folder / learner / LESSON)
    roster = base / "roster.txt"
    roster.write_text("learner\nhelper\nzoe\n")
    # Pay once, outside the graded kernels, for what a fresh environment builds on first import
    # (matplotlib's font list, the libraries' files read from disk).
    subprocess.run([sys.executable, "-c", "import matplotlib.pyplot, torch, course_lib.model"],
                   check=True)
    submitted = folder_hash(folder)
    instructor = graded_copy.tree_hash(ROOT)
    log = []

    def record(line):  # what the gradebook holds each time a notebook finishes
        rows = list(csv.DictReader((out / "gradebook.csv").open()))
        log.append((line, len(rows)))

    # The timed learners' kernels mostly sleep until their limit stops them: graded beside the
    # shared class, in a thread of this process, they add little to its time.
    # As in an instructor's server on a hub with the live view: the honest learner "habits"
    # fails if a graded kernel sees any of it (a kernel could report to the hub as a learner).
    with pytest.MonkeyPatch.context() as hub, ThreadPoolExecutor(max_workers=1) as pool:
        for key in ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTERHUB_SERVICE_URL"):
            hub.setenv(key, "the-instructors-own")
        hub.setenv("COURSE_LIVE_URL", "http://127.0.0.1:9/services/live/")
        timed = pool.submit(grade_timed_class, base, lessons_folder)
        rows, problems = gradebook.grade_class(folder, out, jobs=2, roster=roster, cell_timeout=TIMEOUT,
                                               notebook_timeout=240, memory_gib=3, log=record,
                                               sandbox=SANDBOXED, lessons=lessons_folder)
        timed = timed.result()
    changed = graded_copy.changed(instructor, graded_copy.tree_hash(ROOT))
    keep_log(timed["out"] / "grading.log")
    keep_log(out / "grading.log")
    return dict(folder=folder, out=out, rows=rows, problems=problems, log=log, roster=roster,
                lessons=lessons_folder, timed=timed, changed=changed,
                survivors=processes_with(MARKER),
                submissions_changed=folder_hash(folder) != submitted)


def grade_timed_class(base, lessons_folder):
    """Grade TIMED_LEARNERS as a class of their own, at SHORT_TIMEOUT seconds per cell."""
    folder, out = base / "timed-class", base / "timed-grades"
    for learner, make in TIMED_LEARNERS.items():
        (folder / learner).mkdir(parents=True)
        nbformat.write(make(), folder / learner / LESSON)
    rows, problems = gradebook.grade_class(folder, out, jobs=2, cell_timeout=SHORT_TIMEOUT,
                                           notebook_timeout=240, memory_gib=3, log=lambda line: None,
                                           html=False, sandbox=SANDBOXED, lessons=lessons_folder)
    return dict(folder=folder, out=out, rows=rows, problems=problems)


@pytest.fixture(scope="module")
def timed_class(graded_class):
    """The class of TIMED_LEARNERS, graded beside the shared class."""
    return graded_class["timed"]


@pytest.fixture(scope="module")
def real_class(tmp_path_factory):
    """The forgeries that need three exercises, graded as a class on the real lesson 00."""
    base = tmp_path_factory.mktemp("grading-real")
    folder, out = base / "class", base / "grades"
    for learner, make in REAL_LEARNERS.items():
        (folder / learner).mkdir(parents=True)
        nbformat.write(make(), folder / learner / LESSON)
    rows, problems = gradebook.grade_class(folder, out, jobs=2, cell_timeout=TIMEOUT, notebook_timeout=240,
                                           memory_gib=3, log=lambda line: None, html=False,
                                           sandbox=SANDBOXED)
    return dict(folder=folder, out=out, rows=rows, problems=problems)


ARTEFACTS = ROOT / "tests" / "artefacts" / "grading"
SANDBOXED = sandbox.unavailable() is None
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox here: {sandbox.unavailable()}")
MARKER = f"left-behind-{os.getpid()}-{time.time_ns()}"


def processes_with(text):
    """The command lines of this machine's processes that contain `text`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if text in command:
            found.append(command)
    return found


def keep_log(path):
    """Append the class's grading.log to tests/artefacts/grading/, where a rerun does not erase it."""
    if path.exists():
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        with (ARTEFACTS / "grading.log").open("a", encoding="utf-8") as f:
            f.write(path.read_text(encoding="utf-8"))


def row(graded_class, learner, lesson=LESSON[:-6]):
    """The learner's row for EXERCISE, or the one row of a notebook that could not be graded."""
    found = [r for r in graded_class["rows"] if r["learner"] == learner and r["lesson"] == lesson
             and r["exercise"] in (EXERCISE, "")]
    assert len(found) == 1, found
    return found[0]


def entries_of(log):
    """{learner/notebook: its entry} of a grading.log, whose entries start '### <time> <learner>/<file>'."""
    entries = {}
    for entry in ("\n" + log).split("\n### ")[1:]:
        entries[entry.split("\n", 1)[0].split(" ", 1)[1]] = entry
    return entries


def why(graded_class, learner):
    """A failed assertion's message: the learner's row and what grading.log says of their notebook."""
    log = graded_class["out"] / "grading.log"
    entries = entries_of(log.read_text(encoding="utf-8")) if log.exists() else {}
    mine = [e for name, e in entries.items() if name.startswith(f"{learner}/")]
    return f"{row(graded_class, learner)}\n" + ("".join(mine) or "(nothing in grading.log)")


def test_a_correct_answer_passes_in_a_kernel_with_one_thread_and_a_memory_limit(graded_class):
    r = row(graded_class, "helper")
    assert (r["status"], r["points"], r["max_points"]) == ("passed", "1", "1"), why(graded_class, "helper")
    assert r["feedback"] == PASS


def test_a_blank_notebook_fails_with_the_stub_message(graded_class):
    r = row(graded_class, "blank")
    assert r["status"] == "failed" and r["points"] == "0", why(graded_class, "blank")
    assert r["feedback"].startswith("NotImplementedError: Exercise 'next_token_targets'")


@pytest.mark.parametrize("learner", ["edited", "redefines", "patches", "custom_exc"])
def test_a_wrong_answer_fails_with_its_hint_whatever_the_notebook_did_to_the_check(graded_class, learner):
    r = row(graded_class, learner)
    assert r["status"] == "failed", why(graded_class, learner)
    assert UNSHIFTED.hint in r["feedback"] and "AssertionError" in r["feedback"]


@pytest.mark.parametrize("learner, shown", [
    ("cr_forgery", f"NotImplementedError: \\r{PASS}"),
    # the exception named after the exercise comes to the grader as data: its message alone
    ("named_forgery", f"NotImplementedError: {PASS.split(': ')[1]}"),
])
def test_a_failure_cannot_print_itself_as_the_pass_line(graded_class, learner, shown):
    r = row(graded_class, learner)
    assert r["status"] == "failed" and r["points"] == "0", why(graded_class, learner)
    assert shown in r["feedback"], r["feedback"]


def test_an_input_transformer_decides_nothing(graded_class):
    """One that drops the check lines: the wrong answer fails with its hint all the same; one that
    drops the grader's last cell: no server, so nothing is checked and nothing passes."""
    r = row(graded_class, "transformer")
    assert r["status"] == "failed" and UNSHIFTED.hint in r["feedback"], why(graded_class, "transformer")
    r = row(graded_class, "drops_trigger")
    assert r["status"] == "not run", why(graded_class, "drops_trigger")
    assert r["feedback"] == ("the notebook's run did not reach the grader's last cell, so nothing of it "
                             "can be called"), r["feedback"]


@pytest.mark.parametrize("learner, said", [
    ("exits", "the kernel exited with status 3"),
    ("sigkill", "was killed (SIGKILL)"),
])
def test_a_kernel_that_dies_before_the_grader_calls_means_not_run(graded_class, learner, said):
    r = row(graded_class, learner)
    assert r["status"] == "not run" and said in r["feedback"], why(graded_class, learner)
    assert "the cells after it did not run" in r["feedback"], r["feedback"]


def test_a_function_that_crashes_its_server_fails_and_says_so(graded_class):
    r = row(graded_class, "segfault")
    assert r["status"] == "failed", why(graded_class, "segfault")
    assert ("your function ended the grader's process while it was checked: it crashed with a "
            "segmentation fault (SIGSEGV)") in r["feedback"], r["feedback"]


def test_a_loop_that_swallows_the_interrupt_is_stopped_and_named(timed_class):
    r = row(timed_class, "swallows")
    assert r["status"] == "not run", why(timed_class, "swallows")
    # the limit named is the one that applied
    assert f"ran past the {SHORT_TIMEOUT} s time limit per cell and did not stop when interrupted" in r["feedback"]
    assert "(`import time`)" in r["feedback"]


def test_a_timeout_is_said_as_a_timeout(timed_class):
    r = row(timed_class, "endless")
    assert r["status"] == "failed", why(timed_class, "endless")
    assert (f"your function ran past the {SHORT_TIMEOUT:g} s time limit for a call (an endless loop, or "
            f"far too slow?)") in r["feedback"], r["feedback"]


@pytest.mark.parametrize("learner", HONEST)
def test_honest_habits_pass(graded_class, learner):
    r = row(graded_class, learner)
    assert (r["status"], r["feedback"]) == ("passed", PASS), why(graded_class, learner)


def test_where_a_notebook_stopped_is_said_beside_its_grade_on_the_page_and_in_the_report(graded_class):
    r = row(graded_class, "stops")
    assert (r["status"], r["feedback"]) == ("passed", PASS), why(graded_class, "stops")
    said = "stopped with ValueError: a typo of mine \\x1b[2J"   # its escape shown, never obeyed
    assert r["stopped"].startswith("cell ") and r["stopped"].endswith(said), r["stopped"]
    page = (graded_class["out"] / "feedback" / "stops" / f"{LESSON[:-6]}.html").read_text()
    text = re.sub(r"<[^>]+>", "", page)
    assert "Your notebook's run: cell " in text and said in html.unescape(text) and "\x1b" not in page
    html_ = report.render(graded_class["rows"])
    table = html_[html_.index("Notebooks that stopped"):html_.index("Go over these")]
    assert "<td>stops</td>" in table and said in html.unescape(table)


@pytest.mark.parametrize("learner", ["copied", "helper"])
def test_the_check_follows_the_cell_that_last_defines_the_function(graded_class, learner):
    assert row(graded_class, learner)["status"] == "passed", why(graded_class, learner)


def test_a_kernel_slow_to_send_a_cells_outputs_as_on_a_busy_machine_still_passes(graded_class):
    """The flaky "not run" of a correct notebook: nbval stopped a kernel 5 s after its reply."""
    r = row(graded_class, "stalls")
    assert (r["status"], r["feedback"]) == ("passed", PASS), why(graded_class, "stalls")


RAN_THROUGH = {"drops_trigger"}   # not run: every cell passed, but the grader's last cell never served


def not_run_logged(graded, kernels_expected, misnamed=()):
    """Check that every "not run" of a class is in its grading.log with its reason (and, where a
    kernel ran, pytest's output); its log."""
    log = (graded["out"] / "grading.log").read_text()
    entries = entries_of(log)
    not_run = {r["learner"] for r in graded["rows"] if r["status"] == "not run"}
    kernels = not_run - {"renamed", "misnamed", "unreadable", "linked", *HAZARDS}  # no kernel started
    assert kernels == kernels_expected
    expected = {f"{learner}/{LESSON}" for learner in not_run - {"misnamed", "linked"}} | set(misnamed)
    assert expected <= set(entries)
    for name in set(entries) - expected:  # a kernel that a busy machine did not start in time
        assert "graded on a second try" in entries[name], entries[name]
    for learner in not_run - {"misnamed", "linked"}:
        entry = entries[f"{learner}/{LESSON}"]
        assert row(graded, learner)["feedback"] in entry
    for learner in kernels:
        entry = entries[f"{learner}/{LESSON}"]
        assert "pytest's output (its tail):" in entry
        assert "failed" in entry.split("its tail):")[1] or learner in RAN_THROUGH
        assert "kernel ready after" in entry and "torch" in entry  # imported while it started
    return log


def test_every_not_run_is_logged_with_its_reason_and_pytests_output(graded_class, timed_class):
    # (segfault's server dies in the check of the toy lesson's one exercise: failed, not "not run";
    # endless's call is stopped at the time limit: failed)
    log = not_run_logged(graded_class, {"exits", "sigkill", "drops_trigger"},
                         misnamed=["misnamed/00_start_here (1).ipynb"])
    timed = not_run_logged(timed_class, {"swallows"})
    assert (ARTEFACTS / "grading.log").read_text().endswith(timed + log)


def _fails_to_start_once(monkeypatch):
    real, calls = run._run_copy, []

    def run_copy(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            return run.Run({}, start_failure="the machine was too slow to start the kernel (test)"), {}
        return real(*args, **kwargs)
    monkeypatch.setattr(run, "_run_copy", run_copy)
    return calls


def test_a_kernel_that_did_not_start_is_started_again_once_and_it_says_so(tmp_path, monkeypatch):
    path = tmp_path / LESSON
    nbformat.write(fill(blank(), REFERENCE), path)
    calls = _fails_to_start_once(monkeypatch)
    graded = run.grade(path, cell_timeout=TIMEOUT, lessons=toy_lessons(tmp_path / "lessons"))
    assert len(calls) == 2
    assert [r.status for r in checks_of(graded.results)] == ["passed"] * N_EXERCISES, graded.log
    assert graded.retried == ("graded on a second try: on the first, the machine was too slow to "
                              "start the kernel (test)")
    assert calls[0][0] != calls[1][0]  # a fresh copy for the second try


def test_a_kernel_that_cannot_start_at_all_is_not_run_with_the_reason(tmp_path):
    path = tmp_path / LESSON
    nbformat.write(fill(blank(), REFERENCE), path)
    graded = run.grade(path, startup_timeout=0.01, lessons=toy_lessons(tmp_path / "lessons"))
    assert len(checks_of(graded.results)) == N_EXERCISES
    for result in checks_of(graded.results):
        assert result.status == "not run"
        assert result.feedback.startswith(
            "the machine was too slow to start the kernel (RuntimeError: ")
        assert result.feedback.endswith(
            "tried twice, so this notebook was not graded: grade it again")
    assert graded.retried.startswith("graded on a second try: on the first, the machine was too slow")
    assert "pytest's output (its tail):" in graded.log and "RuntimeError" in graded.log


def test_a_notebook_past_its_time_limit_is_stopped(tmp_path):
    """The run is stopped at its limit, which covers the notebook's run and every call of its
    functions, and says so: in the log and in each exercise's row (nothing was checked)."""
    path = tmp_path / LESSON
    # the notebook's limit counts from when its kernel is ready, and its first code cell sleeps
    nbformat.write(with_cell(fill(blank(), REFERENCE), "import time\ntime.sleep(60)", at=1), path)
    start = time.monotonic()
    graded = run.grade(path, cell_timeout=120, notebook_timeout=5, lessons=toy_lessons(tmp_path / "lessons"))
    results = checks_of(graded.results)
    assert len(results) == N_EXERCISES
    assert "stopped: the notebook ran past its 5 s time limit" in graded.log
    for result in results:
        assert (result.status, result.feedback) == ("not run", "the notebook ran past its 5 s time limit"), result
    assert time.monotonic() - start < 60


def test_a_syntax_error_is_reported_as_a_syntax_error(graded_class):
    r = row(graded_class, "syntax")
    assert r["status"] == "failed"
    assert re.match(r"the cell that defines next_token_targets, cell \d+ "
                    r"\(`def next_token_targets\(ids\):`\), raised SyntaxError", r["feedback"])


def test_writes_stay_in_the_graded_copy_and_tampering_with_it_fails(graded_class):
    r = row(graded_class, "writes")
    assert r["status"] == "failed"
    if SANDBOXED:  # the copy's course_lib is read-only: the write fails, the check runs as it is
        assert UNSHIFTED.hint in r["feedback"], why(graded_class, "writes")
    else:
        assert "changed the grading copy of course_lib (course_lib/checks/lesson00.py)" in r["feedback"]
    assert graded_class["changed"] == []
    assert not graded_class["submissions_changed"]
    assert not (ROOT / "notebooks" / "stray.txt").exists()


@needs_sandbox
@pytest.mark.parametrize("learner, stopped_by", [
    ("reads", "FileNotFoundError"),          # the class folder is not in the sandbox at all
    ("overwrites", "FileNotFoundError"),
    ("signals", "ProcessLookupError"),       # its own PID namespace: the grader is not there
    ("limits", "PermissionError"),           # the hard limits: no raising them; no process to start
])
def test_a_notebook_cannot_reach_outside_its_sandbox(graded_class, learner, stopped_by):
    r = row(graded_class, learner)
    assert r["status"] == "failed" and r["sandbox"] == "bubblewrap", why(graded_class, learner)
    assert "attack blocked: " in r["feedback"] and stopped_by in r["feedback"], r["feedback"]
    if learner == "limits":  # not raised; and the graded kernel starts no process at all
        assert "ValueError" in r["feedback"], r["feedback"]
        started, limit = map(int, re.search(r"after (\d+) processes \(process limit (\d+)\)", r["feedback"]).groups())
        assert limit != -1 and started == 0, r["feedback"]  # RLIM_INFINITY is -1


@needs_sandbox
def test_nothing_outside_the_sandbox_changed_and_no_process_outlived_its_notebook(graded_class):
    folder, out = graded_class["folder"], graded_class["out"]
    assert not graded_class["submissions_changed"]
    time.sleep(2)  # the process that would rewrite the gradebook after the grader: not there
    assert not (folder / "planted.txt").exists() and not (out / "planted.txt").exists()
    assert "planted" not in (out / "gradebook.csv").read_text()
    assert row(graded_class, "outlives")["status"] == "failed"
    assert graded_class["survivors"] == [] and processes_with(MARKER) == []
    assert {r["sandbox"] for r in graded_class["rows"] if r["status"] in ("passed", "failed")} == {
        "bubblewrap"}


def test_notebooks_that_cannot_be_graded_each_get_a_row_with_the_reason(graded_class):
    renamed = row(graded_class, "renamed")
    assert renamed["status"] == "not run"
    assert f"this notebook is lesson {LESSONS[1].stem}" in renamed["feedback"]
    misnamed = row(graded_class, "misnamed", "00_start_here (1)")
    assert misnamed["status"] == "not run"
    assert "no lesson is named 00_start_here (1).ipynb; it looks like 00_start_here.ipynb" in misnamed["feedback"]
    unreadable = row(graded_class, "unreadable")
    assert unreadable["status"] == "not run" and "could not be read" in unreadable["feedback"]
    nobody = row(graded_class, "nobody")
    assert nobody["status"] == "missing" and "empty" in nobody["feedback"]
    zoe = row(graded_class, "zoe")
    assert zoe["status"] == "missing" and "no folder" in zoe["feedback"]
    assert row(graded_class, "misnamed")["status"] == "missing"  # and lesson 00 is missing
    # each is a row with its reason, none the grader's own failure: grade_class counts only those
    assert graded_class["problems"] == 0


@pytest.mark.parametrize("learner", HAZARDS)
def test_a_submission_that_is_not_a_regular_file_of_its_own_is_refused_unopened(graded_class, learner):
    r = row(graded_class, learner)
    assert r["status"] == "not run" and r["sandbox"] == ""
    assert r["feedback"].startswith("this submission was refused: it is ") and HAZARDS[learner][1] in r["feedback"]


def test_a_learner_folder_that_is_a_link_is_refused_and_a_hidden_one_is_named(graded_class):
    r = row(graded_class, "linked", "linked")
    assert r["status"] == "not run" and "is a symbolic link" in r["feedback"]
    assert not any(r["learner"] == ".hidden" for r in graded_class["rows"])
    assert any(line.startswith("WARNING: .hidden: not graded, since its name starts with a dot")
               for line, _ in graded_class["log"])


def test_feedback_pages_cap_the_stored_outputs_they_show():
    nb = blank()
    nb.cells[exercise_index(nb)].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 10 ** 6)]
    graded = run.Graded(ROOT / LESSON, "00_start_here", submission=nb, results=[
        verdicts.Result(EXERCISE, "failed", "Hint: slice", 0, 1)])
    html = feedback.feedback_html(graded, "ada")
    assert len(html) < 10 ** 6 and "characters of this cell" in html and "x" * 19_000 in html


def test_gradebook_summary_and_feedback_files(graded_class):
    out = graded_class["out"]
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert list(rows[0])[:7] == ["learner", "lesson", "exercise", "points", "max_points", "status",
                                 "feedback"]
    assert {r["status"] for r in rows} <= set(gradebook.STATUSES)
    # a row per exercise for each learner whose notebook ran, for the renamed and the unreadable
    # notebook, and for zoe's, nobody's and the misnamed learner's missing lesson 00; one row for
    # the misnamed notebook itself
    kernels = len(LEARNERS) + 2 + (len(ATTACKS) if SANDBOXED else 0)  # 2: v3, subfolder
    assert len(rows) == len(graded_class["rows"]) == (N_EXERCISES + N_QUESTIONS) * (
        kernels + 5 + len(HAZARDS)) + 2
    summary = {r["learner"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert list(summary["helper"]) == ["learner", "00_start_here", "total", "max_total", "questions",
                                       "max_questions"]
    assert (summary["helper"]["total"], summary["blank"]["total"]) == ("1", "0")
    assert summary["zoe"]["max_total"] == str(N_EXERCISES + N_QUESTIONS)
    assert summary["zoe"]["max_questions"] == str(N_QUESTIONS)
    html = (out / "feedback" / "edited" / "00_start_here.html").read_text()
    assert "Check <code>next_token_targets</code>: failed" in html
    assert UNSHIFTED.hint.replace("'", "&#39;") in html or UNSHIFTED.hint in html
    graded = [line for line, _ in graded_class["log"] if line.startswith("[")]
    assert len(graded) == kernels + 3 + len(HAZARDS)  # each kernel run, renamed, misnamed, unreadable
    counts = [n for line, n in graded_class["log"] if line.startswith("[")]
    assert counts == sorted(counts) and counts[0] >= 1  # rows are in the gradebook as each finishes


def test_a_rerun_grades_only_what_changed(graded_class, tmp_path):
    folder, out = graded_class["folder"], graded_class["out"]
    nbformat.write(fill(blank(), REFERENCE), folder / "blank" / LESSON)
    log = []
    rows, _ = gradebook.grade_class(folder, out, jobs=2, roster=graded_class["roster"], cell_timeout=TIMEOUT,
                                  notebook_timeout=240, memory_gib=3, log=log.append, html=False,
                                  lessons=graded_class["lessons"])
    ran = [line for line in log if line.startswith("[")]
    # no kernel: checked again each time
    cheap = ("renamed/", "misnamed/", "unreadable/", *(f"{h}/" for h in HAZARDS))
    # a notebook with a "not run" row is graded again by itself (issue 20)
    again = {r["learner"] for r in graded_class["rows"] if r["status"] == "not run" and r["sha256"]}
    assert {line.split("] ", 1)[1].split("/")[0] for line in ran
            if not any(c in line for c in cheap)} == {"blank"} | again
    assert len([line for line in ran if "blank/" in line]) == 1
    assert row(dict(rows=rows), "blank")["status"] == "passed"
    assert row(dict(rows=rows), "edited") == row(graded_class, "edited")
    nbformat.write(blank(), folder / "blank" / LESSON)  # as it was, for the other tests


def test_the_graded_copy_kept_reruns_the_cells_the_grader_ran(tmp_path):
    """--keep: `python -m pytest notebooks/` in the copy runs the learner's cells as the grader did, and
    its last cell (the grader's) serves nothing without the grader: a plain run, the same outcomes."""
    path = tmp_path / LESSON
    nbformat.write(real_wrong(), path)
    keep = tmp_path / "graded"
    graded = run.grade(path, keep=keep)
    result = next(r for r in graded.results if r.exercise == EXERCISE)
    assert result.status == "failed" and UNSHIFTED.hint in result.feedback
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    rerun = subprocess.run([sys.executable, "-m", "pytest", "notebooks/"], cwd=keep, env=env,
                           capture_output=True, text=True, timeout=300)
    said = rerun.stdout.splitlines()[0].split()[0]   # a letter per code cell: . passed, F failed
    code = [c for c in nbformat.read(keep / "notebooks" / LESSON, as_version=4).cells if c.cell_type == "code"]
    assert set(said) <= {".", "F"} and len(said) == len(code), rerun.stdout[-2000:]
    assert rerun.returncode == (1 if "F" in said else 0), rerun.stdout[-2000:]


def test_single_notebook_command(tmp_path, capsys):
    missing = tmp_path / "nowhere.ipynb"
    assert cli.main([str(missing)]) == 2
    assert "there is no notebook" in capsys.readouterr().err


def test_class_mode_refuses_to_grade_unsandboxed_unless_told(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "class"
    (folder / "ada").mkdir(parents=True)
    nbformat.write(real_blank(), folder / "ada" / LESSON)
    for module in (run, cli):
        monkeypatch.setattr(module, "unavailable", lambda: "bubblewrap is not installed (test)")
    assert cli.main([str(folder), "--class", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "bubblewrap is not installed (test)" in err and "--no-sandbox" in err
    assert not (tmp_path / "out" / "gradebook.csv").exists()
    assert cli.main([str(folder / "ada" / LESSON), "--timeout", "60"]) == 0  # one notebook: graded
    out = capsys.readouterr().out
    assert out.startswith("notice: no sandbox here (bubblewrap is not installed (test))")
    assert "next_token_targets: failed" in out
    assert "graded without a sandbox" in out


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_an_empty_or_missing_class_folder_is_a_message_not_a_traceback(tmp_path, capsys, make):
    folder = tmp_path / "class"
    if make == "empty":
        folder.mkdir()
    assert cli.main([str(folder), "--class", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and ("no class folder" in err or "is empty" in err)


# ---------------------------------------------------------------- without a kernel: every lesson

@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_graded_copy_of_each_lesson_holds_the_learners_cells_then_the_graders_last_cell(lesson, tmp_path):
    nb = read(ROOT / "exercises" / lesson.name)
    found = lessons.lesson_exercises(read(lesson))
    copy, placements = graded_copy.graded_copy(nb, read(lesson), found, tmp_path)
    code = [c for c in copy.cells if c.cell_type == "code"]
    for p, (name, i, _) in zip(placements, exercises(nb)):
        assert p.exercise == name
        assert code[p.defined_in].source == nb.cells[i].source
    assert not any("check" in tags(c) for c in code)   # the learner's own checks: the grader checks
    from course_lib.grading.kernel import TRIGGER_CELL
    assert code[-1].source == TRIGGER_CELL and copy.cells[-1] is code[-1]   # nothing after it


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_each_checker_prints_the_lessons_stored_pass_line(lesson, capsys):
    """The pass line nbval compares is fixed: the checker prints it again for the reference."""
    for ex in lessons.lesson_exercises(read(lesson)):
        import importlib
        checker = getattr(importlib.import_module(ex.module), f"check_{ex.name}")
        checker(function_from(ex.name, REFERENCE[ex.name]))
        assert capsys.readouterr().out == "".join(o["text"] for o in ex.pass_output)


def test_points_come_from_the_check_cells_metadata(tmp_path):
    lesson = read(ROOT / "notebooks" / LESSON)
    assert [e.points for e in lessons.lesson_exercises(lesson)] == [1] * REAL_EXERCISES
    lesson.cells[exercises(lesson)[0][2]].metadata["points"] = 2.5
    assert [e.points for e in lessons.lesson_exercises(lesson)] == [2.5] + [1] * (REAL_EXERCISES - 1)
    lesson.cells[exercises(lesson)[0][2]].metadata["points"] = "two"
    with pytest.raises(ValueError, match="points='two'"):
        lessons.lesson_exercises(lesson)


def test_feedback_html_escapes_the_learners_own_html():
    nb = blank()
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("## Mine <script>alert(1)</script>"))
    graded = run.Graded(ROOT / LESSON, "00_start_here", submission=nb, results=[
        verdicts.Result(EXERCISE, "failed", "Hint: <script>alert(2)</script>", 0, 1)])
    html = feedback.feedback_html(graded, "ada")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html
    assert "Check <code>next_token_targets</code>: failed" in html and "0 of 1 points" in html


def test_the_feedback_page_is_nbconverts_page_without_its_second_pass(monkeypatch):
    """The grader's exporter skips HTMLExporter's BeautifulSoup pass and adds what it adds itself,
    and remembers each cell's sanitized and highlighted HTML from one page to the next: parsed,
    its page after another learner's is nbconvert's own (but for the new cells' random ids and
    the time)."""
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors.sanitize import SanitizeHTML
    nb = read(ROOT / "notebooks" / "01_attention_by_hand.ipynb")  # images, HTML, widgets' stills
    nb.cells.insert(1, nbformat.v4.new_markdown_cell('<img src="x.png"> <div class="jp-OutputArea-output">mine</div>'))
    graded = run.Graded(ROOT / "01_attention_by_hand.ipynb", "01_attention_by_hand", submission=nb,
                        results=[verdicts.Result("softmax", "failed", "Hint: <b>x</b>", 0, 1)])
    other = run.Graded(ROOT / "01_attention_by_hand.ipynb", "01_attention_by_hand",
                       submission=read(ROOT / "exercises" / "01_attention_by_hand.ipynb"))
    monkeypatch.setattr(feedback, "_EXPORTERS", type(feedback._EXPORTERS)())
    feedback.feedback_html(other, "bo")  # the lesson's cells, remembered
    fast = feedback.feedback_html(graded, "ada")

    class Theirs(HTMLExporter):   # nbconvert's own, the markdown sanitized after it is rendered
        def default_filters(self):
            for name, function in super().default_filters():
                yield name, (feedback._sanitized_markdown(function) if name == "markdown2html" else function)

    class TheirSanitizer(SanitizeHTML):   # bleach before markdown would escape its `>`
        def preprocess_cell(self, cell, resources, index):
            if cell.cell_type == "markdown":
                return cell, resources
            return super().preprocess_cell(cell, resources, index)
    monkeypatch.setattr(feedback, "_page_exporter", lambda: Theirs)
    monkeypatch.setattr(feedback, "_remembering_sanitizer", lambda: TheirSanitizer)
    monkeypatch.setattr(feedback, "_EXPORTERS", type(feedback._EXPORTERS)())
    theirs = feedback.feedback_html(graded, "ada")

    def parsed(page):
        return re.sub(r"Graded \d{4}-\d\d-\d\d \d\d:\d\d|cell-id=[0-9a-f-]+", "",
                      str(BeautifulSoup(page, features="html.parser")))
    assert fast.count('tabindex="0"') > 10
    assert parsed(fast) == parsed(theirs)


def test_a_graded_copy_gets_hash_checked_bytecode_that_python_ignores_for_a_changed_source(tmp_path):
    """The copy's course_lib comes with the grader's bytecode (so no process compiles it from
    source), which Python uses only for exactly the source it was compiled from."""
    nb, placements = graded_copy.graded_copy(blank(), toy_lesson(), lessons.lesson_exercises(toy_lesson()), tmp_path)
    graded_copy.write_copy(tmp_path, nb, LESSON, placements, 60, 0, 600)
    cached = tmp_path / "course_lib" / "checks" / "__pycache__"
    pyc = next(cached.glob("tables.cpython-*.pyc"))
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b11  # PEP 552: hash-based, checked
    instructors = graded_copy.tree_hash(ROOT, ("course_lib",))
    assert instructors.pop("course_lib/checks/solutions.json")  # kept out of every copy (NOT_COPIED)
    assert graded_copy.tree_hash(tmp_path, ("course_lib",)) == instructors
    source = tmp_path / "course_lib" / "checks" / "tables.py"
    source.write_text(source.read_text() + "\nCHANGED = True\n")
    shown = subprocess.run([sys.executable, "-c", "import course_lib.checks.tables as r, course_lib; "
                            "print(course_lib.__file__, getattr(r, 'CHANGED', False))"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert shown.stdout.split() == [str(tmp_path / "course_lib" / "__init__.py"), "True"], shown.stderr


def test_a_record_line_not_signed_by_the_plugin_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "record.jsonl"
    monkeypatch.setattr(plugin, "_RECORD", [str(path), "secret"])
    plugin._record({"cell": 0, "outcome": "failed"})
    with path.open("a") as f:
        f.write('0000 {"cell": 0, "outcome": "passed"}\n')
    assert plugin._read_records(path, "secret") == ([{"cell": 0, "outcome": "failed"}], True)


def test_a_record_line_cut_short_is_not_a_forgery(tmp_path, monkeypatch):
    """A run killed at its time limit while it wrote a record: the lines before still count."""
    path = tmp_path / "record.jsonl"
    monkeypatch.setattr(plugin, "_RECORD", [str(path), "secret"])
    plugin._record({"cell": 0, "outcome": "passed"})
    with path.open("a") as f:
        f.write('ab12 {"cell": 1, "outc')
    assert plugin._read_records(path, "secret") == ([{"cell": 0, "outcome": "passed"}], False)


def test_why_an_exercise_was_not_checked_names_the_cell_that_stopped_the_notebook():
    settings = {"cell_timeout": 60, "sources": {"0": "import torch", "1": "x = 1", "2": "y = x\x1b[2J\r"}}
    base = dict(when="call", xfail=False, died=False, error=None, stdout="", late=None, busy=None)
    dead = dict(base, outcome="failed", message="Kernel dead on test start")
    defined = graded_copy.Placement("f", 1, 1)
    late = {0: dict(base, outcome="passed", message=None),
            1: dict(base, outcome="failed", message="Timeout of 5 seconds exceeded waiting for output.",
                    late=60.2),
            2: dead}
    unserved = "the notebook's run did not reach the grader's last cell, so nothing of it can be called"
    (r,) = verdicts.verdicts(late, [defined], settings, unserved=unserved)
    assert (r.status, r.feedback) == ("not run", "the machine was too busy: the kernel finished cell 1 "
                                                 "(`x = 1`) but its output had not arrived 60.2 s later, "
                                                 "so nbval stopped the kernel; grade it again")
    died = {**late, 1: dict(base, outcome="failed", message="the kernel crashed with a segmentation fault "
                                                            "(SIGSEGV)", died=True)}
    (r,) = verdicts.verdicts(died, [defined], settings, unserved=unserved)
    assert r.feedback == ("the kernel crashed with a segmentation fault (SIGSEGV) in cell 1 (`x = 1`); "
                          "the cells after it did not run")
    # a cell that raised is said beside the feedback of what was checked, its first line escaped
    raised = {0: late[0], 1: dict(base, outcome="passed", message=None),
              2: dict(base, outcome="failed", message="", error=["NameError", "name 'x' is not defined"])}
    from course_lib.grading.remote import Outcome
    (r,) = verdicts.verdicts(raised, [defined], settings,
                             outcomes={"f": Outcome("failed", "AssertionError: Exercise 'f': wrong")})
    assert r.feedback == ("AssertionError: Exercise 'f': wrong\n(your notebook: cell 2 (`y = x\\x1b[2J\\r`) "
                          "stopped with NameError: name 'x' is not defined)")


def test_defines_finds_helpers_copies_imports_and_broken_cells():
    assert lessons.defines("def helper():\n    pass\n\ndef f(x):\n    return x", "f")
    assert lessons.defines("from mine import f", "f")
    assert lessons.defines("def f(x):\n    return x[", "f")  # a SyntaxError: by its text
    assert not lessons.defines("y = f(2)", "f")


def test_cells_are_parsed_one_thread_at_a_time(monkeypatch):
    """Python 3.11's ast.parse is not thread-safe (CPython gh-106905): under load, two notebooks
    graded at once once gave 'SystemError: AST constructor recursion depth mismatch'."""
    from course_lib import exercises as ex

    held = []

    class Watched:
        def __enter__(self):
            held.append(True)

        def __exit__(self, *exc):
            held.pop()

    parsed_while_held = []
    real_parse = ex.ast.parse
    monkeypatch.setattr(ex, "_AST_LOCK", Watched())
    monkeypatch.setattr(ex.ast, "parse", lambda source: (parsed_while_held.append(bool(held)),
                                                          real_parse(source))[1])
    lessons._names_bound.cache_clear()
    assert lessons._names_bound("def f(x):\n    return x") == {"f"}
    assert ex.exercise_name("def g():\n    pass") == "g"
    assert parsed_while_held == [True, True]


def test_a_gradebook_is_replaced_whole_or_not_at_all(tmp_path):
    book = tmp_path / "gradebook.csv"
    gradebook._write_csv(book, ["a"], [{"a": "first"}])

    def rows():
        yield {"a": "second"}
        raise KeyboardInterrupt  # the grader killed while it writes

    with pytest.raises(KeyboardInterrupt):
        gradebook._write_csv(book, ["a"], rows())
    assert book.read_text().splitlines() == ["a", "first"] and os.listdir(tmp_path) == ["gradebook.csv"]


def test_a_grader_killed_mid_class_leaves_the_last_complete_gradebook(tmp_path, monkeypatch):
    folder = tmp_path / "class"
    for learner in ("ada", "bob", "cy"):
        (folder / learner).mkdir(parents=True)
        nbformat.write(blank(), folder / learner / LESSON)

    def fake(path, **kwargs):
        return run.Graded(path, "00_start_here", [verdicts.Result(EXERCISE, "failed", "=HYPERLINK(\"x\")", 0, 1)],
                          sha256="s", sandbox="none")

    def log(line):
        if line.startswith("[2/"):
            raise KeyboardInterrupt
    monkeypatch.setattr(gradebook, "grade", fake)
    with pytest.raises(KeyboardInterrupt):
        gradebook.grade_class(folder, tmp_path / "out", jobs=1, html=False, log=log, sandbox=False)
    rows = list(csv.DictReader((tmp_path / "out" / "gradebook.csv").open()))
    assert len(rows) == 2 and len({r["learner"] for r in rows}) == 2  # the two graded before the kill
    assert all(r["feedback"] == "'=HYPERLINK(\"x\")" for r in rows)  # inert in a spreadsheet
    assert gradebook._read_gradebook(tmp_path / "out" / "gradebook.csv")[(rows[0]["learner"], "00_start_here")][0][
        "feedback"] == "=HYPERLINK(\"x\")"  # and read back as it was


@pytest.mark.parametrize("text, shown", [("=1+1", "'=1+1"), ("+1", "'+1"), ("-2+3", "'-2+3"),
                                         ("@SUM(A1)", "'@SUM(A1)"), ("'quoted", "''quoted"),
                                         ("AssertionError: -1", "AssertionError: -1")])
def test_text_that_a_spreadsheet_would_run_is_made_inert(text, shown):
    assert gradebook.inert(text) == shown and gradebook._plain(shown) == text


@pytest.mark.parametrize("learner", ["later_helper", "exec_answer", "globals_answer"])
def test_the_copy_keeps_a_helper_or_an_answer_bound_in_a_later_cell(learner, tmp_path):
    nb = LEARNERS[learner]()
    lesson = toy_lesson()
    graded, placements = graded_copy.graded_copy(nb, lesson, lessons.lesson_exercises(lesson), tmp_path)
    code = [c for c in graded.cells if c.cell_type == "code"]
    p = next(p for p in placements if p.exercise == EXERCISE)
    assert ("_shift" if learner == "later_helper" else EXERCISE) in code[-2].source   # just before the grader's
    assert "def next_token_targets" in code[p.defined_in].source


def test_the_gradebook_says_what_each_notebook_cost_in_cpu(graded_class):
    cpu = {r["learner"]: float(r["cpu_seconds"]) for r in graded_class["rows"] if r["cpu_seconds"]}
    assert cpu["helper"] > 0.1  # its pytest and kernel, which ran the lesson's cells
    # and torch's import counts somewhere: in each fresh kernel, or once in each job's zygote
    # (session.ForkedSandbox), on the notebook it was imported for
    assert max(cpu.values()) > 1.0, cpu
    assert row(graded_class, "fifo")["cpu_seconds"] == ""  # refused: nothing ran


# ---------------------------------------------------------------- forgeries the grader's checks decide

def row_of(graded_class, learner, exercise):
    found = [r for r in graded_class["rows"] if r["learner"] == learner and r["exercise"] == exercise]
    assert len(found) == 1, found
    return found[0]


def rows_of(graded_class, learner):
    return {e: row_of(graded_class, learner, e) for e in ("text_to_ids", EXERCISE, "next_byte_loss")}


def test_a_function_that_crashes_its_server_leaves_the_exercises_after_it_checked(real_class):
    """Each exercise has a server of its own, forked for it from the notebook's: one that crashes
    costs that exercise alone."""
    rows = rows_of(real_class, "segfault_first")
    assert rows["text_to_ids"]["status"] == "failed", why(real_class, "segfault_first")
    assert "segmentation fault (SIGSEGV)" in rows["text_to_ids"]["feedback"]
    for exercise in (EXERCISE, "next_byte_loss"):
        assert rows[exercise]["status"] == "passed", why(real_class, "segfault_first")


def test_patches_in_the_kernel_decide_nothing(real_class):
    """The kernel's Checker.close, numpy's allclose, getattr, import_module, print and sys.stdout patched."""
    rows = rows_of(real_class, "kernel_patches")
    assert {(r["status"], r["points"]) for r in rows.values()} == {("failed", "0")}, why(real_class, "kernel_patches")
    assert UNSHIFTED.hint in rows[EXERCISE]["feedback"]
    # the grader's own checkers: each wrong answer gets its own checker's hint
    assert text_to_ids_wrong().hint in rows["text_to_ids"]["feedback"]
    assert LOSS_WRONG.hint in rows["next_byte_loss"]["feedback"]


def test_a_system_exit_with_the_pass_text_and_an_always_true_tensor_fail_beside_a_right_answer(real_class):
    rows = rows_of(real_class, "forgeries")
    assert (rows["next_byte_loss"]["status"], rows["next_byte_loss"]["feedback"]) == (
        "passed", LOSS_PASS), why(real_class, "forgeries")
    assert rows["text_to_ids"]["status"] == "failed", why(real_class, "forgeries")
    assert f"your function raised SystemExit: {IDS_PASS}" in rows["text_to_ids"]["feedback"]
    true = rows[EXERCISE]
    assert true["status"] == "failed" and true["points"] == "0"
    assert true["feedback"].startswith("AssertionError: Exercise 'next_token_targets'"), true["feedback"]
    assert UNSHIFTED.hint in true["feedback"]  # sent back as its plain values: unshifted


def test_replies_the_notebook_forged_decide_nothing(real_class):
    """A server's reply forged on every pipe the kernel holds, files of the copy made huge, open()
    patched: the grader reads nothing its server did not say after the reset, so the right answers
    pass and the wrong one fails with its hint."""
    rows = rows_of(real_class, "forged_records")
    status = {name: r["status"] for name, r in rows.items()}
    assert status == {"text_to_ids": "passed", EXERCISE: "failed", "next_byte_loss": "passed"}, \
        why(real_class, "forged_records")
    assert UNSHIFTED.hint in rows[EXERCISE]["feedback"]


def test_faked_tags_ids_and_stored_outputs_decide_nothing(real_class):
    rows = rows_of(real_class, "faked_cells")
    assert {r["status"] for r in rows.values()} == {"failed"}, why(real_class, "faked_cells")
    assert UNSHIFTED.hint in rows[EXERCISE]["feedback"]
    assert text_to_ids_wrong().hint in rows["text_to_ids"]["feedback"]
    assert LOSS_WRONG.hint in rows["next_byte_loss"]["feedback"]


def test_cases_passed_and_total_come_from_the_graders_checks_and_the_stored_pass_line(tmp_path):
    path = tmp_path / LESSON
    nbformat.write(fill(real_blank(), {"text_to_ids": REFERENCE["text_to_ids"], EXERCISE: UNSHIFTED.body}), path)
    graded = run.grade(path, cell_timeout=TIMEOUT, sandbox=False)
    got = {r.exercise: (r.status, r.cases_passed, r.cases_total) for r in graded.results
           if not is_question(r.exercise)}  # the questions' rows have no cases
    total = {name: int(line.split(": ")[1].split()[0]) for name, line in
             (("text_to_ids", IDS_PASS), (EXERCISE, PASS), ("next_byte_loss", LOSS_PASS))}
    assert got == {"text_to_ids": ("passed", total["text_to_ids"], total["text_to_ids"]),
                   EXERCISE: ("failed", 1, total[EXERCISE]),
                   "next_byte_loss": ("failed", 0, total["next_byte_loss"])}, graded.log
    assert graded.check_cpu_seconds is not None and 0 < graded.check_cpu_seconds < graded.cpu_seconds


PATCHES_THE_COPY = f"""\
import pathlib
_checks = pathlib.Path("../course_lib/checks/lesson00.py")
_saved = _checks.read_text()
_checks.write_text(_saved + "\\ndef check_next_token_targets(fn):\\n    print({PASS!r})\\n")"""


def test_a_checker_of_the_graded_copy_patched_and_restored_decides_nothing(tmp_path):
    """Unsandboxed (where the copy's course_lib is writable): the patch is undone before the
    checksum is taken, and the grader's own checker, in the grader, decides all the same."""
    path = tmp_path / LESSON
    nb = after_check(with_cell(real_wrong(), PATCHES_THE_COPY), EXERCISE, "_checks.write_text(_saved)")
    nbformat.write(nb, path)
    graded = run.grade(path, cell_timeout=TIMEOUT, sandbox=False)
    r = next(r for r in graded.results if r.exercise == EXERCISE)
    assert (r.status, r.points) == ("failed", 0), graded.log
    assert UNSHIFTED.hint in r.feedback and "changed the grading copy" not in r.feedback


def test_a_notebooks_environment_never_holds_the_hubs_token_or_the_live_views_address(monkeypatch, tmp_path):
    for key in ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "COURSE_LIVE_URL", "PYTEST_CURRENT_TEST"):
        monkeypatch.setenv(key, "the-instructors-own")
    monkeypatch.setenv("LANG", "C.UTF-8")
    for env in (sandbox.own_env({"EXTRA": "1"}), sandbox.sandbox_env(tmp_path, {"EXTRA": "1"})):
        assert not [k for k in env if k.startswith(sandbox.NEVER_PASSED)], sorted(env)
        assert env["EXTRA"] == "1" and env["LANG"] == "C.UTF-8"
