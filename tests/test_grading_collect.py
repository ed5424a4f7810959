"""collect: Canvas and Moodle zips and an nbgrader folder laid out as the class folder; return: the pages back.

The downloads are made here, their entries named as each LMS names them (Canvas:
`{sortable name}_{late_}?{user id}_{id}_{file}`, a re-upload with `-1`; Moodle: a folder or a
prefix `{Full Name}_{participant id}_assignsubmission_file_` per learner; nbgrader:
`submitted/{student}/{assignment}/` with its timestamp.txt), with accents, a late flag, a
re-upload, entries that climb out and a link. Nothing is graded here: collect never runs a
notebook, and return reads only the feedback pages.
"""
import csv
import datetime
import stat
import struct
import zipfile

import pytest

from course_lib.grading import cli, collect, lateness, returns

from notebook_tools import ROOT

BLANK = (ROOT / "exercises" / "00_start_here.ipynb").read_bytes()
LESSON01 = (ROOT / "exercises" / "01_attention_by_hand.ipynb").read_bytes()
UTC = datetime.timezone.utc


def entry(archive, name, data, when=(2026, 12, 8, 16, 0, 0), utc=None, mode=None):
    """Add a zip entry; utc: seconds since the epoch in an extended-timestamp field (as Info-ZIP writes)."""
    info = zipfile.ZipInfo(name, date_time=when)
    if utc is not None:
        info.extra = struct.pack("<HHBi", 0x5455, 5, 1, utc)
    if mode is not None:
        info.external_attr = mode << 16
    archive.writestr(info, data)


def canvas_zip(path):
    with zipfile.ZipFile(path, "w") as z:
        entry(z, "garcíajosé_4821_90001_00_start_here.ipynb", BLANK, (2026, 12, 8, 10, 0, 0))
        entry(z, "lovelaceada_late_4822_90002_00_start_here.ipynb", b"{}", (2026, 12, 9, 9, 0, 0))
        # a re-upload under the same name: Canvas adds -1; it is the newer one, and wins
        entry(z, "lovelaceada_late_4822_90003_00_start_here-1.ipynb", BLANK, (2026, 12, 9, 18, 30, 0))
        entry(z, "lovelaceada_4822_90004_attention.ipynb", LESSON01, utc=1796000000)  # renamed by the learner
        entry(z, "../escaped_4823_90005_00_start_here.ipynb", BLANK)
        entry(z, "/etc/cron.d/x_4823_90006_00_start_here.ipynb", BLANK)
        entry(z, "linked_4824_90007_00_start_here.ipynb", "/etc/passwd", mode=stat.S_IFLNK | 0o777)
        entry(z, "smithbob_4825_90008_notes.pdf", b"%PDF-1.4")
    return path


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
    assert "older file" in why["lovelaceada_late_4822_90002_00_start_here.ipynb"]
    assert not (tmp_path / "escaped_4823_90005_00_start_here.ipynb").exists()
    assert sorted(p.name for p in (tmp_path / "class").iterdir()) == ["García, José", "ada", "collected.csv"]
    # each lesson its own submission time: the zip's time (no zone, read in --timezone), or UTC
    # where the zip records it
    stamps = {s: (tmp_path / "class" / "ada" / s / "timestamp.txt").read_text().strip()
              for s in ("00_start_here", "01_attention_by_hand")}
    assert stamps["00_start_here"] == "2026-12-09 18:30:00.000000"
    assert stamps["01_attention_by_hand"] == datetime.datetime.fromtimestamp(1796000000, UTC).strftime(
        "%Y-%m-%d %H:%M:%S.%f UTC")
    kept = {(r["learner"], r["lesson"]): r for r in collect.read_collected(tmp_path / "class")}
    assert kept["ada", "00_start_here"]["lms_prefix"] == "lovelaceada_late_4822_90003_"
    assert kept["García, José", "00_start_here"]["lms_id"] == "4821"


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
    assert zipfile.ZipFile(made[0]).namelist() == ["lovelaceada_late_4822_90003_00_start_here_feedback.html"]


def test_the_return_command(tmp_path, capsys):
    out = graded_out(tmp_path, {"ada": ["00_start_here"]})
    assert cli.main(["return", str(out), "--into", str(tmp_path / "back")]) == 0
    assert (tmp_path / "back" / "ada" / "00_start_here.html").exists()
    assert cli.main(["return", str(tmp_path / "nowhere"), "--into", str(tmp_path / "back")]) == 2
    assert cli.main(["return", str(out), "--into", str(tmp_path / "b2"), "--lms", "moodle"]) == 2
    assert "--class" in capsys.readouterr().err
