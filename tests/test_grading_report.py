"""The class report: it names the exercise the class failed most, groups one mistake met on other inputs, escapes feedback.

Tested on gradebook rows of a generated class (the report reads nothing else but
similarity.csv), plus one real graded class in test_docs.py, which runs the guide's commands.
"""
import base64
import re
import struct

from course_lib.grading import report

HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def generated_class():
    """12 learners: softmax failed by 9, always with the same mistake on different inputs."""
    rows = []
    for i in range(12):
        learner = f"learner{i:02d}"
        mistake = (f"Exercise 'softmax': the result contains inf or NaN\n  input:    softmax(np.array([{1000 + i}.]))"
                   f"\n  got:      [nan]\nHint: subtract the maximum")
        rows += [
            dict(learner=learner, lesson="01_attention_by_hand", exercise="softmax",
                 points="0" if i < 9 else "1", max_points="1", status="failed" if i < 9 else "passed",
                 feedback=mistake if i < 8 else HOSTILE if i == 8 else "softmax: 26 checks passed",
                 cpu_seconds=f"{4 + i % 3}"),
            dict(learner=learner, lesson="01_attention_by_hand", exercise="attention", points="1",
                 max_points="1", status="passed", feedback="attention: 9 checks passed", cpu_seconds=f"{4 + i % 3}"),
            dict(learner=learner, lesson="00_start_here", exercise="text_to_ids",
                 points="0" if i < 2 else "1", max_points="1", status="missing" if i < 2 else "passed",
                 feedback="", cpu_seconds="" if i < 2 else "3.5"),
        ]
    return rows


def test_the_report_names_the_exercise_the_class_failed_most(tmp_path):
    path = report.write_report(generated_class(), tmp_path)
    html = path.read_text(encoding="utf-8")
    lab = html[html.index("Go over these in the next lab"):html.index("Each exercise")]
    assert "<b>softmax</b>" in lab and "25% of the\n12 who handed it in passed" in lab
    assert "<b>attention</b>" not in lab and "text_to_ids" not in lab  # all who handed them in passed
    # the same mistake on other inputs is one first failure, hit by 8 learners
    assert "(8 learners):\n<code>the result contains inf or NaN</code>" in lab


def test_feedback_is_escaped_and_points_time_and_figure_are_shown(tmp_path):
    html = report.write_report(generated_class(), tmp_path).read_text(encoding="utf-8")
    assert "<script>" not in html and "<img src=x" not in html  # shown as text, never run
    assert "&lt;script&gt;" in html and "&lt;img src=x" in html
    row = html[html.index("01 <b>softmax</b>"):]
    row = row[:row.index("</tr>")]
    assert "3 (25%)" in row and "0/1: 9<br>1/1: 3" in row  # passed and the points' distribution
    assert "8 × <code>the result contains inf or NaN</code>" in row
    times = html[html.index("Time to grade"):html.index("Similar submissions")]
    assert re.search(r"01_attention_by_hand</td>\s*<td class=\"n\">12</td>\s*<td class=\"n\">5.0</td>", times)
    assert re.search(r"00_start_here</td>\s*<td class=\"n\">10</td>", times)  # 2 never handed in
    picture = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    png = base64.b64decode(picture)
    width, height = struct.unpack(">II", png[16:24])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and width <= 932 and height < 400
    assert "similarity.csv was not made" in html


def test_a_class_with_nothing_to_go_over_says_so(tmp_path):
    rows = [r for r in generated_class() if r["exercise"] != "softmax"]
    html = report.render(rows)
    assert "Every exercise was passed by at least 80% of\nthose who handed it in." in html


def test_first_failures_group_the_same_mistake_on_other_inputs():
    line = report.failure_line
    assert line("Exercise 'f': the output has the wrong shape (3, 4)\n  input: x") == \
        line("Exercise 'f': the output has the wrong shape (5, 2)\n  got: y") == "the output has the wrong shape (#, #)"
    assert line("cell 7 (`def f(x):`) raised NameError") == line("cell 12 (`y = 2`) raised NameError")
    assert line("your function returned float64, not float32") != line("your function returned float32, not float64")
    assert line("") == "(no feedback)"


def test_pairs_to_look_at_are_listed_with_what_is_usual(tmp_path):
    (tmp_path / "similarity.csv").write_text(
        "lesson,learner_a,learner_b,score,look_at,matching,compared,shared_by\n"
        "00_start_here,ada,<b>bob</b>,1.00,yes,text_to_ids; next_byte_loss,3,text_to_ids: 2 of 12\n"
        "00_start_here,cy,dee,0.10,,text_to_ids,3,text_to_ids: 9 of 12\n", encoding="utf-8")
    html = report.write_report(generated_class(), tmp_path).read_text(encoding="utf-8")
    section = html[html.index("Similar submissions"):]
    assert "ada and &lt;b&gt;bob&lt;/b&gt;" in section and "cy and dee" not in section
    assert "never a penalty" in section and "no one else's hand-in changes it" in section


def test_a_first_failure_drops_what_every_row_of_its_exercise_says():
    assert report.failure_line("AssertionError: Exercise 'f': targets equal inputs\nHint: shift") == \
        "targets equal inputs"
    assert report.failure_line("NotImplementedError: Exercise 'f': write your solution here") == \
        "NotImplementedError: write your solution here"


def test_the_report_opens_with_each_learner_those_behind_first(tmp_path):
    rows = generated_class()
    stub = "NotImplementedError: Exercise 'softmax': write your solution here"
    for r in rows:   # learner11 handed lesson 01 in blank: every exercise the stub
        if r["learner"] == "learner11" and r["lesson"] == "01_attention_by_hand":
            r.update(status="failed", points="0", feedback=stub)
        if r["learner"] == "learner04" and r["exercise"] == "attention":
            r.update(status="failed", points="0", feedback="a hint")
    rows.append(dict(learner="learner11", lesson="01_attention_by_hand", exercise="01-scale", points="0",
                     max_points="1", status="not answered", feedback="", cpu_seconds="4"))
    people = {p["learner"]: p for p in report.learner_stats(rows)}
    assert people["learner11"]["not_attempted"] == ["01_attention_by_hand"] and people["learner11"]["behind"]
    assert people["learner00"]["missing"] == ["00_start_here"] and people["learner00"]["behind"]
    assert people["learner05"]["passed"] == 2 and not people["learner05"]["behind"]   # 2 of 3 passed
    assert people["learner04"]["passed"] == 1 and people["learner04"]["behind"]       # 1 of 3: under half
    html = report.render(rows)
    table = html[html.index("Each learner"):html.index("Go over these")]
    order = re.findall(r"<tr><td>(?:<b>)?(learner\d+)", table)
    assert order[:4] == ["learner00", "learner01", "learner04", "learner11"] and order[-1] == "learner10"
    assert "<b>learner11</b> (behind)" in table
    # a blank hand-in is not attempted, not a hand-in that failed: softmax's pass share among the 11
    softmax = next(s for s in report.exercise_stats(rows) if s["exercise"] == "softmax")
    assert (softmax["handed_in"], softmax["counts"]["not attempted"], softmax["counts"]["passed"]) == (11, 1, 2)
