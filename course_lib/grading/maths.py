"""The maths of a feedback page, drawn when the page is written: no script, no network.

Each `$...$` and `$$...$$` of a markdown text is replaced by a token (`take_out`), the text
goes through markdown and the HTML sanitizer untouched by its TeX, and each token then
becomes an SVG picture of its formula drawn by matplotlib's mathtext (`put_back`), inlined
as a data: image with the TeX as its alt text. A formula mathtext cannot draw (or a learner's
that is too long) is shown as its TeX in <code>.
"""
import base64
import functools
import html
import io
import re
import secrets
import threading

MAX_TEX = 600            # characters of one formula that are drawn
FONT_SIZE = 13           # points: about the page's text
_DRAWING = threading.Lock()   # matplotlib draws one formula at a time (graders grade in threads)

# $$display$$, then $inline$ (not `\$`, not `$ ` opening or ` $` closing, as Jupyter reads them)
_MATHS = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?![\s$])(.+?)(?<![\s\\])\$(?!\$)", re.S)
_CODE = re.compile(r"(```.*?```|~~~.*?~~~|`[^`\n]*`)", re.S)   # code, where $ is only $


def take_out(text, found):
    """`text` with each formula outside code replaced by a token; found[token] = (tex, display)."""
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):   # the even parts are outside code
        parts[i] = _MATHS.sub(lambda m: _token(m, found), parts[i])
    return "".join(parts)


def _token(match, found):
    token = f"texmath{secrets.token_hex(6)}x{len(found)}"
    found[token] = (match.group(1) if match.group(1) is not None else match.group(2),
                    match.group(1) is not None)
    return token


def put_back(page, found):
    """The page with each token of `found` replaced by its formula's picture."""
    if not found:
        return page
    tokens = re.compile("|".join(map(re.escape, found)))
    return tokens.sub(lambda m: formula_html(*found[m.group(0)]), page)


def formula_html(tex, display=False):
    """An <img> of the formula (inline, or centred on a line of its own), or its TeX as code."""
    drawn = draw(tex) if len(tex) <= MAX_TEX else None
    alt = html.escape(tex.strip(), quote=True)
    if drawn is None:
        return f'<code class="tex">{alt}</code>'
    svg, width, height, depth = drawn
    data = base64.b64encode(svg).decode("ascii")
    img = (f'<img class="tex" alt="{alt}" src="data:image/svg+xml;base64,{data}" '
           f'style="width:{width:.1f}pt;height:{height:.1f}pt;vertical-align:-{depth:.1f}pt">')
    return f'<span class="tex-display" style="display:block;text-align:center;margin:0.6em 0">{img}</span>' \
        if display else img


@functools.lru_cache(maxsize=4096)
def draw(tex):
    """(svg bytes, width, height, depth in points) of the formula, or None if mathtext cannot draw it."""
    import matplotlib
    from matplotlib import mathtext
    from matplotlib.font_manager import FontProperties
    source = mathtext_source(tex)
    if source is None:
        return None
    out = io.BytesIO()
    try:
        with _DRAWING, matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "tex",
                                    "mathtext.fontset": "cm"}):
            depth = mathtext.math_to_image(f"${source}$", out, format="svg",
                                           prop=FontProperties(size=FONT_SIZE))
    except Exception:   # TeX mathtext does not know: shown as code
        return None
    svg = out.getvalue()
    size = re.search(rb'<svg[^>]*\bwidth="([\d.]+)pt"[^>]*\bheight="([\d.]+)pt"', svg)
    if size is None:
        return None
    svg = re.sub(rb"<metadata>.*?</metadata>", b"", svg, flags=re.S)
    return svg, float(size.group(1)), float(size.group(2)), float(depth or 0)


_TEXT = re.compile(r"\\(?:text|textrm|operatorname|mathrm)\s*\{([^{}]*)\}")


def mathtext_source(tex):
    """The formula in the TeX that mathtext reads (its names for a few commands), or None."""
    s = tex.strip()
    s = _TEXT.sub(lambda m: r"\mathrm{" + m.group(1).replace(" ", r"\ ") + "}", s)
    s = re.sub(r"\\[td]frac\s*(\w)\s*(\w)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\[td]frac\b", r"\\frac", s)
    s = re.sub(r"\\(?:big|Big|bigg|Bigg|textstyle|displaystyle)(?![a-zA-Z])", "", s)
    s = re.sub(r"\\le(?![a-zA-Z])", r"\\leq", s)
    s = re.sub(r"\\ge(?![a-zA-Z])", r"\\geq", s)
    s = re.sub(r"\\ne(?![a-zA-Z])", r"\\neq", s)
    s = re.sub(r"\\begin\{(cases|pmatrix|bmatrix|matrix)\}(.*?)\\end\{\1\}", _two_rows, s, flags=re.S)
    return None if "\\begin" in s or "\\end" in s else s


def _two_rows(match):
    """A cases or matrix environment of two rows, as mathtext's \\genfrac without a rule."""
    rows = [r.strip() for r in re.split(r"\\\\", match.group(2)) if r.strip()]
    if len(rows) != 2:
        return match.group(0)
    a, b = (r.replace("&", r"\quad ") for r in rows)
    left, right = {"cases": (r"\{", "."), "pmatrix": ("(", ")"), "bmatrix": ("[", "]"),
                   "matrix": (".", ".")}[match.group(1)]
    return rf"\left{left}\genfrac{{}}{{}}{{0}}{{}}{{{a}}}{{{b}}}\right{right}"
