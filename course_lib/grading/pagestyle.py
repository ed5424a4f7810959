"""The feedback page in few bytes: nbconvert's JupyterLab markup with a style sheet of its own, and
each formula's glyphs drawn once.

nbconvert's lab template inlines JupyterLab's whole style sheet (about 256 KB, for an editor the
page does not have) into every page, and each formula of the page (course_lib.grading.maths)
came as an SVG picture of its own carrying the outlines of its glyphs: a lesson with a hundred
formulas carried a hundred copies of its font. Here a page gets:

- TEMPLATE: the lab template with STYLE (a few KB: the cells, prompts, outputs, tables, the
  highlighted code in the light theme's colours, the terminal colours of a traceback) in place
  of JupyterLab's sheets, without nbconvert's scripts (require.js, MathJax, mermaid, widgets:
  each read from the network), and without the `In [ ]:` of a cell that never ran (the page's
  check cells);
- `shared_formulas`: each formula inline, as an <svg> that uses a symbol drawn once per page,
  whose glyphs are defined once per page; the formula's TeX is its accessible name;
- `trimmed`: the markup that draws nothing taken out: JupyterLab's collapsers, attributes no
  style or link uses, and the <span> of each highlighted token that STYLE does not colour
  (names, operators, punctuation, whitespace), with one <span> for tokens of one colour side
  by side.
"""
import base64
import html
import re
import xml.etree.ElementTree as ET

TEMPLATE_NAME = "course-feedback.html.j2"

# The light theme's code colours (JupyterLab's theme-light.css), by pygments token class.
# Keywords, strings, numbers and comments are coloured; names, operators and punctuation are
# the text's colour: a <span> for each `=`, `.`, bracket and comma was a third of a page.
# `and`, `in`, `not` are keywords, as JupyterLab shows them.
_CODE_COLOURS = {
    "#408080;font-style:italic": "c c1 ch cm cp cpf cs sd",
    "#008000;font-weight:bold": "k kc kd kn kp kr ow",
    "#008000": "kt",
    "#080": "m mb mf mh mi mo il",
    "#ba2121": "s s1 s2 sa sb sc dl sh si sr ss sx se",
    "#f00": "err",
}
# each token class STYLE colours -> the one class of its colour (its group's first)
CLASS_OF = {name: names.split()[0] for names in _CODE_COLOURS.values() for name in names.split()}

STYLE = """
body{margin:0;padding:1em 1.5em;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#212121;background:#fff}
main{max-width:72em;margin:0 auto}
.jp-Cell{margin:.35em 0}
.jp-Collapser,a.anchor-link{display:none}
.jp-InputArea,.jp-OutputArea-child{display:flex;align-items:flex-start}
.jp-InputPrompt,.jp-OutputPrompt{flex:0 0 4.8em;padding:.35em .5em 0 0;text-align:right;font:12px/1.35 menlo,consolas,'DejaVu Sans Mono',monospace;color:#307fc1;opacity:.7;box-sizing:border-box}
.jp-OutputPrompt{color:#bf5b3d}
.jp-InputArea-editor,.jp-InputArea>.jp-RenderedMarkdown,.jp-OutputArea-output{flex:1 1 auto;min-width:0;overflow-x:auto}
.jp-InputArea-editor{background:#f5f5f5;border:1px solid #e0e0e0;border-radius:2px}
pre,code{font-family:menlo,consolas,'DejaVu Sans Mono',monospace;font-size:13px}
pre{margin:0;padding:.3em .5em;line-height:1.35;white-space:pre-wrap;overflow-wrap:anywhere}
.jp-RenderedMarkdown{padding:0 .5em}
.jp-RenderedHTMLCommon code{background:#eee;padding:0 .2em;border-radius:2px}
.jp-RenderedHTMLCommon pre code{background:none;padding:0}
.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]{background:#fdd}
.jp-RenderedHTMLCommon table{border-collapse:collapse;margin:.5em 0}
.jp-RenderedHTMLCommon th,.jp-RenderedHTMLCommon td{border:1px solid #ccc;padding:.2em .6em;text-align:left}
.jp-RenderedHTMLCommon blockquote{margin:.5em 0;padding:0 1em;border-left:4px solid #ddd;color:#555}
.jp-RenderedHTMLCommon h1{font-size:1.6em}.jp-RenderedHTMLCommon h2{font-size:1.35em}.jp-RenderedHTMLCommon h3{font-size:1.15em}
img{max-width:100%}
svg.tex{display:inline-block;overflow:visible}
""" + "".join(f".highlight .{names.split()[0]}{{color:{colour}}}\n"
              for colour, names in _CODE_COLOURS.items()) + "".join(
    f".ansi-{name}-fg{{color:{fg}}}.ansi-{name}-intense-fg{{color:{intense}}}"
    f".ansi-{name}-bg{{background:{fg}}}.ansi-{name}-intense-bg{{background:{intense}}}\n"
    for name, fg, intense in (("black", "#3e424d", "#282c36"), ("red", "#e75c58", "#b22b31"),
                              ("green", "#00a250", "#007427"), ("yellow", "#ddb62b", "#b27d12"),
                              ("blue", "#208ffb", "#0065ca"), ("magenta", "#d160c4", "#a03196"),
                              ("cyan", "#60c6c8", "#258f8f"), ("white", "#c5c1b4", "#a1a6b2"))) \
    + ".ansi-bold{font-weight:bold}.ansi-underline{text-decoration:underline}\n"

# the lab template (nbconvert's templates/lab/index.html.j2), less its style sheets and scripts,
# a code cell's input in one <div> where JupyterLab's editor has three, and no `In [ ]:` for a
# cell that never ran (the page's check cells)
TEMPLATE = ("{%- extends 'index.html.j2' -%}\n"
            "{% block html_head_js %}{% endblock html_head_js %}\n"
            "{% block jupyter_widgets %}{% endblock jupyter_widgets %}\n"
            "{% block notebook_css %}<style>" + STYLE + "</style>{% endblock notebook_css %}\n"
            "{% block html_head_js_mathjax %}{% endblock html_head_js_mathjax %}\n"
            "{% block html_head_js_mermaidjs %}{% endblock html_head_js_mermaidjs %}\n"
            "{% block input %}<div class=\"jp-InputArea-editor\">"
            "{{ cell.source | highlight_code(metadata=cell.metadata) | clean_html }}</div>{%- endblock input %}\n"
            "{% block in_prompt -%}<div class=\"jp-InputPrompt\">"
            "{%- if cell.execution_count is not none %}In&nbsp;[{{ cell.execution_count }}]:{% endif -%}"
            "</div>{%- endblock in_prompt %}\n"
            # a markdown cell: lab's, less its collapser, its empty prompt's classes and its cell id
            "{% block markdowncell scoped %}<div class=\"jp-Cell jp-MarkdownCell\"><div class=\"jp-InputArea\">"
            "<div class=\"jp-InputPrompt\"></div><div class=\"jp-RenderedHTMLCommon jp-RenderedMarkdown {{ celltags(cell) }}\">"
            "{%- if resources.should_sanitize_html -%}{{ cell.source | markdown2html | strip_files_prefix | clean_html }}"
            "{%- else -%}{{ cell.source | markdown2html | strip_files_prefix }}{%- endif -%}"
            "</div></div></div>{%- endblock markdowncell %}\n")


def loaders():
    """The Jinja loaders that give an HTMLExporter TEMPLATE, as its template file TEMPLATE_NAME."""
    from jinja2 import DictLoader
    return [DictLoader({TEMPLATE_NAME: TEMPLATE})]


# ---------------------------------------------------------------- markup that draws nothing

_COLLAPSER = re.compile(r'<div class="jp-Collapser [^"<>]*">\s*</div>\s*')
# what no link and no style of the page needs: cell ids, lessons' cell tags, second class names
_NEEDLESS = re.compile(r' id="cell-id=[^"<>]*"| data-mime-type="text/plain"| jp-Notebook-cell[^"<>]*(?=")'
                       r'| jp-Cell-(?:input|output)Area(?=")| jp-(?:In|Out)putArea-prompt(?=")')
_TOKEN = re.compile(r'<span(?: class="(\w+)")?>([^<]*)</span>')
_NEIGHBOURS = re.compile(r'<span class="(\w+)">([^<]*)</span><span class="\1">')
_HIGHLIGHT = re.compile(r'(<div class="\s*highlight[^"<>]*">\s*<pre>)(.*?)(</pre>)', re.S)


def trimmed(page):
    """The page without JupyterLab's collapsers and _NEEDLESS attributes, and, in highlighted
    code, without the <span> of each token that STYLE leaves the text's colour (one <span> for
    neighbours of one colour)."""
    page = _NEEDLESS.sub("", _COLLAPSER.sub("", page))
    return _HIGHLIGHT.sub(lambda m: m.group(1) + _coloured(m.group(2)) + m.group(3), page)


def _coloured(code):
    """Highlighted code with the <span>s of uncoloured tokens taken out, and neighbours of one class joined."""
    code = _TOKEN.sub(lambda t: f'<span class="{CLASS_OF[t.group(1)]}">{t.group(2)}</span>'
                      if t.group(1) in CLASS_OF else t.group(2), code)
    while True:
        joined = _NEIGHBOURS.sub(r'<span class="\1">\2', code)
        if joined == code:
            return code
        code = joined


# ---------------------------------------------------------------- formulas drawn once

_SVG = "{http://www.w3.org/2000/svg}"
_HREF = "{http://www.w3.org/1999/xlink}href"
_FORMULA = re.compile(r'<img class="tex" alt="([^"]*)" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)" '
                      r'style="([^"]*)">')
_NUMBERS = re.compile(r"^[-\d.eE ,]*$")
_GEOMETRY = re.compile(r"^(?:(?:translate|scale|rotate|matrix)\([-\d.eE ,]*\)\s*)*$")
_PATH = re.compile(r"^[MLQCZz\d.eE\s,-]*$")
FORMULA_ID, GLYPH_ID = "tf", "tg"   # the ids of a page's formulas (tf0, tf1, ...) and glyphs (tg0, ...)


def shared_formulas(page):
    """The page with each formula picture (maths.formula_html's <img>) drawn inline from symbols
    and glyphs defined once, at the top of its body; a picture that is not what maths draws stays.

    Each formula is an <svg role="img"> whose accessible name is its TeX."""
    glyphs, symbols = {}, {}

    def inline(match):
        alt, data, style = match.groups()
        if data not in symbols:
            drawn = _symbol(base64.b64decode(data), glyphs)
            if drawn is None:
                return match.group(0)
            symbols[data] = (f"{FORMULA_ID}{len(symbols)}", *drawn)
        return (f'<svg class="tex" role="img" aria-label="{alt}" style="{style}">'
                f'<use href="#{symbols[data][0]}"/></svg>')   # a <use> of a <symbol> is 100% wide and high
    page = _FORMULA.sub(inline, page)
    if not symbols:
        return page
    sprite = ('<svg aria-hidden="true" style="position:absolute;width:0;height:0;overflow:hidden">'
              '<defs>' + "".join(markup for _, markup in glyphs.values())
              + "".join(f'<symbol id="{name}" viewBox="{box}">{body}</symbol>' for name, box, body in symbols.values())
              + "</defs></svg>")
    at = re.search(r"<body[^>]*>", page)
    return page[:at.end()] + sprite + page[at.end():] if at else sprite + page


def _path(d):
    """SVG path data without the spaces it does not need ('M 594 0 \nL 594 225' -> 'M594 0L594 225')."""
    return re.sub(r"\s*([MLQCZz])\s*", r"\1", " ".join(d.split()))


GLYPH_STEP = 8   # a glyph's outline in steps of 8 of maths' units: 0.01 pt at its 13 pt


def _glyph(d, transform):
    """(path data, transform) of a glyph's outline, its whole-number coordinates in GLYPH_STEP
    steps and its scale GLYPH_STEP times larger: the same outline, to a hundredth of a point."""
    scale = re.fullmatch(r"scale\(([\d.eE-]+)\)", transform)
    if scale is None or not re.fullmatch(r"[MLQCZz\d\s-]*", d):
        return _path(d), transform
    coarse = re.sub(r"-?\d+", lambda m: str(round(int(m.group(0)) / GLYPH_STEP)), d)
    return _relative(coarse), f"scale({float(scale.group(1)) * GLYPH_STEP:g})"


_ARGS = {"M": 2, "L": 2, "Q": 4, "C": 6, "Z": 0}


def _relative(d):
    """Path data of whole numbers and the commands M, L, Q, C, Z, with each point given from the
    one before (m, l, q, c, z): the same outline in shorter numbers."""
    parts = re.findall(r"[MLQCZz]|-?\d+", d)
    out, x, y, start, i = [], 0, 0, (0, 0), 0
    while i < len(parts):
        command = parts[i].upper()
        n = _ARGS[command]
        numbers = [int(v) for v in parts[i + 1:i + 1 + n]]
        i += 1 + n
        if command == "Z":
            out.append("z")
            x, y = start
            continue
        moved = [v - (x if k % 2 == 0 else y) for k, v in enumerate(numbers)]
        out.append(command.lower() + "".join(f"{v}" if v < 0 or k == 0 else f" {v}" for k, v in enumerate(moved)))
        x, y = numbers[-2], numbers[-1]
        if command == "M":
            start = (x, y)
    return "".join(out)


def _placed(transform):
    """A transform with its translations to a tenth of a unit (a tenth of a point where it places
    a formula's group; a hundredth of a point where it places a glyph in the group)."""
    return re.sub(r"translate\(([^)]*)\)", lambda m: "translate(" + " ".join(
        f"{round(float(x), 1) + 0:g}" for x in m.group(1).replace(",", " ").split()) + ")", transform)


def _symbol(svg, glyphs):
    """(viewBox, the drawing's markup) of maths' SVG, its glyph definitions added to `glyphs`
    ({glyph name: (id, <path>)}); None for an SVG that is not a drawing of glyphs, rules and
    their groups."""
    try:
        root = ET.fromstring(svg)
    except ET.ParseError:
        return None
    box = root.get("viewBox", "")
    if root.tag != f"{_SVG}svg" or not _NUMBERS.match(box):
        return None
    found = {}
    for defs in root.iter(f"{_SVG}defs"):
        for path in defs.findall(f"{_SVG}path"):
            glyph, d, transform = path.get("id", ""), path.get("d", ""), path.get("transform", "")
            if not re.fullmatch(r"[\w-]+", glyph) or not _PATH.match(d) or not _GEOMETRY.match(transform):
                return None
            d, transform = _glyph(d, transform)
            found[glyph] = f' d="{d}"' + (f' transform="{transform}"' if transform else "") + "/>"
    if any(glyph in glyphs and not glyphs[glyph][1].endswith(markup) for glyph, markup in found.items()):
        return None   # one name, two outlines: the picture stays
    new = {glyph: f"{GLYPH_ID}{len(glyphs) + i}" for i, glyph in enumerate(g for g in found if g not in glyphs)}
    names = {**{glyph: name for glyph, (name, _) in glyphs.items()}, **new}
    parts = []
    for child in root:
        if child.tag == f"{_SVG}defs" and all(c.tag in (f"{_SVG}style", f"{_SVG}path") for c in child):
            continue   # the glyphs (found above) and mathtext's line style
        drawn = _drawing(child, names) if child.tag == f"{_SVG}g" else None
        if drawn is None:
            return None
        parts.append(drawn)
    glyphs.update({glyph: (name, f'<path id="{name}"{found[glyph]}') for glyph, name in new.items()})
    return box, "".join(parts)


def _drawing(element, names):
    """A group of maths' SVG as markup of <g>, <path> and <use> with geometry only (names: the
    page's id of each glyph); None for anything else."""
    tag = element.tag.removeprefix(_SVG)
    transform = element.get("transform", "")
    if not _GEOMETRY.match(transform):
        return None
    place = f' transform="{_placed(transform)}"' if transform else ""
    if tag == "defs" or element.get("id", "").startswith("patch_"):   # the glyphs; the white background
        return ""
    if tag == "use":
        glyph = (element.get(_HREF) or element.get("href") or "").removeprefix("#")
        moved = re.fullmatch(r"translate\(([-\d.eE]+)[ ,]+([-\d.eE]+)\)", _placed(transform))
        if moved:   # x and y say a translation in fewer bytes
            place = "".join(f' {axis}="{value}"' for axis, value in zip("xy", moved.groups()) if value != "0")
        return f'<use href="#{names[glyph]}"{place}/>' if glyph in names else None
    if tag == "path":
        d = element.get("d", "")
        black = re.fullmatch(r"(fill:\s*#000000;?\s*)?", element.get("style", ""))
        return f'<path d="{_path(d)}"{place}/>' if black and _PATH.match(d) else None
    if tag == "g":
        inner = [_drawing(child, names) for child in element]
        return None if None in inner else f"<g{place}>{''.join(inner)}</g>" if place else "".join(inner)
    return None
