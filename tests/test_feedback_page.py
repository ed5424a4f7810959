"""The learner's grader: `python -m course_lib.grading NOTEBOOK` (what `make grade` runs) on a
partly wrong notebook exits 0 and writes a feedback page, which Chromium opens offline with
every request to another host blocked: formulas drawn, hint numbers as the notebook asked,
the solution as code, the check cells as they ran, and one total."""
import re
import shutil
import sys

import nbformat
import pytest

from course_lib.exercises import exercises
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
    assert '<span class="n">check_softmax</span>' in html    # the check cell, not commented out


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
            drawn = page.evaluate("""() => [...document.querySelectorAll('img.tex')].filter(
                i => i.complete && i.naturalWidth > 0).length""")
            images = page.evaluate("() => document.querySelectorAll('img.tex').length")
        finally:
            browser.close()
    assert asked == []
    assert images > 20 and drawn == images
    assert not re.search(r"\$[^$\n]*\\[a-z]+[^$\n]*\$", text), "raw TeX left on the page"
    assert "Hint 1 of 3 for 'softmax'" in text and "Hint 2 of 3 for 'softmax'" in text
    assert "Hint 3 of 3" not in text
    assert re.findall(r"\btotal\s+(\d+ of \d+) points", text) == ["2 of 7"]   # the one total
    assert "def softmax(x, axis=-1):" in text.split("The reference answer to 'softmax'")[1][:400]
    assert "Exercise 'softmax': the result contains inf or NaN" in text


def test_a_term_note_sets_the_pages_one_total_and_its_removal_puts_the_checks_back(graded, tmp_path):
    from course_lib.grading.feedback import set_term_note
    page = tmp_path / "page.html"
    shutil.copyfile(graded[2], page)

    def totals():
        return re.findall(r'<strong class="total" data-checks="[^"]*">([^<]*)</strong>',
                          page.read_text(encoding="utf-8"))
    assert totals() == ["2 of 7 points"]
    set_term_note(page, ["Handed in late: 25% off.", "Points that count: 1.5 of 7."])
    assert totals() == ["1.5 of 7 points"]
    set_term_note(page, [])
    assert totals() == ["2 of 7 points"]


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
    assert "<code>$HOME</code>" in mine and 'alt="\\sqrt{d_k}"' in mine
    assert not re.search(r"""(src|href)=["']?(https?:|//|javascript:)""", mine), mine
    assert "<script>alert" not in html and "<style>p" not in html
    assert "&lt;script&gt;alert(2)" in mine
