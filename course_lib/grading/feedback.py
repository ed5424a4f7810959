"""Write feedback: the learner's notebook as HTML with each check's result under its exercise.

The page works offline and says only what the grader computed: no script and no request to
another host (nbconvert's scripts are taken out, the maths is drawn when the page is written,
course_lib.grading.maths); a summary table at the top with the one total; each check cell
shown as the grader ran it, with its feedback as the notebook would show it; the outputs of
hint() and solution() made again from the notebook's calls, read as data (never the stored
outputs, which a learner can type); the learner's markdown rendered, then sanitized.
"""
import copy
import datetime
import html
import json
import os
import re
import secrets
import tempfile
import threading
from pathlib import Path

import nbformat

from course_lib.exercises import tags
from course_lib.grading import maths, pagestyle
from course_lib.grading.calls import NotWritten, written
from course_lib.grading.help_taken import help_calls, help_line
from course_lib.grading.lateness import flag_of
from course_lib.grading.lessons import defines
from course_lib.grading.questions import answer_cells, is_question, question_cells
from course_lib.grading.sandbox import printable
from course_lib.grading.verdicts import _points

# ---------------------------------------------------------------- feedback file

def feedback_html(graded, learner=""):
    """The learner's notebook as HTML, with each check's result after the cell that defines it."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    nb = copy.deepcopy(graded.submission) if graded.submission is not None else nbformat.v4.new_notebook()
    extra = {}     # token -> trusted HTML put in after nbconvert (highlighted solutions)
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"] = capped_outputs(cell.get("outputs") or [])
    help_outputs(nb, extra)
    nb.cells = [c for c in nb.cells if not (c.get("cell_type") == "code" and "check" in tags(c))]
    title = f"Feedback: {graded.lesson or graded.path.name}" + (f", {printable(learner)}" if learner else "")
    nb.metadata["title"] = title   # the browser tab's: the lesson and the learner, as the roster names them
    points = f"summarytable{secrets.token_hex(6)}"
    extra[points] = summary_table(graded)
    head = [f"# {_markdown_text(title)}",
            (f"Graded with seed {graded.seed}: graded again with it, this notebook gives this page again. "
             if getattr(graded, "seed", None) is not None else
             f"Graded {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}. ") + "Each check's result "
            f"follows the cell that defines its function, and each question's after its answer, "
            f"with the help asked for. The checks say what they tested; they are feedback, not "
            f"proof.", points]
    if graded.problem:
        head.append("This notebook was not graded; the reason is below.")
    elif getattr(graded, "stopped", ""):
        head.append(f"**Your notebook's run:** {_markdown_text(graded.stopped)}. Each exercise was "
                    f"checked with the functions that run had defined, as the table says.")
    cells = [nbformat.v4.new_markdown_cell("\n\n".join(head))]
    if graded.problem and not graded.results:
        cells.append(_result_cell("grading", graded.problem))
    code_seen, pending = -1, list(graded.results)
    by_name = {p.exercise: p for p in graded.placements}
    answered = answer_cells(nb)  # a question's verdict follows the last cell that answers it
    for cell in nb.cells:
        cells.append(cell)
        if cell.get("cell_type") != "code":
            continue
        code_seen += 1
        for r in list(pending):
            p = by_name.get(r.exercise)
            if (answered.get(r.exercise) == nb.cells.index(cell) if is_question(r.exercise) else
                    p is not None and p.defined_in is not None and _defines_in(cell, r.exercise) and
                    not any(_defines_in(c, r.exercise) for c in nb.cells[nb.cells.index(cell) + 1:])):
                cells.extend(_result_cells(r, graded))
                pending.remove(r)
    for r in pending:
        cells.extend(_result_cells(r, graded))
    own = {id(c) for c in nb.cells}
    for n, cell in enumerate(cells):   # the cells made here: ids that are the same on every grading
        if id(cell) not in own and "id" in cell:
            cell["id"] = f"feedback-{n}"
    nb.cells = cells
    formulas = {}
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown" and isinstance(cell.get("source"), str):
            cell.source = maths.take_out(cell.source, formulas)
    if not hasattr(_EXPORTERS, "html"):  # loading the templates costs more than using them
        # the learner's own HTML (in markdown and outputs) is escaped: no script runs when opened;
        # the page is nbconvert's JupyterLab markup with a style sheet of its own (pagestyle)
        _EXPORTERS.html = _page_exporter()(config=Config(
            {"HTMLExporter": {"preprocessors": [_remembering_sanitizer()], "template_file": pagestyle.TEMPLATE_NAME}}),
            extra_loaders=pagestyle.loaders())
    try:
        body, _ = _EXPORTERS.html.from_notebook_node(nb)
    except _NBCONVERT_CHANGED:  # an nbconvert whose HTMLExporter works otherwise: its own way
        body, _ = HTMLExporter.from_notebook_node(_EXPORTERS.html, nb)
    body = _SCRIPT.sub("", body)   # nbconvert's MathJax, require.js, mermaid, widgets: all from the network
    body = pagestyle.trimmed(body)
    for token, trusted in extra.items():
        body = re.sub(rf"<pre>\s*{token}\s*</pre>|<p>\s*{token}\s*</p>", lambda m: trusted, body)
    return pagestyle.shared_formulas(maths.put_back(body, formulas))


_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S | re.I)


def page_beside(notebook):
    """Where `make grade` writes a learner's page: feedback/<name>.html in the notebook's folder."""
    notebook = Path(notebook)
    return notebook.parent / "feedback" / f"{notebook.stem}.html"


def write_page(graded, target, learner=""):
    """Write graded's feedback page to `target` (replaced whole, never half-written); returns target."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    page = feedback_html(graded, learner)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=".feedback-", suffix=".html")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        os.chmod(name, 0o644)   # a page to hand back and read, as write_text would have made it
        os.replace(name, target)
    except BaseException:
        os.unlink(name)
        raise
    return target


# ---------------------------------------------------------------- the summary and the help

def summary_table(graded):
    """The page's table of points (HTML): each exercise and question, its result, the points its
    check gave and the help taken; then the total, their sum, and the rule that counts them."""
    rows = []
    for r in graded.results:
        taken = getattr(graded, "help", {}).get(r.exercise)
        helped = (taken is not None and help_line(taken)) or ""
        checks = f"{_points(r.points)} of {_points(r.max_points)}"
        rows.append(f'<tr data-exercise="{html.escape(r.exercise)}"><td><code>{html.escape(r.exercise)}</code></td>'
                    f'<td>{html.escape(r.status)}</td><td class="points" data-checks="{checks}">{checks}</td>'
                    f'<td>{html.escape(helped)}</td></tr>')
    earned = sum(r.points for r in graded.results)
    total = sum(r.max_points for r in graded.results)
    checks = f"{_points(earned)} of {_points(total)}"
    return (f'{POINTS_BEGIN}<table class="points"><thead><tr><th>exercise or question</th><th>result</th>'
            f'<th>points</th><th>help taken</th></tr></thead><tbody>{"".join(rows)}'
            f'<tr class="total"><td><strong>total</strong></td><td></td><td><strong class="total" '
            f'data-checks="{checks}">{checks} points</strong></td><td></td></tr></tbody></table>'
            f'<p class="rule">{CHECKS_RULE}</p>{POINTS_END}')


POINTS_BEGIN, POINTS_END = "<!-- course_lib.grading: points -->", "<!-- course_lib.grading: end of points -->"
CHECKS_RULE = ("The total is the sum of the points above: each exercise and question earns its "
               "points when its check passes, none when it fails.")


def _markdown_text(text):
    """Text that markdown shows as it is: its HTML escaped, its markdown signs taken literally."""
    return re.sub(r"([\\`*_{}\[\]()#+.!|~-])", r"\\\1", html.escape(text, quote=False))


def help_outputs(nb, extra):
    """Replace the stored outputs of each cell that calls hint() or solution() with what those
    calls show, numbered as the grader counts them (course_lib.grading.help_taken): the n-th
    `hint("x")` is hint n (at most the last), `hint("x", k)` hint k. `extra` gets the HTML of
    each solution's highlighted code, by the token its output holds."""
    from course_lib.checks.hints import all_hints, hint_text, solution_intro, solution_source
    hints, count, shown = all_hints(), {}, {}
    for call, name in help_calls(nb, hints):
        outputs = shown.setdefault(call.cell, [])
        if call.function == "hint":
            k = _asked(call)
            if k is None:
                count[name] = count.get(name, 0) + 1
                k = min(count[name], len(hints[name]))
            if not 1 <= k <= len(hints[name]):
                continue   # hint() refused it and showed nothing
            outputs.append(nbformat.v4.new_output("stream", name="stdout",
                                                  text=hint_text(name, k, hints[name]) + "\n"))
            continue
        try:
            lesson, source = solution_source(name)
        except ValueError:
            continue
        token = f"solutioncode{len(extra)}x{os.getpid()}"
        extra[token] = _highlighted(source)
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text=solution_intro(name, lesson) + "\n"))
        outputs.append(nbformat.v4.new_output("display_data", data={"text/plain": token}))
    for i, outputs in shown.items():
        nb.cells[i]["outputs"] = outputs


def _asked(call):
    node = call.args[1] if len(call.args) > 1 else dict(call.keywords).get("k")
    if node is None:
        return None
    try:
        k = written(node)
    except NotWritten:
        return 0
    return k if type(k) is int else 0


def _highlighted(source):
    """The code as nbconvert highlights a code cell's input (the page's own CSS colours it)."""
    from nbconvert.filters.highlight import Highlight2HTML
    return Highlight2HTML(pygments_lexer="ipython3")(source)


_EXPORTERS = threading.local()
_NBCONVERT_CHANGED = (AttributeError, TypeError, ImportError)


def _page_exporter():
    """nbconvert's HTMLExporter, less its pass of BeautifulSoup over the whole page.

    That pass (about 40% of a feedback page's CPU, the grader's own, for each notebook) adds
    two attributes: tabindex="0" on each cell's input and output, and a default alt text on
    images without one; `accessible` adds the same to the page's text. Everything else
    (the template, the sanitizing of the learner's HTML, the highlighting) is HTMLExporter's.
    """
    from nbconvert import HTMLExporter
    from nbconvert.exporters.templateexporter import TemplateExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

    class FeedbackExporter(HTMLExporter):
        def default_filters(self):  # bleach, on each highlighted input, is most of a page
            for name, function in super().default_filters():
                if name == "markdown2html":
                    function = _sanitized_markdown(function)
                yield name, (_remembered(function) if name == "clean_html" else function)

        def from_notebook_node(self, nb, resources=None, **kw):
            info = nb.metadata.get("language_info", {})
            lexer = info.get("pygments_lexer", info.get("name", None))
            self.register_filter("highlight_code", self.filters.get(
                "highlight_code", _remembered(Highlight2HTML(pygments_lexer=lexer, parent=self))))
            resources = self._init_resources(resources)
            self.register_filter("filter_data_type", WidgetsDataTypeFilter(
                notebook_metadata=self._nb_metadata, parent=self, resources=resources))
            page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
            return accessible(page), resources

    return FeedbackExporter


# Pages of one lesson share most of their cells (its text, its code): each cell's sanitized
# HTML and highlighted code, a pure function of its text, is made once per grading thread.
REMEMBERED = 20_000  # texts kept per thread; past that, the oldest go


def _remembered(function):
    """function, remembering its results by its arguments (all text, or None)."""
    seen = {}

    def remembering(*args, **kwargs):
        key = (args, json.dumps(kwargs, sort_keys=True, default=str))
        if key not in seen:
            if len(seen) >= REMEMBERED:
                del seen[next(iter(seen))]
            seen[key] = function(*args, **kwargs)
        return seen[key]
    return remembering


def _remembering_sanitizer():
    """nbconvert's SanitizeHTML preprocessor, remembering each text it cleaned (bleach is most of a
    page), leaving markdown cells to `_sanitized_markdown`: bleach on markdown's own text escapes
    its `>` (a blockquote) and `<` before markdown sees them."""
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    class RememberingSanitizeHTML(SanitizeHTML):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.sanitize_html_tags = _remembered(super().sanitize_html_tags)

        def preprocess_cell(self, cell, resources, index):
            if cell.get("cell_type") == "markdown":
                return cell, resources
            return super().preprocess_cell(cell, resources, index)

    return RememberingSanitizeHTML


# What rendered markdown may hold: the tags markdown makes, links, and pictures that are in the
# page itself (a data: URL) or beside it (a relative path), never one fetched from another host.
MARKDOWN_TAGS = ["a", "abbr", "b", "blockquote", "br", "code", "del", "div", "em", "h1", "h2", "h3",
                 "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
                 "strong", "sub", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul"]


def _markdown_attribute(tag, name, value):
    if name in ("class", "id", "title", "alt"):
        return True
    if tag == "a" and name == "href":
        return not value.strip().lower().startswith(("javascript:", "data:", "vbscript:"))
    if tag == "img" and name == "src":
        local = value.strip().lower()
        return local.startswith("data:image/") or not re.match(r"^([a-z][a-z0-9+.-]*:|//|\\\\)", local)
    return False


@_remembered
def clean_markup(text):
    """Rendered markdown with only MARKDOWN_TAGS and safe attributes kept (the rest escaped)."""
    import bleach
    return bleach.clean(text, tags=MARKDOWN_TAGS, attributes=_markdown_attribute,
                        protocols=["http", "https", "mailto", "data"], strip_comments=True)


def _sanitized_markdown(markdown2html):
    """nbconvert's markdown filter, its HTML sanitized after markdown has made it."""
    from jinja2 import pass_context

    @pass_context
    def rendered(context, source):
        return clean_markup(markdown2html(context, source))
    return rendered


_FOCUSED = re.compile(r'<div class="([^"<>]*\b(?:jp-Cell-inputWrapper|jp-OutputArea-output)\b[^"<>]*)"'
                      r'(?![^<>]*\btabindex=)')
_NO_ALT = re.compile(r"<img\b(?![^<>]*\balt=)")


def accessible(page):
    """The page with tabindex="0" on each cell's input and output and an alt text on each image without one."""
    page = _FOCUSED.sub(lambda m: f'{m.group(0)} tabindex="0"', page)
    return _NO_ALT.sub('<img alt="No description has been provided for this image"', page)
# Characters of a cell's stored outputs that a feedback page shows: a notebook may hold
# megabytes of prints or images, and the page is for reading its checks.
OUTPUT_LIMIT = 20_000


def capped_outputs(outputs, limit=OUTPUT_LIMIT):
    """A cell's outputs cut to about `limit` characters in all, with a note saying what was left out."""
    kept, used, cut = [], 0, 0
    for output in outputs:
        if not isinstance(output, dict):
            continue
        size = len(json.dumps(output, default=str))
        if used + size <= limit:
            kept.append(output)
            used += size
            continue
        text = output.get("text") if output.get("output_type") == "stream" else None
        if isinstance(text, list):
            text = "".join(text)
        if isinstance(text, str) and used < limit:  # a long print: its beginning
            kept.append(nbformat.v4.new_output("stream", name=output.get("name", "stdout"),
                                               text=text[:limit - used]))
            used = limit
        cut += size
    if cut:
        kept.append(nbformat.v4.new_output("stream", name="stdout", text=(
            f"\n[{cut:,} characters of this cell's stored outputs are not shown here]\n")))
    return kept


def _defines_in(cell, name):
    return cell.get("cell_type") == "code" and defines(cell.get("source", ""), name)


def _result_cell(title, text):
    cell = nbformat.v4.new_code_cell(f"# {title}")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text + "\n")]
    return cell


def _result_cells(r, graded=None):
    if is_question(r.exercise):
        return question_cells(r)
    mark = {"passed": "passed", "failed": "failed", "not run": "not run", "missing": "missing"}[r.status]
    taken = getattr(graded, "help", {}).get(r.exercise)
    helped = taken is not None and help_line(taken)
    return [nbformat.v4.new_markdown_cell(f"**Check `{r.exercise}`: {mark}**, "
                                          f"{_points(r.points)} of {_points(r.max_points)} points"
                                          + (f" ({helped})" if helped else "")),
            _check_cell(r)]


def _check_cell(r):
    """The check cell as the grader ran it: its call, then its pass line, or its feedback as an error."""
    cell = nbformat.v4.new_code_cell(f"check_{r.exercise}({r.exercise})")
    if r.status == "passed":
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=r.feedback + "\n")]
        return cell
    kind, _, text = r.feedback.partition(": ") if re.match(r"(AssertionError|NotImplementedError): ",
                                                           r.feedback) else ("", "", r.feedback)
    lines = text.splitlines() or [r.status]
    cell.outputs = [nbformat.v4.new_output("error", ename=kind or r.status, evalue=lines[0],
                                           traceback=[f"\x1b[1;31m{lines[0]}\x1b[0m", *lines[1:]])]
    return cell



# ---------------------------------------------------------------- the term's note on a page

NOTE_BEGIN, NOTE_END = "<!-- course_lib.grading: term note -->", "<!-- course_lib.grading: end of term note -->"


def term_notes(rows):
    """What a learner's page says of one lesson's term rows: points set by hand and why, lateness, what counts."""
    lines = []
    for r in rows:
        if r.get("override"):
            lines.append(f"{r['exercise']}: {r['points']} of {r['max_points']} points, set by your "
                         f"instructor (the checks gave {r['auto_points']})"
                         + (f": {r['comment']}" if r.get("comment") else ""))
    late = next((r for r in rows if r.get("lateness")), None)
    penalised = late is not None and late["penalty"] not in ("", "0%")
    flag = late is not None and flag_of(late["submitted"])
    if flag and penalised:
        lines.append(f"Handed in late, as the LMS's late flag says (it gives no time): {late['penalty']} "
                     f"off the points the checks gave, what the least lateness costs.")
    elif flag:
        lines.append(f"Handed in {flag}, as the LMS says.")
    elif penalised:
        lines.append(f"Handed in {late['submitted']}, {late['lateness']} after the due time: "
                     f"{late['penalty']} off the points the checks gave.")
    elif late is not None:
        lines.append(f"Handed in {late['submitted']}, on time.")
    if lines:
        earned = sum(float(r["points"] or 0) for r in rows)
        total = sum(float(r["max_points"] or 0) for r in rows)
        lines.append(f"Points that count: {_points(earned)} of {_points(total)}.")
    return lines


_POINTS_ROW = re.compile(r'(<tr data-exercise="([^"]*)">.*?<td class="points" data-checks="([\d.]+) of ([\d.]+)">)'
                         r'(.*?)(</td>)', re.S)
_TOTAL = re.compile(r'(<strong class="total" data-checks="[\d.]+ of ([\d.]+)">)[^<]*(</strong>)')
_RULE = re.compile(r'<p class="rule">.*?</p>', re.S)


def set_term_note(page, lines, rows=()):
    """Put the lines at the top of a feedback page, in place of the note an earlier run put there,
    and the points that count (the term `rows` of its lesson, as the gradebook has them) in its
    table: each row's, the total as their sum, and the rule that counts them. No rows: the checks'."""
    text = page.read_text(encoding="utf-8")
    start, end = text.find(NOTE_BEGIN), text.find(NOTE_END)
    body = text[:start] + text[end + len(NOTE_END):] if 0 <= start < end else text
    if lines:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
        note = (f"{NOTE_BEGIN}<div class=\"term-note\" style=\"border:2px solid #888;padding:0.5em 1em;"
                f"margin:1em\"><strong>From your instructor's gradebook</strong><ul>{items}</ul></div>{NOTE_END}")
        match = re.search(r"<main[^>]*>", body) or re.search(r"<body[^>]*>", body)
        at = match.end() if match else 0
        body = body[:at] + note + body[at:]
    by_exercise = {r["exercise"]: r for r in rows if r.get("exercise")}
    shown = []

    def row_points(m):
        row, checks, most = by_exercise.get(html.unescape(m.group(2))), float(m.group(3)), m.group(4)
        counted = checks if row is None else float(row["points"] or 0)
        shown.append(counted)
        why = [] if row is None else _changed_by(row)
        cell = f"{_points(counted)} of {most}" + (f" ({'; '.join(why + [f'the check gave {_points(checks)}'])})"
                                                 if counted != checks else "")
        return m.group(1) + html.escape(cell) + m.group(6)
    body = _POINTS_ROW.sub(row_points, body)
    body = _TOTAL.sub(lambda m: f"{m.group(1)}{_points(sum(shown))} of {m.group(2)} points{m.group(3)}", body, count=1)
    body = _RULE.sub(lambda m: f'<p class="rule">{html.escape(counting_rule(list(by_exercise.values())))}</p>',
                     body, count=1)
    if body != text:
        page.write_text(body, encoding="utf-8")


def _changed_by(row):
    """What of the term changed a row's points from its check's: the words for each."""
    if row.get("override"):   # final: nothing else counts
        return ["set by your instructor"]
    why = []
    if row.get("solution", "").startswith("yes, costs"):
        why.append(f"the solution was shown: {row['solution'].removeprefix('yes, ')}")
    if row.get("penalty") not in (None, "", "0%"):
        why.append(f"late: {row['penalty']} off")
    if row.get("status") == "failed" and float(row.get("points_before_penalty") or 0) > 0 and row.get("cases"):
        why.append(f"partial credit, {row['cases'].split(' ')[0]} cases passed")
    return why


def counting_rule(rows):
    """The sentence under a page's table: what the points in it are, given its lesson's term rows."""
    if not rows:
        return CHECKS_RULE
    parts = ["each exercise and question earns its points when its check passes, none when it fails"]
    if any(r.get("status") == "failed" and float(r.get("points_before_penalty") or 0) > 0 for r in rows):
        parts[0] += ", or with partial credit the share of its check's cases it passed"
    if any(r.get("solution", "").startswith("yes, costs") for r in rows):
        parts.append("an exercise whose solution was shown loses what the solution costs")
    penalty = next((r["penalty"] for r in rows if r.get("penalty") not in (None, "", "0%")), None)
    if penalty:
        parts.append(f"the late penalty takes {penalty} off")
    if any(r.get("override") for r in rows):
        parts.append("points your instructor set by hand replace the checks' where a row says so")
    return "The total is the sum of the points above, the points that count: " + "; ".join(parts) + "."


def note_feedback(folder, rows):
    """Update each feedback page under `folder` (learner/lesson.html) with its rows' term note and points."""
    groups = {}
    for r in rows:
        groups.setdefault((r["learner"], r["lesson"]), []).append(r)
    for (learner, lesson), mine in groups.items():
        page = folder / learner / f"{lesson}.html"
        if learner and lesson and page.is_file():
            set_term_note(page, term_notes(mine), mine)
