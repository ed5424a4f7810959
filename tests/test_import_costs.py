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


def _modules_after(imports):
    """The modules a fresh Python holds once `imports` has run."""
    return set(_python(f"import json, sys\n{imports}\nprint(json.dumps(sorted(sys.modules)))"))


def test_a_lesson_kernel_imports_the_checks_without_nbformat_or_jsonschema():
    # every lesson imports course_lib.checks in its first cell; nbformat (and through it
    # jsonschema, whose optional URL grammar compiles a parser at import) are needed only
    # where a notebook file is read
    loaded = _modules_after("import course_lib.checks, course_lib.exercises")
    assert not loaded & {"nbformat", "jsonschema", "rfc3987_syntax"}


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


def test_the_grader_imports_neither_torch_nor_the_checkers():
    # the grader reads the hints and questions from the checks modules' source
    # (course_lib.checks.tables); torch and a lesson's checkers are imported when a notebook is
    # checked, so the command's help, collect, export and merge start without them
    loaded = _modules_after("import course_lib.grading.cli")
    assert not [m for m in loaded if m in ("torch", "course_lib.checks.core")
                or m.startswith("course_lib.checks.lesson")]


def test_a_checker_imports_its_own_lesson_only_and_every_name_still_imports():
    found = _python("import json, sys\n"
                    "from course_lib.checks import check_softmax, hint, answer\n"
                    "first = sorted(m for m in sys.modules if m.startswith('course_lib.checks.lesson'))\n"
                    "import course_lib.checks as c\n"
                    "from course_lib.checks import *\n"
                    "every = all(callable(getattr(c, n)) for n in c.__all__)\n"
                    "c.load_checkers()\n"
                    "print(json.dumps([first, every, len([m for m in sys.modules "
                    "if m.startswith('course_lib.checks.lesson')])]))")
    assert found == [["course_lib.checks.lesson01"], True, 12]


def test_the_tables_read_from_source_are_the_modules_own():
    import importlib

    from course_lib.checks import hints, questions, tables
    paths = tables.lesson_modules()
    assert [p.stem for p in paths] == [f"lesson{i:02d}" for i in range(12)]
    merged_hints, merged_questions = {}, {}
    for path in paths:
        module = importlib.import_module(f"course_lib.checks.{path.stem}")
        merged_hints.update(module.HINTS)
        merged_questions.update(module.QUESTIONS)
    assert hints.all_hints() == merged_hints
    assert questions.all_questions() == merged_questions


def test_a_table_not_written_out_is_refused_with_the_reason(tmp_path):
    from course_lib.checks import questions, tables
    bad = tmp_path / "lesson99.py"
    bad.write_text("X = ('a',)\nHINTS = {'x': X}\n")
    with pytest.raises(ValueError, match="HINTS in lesson99.py .* not written out as a literal"):
        tables.hints_of(bad)
    bad.write_text("QUESTIONS = {'99-x': make()}\n")
    with pytest.raises(ValueError, match=r"must be Choice\(...\) or Number\(...\)"):
        tables.questions_of(bad, {"Choice": questions.Choice, "Number": questions.Number})
