"""How large a learner's feedback page is, per lesson, and what makes it up.

    .venv/bin/python bench/feedback_pages.py

Each solved lesson in notebooks/ (every cell run, its outputs stored, as a learner who ran the
whole lesson hands it in) is made into the page `--class` writes for a learner, every exercise
passed, and the script prints, per lesson, the page's bytes and their parts: the style sheets,
the formulas (the glyphs and drawings defined once, and each formula's <svg>), the highlighted
code and the rest (text, markup, outputs), with the CPU seconds each page took. Nothing is
graded, and no file is written.
"""
import re
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from course_lib.exercises import exercises  # noqa: E402
from course_lib.grading import feedback, run, verdicts  # noqa: E402

from grading import machine  # noqa: E402


def parts(page):
    """{part: bytes} of a page: style sheets, formulas' definitions, formulas, code, the rest."""
    found = {"style": sum(map(len, re.findall(r"<style[^>]*>.*?</style>", page, re.S))),
             "formula definitions": sum(map(len, re.findall(r'<svg aria-hidden="true".*?</svg>', page, re.S))),
             "formulas": sum(map(len, re.findall(r'<svg class="tex".*?</svg>', page, re.S))),
             "code": sum(map(len, re.findall(r'<div class="jp-InputArea-editor">.*?</pre>', page, re.S)))}
    found["rest"] = len(page) - sum(found.values())
    return found


def main():
    print(f"machine: {machine()}")
    print(f"{'lesson':28s} {'KiB':>6s} {'CPU s':>6s}  parts (KiB)")
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        results = [verdicts.Result(name, "passed", f"{name}: 1 checks passed", 1, 1) for name, _, _ in exercises(nb)]
        started = time.process_time()
        page = feedback.feedback_html(run.Graded(path, path.stem, results, submission=nb), "Bâtard, Chloé")
        seconds = time.process_time() - started
        size = len(page.encode("utf-8"))
        print(f"{path.stem:28s} {size / 1024:6.1f} {seconds:6.2f}  "
              + ", ".join(f"{name} {n / 1024:.0f}" for name, n in parts(page).items()))


if __name__ == "__main__":
    main()
