"""The exercise generator on small notebooks made here."""
import nbformat
import pytest

from course_lib.exercises import (ask_for_help, blank, blank_answer, build, exercises,
                                  replace_solution, stale, stub)

SOLVED = '''def double(x):
    """Twice x."""
    ### BEGIN SOLUTION
    y = x + x
    return y
    ### END SOLUTION'''


def lesson(check="check_double(double)"):
    nb = nbformat.v4.new_notebook()
    output = nbformat.v4.new_output("stream", name="stdout", text="shown\n")
    cells = [
        nbformat.v4.new_code_cell("import math", execution_count=1, outputs=[output]),
        nbformat.v4.new_code_cell(SOLVED, execution_count=2, metadata={"tags": ["exercise"]}),
        nbformat.v4.new_code_cell(check, execution_count=3, metadata={"tags": ["check"]},
                                  outputs=[output]),
        nbformat.v4.new_code_cell("print(double(2), 'double(2)')", execution_count=4, outputs=[output]),
        nbformat.v4.new_code_cell("print(math.pi)", execution_count=5, outputs=[output]),
    ]
    nb.cells = cells
    return nb


def test_blank_replaces_the_solution_with_a_stub_that_names_the_exercise():
    nb = blank(lesson())
    help_lines = ["    " + line for line in ask_for_help("double").splitlines()]
    assert nb.cells[1].source.splitlines() == ['def double(x):', '    """Twice x."""', *help_lines,
                                               "    " + stub("double")]
    assert 'hint("double")' in nb.cells[1].source and 'solution("double")' in nb.cells[1].source
    assert "Exercise 'double'" in stub("double") and "NotImplementedError" in stub("double")


def test_blank_clears_the_outputs_that_would_show_the_answer():
    nb = blank(lesson())
    kept = [bool(cell.outputs) for cell in nb.cells]
    assert kept == [True, False, False, False, True]
    assert [cell.execution_count for cell in nb.cells] == [1, None, None, None, 5]


def test_blank_leaves_the_lesson_untouched():
    nb = lesson()
    blank(nb)
    assert "### BEGIN SOLUTION" in nb.cells[1].source and nb.cells[3].outputs


def test_replace_solution_keeps_indentation():
    assert replace_solution(SOLVED, "a = 1\nreturn a").splitlines()[2:] == ["    a = 1", "    return a"]


def test_replace_solution_needs_one_region():
    with pytest.raises(ValueError, match="exactly one '### BEGIN SOLUTION'"):
        replace_solution("def f():\n    return 1", "pass")


def test_an_exercise_needs_its_check_cell():
    with pytest.raises(ValueError, match="must be exactly `check_double\\(double\\)`"):
        exercises(lesson(check="check_double(lambda x: 2 * x)"))
    nb = lesson()
    nb.cells[2].metadata["tags"] = []
    with pytest.raises(ValueError, match="must be followed by a cell tagged 'check'"):
        exercises(nb)


def test_build_and_stale(tmp_path):
    src, dst = tmp_path / "notebooks", tmp_path / "exercises"
    src.mkdir()
    nbformat.write(lesson(), src / "00_x.ipynb")
    assert stale(src, dst) == ["00_x.ipynb"]
    assert build(src, dst) == ["00_x.ipynb"]
    assert stale(src, dst) == []
    (dst / "00_x.ipynb").write_text((dst / "00_x.ipynb").read_text().replace("Exercise", "Exercize"))
    (dst / "99_extra.ipynb").write_text("{}")
    assert stale(src, dst) == ["00_x.ipynb", "99_extra.ipynb"]
    build(src, dst)
    assert sorted(p.name for p in dst.iterdir()) == ["00_x.ipynb"]


def test_blank_clears_what_depends_on_the_answer_through_other_names():
    """A result computed from the exercise's function shows what the stub cannot give."""
    nb = lesson()
    output = nbformat.v4.new_output("stream", name="stdout", text="shown\n")
    more = ["y = double(3)\nz = 1",                       # y depends on the answer, z does not
            "print(y)",                                     # through y: cleared
            "print(z)",                                     # kept
            "f = lambda y: y + 1\nprint(f(2))",             # a lambda's own y: kept
            "for _, y in [(0, 1)]:\n    print(y)",          # y bound again by the loop: kept
            "print(y)",                                     # y no longer the answer's: kept
            "double = math.floor\nprint(double(2.5))",      # the name rebound: kept
            "print(double(2))"]                             # and kept from then on
    nb.cells += [nbformat.v4.new_code_cell(src, execution_count=6 + i, outputs=[output])
                 for i, src in enumerate(more)]
    kept = [bool(cell.outputs) for cell in blank(nb).cells[5:]]
    assert kept == [False, False, True, True, True, True, True, True]


def test_blank_turns_each_question_answer_into_the_blank_and_clears_its_output():
    nb = lesson()
    output = nbformat.v4.new_output("stream", name="stdout", text="Question '00-x': right. ...\n")
    question = {"tags": ["question"]}
    nb.cells += [
        nbformat.v4.new_markdown_cell("## Questions", metadata={"tags": ["questions"]}),
        nbformat.v4.new_code_cell('from course_lib.checks import answer\n\nanswer("00-x", "b")',
                                  execution_count=6, metadata=question, outputs=[output]),
        nbformat.v4.new_code_cell('answer("00-y", [1.5,\n               2])  # café',
                                  execution_count=7, metadata=question, outputs=[output]),
    ]
    cells = blank(nb).cells
    assert cells[6].source == 'from course_lib.checks import answer\n\nanswer("00-x", ...)'
    assert cells[7].source == 'answer("00-y", ...)  # café'
    assert [c.outputs for c in cells[6:]] == [[], []]
    assert [c.execution_count for c in cells[6:]] == [None, None]
    assert cells[5].source == "## Questions" and cells[4].outputs    # the rest as before
    assert nb.cells[6].source.endswith('"b")') and nb.cells[6].outputs   # the lesson untouched
    assert blank_answer(cells[6].source) == cells[6].source               # blank stays blank


def test_a_question_cell_needs_one_answer_call():
    for source in ('print("b")', 'answer("00-x", "a"); answer("00-y", 2)', 'answer("00-x")',
                   'answer("00-x", given="b")'):
        nb = lesson()
        nb.cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": ["question"]}))
        with pytest.raises(ValueError, match="must call answer"):
            blank(nb)


def test_the_working_copy_says_so_under_its_title():
    from course_lib.exercises import SOLVED_NOTE, WORKING_NOTE, working_copy
    nb = lesson()
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(
        "# 00 · X\n\n" + SOLVED_NOTE.format(name="00_x.ipynb") + "\nMore."))
    first = working_copy(nb, "00_x.ipynb").cells[0].source
    assert first == "# 00 · X\n\n" + WORKING_NOTE.format(name="00_x.ipynb") + "\nMore."
    assert "../notebooks/00_x.ipynb" in first and "../exercises/" not in first
