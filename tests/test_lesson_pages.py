"""What a learner meets when a lesson opens, read from the stored notebooks (no browser needed)."""
import json
import re

import nbformat
import pytest

from notebook_tools import LESSONS, ROOT, stated_run_time

OPENED = LESSONS + sorted((ROOT / "exercises").glob("*.ipynb"))


def _installed_kernelspec():
    from ipykernel.kernelspec import get_kernel_dict
    spec = get_kernel_dict()
    return spec["display_name"], spec["language"]


@pytest.mark.parametrize("path", OPENED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_opens_without_an_unsaved_mark(path):
    """JupyterLab rewrites a kernelspec that differs from the kernel's, and marks the tab unsaved."""
    spec = json.loads(path.read_text())["metadata"]["kernelspec"]
    display_name, language = _installed_kernelspec()
    assert (spec["name"], spec["display_name"], spec["language"]) == \
        ("python3", display_name, language)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_states_one_run_time_at_its_top(path):
    assert 5 <= stated_run_time(path) <= 600


# JupyterLab's code column on a 1366 x 768 laptop is about 932 px wide, and about 620 px of
# notebook show at once; a wider figure is shrunk, text and all, and a taller one never fits.
COLUMN_PX, VISIBLE_PX = 932, 620


def _figures(path):
    import base64
    import struct
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                data = base64.b64decode("".join(png) if isinstance(png, list) else png)
                yield i, struct.unpack(">II", data[16:24])   # the PNG header's width, height


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_figure_fits_a_laptops_column(path):
    too_big = [(i, w, h) for i, (w, h) in _figures(path) if w > COLUMN_PX or h > VISIBLE_PX]
    assert not too_big, f"figures (cell, width, height) over {COLUMN_PX} x {VISIBLE_PX} px: {too_big}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_copy_says_under_its_title_which_copy_it_is(path):
    from course_lib.exercises import SOLVED_NOTE, WORKING_NOTE
    solved = json.loads(path.read_text())["cells"][0]["source"]
    working = json.loads((ROOT / "exercises" / path.name).read_text())["cells"][0]["source"]
    assert SOLVED_NOTE.format(name=path.name) in "".join(solved)
    assert WORKING_NOTE.format(name=path.name) in "".join(working)


# --- Every figure described in words beside it ----------------------------------------------
# The rule a maintainer follows: a code cell that shows a figure has, in the markdown cell just
# before it or just after it, a sentence that begins "The figure" ("The figures" for a cell that
# draws several) which, with the sentence after it, quotes at least one number that the figure's
# own cell prints (so: print the number that matters in the figure's cell, and quote it). A screen
# reader, or a reader who skips the picture, gets what it shows and the number that matters,
# and the number is the computed one, printed beside the picture.
FIGURE_SENTENCE = re.compile(r"^The figures? ")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _numbers(text):
    return {n.replace(",", "") for n in NUMBER.findall(text)}


def _printed(cell):
    """The text a code cell printed or displayed, beside its pictures."""
    parts = []
    for output in cell.get("outputs", []):
        text = output.get("text") or output.get("data", {}).get("text/plain", "")
        parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


def _sentences(markdown):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", markdown) if s.strip()]


def figure_descriptions(cells):
    """(figure cell index, each describing sentence beside it with the next, numbers it printed)."""
    found = []
    for i, cell in enumerate(cells):
        if not any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            continue
        beside = [cells[j] for j in (i - 1, i + 1)
                  if 0 <= j < len(cells) and cells[j]["cell_type"] == "markdown"]
        sentences = []
        for c in beside:
            said = _sentences("".join(c["source"]))
            sentences += [" ".join(said[k:k + 2]) for k, s in enumerate(said)
                          if FIGURE_SENTENCE.match(s)]      # the sentence and the one after it
        found.append((i, sentences, _numbers(_printed(cell))))
    return found


def undescribed(cells):
    """Figure cells without a sentence beside them that quotes a number the cell prints."""
    return [i for i, sentences, printed in figure_descriptions(cells)
            if not any(_numbers(s) & printed for s in sentences)]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_figure_is_described_with_its_number_beside_it(path):
    cells = json.loads(path.read_text())["cells"]
    assert list(_figures(path)), f"{path.name} shows no figure; is this the executed lesson?"
    missing = undescribed(cells)
    assert not missing, (f"{path.name}: the figures of cells {missing} have no sentence beginning "
                         f"'The figure' in the markdown cell beside them that quotes a number "
                         f"the cell prints")


def test_the_figure_rule_refuses_a_number_the_cell_did_not_print():
    figure = {"cell_type": "code", "source": "", "outputs": [
        {"output_type": "display_data", "data": {"image/png": "", "text/plain": "<Figure>"}},
        {"output_type": "stream", "name": "stdout", "text": "final loss: 2.58\n"}]}
    described = {"cell_type": "markdown", "source": "The figure shows the loss falling to 2.58."}
    wrong = {"cell_type": "markdown", "source": "The figure shows the loss falling to 2.31."}
    vague = {"cell_type": "markdown", "source": "The loss falls to 2.58, as the figure shows."}
    assert undescribed([figure, described]) == [] and undescribed([described, figure]) == []
    assert undescribed([figure, wrong]) == [0] and undescribed([vague, figure]) == [1]
    assert undescribed([figure]) == [0]


# --- Colour maps everyone can read ------------------------------------------------------------
# Perceptually uniform sequential maps (matplotlib's "Choosing Colormaps": viridis and its kin,
# and cividis, made for colour-vision deficiency), and diverging maps whose two arms differ in
# lightness and are colour-blind safe in ColorBrewer (RdBu, PuOr); each also reversed. Never a
# rainbow (jet, hsv, rainbow) or a red-green diverging map (RdYlGn).
ALLOWED_CMAPS = {name + suffix for name in ("viridis", "cividis", "plasma", "inferno", "magma",
                                             "RdBu", "PuOr") for suffix in ("", "_r")}
CMAP_NAMED = re.compile(r"""cmap\s*=\s*["']([^"']+)["']|get_cmap\(\s*["']([^"']+)["']"""
                        r"""|colormaps\[\s*["']([^"']+)["']|image\.cmap["']\]\s*=\s*["']([^"']+)""")
CMAP_CALL = re.compile(r"\bplt\.(jet|hsv|rainbow|gray|hot|cool|spring|summer|autumn|winter|"
                       r"bone|copper|flag|prism|pink|nipy_spectral)\(")


def colour_maps(source):
    """Every colour map a cell's code names."""
    named = {next(g for g in m.groups() if g) for m in CMAP_NAMED.finditer(source)}
    return named | set(CMAP_CALL.findall(source))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_colour_maps_are_uniform_and_colour_blind_safe(path):
    used = {name for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"
            for name in colour_maps("".join(cell["source"]))}
    assert used <= ALLOWED_CMAPS, (f"{path.name} uses the colour maps {sorted(used - ALLOWED_CMAPS)}; "
                                   f"use one of {sorted(ALLOWED_CMAPS)}")


def test_the_colour_map_rule_sees_every_spelling():
    assert colour_maps('ax.imshow(x, cmap="jet")\nplt.get_cmap(\'RdYlGn\')') == {"jet", "RdYlGn"}
    assert colour_maps('matplotlib.colormaps["hsv"]; plt.rcParams["image.cmap"] = "Greens"') \
        == {"hsv", "Greens"}
    assert colour_maps("plt.jet()\nax.imshow(x, cmap='viridis')") == {"jet", "viridis"}


# --- Exercise headings that say where the solution lives ------------------------------------
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_exercise_heading_says_where_its_solution_lives(path):
    from course_lib.exercises import exercise_notes, exercises
    solved = nbformat.read(path, as_version=4)
    working = nbformat.read(ROOT / "exercises" / path.name, as_version=4)
    notes = exercise_notes(solved, path.name)
    assert len(notes) == len(exercises(solved)) > 0
    for i, heading, solved_note, working_note in notes:
        after_heading = solved.cells[i].source.split(heading, 1)[1].lstrip("\n")
        assert after_heading.startswith(solved_note + "\n") or after_heading == solved_note, \
            f"{path.name}: under {heading!r} put the line\n{solved_note}"
        assert heading in working.cells[i].source and working_note in working.cells[i].source
        assert solved_note not in working.cells[i].source


def test_an_exercise_link_lands_on_jupyterlabs_heading_anchor():
    from course_lib.exercises import heading_anchor
    assert heading_anchor("### Exercise: `rms_norm`") == "Exercise:-rms_norm"
    assert heading_anchor("## 7. Exercise 3: GPT-2's weights") == "7.-Exercise-3:-GPT-2's-weights"
    assert heading_anchor("### Exercise 1: **text** to [ids](x.md)") == "Exercise-1:-text-to-ids"


# --- "Next:" is a link to the next lesson, in both copies -------------------------------------
NEXT_LINE = re.compile(r"^\*\*Next:\*\*.*$", re.MULTILINE)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
@pytest.mark.parametrize("copy", ["notebooks", "exercises"])
def test_ends_with_a_link_to_the_next_lesson(path, copy):
    page = ROOT / copy / path.name
    last = json.loads(page.read_text())["cells"][-1]
    lines = NEXT_LINE.findall("".join(last["source"]))
    assert len(lines) == 1, f"{page.name} should end with one line that begins **Next:**"
    targets = LINK.findall(lines[0])
    assert targets and all((page.parent / t).is_file() for t in targets), lines[0]
    later = LESSONS[LESSONS.index(path) + 1:]
    if later:
        assert targets[0] == later[0].name, f"{page.name}'s Next: should link {later[0].name}"


# --- A saved time that contradicts the run time stated at the top ----------------------------
# A lesson states "**Run time:** about 80 s"; no part of it can take longer than the whole. A
# saved output such as "160 steps in 295 s" under it says the lesson was saved on a machine busy
# with other work (or that the stated time is wrong): save it again on a quiet machine, e.g.
#   OMP_NUM_THREADS=1 .venv/bin/python -m jupyter nbconvert --to notebook --execute --inplace \
#       --ExecutePreprocessor.timeout=900 notebooks/NN_x.ipynb && .venv/bin/python -m course_lib.exercises
# "About" allows a quarter more. A duration is a number then " s" or " min" (not ms, not 1024s).
DURATION = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?) (s|min)\b")
ABOUT = 1.25


def saved_durations(cells):
    """(cell index, seconds, the line) of every duration in the cells' saved outputs."""
    found = []
    for i, cell in enumerate(cells):
        for line in _printed(cell).splitlines():
            for number, unit in DURATION.findall(line):
                found.append((i, float(number) * (60 if unit == "min" else 1), line.strip()))
    return found


@pytest.mark.parametrize("path", OPENED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_saved_time_exceeds_the_stated_run_time(path):
    stated = stated_run_time(ROOT / "notebooks" / path.name)
    cells = json.loads(path.read_text())["cells"]
    over = [(i, line) for i, seconds, line in saved_durations(cells) if seconds > ABOUT * stated]
    assert not over, (f"{path.parent.name}/{path.name} states a run time of about {stated:g} s, "
                      f"but its saved outputs show longer times (cell, line): {over}; save it "
                      f"again on a quiet machine, or correct the stated run time")


def test_the_run_time_rule_reads_seconds_and_minutes_and_skips_other_units():
    cells = [{"cell_type": "code", "source": "", "outputs": [
        {"output_type": "stream", "name": "stdout",
         "text": "160 steps in 295 s\n2.5 ms a step\nrounded up to 1024s\n2 min 5 s in all\n"}]}]
    assert [(i, s) for i, s, _ in saved_durations(cells)] == [(0, 295.0), (0, 120.0), (0, 5.0)]
