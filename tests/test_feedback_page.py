"""The learner's grader: `python -m course_lib.grading NOTEBOOK` (what `make grade` runs) on a
partly wrong notebook exits 0 and writes a feedback page, which Chromium opens offline with
every request to another host blocked: formulas drawn, hint numbers as the notebook asked,
the solution as code, the check cells as they ran, and one total. The page is titled with the
lesson and the learner as the roster names them, its points add up (each row's, and a total
that is their sum, with the rule that counts them), and it is small: each lesson's page, made
from the solved lesson's own outputs, is under PAGE_LIMIT, with no script, no font and no
formula's glyph drawn twice."""
import base64
import html
import json
import re
import shutil
import sys

import nbformat
import pytest

from course_lib.exercises import exercises, tags
from course_lib.grading import cli
from notebook_tools import ROOT, fill, read

sys.path.insert(0, str(ROOT / "tests"))
import answers  # noqa: E402

LESSON = "01_attention_by_hand.ipynb"
WRONG_SOFTMAX = "e = np.exp(x)\nreturn e / e.sum(axis=axis, keepdims=True)"


def learner_notebook():
    """Lesson 01's working copy: attention_steps and attention right, softmax wrong, two hints
    and the solution of softmax asked for; the hint cells' stored outputs typed in (both "Hint 3
    of 3"), as a page must not trust them."""
    nb = read(ROOT / "exercises" / LESSON)
    names = [name for name, _, _ in exercises(nb)]
    bodies = {name: answers.REFERENCE[name] for name in names}
    bodies["softmax"] = WRONG_SOFTMAX
    nb = fill(nb, bodies)
    at = next(i for name, i, _ in exercises(nb) if name == "softmax")
    typed = nbformat.v4.new_output("stream", name="stdout", text="Hint 3 of 3 for 'softmax': typed\n")
    asked = [nbformat.v4.new_code_cell('from course_lib.checks import hint, solution\nhint("softmax")',
                                       outputs=[typed]),
             nbformat.v4.new_code_cell('hint("softmax")', outputs=[typed]),
             nbformat.v4.new_code_cell('solution("softmax")')]
    nb.cells[at:at] = asked
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("> a quoted line of mine, and $e^{x_i}$"))
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("learner")
    path = folder / LESSON
    nbformat.write(learner_notebook(), path)
    import io
    from contextlib import redirect_stdout
    out = io.StringIO()
    # the course's tree may change meanwhile (a maintainer saving a lesson): not this test's concern
    patch = pytest.MonkeyPatch()
    patch.setattr(cli, "changed", lambda before, after: [])
    try:
        with redirect_stdout(out):
            code = cli.main([str(path), "--timeout", "120"])
    finally:
        patch.undo()
    return code, out.getvalue(), folder / "feedback" / "01_attention_by_hand.html"


def test_the_learners_grader_exits_0_on_a_partly_wrong_notebook_and_writes_its_page(graded):
    code, out, page = graded
    assert code == 0, out
    assert "softmax: failed (0/1)" in out and "attention: passed (1/1)" in out, out
    assert f"your feedback page: {page}" in out.splitlines()
    assert page.is_file() and page.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in page.parent.iterdir()] == [page.name]   # no temporary file left


def test_the_page_says_what_the_notebook_asked_and_one_total(graded):
    html = graded[2].read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "a request to another host"
    assert re.findall(r"Hint (\d) of 3 for &#39;softmax&#39;", html) == ["1", "2"]
    assert "typed" not in html                      # the stored outputs are not trusted
    assert "hints asked for: up to hint 2 of 3; the solution was shown" in html
    assert "<style>" not in html.split("The reference answer to")[1][:5000]
    assert len(re.findall(r"\*\*total\*\*|<strong>total</strong>", html)) == 1
    assert len(re.findall(r"\d+ of \d+ points</strong>", html)) == 1
    assert "<blockquote>" in html and "&gt; a quoted line" not in html
    # the check cell as code (not a comment), and no `In [ ]:` for it or any cell that never ran
    assert re.search(r'<div class="jp-InputArea-editor"><div[^>]*><pre>check_softmax\(softmax\)', html)
    assert "In&nbsp;[&nbsp;]" not in html and "In [ ]" not in html


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_the_page_opened_offline_in_chromium(graded):
    playwright = pytest.importorskip("playwright.sync_api")
    if _chromium() is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    page_path = graded[2]
    asked = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=[
            "--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})

            def route(r):
                if r.request.url.startswith(("file:", "data:")):
                    r.continue_()
                else:
                    asked.append(r.request.url)
                    r.abort()
            page.route("**/*", route)
            page.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else asked.append(r.url))
            page.goto(page_path.as_uri())
            page.wait_for_load_state("load")
            text = page.inner_text("body")
            # each formula an <svg> drawn from a symbol and glyphs defined once on the page
            drawn = page.evaluate("""() => [...document.querySelectorAll('svg.tex use')].filter(
                u => u.getBBox().width > 0 && u.getBBox().height > 0).length""")
            images = page.evaluate("() => document.querySelectorAll('svg.tex').length")
            title = page.title()
        finally:
            browser.close()
    assert asked == []
    assert images > 20 and drawn == images
    assert title == "Feedback: 01_attention_by_hand"   # make grade: one learner, their own page
    assert not re.search(r"\$[^$\n]*\\[a-z]+[^$\n]*\$", text), "raw TeX left on the page"
    assert "Hint 1 of 3 for 'softmax'" in text and "Hint 2 of 3 for 'softmax'" in text
    assert "Hint 3 of 3" not in text
    assert re.findall(r"\btotal\s+(\d+ of \d+) points", text) == ["2 of 7"]   # the one total
    assert "def softmax(x, axis=-1):" in text.split("The reference answer to 'softmax'")[1][:400]
    assert "Exercise 'softmax': the result contains inf or NaN" in text


def test_a_term_note_sets_each_rows_points_and_a_total_that_is_their_sum(graded, tmp_path):
    """The gradebook's rows of the page's lesson (a late penalty, an override) set each row's
    points that count, with what changed them; the total is their sum, and the rule says what
    counts. Without rows the page shows the checks' points again."""
    from course_lib.grading.feedback import CHECKS_RULE, set_term_note, term_notes
    page = tmp_path / "page.html"
    shutil.copyfile(graded[2], page)

    def table():
        text = page.read_text(encoding="utf-8")
        cells = dict(re.findall(r'<tr data-exercise="([^"]*)">.*?<td class="points"[^>]*>([^<]*)</td>', text))
        total = re.findall(r'<strong class="total" data-checks="[^"]*">([^<]*)</strong>', text)
        rule = re.search(r'<p class="rule">([^<]*)</p>', text).group(1)
        return cells, total, html.unescape(rule)
    cells, total, rule = table()
    assert total == ["2 of 7 points"] and rule == CHECKS_RULE
    assert sum(float(c.split(" of ")[0]) for c in cells.values()) == 2
    checks = {e: float(c.split(" of ")[0]) for e, c in cells.items()}
    rows = [dict(learner="ada", lesson="01_attention_by_hand", exercise=e, points=str(round(p * 0.9, 3)),
                 max_points="1", auto_points=str(round(p * 0.9, 3)), points_before_penalty=str(p),
                 status="passed" if p else "failed", penalty="10%", lateness="1 day, 0:00:00",
                 submitted="2026-12-09T17:00:00+00:00", override="", comment="", solution="no", cases="")
            for e, p in checks.items()]
    rows[0].update(points="0.25", override="yes", comment="shown in the lab")
    set_term_note(page, term_notes(rows), rows)
    cells, total, rule = table()
    counted = sum(float(r["points"]) for r in rows)
    assert total == [f"{counted:g} of 7 points"]
    assert sum(float(c.split(" of ")[0]) for c in cells.values()) == pytest.approx(counted)
    assert cells["attention"] == "0.9 of 1 (late: 10% off; the check gave 1)"
    assert cells[rows[0]["exercise"]].startswith("0.25 of 1 (set by your instructor")
    assert "the late penalty takes 10% off" in rule and "set by hand" in rule
    assert f"Points that count: {counted:g} of 7." in page.read_text(encoding="utf-8")
    set_term_note(page, [], [])
    assert table()[1:] == (["2 of 7 points"], CHECKS_RULE)


def _grade_of(lesson, submission):
    """A Graded of `lesson` with `submission` as the learner's notebook, every exercise passed."""
    from course_lib.grading import run, verdicts
    results = [verdicts.Result(name, "passed", f"{name}: 1 checks passed", 1, 1)
               for name, _, _ in exercises(submission)]
    return run.Graded(ROOT / "notebooks" / f"{lesson}.ipynb", lesson, results, submission=submission)


@pytest.mark.parametrize("learner", ["Bâtard, Chloé", "O'Brien <b>*Seán*</b> [x](y) #1"])
def test_the_page_and_its_tab_name_the_lesson_and_the_learner_as_the_roster_writes_them(learner):
    from course_lib.grading import feedback
    page = feedback.feedback_html(_grade_of("00_start_here", read(ROOT / "exercises" / "00_start_here.ipynb")),
                                  learner)
    expected = f"Feedback: 00_start_here, {learner}"
    assert html.unescape(re.search(r"<title>(.*?)</title>", page).group(1)) == expected
    heading = re.search(r"<h1[^>]*>(.*?)<a class=\"anchor-link\"", page, re.S).group(1)
    assert "<b>" not in heading and html.unescape(re.sub(r"<[^>]+>", "", heading)) == expected


def _absolute(d):
    """The absolute points of relative path data (m, l, q, c, z), to check pagestyle._relative."""
    import re as regex
    points, x, y, start = [], 0, 0, (0, 0)
    for command, numbers in regex.findall(r"([mlqcz])([-\d ]*)", d):
        values = [int(v) for v in regex.findall(r"-?\d+", numbers)]
        if command == "z":
            x, y = start
            points.append(("Z",))
            continue
        absolute = [v + (x if k % 2 == 0 else y) for k, v in enumerate(values)]
        points.append((command.upper(), *absolute))
        x, y = absolute[-2], absolute[-1]
        if command == "m":
            start = (x, y)
    return points


def test_a_glyph_written_from_point_to_point_is_the_same_outline():
    import random
    from course_lib.grading import pagestyle
    rng = random.Random(43)
    for _ in range(200):
        shape = [("M", rng.randint(-5000, 5000), rng.randint(-5000, 5000))]
        for _ in range(rng.randint(1, 12)):
            command = rng.choice("LQCZM")
            shape.append((command, *(rng.randint(-5000, 5000) for _ in range({"L": 2, "Q": 4, "C": 6, "Z": 0,
                                                                               "M": 2}[command]))))
        d = " \n".join(" ".join(map(str, part)) for part in shape)
        assert _absolute(pagestyle._relative(d)) == shape


def test_a_picture_that_is_not_maths_drawing_stays_as_it_was():
    from course_lib.grading import maths, pagestyle
    odd = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><script>x</script></svg>')
    page = (f'<body><img class="tex" alt="x" src="data:image/svg+xml;base64,{odd.decode()}" style="width:1pt">'
            + maths.formula_html("x^2") + maths.formula_html("x^2") + "</body>")
    shared = pagestyle.shared_formulas(page)
    assert shared.count('<img class="tex"') == 1 and shared.count('<svg class="tex"') == 2
    assert shared.count("<symbol ") == 1 and "<script" not in shared.split('<img class="tex"')[0]


PAGE_LIMIT = 200_000   # bytes of a lesson's feedback page (issue 43: under 200 KB)


def test_every_lessons_page_is_small_and_keeps_the_learners_outputs():
    """Each solved lesson, its stored outputs those of a learner who ran it all, as a feedback
    page: under PAGE_LIMIT, every output a page shows (course_lib.grading.feedback.OUTPUT_LIMIT
    a cell) there, no script or font, and each formula's glyphs defined once."""
    from course_lib.grading import feedback
    sizes = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = read(path)
        page = feedback.feedback_html(_grade_of(path.stem, nb), "Bâtard, Chloé")
        sizes[path.stem] = len(page.encode("utf-8"))
        assert "<script" not in page and "@font-face" not in page and "data:image/svg+xml" not in page
        glyphs = re.findall(r'<path id="(tg\d+)"', page)
        assert len(glyphs) == len(set(glyphs)) and page.count("<symbol ") == len(set(re.findall(
            r'<use href="#(tf\d+)"', page))), path.name
        styles = re.findall(r"<style[^>]*>.*?</style>", page, re.S)
        assert sum(map(len, styles)) < 10_000, path.name
        shown = html.unescape(page)
        for cell in nb.cells:
            outputs = cell.get("outputs") or []
            if cell.cell_type != "code" or "check" in tags(cell) or len(json.dumps(outputs)) > feedback.OUTPUT_LIMIT:
                continue   # a check cell's output is the grader's verdict, shown in its place
            for output in outputs:
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                line = next((l for l in "".join(text).splitlines() if l.strip() and "\x1b" not in l), None)
                if output.get("output_type") == "stream" and line:
                    assert line.strip() in shown, (path.name, line)
    print("\nfeedback page per lesson: " + ", ".join(f"{k[:2]} {v / 1024:.0f} KiB" for k, v in sizes.items()))
    assert {k: v for k, v in sizes.items() if v >= PAGE_LIMIT} == {}


def test_the_learners_markdown_is_rendered_then_sanitized_and_fetches_nothing():
    from course_lib.grading import feedback, run, verdicts
    nb = read(ROOT / "exercises" / "00_start_here.ipynb")
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(
        "> quoted, with `$HOME` kept as code and $\\sqrt{d_k}$ drawn\n\n"
        '<img src="https://example.org/a.png"> ![b](http://example.org/b.png) '
        '<a href="javascript:alert(1)">x</a> <script>alert(2)</script> <style>p {color: red}</style>'))
    graded = run.Graded(ROOT / "00_start_here.ipynb", "00_start_here", submission=nb, results=[
        verdicts.Result("text_to_ids", "failed", "AssertionError: Exercise 'text_to_ids': wrong\nHint: h",
                        0, 1)])
    html = feedback.feedback_html(graded, "ada")
    start = html.index("quoted, with")
    mine = html[start:html.index("alert(2)", start) + 200]   # the learner's cell as rendered
    assert "<blockquote>" in html[:html.index("quoted, with")][-200:]
    assert "<code>$HOME</code>" in mine and 'aria-label="\\sqrt{d_k}"' in mine
    assert not re.search(r"""(src|href)=["']?(https?:|//|javascript:)""", mine), mine
    assert "<script>alert" not in html and "<style>p" not in html
    assert "&lt;script&gt;alert(2)" in mine
