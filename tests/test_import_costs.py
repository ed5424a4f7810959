"""What a lesson's kernel imports at its start, and what the grader's processes leave out."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _python(code):
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_lesson_kernel_imports_the_checks_without_nbformat_or_jsonschema():
    # every lesson imports course_lib.checks in its first cell; nbformat (and through it
    # jsonschema, whose optional URL grammar compiles a parser at import) are needed only
    # where a notebook file is read
    loaded = _python("import json, sys, course_lib.checks, course_lib.exercises\n"
                     "print(json.dumps([m for m in ('nbformat', 'jsonschema', 'rfc3987_syntax') "
                     "if m in sys.modules]))")
    assert loaded == []


def test_hints_and_solutions_still_read_the_lessons():
    lesson, source = _python("import json\n"
                             "from course_lib.checks.hints import solution_source\n"
                             "print(json.dumps(solution_source('next_token_targets')))")
    assert lesson == "00_start_here.ipynb"
    assert "def next_token_targets" in source and "### BEGIN SOLUTION" not in source


def test_the_grader_leaves_out_the_url_grammar_and_still_validates_notebooks():
    found = _python("import json, sys, course_lib.grading, nbformat\n"
                    "nb = nbformat.read('notebooks/00_start_here.ipynb', as_version=4)\n"
                    "nbformat.validate(nb)\n"
                    "bad = nbformat.from_dict({'nbformat': 4, 'nbformat_minor': 5, 'metadata': {},"
                    " 'cells': [{'cell_type': 'code'}]})\n"
                    "try:\n    nbformat.validate(bad); caught = False\n"
                    "except nbformat.ValidationError:\n    caught = True\n"
                    "print(json.dumps([sys.modules.get('rfc3987_syntax', 'absent'), caught]))")
    assert found == [None, True]


@pytest.mark.parametrize("args, message", [
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["99_nothing.ipynb"], "no such lesson"),
])
def test_the_lesson_start_bench_refuses_bad_arguments(args, message):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "lesson_start.py"), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr
