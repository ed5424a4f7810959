"""The docs hold: every relative link resolves, and every command of the instructor's guide runs.

The guide's commands are its fenced blocks marked ```bash. Each is run as written against a
tiny generated class of lesson-00 notebooks (ada right, bob with one wrong answer, cy blank),
and what it made is checked. Each waits for the commands before it in the guide whose folders
it uses, so it finds what it would find were they run one by one in the guide's order; those
that share no folder (the shards, beside the regrades of grades/) run side by side, two at a
time. A command the test does not know how to run fails the test, so none is skipped
silently; those of another branch's features are listed in PENDING_MERGE, reported as pending
(a warning each), and fail the test when the guide no longer has them.
"""
import csv
import json
import re
import shlex
import subprocess
import sys
import threading
import warnings
import zipfile

import nbformat
import pytest

from course_lib.grading import sandbox

from answers import REFERENCE, WRONG
from notebook_tools import ROOT, fill, read

GUIDE = ROOT / "docs" / "instructors.md"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Commands the guide shows that this test cannot run here (none at present); it fails when the
# guide no longer has one of them.
PENDING_MERGE = []


def fenced(path, kind):
    """The blocks of a Markdown file fenced as ```kind, in order."""
    return re.findall(rf"^```{kind}\n(.*?)^```", path.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)


def commands(block):
    """The commands of a bash block: lines joined at a trailing backslash, comments dropped."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            found.append(re.sub(r"\s+", " ", line))
    return found


# ---------------------------------------------------------------- links

def _slug(heading):
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # a web address
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            broken.append(link)
        elif anchor and path.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(link)
    assert not broken, f"{doc.name}: links that lead nowhere: {broken}"


def test_readme_is_for_learners_and_newcomers():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    for heading in ("## Two commands", "## The course map", "## Where to go next", "**Stuck?**"):
        assert heading in text
    assert "docs/instructors.md" in text and "docs/maintainers.md" in text


# ---------------------------------------------------------------- the guide's commands

DOWNLOADED = (2026, 12, 20, 9, 41, 7)   # when the guide's Canvas zip was made: after every due time


@pytest.fixture(scope="module")
def tiny_class(tmp_path_factory):
    """A folder to run the guide's commands in: Canvas's submissions zip of 3 learners, Canvas's
    submission times for them, and a roster.

    The zip is made as Canvas makes it (instructure/canvas-lms, lib/content_zipper.rb): each entry
    `{sortable name}_{LATE_}{user id}_{file id}_{file}`, every one stamped with the moment of the
    download, twelve days after the due time; cy's is flagged LATE. bob handed in two files (the
    later file id, `-1`, wins), and a PDF is in it too, which collect lists, not places. The
    times file is what Canvas's Submissions API lists: ada and bob before the due time, cy 26
    hours after it."""
    here = tmp_path_factory.mktemp("guide")
    blank = read(ROOT / "exercises" / "00_start_here.ipynb")
    wrong = next(w for w in WRONG if w.exercise == "next_token_targets" and w.inject)
    learners = {"ada": fill(blank, REFERENCE),
                "bob": fill(blank, {**REFERENCE, wrong.exercise: wrong.body}),
                "cy": blank}
    names = {"ada": "lovelaceada_4821_90001_", "bob": "babbagebob_4822_90002_", "cy": "cy_LATE_4823_90003_"}
    with zipfile.ZipFile(here / "canvas-submissions.zip", "w") as download:
        download.writestr(zipfile.ZipInfo("babbagebob_4822_90000_00_start_here.ipynb", DOWNLOADED),
                          nbformat.writes(blank))
        for learner, nb in learners.items():
            name = names[learner] + ("00_start_here-1.ipynb" if learner == "bob" else "00_start_here.ipynb")
            download.writestr(zipfile.ZipInfo(name, DOWNLOADED), nbformat.writes(nb))
        download.writestr(zipfile.ZipInfo("cy_LATE_4823_90004_notes.pdf", DOWNLOADED), b"%PDF")
    (here / "canvas-times.json").write_text(json.dumps([
        {"id": 1, "user_id": 4821, "submitted_at": "2026-12-08T16:00:00Z", "late": False},
        {"id": 2, "user_id": 4822, "submitted_at": "2026-12-08T16:30:00Z", "late": False},
        {"id": 3, "user_id": 4823, "submitted_at": "2026-12-09T19:00:00Z", "late": True, "seconds_late": 93600}]))
    (here / "roster.csv").write_text("learner,lms_id,email\nada,4821,ada@example.edu\n"
                                     "bob,4822,bob@example.edu\ncy,4823,cy@example.edu\n")
    (here / "overrides.csv").write_text("learner,lesson,exercise,points,comment\n"
                                        "bob,00,next_token_targets,0.5,the idea is right: half a point\n")
    subprocess.run([sys.executable, "-c", "import matplotlib.pyplot, torch, course_lib.model"], check=True)
    return here


def _run(command, here):
    """Run a guide command in `here` with this Python; (exit status, output)."""
    argv = shlex.split(command)
    if argv[0] == ".venv/bin/python":
        argv[0] = sys.executable
    if "--class" in argv and "return" not in argv and sandbox.unavailable() is not None:
        argv.append("--no-sandbox")  # a machine without bubblewrap: the test says so below
    done = subprocess.run(argv, cwd=here, capture_output=True, text=True, timeout=900)
    return done.returncode, done.stdout + done.stderr


def _check_exercises(code, output, here):
    assert code == 0, output


def _stamps(here):
    """{learner: the first line of their lesson 00's timestamp.txt}."""
    return {learner: (here / "submissions" / learner / "00_start_here" / "timestamp.txt").read_text().splitlines()[0]
            for learner in ("ada", "bob", "cy")}


def _check_collected(code, output, here):
    assert code == 0, output
    for learner in ("ada", "bob", "cy"):
        lesson = here / "submissions" / learner / "00_start_here"
        assert (lesson / "00_start_here.ipynb").is_file() and (lesson / "timestamp.txt").is_file(), output
    assert "not placed: cy_LATE_4823_90004_notes.pdf: not a notebook" in output
    assert "not placed: babbagebob_4822_90000_00_start_here.ipynb: an older file" in output
    # bob's -1 upload (his answers), not the older blank one
    bob = (here / "submissions" / "bob" / "00_start_here" / "00_start_here.ipynb").read_text(encoding="utf-8")
    blank = (ROOT / "exercises" / "00_start_here.ipynb").read_text(encoding="utf-8")
    assert bob.count("NotImplementedError(") < blank.count("NotImplementedError(")
    # the zip's time is the download's, no one's hand-in: each is late or on time by its flag
    assert _stamps(here) == {"ada": "on time", "bob": "on time", "cy": "late"}


def _check_collected_times(code, output, here):
    assert code == 0, output
    assert _stamps(here) == {"ada": "2026-12-08 16:00:00.000000 UTC", "bob": "2026-12-08 16:30:00.000000 UTC",
                             "cy": "2026-12-09 19:00:00.000000 UTC"}


def _check_term_shown(code, output, here):
    assert code == 0, output
    assert "--roster: 3 learner(s)" in output and "--partial: (none)" in output


def _check_returned(code, output, here):
    assert code == 0, output
    assert sorted(p.relative_to(here / "feedback-back").as_posix()
                  for p in (here / "feedback-back").rglob("*.html")) == [
        f"{n}/00_start_here.html" for n in ("ada", "bob", "cy")]


def _check_returned_canvas(code, output, here):
    assert code == 0, output
    with zipfile.ZipFile(here / "feedback-canvas" / "canvas-00_start_here.zip") as z:
        assert sorted(z.namelist()) == ["babbagebob_4822_90002_00_start_here_feedback.html",
                                        "cy_LATE_4823_90003_00_start_here_feedback.html",
                                        "lovelaceada_4821_90001_00_start_here_feedback.html"]


def _check_graded(code, output, here):
    assert code == 0, output  # every learner on the roster handed in: nothing missing
    rows = list(csv.DictReader((here / "grades" / "gradebook.csv").open()))
    status = {(r["learner"], r["exercise"]): r["status"] for r in rows}
    assert status["ada", "next_token_targets"] == "passed" and status["bob", "next_token_targets"] == "failed"
    assert status["cy", "text_to_ids"] == "failed"
    html = (here / "grades" / "report.html").read_text(encoding="utf-8")
    lab = html[html.index("Go over these in the next lab"):html.index("Each exercise")]
    first = re.search(r"<li><b>(\w+)</b>", lab).group(1)
    assert first == "next_token_targets", lab  # 1 of 3 passed it; 2 of 3 the others
    assert (here / "grades" / "similarity.csv").exists()


def _check_regraded(code, output, here):
    _check_graded(code, output, here)
    assert output.count("unchanged since it was graded, kept") == 3, output


def _check_exported(code, output, here):
    _check_regraded(code, output, here)
    canvas = list(csv.reader((here / "grades" / "canvas.csv").open()))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "00_start_here"]
    # each learner's lesson points, exercises and questions together, as the gradebook has them
    rows = list(csv.DictReader((here / "grades" / "gradebook.csv").open()))
    points = {n: sum(float(r["points"]) for r in rows if r["learner"] == n) for n in ("ada", "bob", "cy")}
    most = sum(float(r["max_points"]) for r in rows if r["learner"] == "ada")
    assert most == 7  # 3 exercises and 4 questions of a point each
    assert "Points Possible" in canvas[1][0] and float(canvas[1][5]) == most
    assert {r[0]: (r[1], float(r[5])) for r in canvas[2:]} == {
        "ada": ("4821", points["ada"]), "bob": ("4822", points["bob"]), "cy": ("4823", points["cy"])}
    assert points["ada"] == 3 and points["cy"] == 0  # ada: the exercises right, no question answered
    moodle = list(csv.reader((here / "grades" / "moodle.csv").open()))
    assert moodle[0] == ["Learner", "ID number", "Email address", "00_start_here"]
    assert moodle[1][:3] == ["ada", "4821", "ada@example.edu"] and float(moodle[1][3]) == 3


def _book(here, out="grades"):
    return {(r["learner"], r["exercise"]): r for r in csv.DictReader((here / out / "gradebook.csv").open())}


def _check_costs(code, output, here):
    assert code == 0, output
    book = _book(here)
    assert {r["solution"] for (_, e), r in book.items() if e == "next_token_targets"} == {"no"}
    assert output.count("unchanged since it was graded, kept") == 3, output  # no solution shown


def _check_one_learner(code, output, here):
    assert code == 0, output
    seed = _book(here)["ada", "next_token_targets"]["seed"]
    page = (here / "grades" / "feedback" / "ada" / "00_start_here.html").read_text(encoding="utf-8")
    assert seed and f"Graded with seed {seed}" in page
    assert "ada/00_start_here.ipynb: unchanged" not in output and "ada/00_start_here.ipynb" in output
    assert output.count("unchanged since it was graded, kept") == 0, output  # only ada, forced
    assert {learner for learner, _ in _book(here)} == {"ada", "bob", "cy"}  # the others' rows stay


def _check_partial_and_overrides(code, output, here):
    assert code == 0, output
    row = _book(here)["bob", "next_token_targets"]
    assert (row["points"], row["override"], row["status"]) == ("0.5", "yes", "failed"), row
    assert row["auto_points"] != "" and row["comment"].startswith("the idea is right")
    assert "/" in _book(here)["cy", "text_to_ids"]["cases"]


def _check_late(code, output, here):
    assert code == 0, output
    rows = _book(here).values()
    assert all(r["submitted"] for r in rows)
    # Canvas's times (collect --times): ada and bob before the due time, cy 26 hours after it,
    # two started days; the download's own moment, twelve days later, counts for no one
    late = {r["learner"]: (r["lateness"], r["penalty"]) for r in rows}
    assert late == {"ada": ("0:00:00", "0%"), "bob": ("0:00:00", "0%"), "cy": ("1 day, 2:00:00", "20%")}, rows


def _check_shard(code, output, here):
    assert code == 0, output


def _check_merged(code, output, here):
    assert code == 0, output
    parts = {**_book(here, "grades-1"), **_book(here, "grades-2")}
    merged = _book(here)
    assert merged.keys() == parts.keys() and {r["learner"] for r in merged.values()} == {"ada", "bob", "cy"}
    assert all(merged[k]["status"] == parts[k]["status"] for k in merged)


def _check_gradescope(code, output, here):
    assert code == 0, output
    with zipfile.ZipFile(here / "autograder.zip") as z:
        config = json.loads(z.read("gradescope.json"))
        assert {"setup.sh", "run_autograder", "notebooks/00_start_here.ipynb"} <= set(z.namelist())
    assert config["lesson"] == "00_start_here" and config["late_penalty"] == "10%/day"


GRADE = ".venv/bin/python -m course_lib.grading --class submissions/ --out grades/ --roster roster.csv"
# (the command, how to check what it did); a command that appears twice is checked by the
# next checker each time.
CLASS = ".venv/bin/python -m course_lib.grading --class submissions/"
KNOWN = {
    ".venv/bin/python -m course_lib.exercises --check": [_check_exercises],
    ".venv/bin/python -m course_lib.grading collect canvas-submissions.zip --into submissions/ --roster roster.csv":
        [_check_collected],
    ".venv/bin/python -m course_lib.grading collect canvas-submissions.zip --into submissions/ --roster roster.csv "
    "--times canvas-times.json": [_check_collected_times],
    GRADE: [_check_graded],
    ".venv/bin/python -m course_lib.grading --show-term --out grades/": [_check_term_shown],
    CLASS + " --out grades/": [_check_regraded],
    CLASS + " --out grades/ --solution-costs 0.5": [_check_costs],
    CLASS + " --out grades/ --learner ada --force --same-seed": [_check_one_learner],
    CLASS + " --out grades/ --partial --overrides overrides.csv": [_check_partial_and_overrides],
    CLASS + " --out grades/ --due 00=2026-12-08T17:00,01=2026-12-15T17:00 --late-penalty 10%/day": [_check_late],
    CLASS + " --out grades-1/ --shard 1/2": [_check_shard],
    CLASS + " --out grades-2/ --shard 2/2": [_check_shard],
    ".venv/bin/python -m course_lib.grading merge grades-1/ grades-2/ --out grades/": [_check_merged],
    GRADE + " --export canvas --export moodle": [_check_exported],
    ".venv/bin/python -m course_lib.grading return grades/ --into feedback-back/": [_check_returned],
    ".venv/bin/python -m course_lib.grading return grades/ --into feedback-canvas/ --lms canvas --class submissions/":
        [_check_returned_canvas],
    ".venv/bin/python -m course_lib.grading gradescope --lesson 00 --out autograder.zip --late-penalty 10%/day":
        [_check_gradescope],
}


def folders(command):
    """(the folders of the class a guide command reads, the one it writes) as its arguments name
    them: a grading writes its --out folder, and merge also reads the folders it is given. The
    lessons' own check (course_lib.exercises) uses none ("" for its folder); any other command
    that names no --out gets None, which `after` takes for every folder."""
    argv = shlex.split(command)
    if "course_lib.exercises" in argv:
        return set(), ""
    out = argv[argv.index("--out") + 1].rstrip("/") if "--out" in argv else None
    reads = set()
    if "merge" in argv:
        reads = {a.rstrip("/") for a in argv[argv.index("merge") + 1:] if not a.startswith("-")} - {out}
    return reads, out


def after(guide):
    """For each command of the guide, the earlier ones it must wait for: those that write a folder
    it reads or writes, or read the folder it writes (a command of unknown folders waits for all)."""
    found = [folders(c) for c in guide]
    waits = []
    for j, (reads_j, out_j) in enumerate(found):
        waits.append([i for i, (reads_i, out_i) in enumerate(found[:j])
                      if out_i is None or out_j is None
                      or (out_i and (out_i == out_j or out_i in reads_j)) or (out_j and out_j in reads_i)])
    return waits


def run_guide(guide, here, checks, jobs=2):
    """Run the guide's commands, at most `jobs` at a time, each after the earlier commands it must
    wait for (`after`), and check each as it ends, before any command that waits for it starts.
    Independent commands (the shards, say, beside the regrades of grades/) run side by side. Returns
    what each command raised (None where it ran and its check passed), in the guide's order."""
    waits, slots = after(guide), threading.Semaphore(jobs)
    done = [threading.Event() for _ in guide]
    raised = [None] * len(guide)

    def one(i):
        try:
            for k in waits[i]:
                done[k].wait()
            failed = [guide[k] for k in waits[i] if raised[k] is not None]
            if failed:
                raise AssertionError(f"not run: it follows {failed[0]!r}, which failed")
            with slots:
                code, output = _run(guide[i], here)
            # a command names learners, never their e-mails (the roster's, in tiny_class)
            assert "@example.edu" not in output, output
            checks[i](code, output, here)
        except BaseException as e:  # raised again by the test, in the guide's order
            raised[i] = e
        finally:
            done[i].set()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(guide))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return raised


def test_the_guides_commands_wait_for_the_commands_whose_folders_they_use():
    guide = [".venv/bin/python -m course_lib.exercises --check", GRADE, CLASS + " --out grades-1/ --shard 1/2",
             CLASS + " --out grades-2/ --shard 2/2", CLASS + " --out grades/ --learner ada --force",
             ".venv/bin/python -m course_lib.grading merge grades-1/ grades-2/ --out grades/",
             GRADE + " --export canvas", ".venv/bin/python -m course_lib.grading --class submissions/"]
    assert after(guide) == [[], [], [], [], [1], [1, 2, 3, 4], [1, 4, 5], [0, 1, 2, 3, 4, 5, 6]]


def test_every_command_in_the_instructors_guide_runs(tiny_class, capsys):
    guide = [c for block in fenced(GUIDE, "bash") for c in commands(block)]
    assert guide, "the guide has no ```bash block"
    unknown = [c for c in guide if c not in KNOWN and c not in PENDING_MERGE]
    assert not unknown, f"the guide has commands this test does not know how to run: {unknown}"
    stale = [c for c in PENDING_MERGE if c not in guide]
    assert not stale, f"PENDING_MERGE lists commands the guide no longer has: {stale}"
    for command in guide:
        if command in PENDING_MERGE:
            warnings.warn(f"pending merge, not run: {command}")
    ran = [c for c in guide if c not in PENDING_MERGE]
    pending = [c for c in guide if c in PENDING_MERGE]
    queued = {c: list(v) for c, v in KNOWN.items()}
    checks = [queued[c].pop(0) for c in ran]  # a command that appears twice: the next checker each time
    for command, error in zip(ran, run_guide(ran, tiny_class, checks)):
        if error is not None:
            raise AssertionError(f"{command}: {error}") from error
    with capsys.disabled():
        print(f"\nran {len(ran)} command(s) of docs/instructors.md"
              + (" (without a sandbox: none here)" if sandbox.unavailable() else "") + ":")
        print("\n".join(f"  ran:     {c}" for c in ran))
        print("\n".join(f"  pending: {c}" for c in pending))
    assert len(ran) + len(pending) == len(guide)


def test_the_readmes_pass_line_is_the_one_lesson_01_prints():
    """README quotes a check's pass line: it is the one lesson 01's softmax check printed in its
    saved run."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"`(softmax: \d+ checks passed)`", readme).group(1)
    lesson = read(ROOT / "notebooks" / "01_attention_by_hand.ipynb")
    printed = [o.get("text", "").strip() for c in lesson.cells for o in c.get("outputs", [])
               if o.get("output_type") == "stream"]
    assert quoted in printed


def test_the_guides_roster_example_is_one_the_export_reads(tmp_path):
    from course_lib.grading.roster import read_roster
    (example,) = fenced(GUIDE, "csv")
    (tmp_path / "roster.csv").write_text(example)
    assert [e["lms_id"] for e in read_roster(tmp_path / "roster.csv")] == ["4821", "4822"]
