"""--export canvas and --export moodle: the columns each LMS's grade import reads, ids from the roster.

Tested on gradebook rows written by hand (the export reads nothing else). What each importer
reads is in course_lib/grading/export.py's docstring, from the LMS's own importer code:
Canvas, instructure/canvas-lms app/models/gradebook_importer.rb; Moodle, moodle/moodle
grade/import/csv/classes/load_data.php.
"""
import csv
import re

import pytest

from course_lib.grading import cli, export, term
from course_lib.grading.roster import read_roster, roster_names
from course_lib.grading.submissions import read_roster as submission_names

GRADEBOOK = [  # (learner, lesson, exercise, points, max_points, status)
    ("ada", "00_start_here", "text_to_ids", 1, 1, "passed"),
    ("ada", "00_start_here", "next_token_targets", 1, 1, "passed"),
    ("ada", "00_start_here", "next_byte_loss", 0.5, 1, "failed"),
    ("ada", "01_attention_by_hand", "softmax", 2, 2, "passed"),
    ("bob", "00_start_here", "text_to_ids", 0, 1, "failed"),
    ("bob", "00_start_here", "next_token_targets", 1, 1, "passed"),
    ("bob", "00_start_here", "next_byte_loss", 0, 1, "failed"),
    ("bob", "01_attention_by_hand", "softmax", 0, 2, "missing"),
    ("=cmd", "00_start_here", "", 0, 0, "not run"),
    ("=cmd", "01_attention_by_hand", "softmax", 0, 2, "missing"),
    ("cy", "00_start_here (1)", "", 0, 0, "not run"),   # a misnamed notebook: no lesson's column
]


def rows():
    return [dict(learner=l, lesson=s, exercise=e, points=str(p), max_points=str(m), status=st,
                 feedback="", sha256="", sandbox="", cpu_seconds="")
            for l, s, e, p, m, st in GRADEBOOK]


def roster(tmp_path, text):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


ROSTER = "learner,LMS id,email\nada,101,ada@example.edu\nbob,102,bob@example.edu\n=cmd,103,\n"


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_canvas_has_the_columns_its_importer_reads(tmp_path):
    warnings = []
    path = export.write_export(rows(), tmp_path, "canvas", roster(tmp_path, ROSTER), log=warnings.append)
    table = read(path)
    head = table[0]
    # gradebook_importer.rb: row[0] includes "Student", row[1] includes "ID", then SIS User ID and
    # SIS Login ID, and the last learner column is "Section"; the rest are assignments
    assert head[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert head[5:] == ["00_start_here", "01_attention_by_hand"]  # one column per lesson
    # a row whose first cell includes "Points Possible" gives each new assignment its points
    assert "Points Possible" in table[1][0] and table[1][5:] == ["3", "2"]
    by_name = {r[0]: r for r in table[2:]}
    assert by_name["ada"][1] == "101" and by_name["ada"][5:] == ["2.5", "2"]
    assert by_name["bob"][1] == "102" and by_name["bob"][5:] == ["1", "0"]  # missing: 0 points
    # a notebook that was not run has no points yet: its cell is empty, and a warning says so
    assert by_name["'=cmd"][5:] == ["", "0"]  # and a name a spreadsheet would run is made inert
    assert any("=cmd/00_start_here was not run" in w for w in warnings)
    assert set(by_name) == {"ada", "bob", "'=cmd"}  # cy's only row is a misnamed notebook's
    assert not any("not on the roster" in w for w in warnings)


def test_moodle_has_a_user_field_column_and_one_grade_column_per_lesson(tmp_path):
    warnings = []
    path = export.write_export(rows(), tmp_path, "moodle", roster(tmp_path, ROSTER), log=warnings.append)
    table = read(path)
    # load_data.php: the header row names the columns; one column maps to useridnumber or
    # useremail, each other to a grade item (an existing one, or a new one named by its header)
    assert table[0] == ["Learner", "ID number", "Email address", "00_start_here", "01_attention_by_hand"]
    assert table[1:] == [["ada", "101", "ada@example.edu", "2.5", "2"],
                         ["bob", "102", "bob@example.edu", "1", "0"]]
    # an empty user field stops Moodle's whole import, so a learner without one is left out and named
    assert any("=cmd" in w and "left out" in w for w in warnings)
    for row in table[1:]:
        assert all(re.fullmatch(r"\d+(\.\d+)?", v) for v in row[3:])  # numbers Moodle can read
    # a grade item Moodle's import creates has a maximum of 100: each lesson's own maximum is said
    assert any("maximum grade of 100" in w and "00_start_here 3, 01_attention_by_hand 2" in w for w in warnings)


def test_learners_missing_from_the_roster_are_listed(tmp_path):
    warnings = []
    short = roster(tmp_path, "learner,lms_id,email\nada,101,ada@example.edu\n")
    export.write_export(rows(), tmp_path, "canvas", short, log=warnings.append)
    assert any("not on the roster" in w and "=cmd, bob" in w for w in warnings)
    canvas = {r[0]: r for r in read(tmp_path / "canvas.csv")[2:]}
    assert canvas["bob"][1] == ""  # Canvas matches bob by name, or asks
    warnings.clear()
    export.write_export(rows(), tmp_path, "moodle", short, log=warnings.append)
    assert [r[0] for r in read(tmp_path / "moodle.csv")[1:]] == ["ada"]
    assert any("not on the roster" in w and "left out" in w for w in warnings)


def test_a_warning_names_learners_and_never_a_rosters_emails_or_sis_ids(tmp_path):
    """grade_class hands the export the roster it read (its entries, as term.roster keeps them):
    the warnings name the learners missing from it, never another learner's e-mail or SIS id."""
    entries = read_roster(roster(tmp_path, "learner,lms_id,email,sis_user_id\n"
                                           "ada,101,ada@example.edu,SIS-0001\n=cmd,103,cmd@example.edu,SIS-0003\n"))
    for lms in ("canvas", "moodle"):
        warnings = []
        export.write_export(rows(), tmp_path, lms, tuple(entries), log=warnings.append)
        assert any("not on the roster: bob" in w for w in warnings), warnings
        text = "\n".join(warnings)
        assert "@" not in text and "SIS-" not in text and "{" not in text, text


def test_the_plain_roster_still_works_for_canvas_and_moodle_says_what_it_needs(tmp_path):
    plain = roster(tmp_path, "ada\nbob\n=cmd\n")
    assert [e["learner"] for e in read_roster(plain)] == ["ada", "bob", "=cmd"]
    export.write_export(rows(), tmp_path, "canvas", plain, log=lambda line: None)
    assert [r[1] for r in read(tmp_path / "canvas.csv")[2:]] == ["", "", ""]
    with pytest.raises(ValueError, match="needs each learner's Moodle ID number or email"):
        term.settle(tmp_path / "out", term.Given(roster=plain, export=["moodle"]), ["00_start_here"])


@pytest.mark.parametrize("text, message", [
    ("learner,lms_id\nada,1,extra\n", "line 2: 3 fields"),
    ("learner,lms_id\n\"García, José\",1,2\n", "line 2: 3 fields"),
    ("learner,lms_id\nada,1\nada,2\n", "line 3: ada is on line 2 too"),
    ("learner,lms_id\nada,1\nbob,1\n", "the LMS id 1 is ada's too"),
    ("learner,lms_id\n,1\n", "line 2: no learner name"),
    ("ada\nbob,2\n", "line 2: 2 fields but no header row"),
    ("learner,lms_id\n\"ada,1\n", "line 2: .*quotes"),
])
def test_a_malformed_roster_is_a_clear_error(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_roster(roster(tmp_path, text))


SPREADSHEET = [  # (what a spreadsheet or an LMS saves, the learners it names)
    ('learner,lms_id,email\n"García, José",4821,jose@example.edu\nbob,4822,bob@example.edu\n',
     ["García, José", "bob"]),
    ("\ufefflearner,lms_id,email\r\nada,4821,ada@example.edu\r\nbob,4822,\r\n", ["ada", "bob"]),
    ("First name,Learner,Phone,LMS ID,Email\nAda,ada,555,4821,ada@example.edu\n", ["ada"]),
    ('\ufeff"García, José"\r\nbob\r\n# a comment\r\n', ["García, José", "bob"]),
]


@pytest.mark.parametrize("text, names", SPREADSHEET)
def test_one_roster_reader_reads_what_a_spreadsheet_saves_and_makes_no_phantom_learner(tmp_path, text, names):
    path = tmp_path / "roster.csv"
    path.write_bytes(text.encode("utf-8"))
    assert roster_names(path) == names
    assert submission_names(path) == names   # the grader's missing rows: the same reader
    entries = read_roster(path)
    if "4821" in text:
        assert entries[0]["lms_id"] == "4821" and entries[0]["email"].endswith("@example.edu")


def test_the_command_refuses_a_bad_roster_before_grading_anything(tmp_path, capsys):
    (tmp_path / "class" / "ada").mkdir(parents=True)
    bad = roster(tmp_path, "learner,lms_id\nada,1,extra\n")
    code = cli.main([str(tmp_path / "class"), "--class", "--out", str(tmp_path / "out"),
                     "--roster", str(bad), "--export", "canvas", "--no-sandbox"])
    assert code == 2 and "line 2: 3 fields" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
