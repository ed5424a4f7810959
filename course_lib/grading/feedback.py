"""Write feedback: the learner's notebook as HTML with each check's result under its exercise."""
import copy
import datetime
import html
import json
import re
import threading

import nbformat

from course_lib.exercises import tags
from course_lib.grading.help_taken import help_line
from course_lib.grading.lessons import defines
from course_lib.grading.questions import answer_cells, is_question, question_cells
from course_lib.grading.verdicts import _points

# ---------------------------------------------------------------- feedback file

def feedback_html(graded, learner=""):
    """The learner's notebook as HTML, with each check's result after the cell that defines it."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    nb = copy.deepcopy(graded.submission) if graded.submission is not None else nbformat.v4.new_notebook()
    nb.cells = [c for c in nb.cells if not (c.get("cell_type") == "code" and "check" in tags(c))]
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"] = capped_outputs(cell.get("outputs") or [])
    earned = sum(r.points for r in graded.results)
    total = sum(r.max_points for r in graded.results)
    who = re.sub(r"[^\w .@-]", "_", learner)
    head = [f"# Feedback: {graded.lesson or graded.path.name}" + (f", {who}" if who else ""),
            f"**{_points(earned)} of {_points(total)} points.** Graded "
            f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}. Each check's result follows "
            f"the cell that defines its function, and each question's after its answer, with the "
            f"help asked for. The checks say what they tested; they are feedback, not proof."]
    if graded.problem:
        head.append("This notebook was not graded; the reason is below.")
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
    nb.cells = cells
    if not hasattr(_EXPORTERS, "html"):  # loading the templates costs more than using them
        # the learner's own HTML (in markdown and outputs) is escaped: no script runs when opened
        _EXPORTERS.html = _page_exporter()(config=Config(
            {"HTMLExporter": {"preprocessors": [_remembering_sanitizer()]}}))
    try:
        body, _ = _EXPORTERS.html.from_notebook_node(nb)
    except _NBCONVERT_CHANGED:  # an nbconvert whose HTMLExporter works otherwise: its own way
        body, _ = HTMLExporter.from_notebook_node(_EXPORTERS.html, nb)
    return body


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
    """nbconvert's SanitizeHTML preprocessor, remembering each text it cleaned (bleach is most of a page)."""
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    class RememberingSanitizeHTML(SanitizeHTML):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.sanitize_html_tags = _remembered(super().sanitize_html_tags)

    return RememberingSanitizeHTML


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
            _result_cell(f"check_{r.exercise}({r.exercise})", r.feedback)]



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
    if late is not None and late["penalty"] not in ("", "0%"):
        lines.append(f"Handed in {late['submitted']}, {late['lateness']} after the due time: "
                     f"{late['penalty']} off the points the checks gave.")
    elif late is not None:
        lines.append(f"Handed in {late['submitted']}, on time.")
    if lines:
        earned = sum(float(r["points"] or 0) for r in rows)
        total = sum(float(r["max_points"] or 0) for r in rows)
        lines.append(f"Points that count: {_points(earned)} of {_points(total)}.")
    return lines


def set_term_note(page, lines):
    """Put the lines at the top of a feedback page, in place of the note an earlier run put there."""
    text = page.read_text(encoding="utf-8")
    start, end = text.find(NOTE_BEGIN), text.find(NOTE_END)
    body = text[:start] + text[end + len(NOTE_END):] if 0 <= start < end else text
    if lines:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
        note = (f"{NOTE_BEGIN}<div class=\"term-note\" style=\"border:2px solid #888;padding:0.5em 1em;"
                f"margin:1em\"><strong>From your instructor's gradebook</strong><ul>{items}</ul></div>{NOTE_END}")
        match = re.search(r"<body[^>]*>", body)
        at = match.end() if match else 0
        body = body[:at] + note + body[at:]
    if body != text:
        page.write_text(body, encoding="utf-8")


def note_feedback(folder, rows):
    """Update each feedback page under `folder` (learner/lesson.html) with its rows' term note."""
    groups = {}
    for r in rows:
        groups.setdefault((r["learner"], r["lesson"]), []).append(r)
    for (learner, lesson), mine in groups.items():
        page = folder / learner / f"{lesson}.html"
        if learner and lesson and page.is_file():
            set_term_note(page, term_notes(mine))
