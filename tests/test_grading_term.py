"""A term's grading: partial credit, overrides, late work, regrading some learners, shards and merge.

The rules are tested on rows and on classes whose notebooks a stand-in for `grade` reads
(fast); then one tiny lesson-00 class of three learners is graded for real, whole, in two
shards, and again for one learner, and the runs are compared.
"""
import csv
import datetime
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from course_lib.grading import cli, gradebook, lateness, partial, run, shards, term
from course_lib.grading.overrides import Override, read_overrides
from course_lib.grading.submissions import submission_hash
from course_lib.grading.verdicts import Result

from answers import REFERENCE
from notebook_tools import ROOT, fill, pass_line
from test_grading import EXERCISE, LESSON, SANDBOXED, TIMEOUT, UNSHIFTED
from test_grading import real_blank as blank  # lesson 00 itself, with its three exercises

STEM = LESSON[:-6]
EXERCISES = ["text_to_ids", "next_token_targets", "next_byte_loss"]  # lesson 00's, in order
# each exercise's count of checks, as lesson 00's saved pass lines give it
TOTAL = {name: int(pass_line(name).split(": ")[1].split()[0]) for name in EXERCISES}
UTC = datetime.timezone.utc


def read_csv(path):
    return list(csv.DictReader(open(path, newline="", encoding="utf-8")))


def rows_of(rows, learner, exercise=EXERCISE):
    found = [r for r in rows if r["learner"] == learner and r["exercise"] == exercise]
    assert len(found) == 1, found
    return found[0]


# ---------------------------------------------------------------- partial credit, on Results

def test_partial_points_are_the_passed_share_and_only_where_counted():
    assert partial.automatic_points("failed", 2, 12, 26, True) == round(2 * 12 / 26, 3)
    assert partial.automatic_points("failed", 2, 12, 26, False) == 0       # all or nothing
    assert partial.automatic_points("failed", 2, None, 26, True) == 0      # not counted: nothing
    assert partial.automatic_points("not run", 2, 3, 6, True) == 0
    assert partial.automatic_points("passed", 2, None, None, True) == 2
    assert partial.automatic_points("failed", 2, 26, 26, True) == 0        # failed for another reason
    assert partial.cases_text(None, 26, partial=True) == "?/26 (unknown: no partial credit)"
    assert partial.parse_cases("?/26 (unknown: no partial credit)") == (None, 26)


def test_counts_come_from_the_pass_line_and_the_lessons_stored_one():
    passed = partial.counted(Result("softmax", "passed", "softmax: 26 checks passed", 1, 1))
    assert (passed.cases_passed, passed.cases_total) == (26, 26)
    failed = partial.counted(Result("softmax", "failed", "softmax: 26 checks passed? no", 0, 1), 26)
    assert (failed.cases_passed, failed.cases_total) == (None, 26)
    replayed = partial.counted(Result("softmax", "failed", "a hint", 0, 1, cases_passed=12, cases_total=26))
    assert (replayed.cases_passed, replayed.cases_total) == (12, 26)
    lesson = nbformat.read(ROOT / "notebooks" / LESSON, as_version=4)
    assert partial.stored_counts(lesson) == TOTAL


def plain_row(**changes):
    row = dict(learner="ada", lesson=STEM, exercise=EXERCISE, points="0", max_points="2", status="failed",
               feedback="", sha256="s", sandbox="none", cpu_seconds="", cases="3/6", submitted="")
    row.update(changes)
    return row


def test_partial_credit_by_the_check_cells_metadata_or_for_every_exercise():
    by_metadata = term.Term(partial_exercises={STEM: {EXERCISE}})
    assert term.finish(plain_row(), by_metadata)["points"] == "1"  # 2 x 3/6
    assert term.finish(plain_row(exercise="text_to_ids"), by_metadata)["points"] == "0"
    assert term.finish(plain_row(exercise="text_to_ids"), term.Term(partial=True))["points"] == "1"
    unknown = term.finish(plain_row(cases="?/6"), term.Term(partial=True))
    assert (unknown["points"], unknown["cases"]) == ("0", "?/6 (unknown: no partial credit)")


def test_a_lessons_partial_flag_must_be_true_or_false():
    lesson = nbformat.read(ROOT / "notebooks" / LESSON, as_version=4)
    check = next(c for c in lesson.cells if "check" in c.metadata.get("tags", []))
    check.metadata["partial"] = "yes"
    with pytest.raises(ValueError, match="partial='yes'"):
        partial.partial_exercises(lesson)


# ---------------------------------------------------------------- late work, on rows

def test_the_penalty_rule_counts_each_started_day_and_stops_at_its_cap():
    rule = lateness.parse_penalty("10%/day,max=50%")
    assert (rule.rate, rule.unit, rule.cap) == (0.1, "day", 0.5)
    day = datetime.timedelta(days=1)
    assert lateness.penalty_share(datetime.timedelta(0), rule) == 0                 # at the due time
    assert lateness.penalty_share(datetime.timedelta(seconds=1), rule) == 0.1       # one started day
    assert lateness.penalty_share(day, rule) == 0.1
    assert lateness.penalty_share(day + datetime.timedelta(hours=2), rule) == 0.2  # 26 h: 2 days
    assert lateness.penalty_share(9 * day, rule) == 0.5
    assert lateness.penalty_share(datetime.timedelta(minutes=61), lateness.parse_penalty("2%/hour")) == 0.04
    for bad in ("10%", "10/day", "10%/week", "10%/day,max=150%", "10%/day,cap=5%"):
        with pytest.raises(ValueError, match="--late-penalty"):
            lateness.parse_penalty(bad)


def test_a_naive_time_is_in_the_given_zone_never_the_machines():
    berlin = lateness.zone("Europe/Berlin")
    assert lateness.parse_time("2026-12-08T17:00", lateness.zone("UTC"), "x") == \
        datetime.datetime(2026, 12, 8, 17, tzinfo=UTC)
    assert lateness.parse_time("2026-12-08T17:00", berlin, "x").astimezone(UTC).hour == 16  # CET is +1
    assert lateness.parse_time("2026-12-08T17:00+02:00", berlin, "x").astimezone(UTC).hour == 15
    # nbgrader's timestamp.txt: '%Y-%m-%d %H:%M:%S.%f %Z'
    assert lateness.parse_time("2026-12-08 17:00:00.250000 UTC\n", berlin, "x") == \
        datetime.datetime(2026, 12, 8, 17, 0, 0, 250000, tzinfo=UTC)
    with pytest.raises(ValueError, match="abbreviations such as CEST are ambiguous"):
        lateness.parse_time("2026-12-08 17:00:00 CEST", berlin, "x")
    with pytest.raises(ValueError, match="no time zone"):
        lateness.zone("Mars/Olympus")


def test_due_times_by_lesson_number_or_from_a_file(tmp_path):
    stems = ["00_start_here", "01_attention_by_hand"]
    utc = lateness.zone("UTC")
    due = lateness.parse_due("00=2026-12-08T17:00, 01_attention_by_hand=2026-12-15T17:00", stems, utc)
    assert due == {"00_start_here": datetime.datetime(2026, 12, 8, 17, tzinfo=UTC),
                   "01_attention_by_hand": datetime.datetime(2026, 12, 15, 17, tzinfo=UTC)}
    file = tmp_path / "due.txt"
    file.write_text("# the term's due times\n00=2026-12-08T17:00\n01,2026-12-15T17:00\n")
    assert lateness.parse_due(str(file), stems, utc) == due
    file.write_text("00=2026-12-08T17:00\n07=2026-12-15T17:00\n")
    with pytest.raises(ValueError, match="due.txt line 2: no single lesson is '07'"):
        lateness.parse_due(str(file), stems, utc)


def test_timestamp_txt_wins_over_the_files_time(tmp_path):
    learner = tmp_path / "ada"
    (learner / "week1").mkdir(parents=True)
    notebook = learner / "week1" / LESSON
    notebook.write_text("{}")
    os.utime(notebook, (0, 1_800_000_000))
    utc = lateness.zone("UTC")
    assert lateness.submitted_at(notebook, learner, utc) == (
        datetime.datetime.fromtimestamp(1_800_000_000, UTC), "file time")
    (learner / "timestamp.txt").write_text("2026-12-08 18:00:00.000000 UTC")  # in a folder above it
    assert lateness.submitted_at(notebook, learner, utc)[0] == datetime.datetime(2026, 12, 8, 18, tzinfo=UTC)


def test_a_late_row_loses_the_documented_share():
    rules = term.Term(due={STEM: datetime.datetime(2026, 12, 8, 17, tzinfo=UTC)},
                      penalty=lateness.parse_penalty("10%/day,max=50%"))
    row = term.finish(plain_row(status="passed", cases="6/6", submitted="2026-12-09T19:00:00+00:00"), rules)
    assert (row["points_before_penalty"], row["lateness"], row["penalty"], row["auto_points"], row["points"]) \
        == ("2", "1 day, 2:00:00", "20%", "1.6", "1.6")
    on_time = term.finish(plain_row(status="passed", submitted="2026-12-08T18:00:00+01:00"), rules)
    assert (on_time["lateness"], on_time["penalty"], on_time["points"]) == ("0:00:00", "0%", "2")


def test_a_hand_in_the_lms_flagged_without_a_time_is_late_by_one_started_unit():
    rules = term.Term(due={STEM: datetime.datetime(2026, 12, 8, 17, tzinfo=UTC)},
                      penalty=lateness.parse_penalty("10%/day,max=50%"))
    late = term.finish(plain_row(status="passed", submitted=lateness.FLAGGED[lateness.LATE]), rules)
    assert (late["lateness"], late["penalty"], late["points"]) == (term.LATENESS_UNKNOWN, "10%", "1.8")
    hourly = term.Term(due=rules.due, penalty=lateness.parse_penalty("2%/hour"))
    assert term.finish(plain_row(status="passed", submitted=lateness.FLAGGED[lateness.LATE]), hourly)["penalty"] == "2%"
    on_time = term.finish(plain_row(status="passed", submitted=lateness.FLAGGED[lateness.ON_TIME]), rules)
    assert (on_time["lateness"], on_time["penalty"], on_time["points"]) == ("0:00:00", "0%", "2")


# ---------------------------------------------------------------- overrides, on files

MAXIMA = {STEM: {e: 1 for e in EXERCISES}, "01_attention_by_hand": {"softmax": 2}}


@pytest.mark.parametrize("line, message", [
    ("zoe,00,next_token_targets,1,", "line 3: there is no learner 'zoe'"),
    ("ada,00,softmax,1,", "line 3: lesson 00_start_here has no exercise 'softmax'"),
    ("ada,09,softmax,1,", "line 3: no single lesson is '09'"),
    ("ada,01,softmax,2.5,", "line 3: points 2.5 is outside 0 to 2"),
    ("ada,01,softmax,lots,", "line 3: points 'lots' is not a number"),
    ("ada,01,softmax,1,late, but fine", "line 3: 6 fields"),
    ("bob,00,text_to_ids,0,again", "line 3: bob's 00_start_here text_to_ids is overridden already, on line 2"),
])
def test_a_bad_override_line_is_named(tmp_path, line, message):
    path = tmp_path / "overrides.csv"
    path.write_text(f"learner,lesson,exercise,points,comment\nbob,00,text_to_ids,1,ok\n{line}\n")
    with pytest.raises(ValueError, match=message):
        read_overrides(path, {"ada", "bob"}, MAXIMA)


def test_an_override_file_needs_its_header(tmp_path):
    path = tmp_path / "overrides.csv"
    path.write_text("ada,00,text_to_ids,1,ok\n")
    with pytest.raises(ValueError, match="line 1: the header should be learner,lesson,exercise,points,comment"):
        read_overrides(path, {"ada"}, MAXIMA)


def test_an_override_sets_the_points_and_keeps_the_automatic_ones():
    rules = term.Term(overrides={("ada", STEM, EXERCISE): Override("ada", STEM, EXERCISE, 1.5,
                                                                  "shown in the lab", 2)})
    row = term.finish(plain_row(), rules)
    assert (row["points"], row["auto_points"], row["override"], row["comment"]) == ("1.5", "0", "yes",
                                                                                   "shown in the lab")


# ---------------------------------------------------------------- classes with a stand-in grader

def fake_grader(monkeypatch, calls):
    """Make grade_class's `grade` read each exercise's outcome from the notebook's metadata.

    metadata "fake": {exercise: [status, cases passed]}; an exercise not named passes.
    """
    def fake(path, lessons=None, root=ROOT, **kwargs):
        calls.append(path.parent.name)
        nb = nbformat.read(path, as_version=4)
        said = nb.metadata.get("fake", {})
        results = []
        for name in EXERCISES:
            status, count = said.get(name, ["passed", None])
            total = TOTAL[name]
            feedback = f"{name}: {total} checks passed" if status == "passed" else "a hint"
            results.append(Result(name, status, feedback, 1 if status == "passed" else 0, 1,
                                  cases_passed=count))
        sha = submission_hash(path, ROOT / "notebooks" / LESSON, root)
        return run.Graded(path, STEM, results, sha256=sha, sandbox="none", submission=nb)
    monkeypatch.setattr(gradebook, "grade", fake)


def write_learner(folder, name, fake=None, stamp=None):
    (folder / name).mkdir(parents=True, exist_ok=True)
    nb = blank()
    nb.metadata["fake"] = fake or {}
    nbformat.write(nb, folder / name / LESSON)
    if stamp:
        (folder / name / "timestamp.txt").write_text(stamp)


def grade_fake(folder, out, **options):
    options.setdefault("html", False)
    return gradebook.grade_class(folder, out, jobs=1, sandbox=False, log=lambda line: None, **options)


@pytest.fixture
def fake_class(tmp_path, monkeypatch):
    calls = []
    fake_grader(monkeypatch, calls)
    folder = tmp_path / "class"
    write_learner(folder, "ada")
    write_learner(folder, "bob", {EXERCISE: ["failed", TOTAL[EXERCISE] // 2]})   # half: 0.5 of 1
    write_learner(folder, "cy", {EXERCISE: ["not run", None]})
    write_learner(folder, "dee", {"text_to_ids": ["failed", 4]})
    return dict(folder=folder, out=tmp_path / "grades", calls=calls, tmp=tmp_path)


def test_partial_credit_through_a_class(fake_class):
    rows, _ = grade_fake(fake_class["folder"], fake_class["out"], partial=True)
    bob = rows_of(rows, "bob")
    half = f"{TOTAL[EXERCISE] // 2}/{TOTAL[EXERCISE]}"
    assert (bob["cases"], bob["points"], bob["points_before_penalty"]) == (half, "0.5", "0.5")
    assert rows_of(rows, "dee", "text_to_ids")["points"] == f"{round(4 / TOTAL['text_to_ids'], 3):g}"
    assert rows_of(rows, "ada")["cases"] == f"{TOTAL[EXERCISE]}/{TOTAL[EXERCISE]}"
    summary = {r["learner"]: r for r in read_csv(fake_class["out"] / "summary.csv")}
    assert summary["bob"]["total"] == "2.5"


def test_learner_regrades_one_and_keeps_every_other_row_and_not_run_is_graded_again(fake_class):
    folder, out, calls = fake_class["folder"], fake_class["out"], fake_class["calls"]
    grade_fake(folder, out)
    before = read_csv(out / "gradebook.csv")
    summary = read_csv(out / "summary.csv")
    calls.clear()
    write_learner(folder, "bob")  # bob hands in a right answer
    rows, _ = grade_fake(folder, out, chosen=["bob"])
    assert calls == ["bob"]
    after = read_csv(out / "gradebook.csv")
    assert [r for r in after if r["learner"] != "bob"] == [r for r in before if r["learner"] != "bob"]
    assert rows_of(after, "bob")["status"] == "passed"
    assert [r for r in read_csv(out / "summary.csv") if r["learner"] != "bob"] == \
        [r for r in summary if r["learner"] != "bob"]
    calls.clear()
    grade_fake(folder, out)  # only cy's "not run" is graded again
    assert calls == ["cy"]
    calls.clear()
    grade_fake(folder, out, force=True)
    assert sorted(calls) == ["ada", "bob", "cy", "dee"]
    with pytest.raises(ValueError, match="--learner: zed has no folder"):
        grade_fake(folder, out, chosen=["zed"])


def test_an_override_survives_regrades_and_reaches_the_feedback_page(fake_class):
    folder, out, tmp = fake_class["folder"], fake_class["out"], fake_class["tmp"]
    overrides = tmp / "overrides.csv"
    overrides.write_text("learner,lesson,exercise,points,comment\n"
                         "bob,00,next_token_targets,0.75,\"fixed in the lab, see the <b>note</b>\"\n")
    grade_fake(folder, out, overrides=str(overrides), html=True)
    bob = rows_of(read_csv(out / "gradebook.csv"), "bob")
    assert (bob["points"], bob["auto_points"], bob["override"]) == ("0.75", "0", "yes")
    write_learner(folder, "bob", {EXERCISE: ["failed", 1]})  # changed: graded again, no --overrides
    rows, _ = grade_fake(folder, out, chosen=["bob"], force=True)
    bob = rows_of(rows, "bob")
    assert (bob["points"], bob["comment"]) == ("0.75", "fixed in the lab, see the <b>note</b>")
    page = (out / "feedback" / "bob" / f"{STEM}.html").read_text()
    assert "fixed in the lab, see the &lt;b&gt;note&lt;/b&gt;" in page and page.count("term note -->") == 2
    assert "Points that count: 2.75 of 3." in page
    grade_fake(folder, out, overrides="none")
    assert rows_of(read_csv(out / "gradebook.csv"), "bob")["override"] == ""
    assert "term note" not in (out / "feedback" / "bob" / f"{STEM}.html").read_text()


def test_a_bad_override_stops_the_run_before_grading(fake_class, capsys):
    bad = fake_class["tmp"] / "bad.csv"
    bad.write_text("learner,lesson,exercise,points,comment\nbob,00,next_token_targets,7,\n")
    assert cli.main(["--class", str(fake_class["folder"]), "--out", str(fake_class["out"]),
                     "--overrides", str(bad), "--no-sandbox"]) == 2
    assert "bad.csv line 2: points 7 is outside 0 to 1" in capsys.readouterr().err
    assert fake_class["calls"] == []


def test_late_work_in_a_class_from_timestamp_txt(fake_class):
    folder, out = fake_class["folder"], fake_class["out"]
    write_learner(folder, "ada", stamp="2026-12-10 17:00:01.000000 UTC")     # 2 days and a second
    write_learner(folder, "bob", stamp="2026-12-08 18:00:00")                 # on time in Berlin (17:00 UTC)
    rows, _ = grade_fake(folder, out, due="00=2026-12-08T18:00", late_penalty="10%/day",
                         timezone="Europe/Berlin")
    ada = rows_of(rows, "ada")
    assert (ada["submitted"], ada["lateness"], ada["penalty"], ada["points"]) == (
        "2026-12-10T18:00:01+01:00", "2 days, 0:00:01", "30%", "0.7")
    assert rows_of(rows, "bob")["lateness"] == "0:00:00"
    # a regrade of one learner given no rules uses the kept ones
    rows, _ = grade_fake(folder, out, chosen=["bob"], force=True)
    assert rows_of(rows, "ada")["points"] == "0.7" and json.loads((out / "term.json").read_text())[
        "late_penalty"] == "10%/day"
    with pytest.raises(ValueError, match="needs due times"):
        grade_fake(folder, out, due="none")


def test_a_canvas_download_made_after_the_due_time_penalises_only_its_late_flagged_learners(fake_class):
    """Canvas writes every entry of its zip at the moment the zip is made (here 12 days after the
    due time): collected and graded with --due and --late-penalty, only the learners Canvas
    flagged LATE lose, one day's 10% each; every other one is on time."""
    from test_grading_collect import canvas_download
    tmp = fake_class["tmp"]
    nb = blank()
    nb.metadata["fake"] = {}
    data = nbformat.writes(nb).encode()
    learners = {"lovelaceada": "", "babbagebob": "LATE_", "hoppergrace": "", "turingalan": "LATE_",
                "curiemarie": "", "noetheremmy": ""}
    download = canvas_download(tmp / "canvas.zip", [
        (f"{name}_{flag}{4800 + i}_{90000 + i}_00_start_here.ipynb", data)
        for i, (name, flag) in enumerate(learners.items())], when=(2026, 12, 20, 9, 41, 7))
    from course_lib.grading import collect
    collect.collect(download, tmp / "canvas-class")
    rows, _ = grade_fake(tmp / "canvas-class", fake_class["out"], due="00=2026-12-08T17:00",
                         late_penalty="10%/day")
    penalties = {r["learner"]: (r["penalty"], r["points"]) for r in rows if r["exercise"] == EXERCISE}
    assert penalties == {name: ("10%", "0.9") if flag else ("0%", "1") for name, flag in learners.items()}
    late = rows_of(rows, "babbagebob")
    assert (late["submitted"], late["lateness"]) == (lateness.FLAGGED[lateness.LATE], term.LATENESS_UNKNOWN)


def test_shards_are_stable_and_merge_refuses_what_does_not_fit(fake_class):
    names = [f"learner{i}" for i in range(200)]
    parts = {name: shards.shard_of(name, 3) for name in names}
    assert set(parts.values()) == {1, 2, 3}
    assert {name: shards.shard_of(name, 3) for name in names + ["newcomer"]} == {**parts, "newcomer":
                                                                                  shards.shard_of("newcomer", 3)}
    for bad in ("0/2", "3/2", "1", "a/b"):
        with pytest.raises(ValueError, match="--shard"):
            shards.parse_shard(bad)
    folder, tmp = fake_class["folder"], fake_class["tmp"]
    whole, _ = grade_fake(folder, tmp / "whole")
    for k in (1, 2):
        grade_fake(folder, tmp / f"part{k}", shard=(k, 2))
    merged = shards.merge([tmp / "part1", tmp / "part2"], tmp / "merged", log=lambda line: None)
    assert merged == whole
    assert read_csv(tmp / "merged" / "summary.csv") == read_csv(tmp / "whole" / "summary.csv")
    with pytest.raises(ValueError, match="shard 2/2 is missing"):
        shards.merge([tmp / "part1"], tmp / "m2")
    with pytest.raises(ValueError, match="are both shard 1/2"):
        shards.merge([tmp / "part1", tmp / "part1"], tmp / "m3")
    with pytest.raises(ValueError, match="holds no shard"):
        shards.merge([tmp / "part1", tmp / "whole"], tmp / "m4")
    grade_fake(folder, tmp / "part2", shard=(2, 2), partial=True)
    with pytest.raises(ValueError, match="other term rules"):
        shards.merge([tmp / "part1", tmp / "part2"], tmp / "m5")
    shutil.copy(tmp / "whole" / "gradebook.csv", tmp / "part2" / "gradebook.csv")  # everyone
    (tmp / "part2" / "term.json").write_text((tmp / "part1" / "term.json").read_text())
    with pytest.raises(ValueError, match=r"\(shard 2/2\) holds"):
        shards.merge([tmp / "part1", tmp / "part2"], tmp / "m6")


def test_an_older_gradebook_is_read_and_its_rows_kept(fake_class):
    folder, out = fake_class["folder"], fake_class["out"]
    grade_fake(folder, out)
    rows = read_csv(out / "gradebook.csv")
    gradebook._write_csv(out / "gradebook.csv", gradebook.GRADEBOOK[:10], rows)  # before the term columns
    write_learner(folder, "zed")
    fake_class["calls"].clear()
    rows, _ = grade_fake(folder, out, chosen=["zed"])
    assert fake_class["calls"] == ["zed"] and {r["learner"] for r in rows} == {"ada", "bob", "cy", "dee", "zed"}


# ---------------------------------------------------------------- a class graded for real

@pytest.fixture(scope="module")
def real_class(tmp_path_factory):
    """Two lesson-00 learners (one a shard each) graded whole, in two shards merged, and one again.

    ada: right, early. eve: next_token_targets wrong, a day and half an hour late, with an
    override for it; then she hands in a right answer and is graded again by herself.
    """
    base = tmp_path_factory.mktemp("term")
    folder = base / "class"
    assert (shards.shard_of("ada", 2), shards.shard_of("eve", 2)) == (1, 2)
    for name, nb, stamp in (("ada", fill(blank(), REFERENCE), "2026-12-08T16:00:00+00:00"),
                            ("eve", fill(blank(), {**REFERENCE, EXERCISE: UNSHIFTED.body}),
                             "2026-12-09 17:30:00.000000 UTC")):
        (folder / name).mkdir(parents=True)
        nbformat.write(nb, folder / name / LESSON)
        (folder / name / "timestamp.txt").write_text(stamp)
    overrides = base / "overrides.csv"
    overrides.write_text("learner,lesson,exercise,points,comment\neve,00,next_token_targets,0.5,"
                         "the shift was right in the lab\n")
    options = dict(jobs=2, cell_timeout=TIMEOUT, notebook_timeout=240, memory_gib=3, sandbox=SANDBOXED,
                   log=lambda line: None, partial=True, due="00=2026-12-08T17:00",
                   late_penalty="10%/day,max=50%", overrides=str(overrides))
    parts = [base / f"part{k}" for k in (1, 2)]
    # the whole class and its two shards graded side by side: three out folders, one class folder
    # that none of them writes to (each shard's one notebook would leave a job idle alone)
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = [pool.submit(gradebook.grade_class, folder, base / "whole", **options)] + [
            pool.submit(gradebook.grade_class, folder, part, shard=(k, 2), **options)
            for k, part in enumerate(parts, 1)]
    whole, _ = runs[0].result()
    for graded in runs[1:]:
        graded.result()
    merged = shards.merge(parts, base / "merged", log=lambda line: None)
    before = read_csv(base / "whole" / "gradebook.csv")
    summary = read_csv(base / "whole" / "summary.csv")  # before eve's regrade
    nbformat.write(fill(blank(), REFERENCE), folder / "eve" / LESSON)
    calls = []
    regraded, _ = gradebook.grade_class(folder, base / "whole", chosen=["eve"], jobs=2,
                                        cell_timeout=TIMEOUT, notebook_timeout=240, memory_gib=3,
                                        sandbox=SANDBOXED, log=calls.append)  # the rules kept in whole/
    return dict(base=base, whole=whole, merged=merged, before=before, summary=summary, regraded=regraded,
                calls=calls)


VARYING = ("cpu_seconds", "seed")  # what two gradings of one notebook need not share (each draws its seed)


def steady(rows):
    return [{k: v for k, v in r.items() if k not in VARYING} for r in rows]


def test_a_real_class_two_shards_merged_give_the_rows_of_one_run(real_class):
    base = real_class["base"]
    assert steady(real_class["merged"]) == steady(real_class["whole"])
    assert read_csv(base / "merged" / "summary.csv") == real_class["summary"]
    pages = sorted(p.relative_to(base / "merged" / "feedback") for p in (base / "merged" / "feedback").rglob("*.html"))
    assert [str(p) for p in pages] == [f"ada/{STEM}.html", f"eve/{STEM}.html"]
    note = (base / "merged" / "feedback" / "eve" / f"{STEM}.html").read_text()
    assert "the shift was right in the lab" in note and "1 day, 0:30:00 after the due time: 20% off" in note


def test_a_real_class_gets_counts_partial_points_the_late_penalty_and_the_override(real_class):
    rows = real_class["whole"]
    ada = rows_of(rows, "ada")
    every = f"{TOTAL[EXERCISE]}/{TOTAL[EXERCISE]}"
    assert (ada["status"], ada["cases"], ada["points"], ada["lateness"]) == ("passed", every, "1", "0:00:00")
    eve = rows_of(rows, "eve")  # a wrong answer: the grader's check counts the cases it passed, 1
    # partial credit 1/N of its point, 20% off for lateness; overridden to 0.5
    assert (eve["status"], eve["cases"], eve["auto_points"], eve["points"], eve["override"]) == (
        "failed", f"1/{TOTAL[EXERCISE]}", f"{round(round(1 / TOTAL[EXERCISE], 3) * 0.8, 3):g}", "0.5", "yes")
    right = rows_of(rows, "eve", "text_to_ids")  # right, a day and half an hour late: 2 days, 20%
    ids = TOTAL["text_to_ids"]
    assert (right["status"], right["cases"], right["lateness"], right["penalty"],
            right["points_before_penalty"], right["points"]) == ("passed", f"{ids}/{ids}", "1 day, 0:30:00",
                                                                 "20%", "1", "0.8")


def test_a_real_regrade_of_one_learner_keeps_the_others_and_the_override(real_class):
    regraded = real_class["regraded"]
    assert [r for r in steady(regraded) if r["learner"] != "eve"] == \
        [r for r in steady(real_class["before"]) if r["learner"] != "eve"]
    eve = rows_of(regraded, "eve")
    assert (eve["status"], eve["auto_points"], eve["points"], eve["comment"]) == (
        "passed", "0.8", "0.5", "the shift was right in the lab")
    assert [line for line in real_class["calls"] if line.startswith("[")] == [
        next(line for line in real_class["calls"] if line.startswith("[1/1] eve/"))]


def test_the_command_grades_shards_and_merges_them(fake_class, capsys):
    folder, tmp = str(fake_class["folder"]), fake_class["tmp"]
    common = ["--class", folder, "--no-sandbox", "--no-html", "--partial", "--due", "00=2026-12-08T17:00",
              "--late-penalty", "10%/day,max=50%", "--timezone", "Europe/Berlin"]
    for k in (1, 2):
        cli.main([*common, "--out", str(tmp / f"p{k}"), "--shard", f"{k}/2"])
    assert cli.main(["merge", str(tmp / "p1"), str(tmp / "p2"), "--out", str(tmp / "all")]) == 0
    assert {r["learner"] for r in read_csv(tmp / "all" / "gradebook.csv")} == {"ada", "bob", "cy", "dee"}
    assert cli.main(["merge", str(tmp / "p1"), "--out", str(tmp / "none")]) == 2
    assert "shard 2/2 is missing" in capsys.readouterr().err
    assert cli.main([*common, "--out", str(tmp / "p3"), "--shard", "0/2"]) == 2
    assert "$((INDEX + 1))/2" in capsys.readouterr().err
    assert cli.main(["x.ipynb", "--learner", "ada"]) == 2
    assert "--learner grade a class" in capsys.readouterr().err


def test_a_timestamp_txt_that_is_not_a_time_is_named_and_the_files_time_used(fake_class):
    folder, out = fake_class["folder"], fake_class["out"]
    write_learner(folder, "ada", stamp="handed in on Tuesday")
    os.utime(folder / "ada" / LESSON, (0, 1_800_000_000))
    said = []
    rows, _ = gradebook.grade_class(folder, out, jobs=1, sandbox=False, html=False, log=said.append)
    assert any("ada/timestamp.txt: 'handed in on Tuesday' is not a time" in line for line in said)
    assert rows_of(rows, "ada")["submitted"] == datetime.datetime.fromtimestamp(1_800_000_000, UTC).isoformat()


# ---------------------------------------------------------------- the term, kept; the exit status

def test_every_option_that_shapes_the_gradebook_is_kept_until_changed(fake_class, capsys):
    folder, out, tmp = fake_class["folder"], fake_class["out"], fake_class["tmp"]
    roster = tmp / "roster.csv"
    roster.write_text('learner,lms_id,email\r\nada,1,a@x.edu\r\nbob,2,b@x.edu\r\ncy,3,c@x.edu\r\n'
                      'dee,4,d@x.edu\r\n"García, José",5,j@x.edu\r\n=cmd,6,\r\n', encoding="utf-8")
    overrides = tmp / "overrides.csv"
    overrides.write_text("learner,lesson,exercise,points,comment\nbob,00,next_token_targets,0.75,lab\n"
                         "=cmd,00,next_token_targets,0.25,excused\n")
    write_learner(folder, "ada", {"text_to_ids": ["failed", 8]}, stamp="2026-12-09 17:00:01 UTC")
    flags = ["--roster", str(roster), "--partial", "--due", "00=2026-12-08T17:00", "--late-penalty",
             "10%/day", "--timezone", "Europe/Berlin", "--overrides", str(overrides),
             "--solution-costs", "0.5", "--export", "canvas", "--lessons", "00"]
    base = ["--class", str(folder), "--no-sandbox", "--no-html"]
    assert cli.main([*base, "--out", str(out), *flags]) == 0   # José is missing: a row, not a failure
    first = read_csv(out / "gradebook.csv")
    assert rows_of(first, "García, José")["status"] == "missing" and rows_of(first, "'=cmd")["status"] == "missing"
    assert not any(r["learner"] in ('"García', "García") for r in first)   # no phantom learner
    roster.unlink()
    overrides.unlink()
    assert cli.main([*base, "--out", str(out), "--force"]) == 0           # no flags: the kept term
    again = read_csv(out / "gradebook.csv")
    assert again == first and rows_of(again, "'=cmd")["override"] == "yes"
    assert (out / "canvas.csv").exists() and (out / "roster.csv").exists()
    capsys.readouterr()
    assert cli.main(["--show-term", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    for part in ("--partial: True", "--late-penalty: 10%/day", "--timezone: Europe/Berlin",
                 "--solution-costs: 0.5", "--export: canvas", "--lessons: 00_start_here",
                 "--roster: 6 learner(s)", "--overrides: 2 line(s)"):
        assert part in shown, shown
    # "none" drops what is kept
    assert cli.main([*base, "--out", str(out), "--roster", "none", "--no-partial",
                     "--export", "none", "--overrides", "none"]) == 0
    dropped = read_csv(out / "gradebook.csv")
    assert not any(r["learner"] == "García, José" for r in dropped)
    assert rows_of(dropped, "ada", "text_to_ids")["points_before_penalty"] == "0"
    assert rows_of(dropped, "bob")["override"] == ""
    assert not (out / "roster.csv").exists() and "export" not in json.loads((out / "term.json").read_text())


def test_the_exit_status_is_0_for_any_verdicts_and_1_only_for_the_graders_own_failure(fake_class, monkeypatch):
    folder, out, tmp = fake_class["folder"], fake_class["out"], fake_class["tmp"]
    (tmp / "roster.csv").write_text("ada\nbob\ncy\ndee\nzoe\n")
    base = ["--class", str(folder), "--out", str(out), "--no-sandbox", "--no-html"]
    # zoe missing, cy not run, bob failed: each a row, and the run did its job
    assert cli.main([*base, "--roster", str(tmp / "roster.csv")]) == 0
    rows = read_csv(out / "gradebook.csv")
    assert {rows_of(rows, "zoe")["status"], rows_of(rows, "cy")["status"]} == {"missing", "not run"}

    def broken(path, **kwargs):
        raise RuntimeError("a bug of the grader's")
    monkeypatch.setattr(gradebook, "grade", broken)
    assert cli.main([*base, "--force"]) == 1
    assert rows_of(read_csv(out / "gradebook.csv"), "ada", "")["feedback"].startswith("the grader failed")
    assert cli.main(["--class", str(tmp / "nowhere"), "--out", str(out), "--no-sandbox"]) == 2


def test_grade_class_takes_the_term_and_the_run_as_two_objects(fake_class):
    given, run_ = gradebook.options(roster=None, partial=True, jobs=1, sandbox=False, html=False)
    assert given == term.Given(partial=True) and run_ == gradebook.Run(jobs=1, sandbox=False, html=False)
    rows, failures = gradebook.grade_class(fake_class["folder"], fake_class["out"], given, run_,
                                           log=lambda line: None)
    assert failures == 0 and rows_of(rows, "bob")["points"] == "0.5"
    with pytest.raises(TypeError, match="no option colour"):
        gradebook.options(colour="red")


def test_a_regrade_with_same_seed_draws_the_kept_seed_and_a_changed_notebook_a_fresh_one(fake_class, monkeypatch):
    folder, out = fake_class["folder"], fake_class["out"]
    seeds = {}
    fake = gradebook.grade

    def seeded(path, seed=None, **kwargs):
        graded = fake(path, **kwargs)
        graded.seed = seed if seed is not None else 1000 + len(seeds)
        seeds.setdefault(path.parent.name, []).append(graded.seed)
        return graded
    monkeypatch.setattr(gradebook, "grade", seeded)
    grade_fake(folder, out)
    kept = {r["learner"]: r["seed"] for r in read_csv(out / "gradebook.csv") if r["exercise"] == EXERCISE}
    assert len(set(kept.values())) == 4   # each notebook its own seed, in the gradebook
    write_learner(folder, "bob", {EXERCISE: ["failed", 2]})
    grade_fake(folder, out, force=True, same_seed=True)
    assert seeds["ada"][-1] == int(kept["ada"])       # unchanged: its kept seed, its page again
    assert seeds["bob"][-1] != int(kept["bob"])       # changed: a fresh seed


def test_the_grading_modules_import_each_other_without_a_cycle():
    import ast
    package = ROOT / "course_lib" / "grading"
    modules = {p.stem for p in package.glob("*.py")}
    graph = {}
    for path in package.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):   # imports inside functions too
            if isinstance(node, ast.ImportFrom) and node.module == "course_lib.grading":
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib.grading."):
                found.add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("course_lib.grading.")}
        graph[path.stem] = found & modules
    assert graph["gradebook"] >= {"term", "export", "shards", "similarity", "book"}  # the graph is read

    def cycle_from(start, path):
        for nxt in sorted(graph[path[-1]]):
            if nxt == start:
                return path + [nxt]
            if nxt not in path:
                found = cycle_from(start, path + [nxt])
                if found:
                    return found
        return None
    cycles = [c for c in (cycle_from(m, [m]) for m in sorted(graph)) if c]
    assert not cycles, f"import cycles in course_lib/grading: {cycles[:3]}"


def test_the_same_notebook_graded_with_the_same_seed_gets_the_same_feedback(tmp_path):
    """Lesson 01's attention check draws its inputs from the grading seed: a wrong answer's
    feedback shows them, so one seed gives one page and another seed another."""
    from answers import WRONG
    from course_lib.grading import feedback
    from notebook_tools import read
    wrong = next(w for w in WRONG if w.exercise == "attention" and w.name == "ignores the mask")
    path = tmp_path / "01_attention_by_hand.ipynb"
    nbformat.write(fill(read(ROOT / "exercises" / path.name), {**REFERENCE, "attention": wrong.body}), path)

    def graded(seed):
        g = run.grade(path, seed=seed, sandbox=SANDBOXED, cell_timeout=TIMEOUT, notebook_timeout=240,
                      memory_gib=3)
        text = next(r.feedback for r in g.results if r.exercise == "attention")
        page = feedback.feedback_html(g, "ada")
        return g.seed, text, page
    first, again, other = graded(7), graded(7), graded(8)
    assert first[0] == again[0] == 7 and other[0] == 8 and "Graded with seed 7" in first[2]
    assert "random q (4, 3)" in first[1]        # it failed on random inputs the seed drew
    assert first[1:] == again[1:]               # the same seed: the same feedback, the same page
    assert other[1] != first[1]                 # another seed: other inputs in the feedback
