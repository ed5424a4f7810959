"""collect: Canvas and Moodle zips and an nbgrader folder laid out as the class folder; return: the pages back.

The downloads are made here as each LMS makes them. Canvas (instructure/canvas-lms,
lib/content_zipper.rb): an entry `{sortable name}_{LATE_}?{user id}_{file id}_{file}` (the
name lowercased, every character but a letter, a digit or `_` removed), or with anonymous
grading `{LATE_}?anon_{anonymous id}_{file id}_{file}`, a re-upload with `-1`, and every entry
stamped with the one moment the zip was made. Moodle: a folder or a prefix
`{Full Name}_{participant id}_assignsubmission_file_` per learner, each entry with its file's
own time. nbgrader: `submitted/{student}/{assignment}/` with its timestamp.txt. With accents,
late flags, a re-upload, entries that climb out and a link. Nothing is graded here: collect
never runs a notebook, and return reads only the feedback pages.
"""
import csv
import datetime
import json
import stat
import struct
import zipfile

import nbformat
import pytest

from course_lib.grading import cli, collect, lateness, returns

from notebook_tools import ROOT

BLANK = (ROOT / "exercises" / "00_start_here.ipynb").read_bytes()
LESSON01 = (ROOT / "exercises" / "01_attention_by_hand.ipynb").read_bytes()
UTC = datetime.timezone.utc
DOWNLOADED = (2026, 12, 20, 9, 41, 7)   # when the instructor clicked "Download Submissions"


def entry(archive, name, data, when=(2026, 12, 8, 16, 0, 0), utc=None, mode=None):
    """Add a zip entry; utc: seconds since the epoch in an extended-timestamp field (as Info-ZIP writes)."""
    info = zipfile.ZipInfo(name, date_time=when)
    if utc is not None:
        info.extra = struct.pack("<HHBi", 0x5455, 5, 1, utc)
    if mode is not None:
        info.external_attr = mode << 16
    archive.writestr(info, data)


def canvas_download(path, entries, when=DOWNLOADED):
    """A zip as Canvas's "Download Submissions" makes it: every entry stamped with the one moment
    the zip was made (`when`), whatever the entry; entries: [(name, bytes)] or (name, bytes, mode)."""
    moment = int(datetime.datetime(*when, tzinfo=UTC).timestamp())
    with zipfile.ZipFile(path, "w") as z:
        for name, data, *mode in entries:
            entry(z, name, data, when, utc=moment, mode=mode[0] if mode else None)
    return path


def notebook(marker):
    """Lesson 00's blank, told apart by `marker` (so that which hand-in went where can be checked)."""
    nb = nbformat.reads(BLANK.decode(), as_version=4)
    nb.metadata["marker"] = marker
    return nbformat.writes(nb).encode()


def marker(path):
    return nbformat.read(path, as_version=4).metadata.get("marker")


def canvas_zip(path, when=DOWNLOADED):
    return canvas_download(path, [
        ("garcíajosé_4821_90001_00_start_here.ipynb", BLANK),
        ("lovelaceada_LATE_4822_90002_00_start_here.ipynb", b"{}"),
        # uploaded again under the same name in one submission: Canvas adds -1; a later file id
        ("lovelaceada_LATE_4822_90003_00_start_here-1.ipynb", BLANK),
        ("lovelaceada_LATE_4822_90004_attention.ipynb", LESSON01),  # renamed by the learner
        ("../escaped_4823_90005_00_start_here.ipynb", BLANK),
        ("/etc/cron.d/x_4823_90006_00_start_here.ipynb", BLANK),
        ("linked_4824_90007_00_start_here.ipynb", b"/etc/passwd", stat.S_IFLNK | 0o777),
        ("smithbob_4825_90008_notes.pdf", b"%PDF-1.4"),
    ], when)


def moodle_zip(path):
    with zipfile.ZipFile(path, "w") as z:
        entry(z, "José García_551_assignsubmission_file/00_start_here.ipynb", BLANK)           # Moodle 4.1+
        entry(z, "Ada Lovelace_552_assignsubmission_file_/00_start_here.ipynb", BLANK)         # before 4.1
        entry(z, "Bob Smith_553_assignsubmission_file_00_start_here.ipynb", BLANK)             # no folders
        entry(z, "Bob Smith_553_assignsubmission_onlinetext_onlinetext.html", b"<p>hi</p>")
        entry(z, "Eve_554_assignsubmission_file/../../00_start_here.ipynb", BLANK)
    return path


def roster(tmp_path, text):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_canvas_zip_is_laid_out_per_learner_and_lesson_and_the_newest_file_wins(tmp_path):
    people = roster(tmp_path, 'learner,lms_id\n"García, José",4821\nada,4822\n')
    placed, skipped = collect.collect(canvas_zip(tmp_path / "c.zip"), tmp_path / "class", people)
    assert sorted((l, s) for l, s, _ in placed) == [
        ("García, José", "00_start_here"), ("ada", "00_start_here"), ("ada", "01_attention_by_hand")]
    assert (tmp_path / "class" / "ada" / "00_start_here" / "00_start_here.ipynb").read_bytes() == BLANK
    assert (tmp_path / "class" / "ada" / "01_attention_by_hand" / "01_attention_by_hand.ipynb").read_bytes() == LESSON01
    why = dict(skipped)
    assert "climbs out" in why["../escaped_4823_90005_00_start_here.ipynb"]
    assert "absolute path" in why["/etc/cron.d/x_4823_90006_00_start_here.ipynb"]
    assert "symbolic link" in why["linked_4824_90007_00_start_here.ipynb"]
    assert "not a notebook" in why["smithbob_4825_90008_notes.pdf"]
    assert "older file" in why["lovelaceada_LATE_4822_90002_00_start_here.ipynb"]
    assert not (tmp_path / "escaped_4823_90005_00_start_here.ipynb").exists()
    assert sorted(p.name for p in (tmp_path / "class").iterdir()) == ["García, José", "ada", "collected.csv"]
    # Canvas stamps every entry with the download's time: no hand-in gets it; each lesson is late
    # or on time by its LATE flag
    def stamp(learner, stem):
        return lateness.submitted_at(tmp_path / "class" / learner / stem / f"{stem}.ipynb",
                                     tmp_path / "class" / learner, UTC)
    assert stamp("ada", "00_start_here") == stamp("ada", "01_attention_by_hand") == (lateness.LATE, "timestamp.txt")
    assert stamp("García, José", "00_start_here") == (lateness.ON_TIME, "timestamp.txt")
    assert "2026-12-20" not in (tmp_path / "class" / "collected.csv").read_text()
    kept = {(r["learner"], r["lesson"]): r for r in collect.read_collected(tmp_path / "class")}
    assert kept["ada", "00_start_here"]["lms_prefix"] == "lovelaceada_LATE_4822_90003_"
    assert kept["García, José", "00_start_here"]["lms_id"] == "4821"
    assert (kept["ada", "00_start_here"]["submitted"], kept["García, José", "00_start_here"]["submitted"]) \
        == ("late", "on time")


def test_without_a_roster_learners_are_named_as_the_lms_names_them(tmp_path):
    placed, _ = collect.collect(canvas_zip(tmp_path / "c.zip"), tmp_path / "class")
    assert {l for l, _, _ in placed} == {"garcíajosé", "lovelaceada"}


def test_a_moodle_zip_in_folders_or_prefixes_is_laid_out_and_its_other_entries_listed(tmp_path):
    people = roster(tmp_path, "learner,lms_id\njose,551\n")
    placed, skipped = collect.collect(moodle_zip(tmp_path / "m.zip"), tmp_path / "class", people)
    assert sorted(l for l, _, _ in placed) == ["Ada Lovelace", "Bob Smith", "jose"]
    assert all(s == "00_start_here" for _, s, _ in placed)
    why = dict(skipped)
    assert "onlinetext" in why["Bob Smith_553_assignsubmission_onlinetext_onlinetext.html"]
    assert "climbs out" in why["Eve_554_assignsubmission_file/../../00_start_here.ipynb"]
    kept = {r["learner"]: r for r in collect.read_collected(tmp_path / "class")}
    assert (kept["jose"]["lms_name"], kept["jose"]["lms_id"]) == ("José García", "551")


def test_a_moodle_learner_is_found_on_the_roster_by_full_name(tmp_path):
    """Moodle's participant id is the assignment's own: the roster's `name` column matches instead."""
    people = roster(tmp_path, "learner,lms_id,full name\njose,J-17,JOSÉ  garcía\nada,A-3,Ada Lovelace\n")
    placed, _ = collect.collect(moodle_zip(tmp_path / "m.zip"), tmp_path / "class", people)
    assert sorted(l for l, _, _ in placed) == ["Bob Smith", "ada", "jose"]


def test_an_nbgrader_folder_keeps_its_timestamps(tmp_path):
    for student, stamp in (("ada", "2026-12-08 17:04:31.123456 UTC"), ("bob", None)):
        folder = tmp_path / "course" / "submitted" / student / "ps1"
        folder.mkdir(parents=True)
        (folder / "00_start_here.ipynb").write_bytes(BLANK)
        if stamp:
            (folder / "timestamp.txt").write_text(stamp)
    placed, skipped = collect.collect(tmp_path / "course", tmp_path / "class")
    assert sorted(l for l, _, _ in placed) == ["ada", "bob"] and not skipped
    text = (tmp_path / "class" / "ada" / "00_start_here" / "timestamp.txt").read_text().strip()
    assert text == "2026-12-08 17:04:31.123456 UTC"
    when, how = lateness.submitted_at(tmp_path / "class" / "ada" / "00_start_here" / "00_start_here.ipynb",
                                      tmp_path / "class" / "ada", UTC)
    assert (when, how) == (datetime.datetime(2026, 12, 8, 17, 4, 31, 123456, UTC), "timestamp.txt")


def test_late_work_reads_each_lessons_own_timestamp_and_the_flat_layout_still(tmp_path):
    learner = tmp_path / "class" / "ada"
    for stem, stamp in (("00_start_here", "2026-12-08 10:00:00 UTC"), ("01_attention_by_hand", "2026-12-20 10:00:00 UTC")):
        (learner / stem).mkdir(parents=True)
        (learner / stem / f"{stem}.ipynb").write_bytes(BLANK)
        (learner / stem / "timestamp.txt").write_text(stamp)
    (learner / "timestamp.txt").write_text("2027-01-01 00:00:00 UTC")   # an old flat one: not these lessons'
    times = {stem: lateness.submitted_at(learner / stem / f"{stem}.ipynb", learner, UTC)[0]
             for stem in ("00_start_here", "01_attention_by_hand")}
    assert times == {"00_start_here": datetime.datetime(2026, 12, 8, 10, tzinfo=UTC),
                     "01_attention_by_hand": datetime.datetime(2026, 12, 20, 10, tzinfo=UTC)}
    flat = tmp_path / "flat" / "bob"
    flat.mkdir(parents=True)
    (flat / "00_start_here.ipynb").write_bytes(BLANK)
    (flat / "timestamp.txt").write_text("2026-12-09 10:00:00 UTC")
    assert lateness.submitted_at(flat / "00_start_here.ipynb", flat, UTC)[0] == datetime.datetime(
        2026, 12, 9, 10, tzinfo=UTC)


def test_an_entry_that_unpacks_past_the_limit_is_refused_whatever_its_header_says(tmp_path, monkeypatch):
    monkeypatch.setattr(collect, "SUBMISSION_LIMIT", 1000)
    path = tmp_path / "c.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        entry(z, "bigbob_1_2_00_start_here.ipynb", b" " * 5000)
    placed, skipped = collect.collect(path, tmp_path / "class")
    assert not placed and "over" in skipped[0][1]


def test_the_command_collects_and_lists_and_refuses_what_is_not_a_download(tmp_path, capsys):
    code = cli.main(["collect", str(canvas_zip(tmp_path / "c.zip")), "--into", str(tmp_path / "class")])
    out = capsys.readouterr().out
    assert code == 0 and "collected 3 notebook(s) of 2 learner(s)" in out
    assert "not placed: ../escaped_4823_90005_00_start_here.ipynb: its name climbs out" in out
    (tmp_path / "not.zip").write_text("hello")
    assert cli.main(["collect", str(tmp_path / "not.zip"), "--into", str(tmp_path / "class")]) == 2
    assert "is not a zip" in capsys.readouterr().err
    assert cli.main(["collect", str(tmp_path / "nowhere"), "--into", str(tmp_path / "class")]) == 2
    assert cli.main(["collect", str(tmp_path / "c.zip"), "--into", str(tmp_path / "x"), "--lesson", "99"]) == 2


# ---------------------------------------------------------------- Canvas's lateness, as Canvas gives it

def test_a_download_made_later_moves_no_time_and_only_canvas_late_flag_is_late(tmp_path):
    """Canvas stamps each entry with the download's moment: downloaded on the 20th, long after
    the due time, no hand-in is late by it; collected again from a download of the 28th (one
    learner re-uploaded), nothing moves but the changed learner's flag."""
    first = canvas_download(tmp_path / "first.zip", [
        ("lovelaceada_4821_90001_00_start_here.ipynb", notebook("ada")),
        ("babbagebob_LATE_4822_90002_00_start_here.ipynb", notebook("bob")),
        ("hoppergrace_4823_90003_00_start_here.ipynb", notebook("grace 1"))])
    collect.collect(first, tmp_path / "class")
    again = canvas_download(tmp_path / "again.zip", [
        ("lovelaceada_4821_90001_00_start_here.ipynb", notebook("ada")),
        ("babbagebob_LATE_4822_90002_00_start_here.ipynb", notebook("bob")),
        ("hoppergrace_LATE_4823_90007_00_start_here.ipynb", notebook("grace 2"))], when=(2026, 12, 28, 8, 0, 0))
    before = {p: p.read_bytes() for p in (tmp_path / "class").rglob("timestamp.txt")}
    collect.collect(again, tmp_path / "class")
    after = {p: p.read_bytes() for p in (tmp_path / "class").rglob("timestamp.txt")}
    changed = sorted(p.parent.parent.name for p in after if after[p] != before.get(p))
    assert changed == ["hoppergrace"]
    flags = {p.parent.parent.name: lateness.read_stamp(p.read_text(), UTC, "x") for p in after}
    assert flags == {"lovelaceada": "on time", "babbagebob": "late", "hoppergrace": "late"}
    assert marker(tmp_path / "class" / "hoppergrace" / "00_start_here" / "00_start_here.ipynb") == "grace 2"


def test_canvas_submission_times_from_its_api_or_a_csv_set_each_hand_ins_time(tmp_path):
    download = canvas_download(tmp_path / "c.zip", [
        ("lovelaceada_4821_90001_00_start_here.ipynb", notebook("ada")),
        ("babbagebob_LATE_4822_90002_00_start_here.ipynb", notebook("bob")),
        ("LATE_anon_Qr7Zt_90003_00_start_here.ipynb", notebook("anonymous")),
        ("hoppergrace_LATE_4823_90004_00_start_here.ipynb", notebook("grace"))])
    api = tmp_path / "submissions.json"   # GET /api/v1/courses/:c/assignments/:a/submissions
    api.write_text(json.dumps([
        {"id": 1, "user_id": 4821, "submitted_at": "2026-12-08T16:59:00Z", "late": False, "seconds_late": 0},
        {"id": 2, "user_id": 4822, "submitted_at": "2026-12-09T19:00:00Z", "late": True, "seconds_late": 93600},
        {"id": 3, "user_id": 4830, "anonymous_id": "Qr7Zt", "submitted_at": "2026-12-08T17:30:00Z"},
        {"id": 4, "user_id": 4824, "submitted_at": None, "workflow_state": "unsubmitted"}]))
    collect.collect(download, tmp_path / "class", times=api)
    utc = lateness.zone("UTC")

    def when(learner):
        return lateness.submitted_at(tmp_path / "class" / learner / "00_start_here" / "00_start_here.ipynb",
                                     tmp_path / "class" / learner, utc)[0]
    assert when("lovelaceada") == datetime.datetime(2026, 12, 8, 16, 59, tzinfo=UTC)
    assert when("babbagebob") == datetime.datetime(2026, 12, 9, 19, tzinfo=UTC)
    assert when("anon_Qr7Zt") == datetime.datetime(2026, 12, 8, 17, 30, tzinfo=UTC)
    assert when("hoppergrace") == lateness.LATE   # not in the file: its flag
    table = tmp_path / "times.csv"   # the same, as a spreadsheet keeps it: no zone, read in --timezone
    table.write_text("user_id,anonymous_id,submitted_at\n4821,,2026-12-08 17:59:00\n")
    collect.collect(download, tmp_path / "again", times=table)
    stamp = (tmp_path / "again" / "lovelaceada" / "00_start_here" / "timestamp.txt").read_text()
    berlin = lateness.zone("Europe/Berlin")
    assert lateness.read_stamp(stamp, berlin, "x") == datetime.datetime(2026, 12, 8, 16, 59, tzinfo=UTC)
    for text, message in [("[{\"user_id\": 1}]", "item 1 has no submitted_at"),
                          ("user_id,submitted_at\n1,yesterday\n", "line 2: 'yesterday' is not a time"),
                          ("submitted_at\n2026-12-08T17:00\n", "line 2 names no learner"),
                          ("user_id,submitted_at\n1,2026-12-08T17:00\n1,2026-12-09T17:00\n", "two times")]:
        table.write_text(text)
        with pytest.raises(ValueError, match=message):
            collect.read_times(table)


def test_canvas_anonymous_grading_is_collected_by_its_anonymous_ids_which_a_roster_may_map(tmp_path):
    download = canvas_download(tmp_path / "anon.zip", [
        ("anon_Mx3kP_90001_00_start_here.ipynb", notebook("one")),
        ("LATE_anon_Qr7Zt_90002_00_start_here.ipynb", notebook("two")),
        ("anon_Mx3kP_90003_notes.pdf", b"%PDF")])
    placed, skipped = collect.collect(download, tmp_path / "class")
    assert sorted(l for l, _, _ in placed) == ["anon_Mx3kP", "anon_Qr7Zt"]
    assert [e for e, _ in skipped] == ["anon_Mx3kP_90003_notes.pdf"]
    assert lateness.read_stamp((tmp_path / "class" / "anon_Qr7Zt" / "00_start_here" / "timestamp.txt").read_text(),
                               UTC, "x") == lateness.LATE
    people = roster(tmp_path, "learner,lms_id,anonymous_id\nada,4821,Mx3kP\n")
    placed, _ = collect.collect(download, tmp_path / "mapped", people)
    assert sorted(l for l, _, _ in placed) == ["ada", "anon_Qr7Zt"]
    kept = {r["learner"]: r for r in collect.read_collected(tmp_path / "mapped")}
    assert kept["ada"]["lms_prefix"] == "anon_Mx3kP_90001_" and kept["anon_Qr7Zt"]["lms_prefix"] == "LATE_anon_Qr7Zt_90002_"


def test_a_download_of_which_nothing_is_placed_fails_with_a_line_that_says_so(tmp_path, capsys):
    odd = canvas_download(tmp_path / "odd.zip", [("README.txt", b"hello"), ("notes_1_2_notes.pdf", b"%PDF")])
    assert cli.main(["collect", str(odd), "--into", str(tmp_path / "class")]) == 1
    captured = capsys.readouterr()
    assert "not placed: README.txt: its name is neither Canvas's" in captured.out
    assert "error: nothing was collected from" in captured.err and "none of its 2 file(s)" in captured.err
    empty = canvas_download(tmp_path / "empty.zip", [])
    assert cli.main(["collect", str(empty), "--into", str(tmp_path / "class")]) == 1
    assert "it holds no submission" in capsys.readouterr().err


# ---------------------------------------------------------------- no learner overwrites another

def folders(tmp_path, into="class"):
    """{learner folder: the marker of its lesson 00 notebook}, and collected.csv's learners."""
    root = tmp_path / into
    found = {p.name: marker(p / "00_start_here" / "00_start_here.ipynb") for p in root.iterdir() if p.is_dir()}
    return found, sorted(r["learner"] for r in collect.read_collected(root))


def test_two_canvas_learners_of_one_name_both_keep_their_hand_ins(tmp_path):
    """An off-roster learner whose sortable name is a roster learner's, and two learners with one
    name and no roster: each gets a folder, named by their Canvas id, and a line says so."""
    people = roster(tmp_path, "learner,lms_id\nada,4821\n")
    download = canvas_download(tmp_path / "c.zip", [
        ("lovelaceada_4821_90001_00_start_here.ipynb", notebook("roster ada")),
        ("ada_9999_90002_00_start_here.ipynb", notebook("another ada")),
        ("smithjohn_5001_90003_00_start_here.ipynb", notebook("john 1")),
        ("smithjohn_5002_90004_00_start_here.ipynb", notebook("john 2"))])
    lines = []
    collect.collect(download, tmp_path / "class", people, log=lines.append)
    found, listed = folders(tmp_path)
    assert found == {"ada": "roster ada", "ada (9999)": "another ada", "smithjohn": "john 1",
                     "smithjohn (5002)": "john 2"}
    assert listed == sorted(found)
    assert any("canvas 9999 is collected as 'ada (9999)'" in l and "the roster's ada (LMS id 4821)" in l for l in lines)
    assert any("canvas 5002 is collected as 'smithjohn (5002)'" in l and "canvas 5001's" in l for l in lines)
    # a later download of another lesson: each keeps the folder it had; a newcomer named like one
    # of them collected earlier does not take theirs
    later = canvas_download(tmp_path / "later.zip", [
        ("smithjohn_5002_90011_00_start_here.ipynb", notebook("john 2, again")),
        ("smithjohn_5003_90012_00_start_here.ipynb", notebook("john 3"))])
    collect.collect(later, tmp_path / "class")
    found, _ = folders(tmp_path)
    assert (found["smithjohn"], found["smithjohn (5002)"], found["smithjohn (5003)"]) == (
        "john 1", "john 2, again", "john 3")


def test_moodle_learners_whose_names_fold_alike_or_are_one_both_keep_their_hand_ins(tmp_path):
    download = tmp_path / "m.zip"
    with zipfile.ZipFile(download, "w") as z:
        entry(z, "Ada Lovelace_552_assignsubmission_file/00_start_here.ipynb", notebook("ada 552"))
        entry(z, "ADA  lovelace_553_assignsubmission_file/00_start_here.ipynb", notebook("ada 553"))
        entry(z, "John Smith_601_assignsubmission_file/00_start_here.ipynb", notebook("john 601"))
        entry(z, "John Smith_602_assignsubmission_file/00_start_here.ipynb", notebook("john 602"))
    collect.collect(download, tmp_path / "class")
    found, listed = folders(tmp_path)
    assert found == {"Ada Lovelace": "ada 552", "ADA  lovelace (553)": "ada 553", "John Smith": "john 601",
                     "John Smith (602)": "john 602"}
    # a roster whose john is named John Smith maps neither: which of the two is john, no one can say
    people = roster(tmp_path, "learner,lms_id,name\njohn,,John Smith\nada,,Ada Lovelace\n")
    collect.collect(download, tmp_path / "rostered", people)
    assert folders(tmp_path, "rostered")[0] == found


def test_a_learner_named_like_the_file_collect_writes_is_collected_and_so_is_the_list(tmp_path, capsys):
    moodle = tmp_path / "m.zip"
    with zipfile.ZipFile(moodle, "w") as z:
        entry(z, "collected.csv_554_assignsubmission_file/00_start_here.ipynb", notebook("moodle"))
        entry(z, "Collected.CSV_555_assignsubmission_file/00_start_here.ipynb", notebook("moodle 2"))
    assert cli.main(["collect", str(moodle), "--into", str(tmp_path / "class")]) == 0
    out = capsys.readouterr().out
    assert "is collected as 'collected.csv (554)'" in out and "a file collect writes" in out
    found, listed = folders(tmp_path)
    assert found == {"collected.csv (554)": "moodle", "Collected.CSV (555)": "moodle 2"}
    assert (tmp_path / "class" / "collected.csv").is_file() and listed == sorted(found)
    course = tmp_path / "course" / "submitted" / "collected.csv" / "ps1"
    course.mkdir(parents=True)
    (course / "00_start_here.ipynb").write_bytes(notebook("nbgrader"))
    placed, _ = collect.collect(tmp_path / "course", tmp_path / "class")
    assert [l for l, _, _ in placed] == ["collected.csv (2)"]
    bad = roster(tmp_path, "learner,lms_id\ncollected.csv,1\n")
    with pytest.raises(ValueError, match="the name of a file collect writes"):
        collect.collect(moodle, tmp_path / "class", bad)


# ---------------------------------------------------------------- return

def graded_out(tmp_path, learners):
    """An --out folder with feedback pages, as a grading leaves it."""
    out = tmp_path / "grades"
    for learner, stems in learners.items():
        (out / "feedback" / learner).mkdir(parents=True)
        for stem in stems:
            (out / "feedback" / learner / f"{stem}.html").write_text(f"<p>{learner} {stem}</p>")
    return out


def test_return_writes_a_folder_per_learner(tmp_path):
    out = graded_out(tmp_path, {"ada": ["00_start_here", "01_attention_by_hand"], "bob": ["00_start_here"]})
    made, left = returns.hand_back(out, tmp_path / "back")
    assert sorted(p.relative_to(tmp_path / "back").as_posix() for p in made) == [
        "ada/00_start_here.html", "ada/01_attention_by_hand.html", "bob/00_start_here.html"]
    assert not left


def test_return_for_moodle_is_its_feedback_zip_per_lesson(tmp_path):
    people = roster(tmp_path, "learner,lms_id\njose,551\n")
    collect.collect(moodle_zip(tmp_path / "m.zip"), tmp_path / "class", people)
    out = graded_out(tmp_path, {"jose": ["00_start_here"], "Ada Lovelace": ["00_start_here"], "zed": ["00_start_here"]})
    made, left = returns.hand_back(out, tmp_path / "back", lms="moodle", class_folder=tmp_path / "class")
    assert [p.name for p in made] == ["moodle-00_start_here.zip"]
    names = zipfile.ZipFile(made[0]).namelist()
    # importziplib.php: a path part `{name}_{participant id}_{plugin type}_{plugin name}`, then the file
    assert sorted(names) == ["Ada Lovelace_552_assignfeedback_file/00_start_here.html",
                             "José García_551_assignfeedback_file/00_start_here.html"]
    assert any("zed" in why for _, why in left)


def test_return_for_canvas_names_each_page_as_its_download_did(tmp_path):
    collect.collect(canvas_zip(tmp_path / "c.zip"), tmp_path / "class")
    out = graded_out(tmp_path, {"lovelaceada": ["00_start_here"]})
    made, _ = returns.hand_back(out, tmp_path / "back", lms="canvas", class_folder=tmp_path / "class")
    assert zipfile.ZipFile(made[0]).namelist() == ["lovelaceada_LATE_4822_90003_00_start_here_feedback.html"]


def test_the_return_command(tmp_path, capsys):
    out = graded_out(tmp_path, {"ada": ["00_start_here"]})
    assert cli.main(["return", str(out), "--into", str(tmp_path / "back")]) == 0
    assert (tmp_path / "back" / "ada" / "00_start_here.html").exists()
    assert cli.main(["return", str(tmp_path / "nowhere"), "--into", str(tmp_path / "back")]) == 2
    assert cli.main(["return", str(out), "--into", str(tmp_path / "b2"), "--lms", "moodle"]) == 2
    assert "--class" in capsys.readouterr().err
