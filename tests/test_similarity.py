"""Similar submissions: a copy under other names, comments and order is the top pair; independent answers are not flagged.

The class is a folder of lesson-00 notebooks (read as data, never run) and gradebook rows
written by hand: similarity reads only the notebooks and which of them the gradebook graded.
"""
import csv

import nbformat

from course_lib.grading import similarity

from notebook_tools import ROOT, fill, read

LESSON = "00_start_here"

# ada's answers, written for this test (none is the reference or one of its ALTERNATIVES).
ADA = {
    "next_token_targets": """\
window = ids.clone()
inputs = window[0:len(window) - 1]
targets = window[1:len(window)]
return inputs, targets""",
    "text_to_ids": """\
raw = bytearray(text, encoding="utf-8")
ids = torch.zeros(len(raw), dtype=torch.long)
for position, value in enumerate(raw):
    ids[position] = value
return ids""",
    "next_byte_loss": """\
import torch.nn.functional as F
flat = logits.reshape(-1, logits.shape[-1])
picked = F.log_softmax(flat, dim=-1)[torch.arange(flat.shape[0]), targets.reshape(-1)]
return -(picked.sum() / picked.numel())""",
}

# bob's: ada's, with every name changed, comments and a docstring added, spacing changed and
# the lines that do not depend on each other reordered.
BOB = {
    "next_token_targets": """\
# copy first so we never touch the caller's tensor
w = ids.clone()
outs = w[1 : len(w)]
ins = w[0 : len(w) - 1]   # all but the last
return ins, outs""",
    "text_to_ids": """\
\"\"\"bytes -> ids\"\"\"
buf = bytearray(text, encoding = "utf-8")
result = torch.zeros(len(buf), dtype=torch.long)
for k, byte in enumerate(buf):   # one id per byte
    result[k] = byte
return result""",
    "next_byte_loss": """\
import torch.nn.functional as fn
two_d = logits.reshape(-1, logits.shape[-1])

# log-probability of each target
lp = fn.log_softmax(two_d, dim=-1)[torch.arange(two_d.shape[0]), targets.reshape(-1)]
return -(lp.sum() / lp.numel())""",
}

# cy's and dee's: two independent right answers, each written another way.
CY = {
    "next_token_targets": "return ids[:-1].clone(), ids[1:].clone()",
    "text_to_ids": "return torch.tensor([b for b in text.encode('utf-8')], dtype=torch.int64)",
    "next_byte_loss": """\
lse = torch.logsumexp(logits, dim=-1)
target_logit = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
return (lse - target_logit).mean()""",
}
DEE = {
    "next_token_targets": """\
T = ids.shape[0] - 1
return torch.narrow(ids, 0, 0, T), torch.narrow(ids, 0, 1, T)""",
    "text_to_ids": """\
data = text.encode("utf-8")
return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.int64) if data else torch.zeros(0, dtype=torch.int64)""",
    "next_byte_loss": """\
probs = torch.softmax(logits, dim=-1)
chosen = probs.gather(-1, targets[..., None])[..., 0]
return -torch.log(chosen).mean()""",
}


def _class(tmp_path, answers):
    """A class folder with one lesson-00 notebook per learner, and gradebook rows for them."""
    blank = read(ROOT / "exercises" / f"{LESSON}.ipynb")
    rows = []
    for learner, bodies in answers.items():
        (tmp_path / "class" / learner).mkdir(parents=True)
        nbformat.write(fill(blank, bodies), tmp_path / "class" / learner / f"{LESSON}.ipynb")
        rows += [dict(learner=learner, lesson=LESSON, exercise=e, status="passed") for e in bodies]
    return tmp_path / "class", rows


def test_a_copy_under_other_names_comments_and_order_is_the_top_pair(tmp_path):
    folder, rows = _class(tmp_path, {"ada": ADA, "bob": BOB, "cy": CY, "dee": DEE})
    (tmp_path / "out").mkdir()
    found = similarity.write_similarity(rows, tmp_path / "out", folder)
    top = found[0]
    assert (top["learner_a"], top["learner_b"]) == ("ada", "bob")
    assert top["look_at"] == "yes" and float(top["score"]) == 1.0
    assert top["matching"].split("; ") == ["text_to_ids", "next_token_targets", "next_byte_loss"]
    assert "next_byte_loss: 2 of 4" in top["shared_by"]
    # the independent answers are not flagged, and no one but ada and bob is
    assert [p for p in found if p["look_at"]] == [top]
    assert not any({p["learner_a"], p["learner_b"]} == {"cy", "dee"} for p in found)
    written = list(csv.DictReader((tmp_path / "out" / "similarity.csv").open()))
    assert written[0]["learner_a"] == "ada" and list(written[0]) == similarity.COLUMNS


def test_the_flag_depends_on_the_pair_alone_not_on_who_else_resubmitted(tmp_path):
    """A classmate handing in ada's code too (or something else) leaves ada and bob's mark as it was."""
    marks, shared = [], []
    for cy in (CY, ADA, {}):
        folder, rows = _class(tmp_path / str(len(marks)), {"ada": ADA, "bob": BOB, "cy": cy, "dee": DEE})
        (tmp_path / str(len(marks)) / "out").mkdir()
        found = similarity.write_similarity(rows, tmp_path / str(len(marks)) / "out", folder)
        pair = next(p for p in found if (p["learner_a"], p["learner_b"]) == ("ada", "bob"))
        marks.append((pair["look_at"], pair["score"], pair["matching"]))
        shared.append(pair["shared_by"])
    assert marks[0] == marks[1] == marks[2] == ("yes", "1.00", "text_to_ids; next_token_targets; next_byte_loss")
    # how many wrote it is said beside it, for the instructor to weigh
    assert "next_byte_loss: 2 of 4" in shared[0] and "next_byte_loss: 3 of 4" in shared[1]


def test_an_edit_of_the_lessons_own_answer_is_not_compared(tmp_path):
    """What solution() shows every learner, renamed or reordered, is no one's own code."""
    edited = {e: "# my version\n" + _lesson_solution(e) for e in ADA}
    folder, rows = _class(tmp_path, {"ada": edited, "bob": edited, "cy": edited})
    (tmp_path / "out").mkdir()
    assert similarity.write_similarity(rows, tmp_path / "out", folder) == []


def _lesson_solution(name):
    """The lesson's own answer to `name` (between its BEGIN and END SOLUTION lines), unindented."""
    import textwrap
    from course_lib.exercises import BEGIN, END
    from notebook_tools import exercise_cells
    lines = exercise_cells(name)[1].splitlines()
    return textwrap.dedent("\n".join(lines[lines.index(next(l for l in lines if l.strip() == BEGIN)) + 1:
                                           lines.index(next(l for l in lines if l.strip() == END))]))


def test_blank_and_reference_answers_are_not_compared(tmp_path):
    """The stub, and the lesson's answer that solution() shows everyone, are no one's own code."""
    reference = {e: _lesson_solution(e) for e in ADA}
    folder, rows = _class(tmp_path, {"ada": {}, "bob": {}, "cy": reference, "dee": reference, "eve": CY})
    (tmp_path / "out").mkdir()
    assert similarity.write_similarity(rows, tmp_path / "out", folder) == []


def test_unreadable_notebooks_and_other_files_are_skipped_not_run(tmp_path):
    folder, rows = _class(tmp_path, {"ada": ADA, "bob": BOB, "cy": CY})
    (folder / "cy" / f"{LESSON}.ipynb").write_text("{ not json")
    marker = tmp_path / "ran"
    evil = dict(ADA, text_to_ids=f"open({str(marker)!r}, 'w').write('x')\nreturn ids")
    (folder / "dee").mkdir()
    nbformat.write(fill(read(ROOT / "exercises" / f"{LESSON}.ipynb"), evil), folder / "dee" / f"{LESSON}.ipynb")
    rows += [dict(learner=l, lesson=LESSON, exercise="x", status="failed") for l in ("dee",)]
    (tmp_path / "out").mkdir()
    found = similarity.write_similarity(rows, tmp_path / "out", folder)
    assert not marker.exists()
    assert {(p["learner_a"], p["learner_b"]) for p in found} >= {("ada", "bob")}


def test_normalising_drops_names_comments_docstrings_and_order():
    one = similarity.normalised("import numpy as np\ndef f(x):\n    '''doc'''\n    y = np.exp(x)  # e\n    return y\nA = 1")
    two = similarity.normalised("A = 1\nimport numpy\ndef g(value):\n    out = numpy.exp(value)\n    return out")
    import ast
    assert ast.dump(one) == ast.dump(two)
    assert similarity.normalised("def f(:") is None


def test_hostile_code_is_not_compared_and_never_hangs():
    deep = "def f(x):\n    return " + "+".join(["x"] * 3000)
    assert similarity.normalised(deep) is None  # over MAX_NODES
    nested = "def f(x):\n    return " + "(" * 150 + "x" + ")" * 150
    tree = similarity.normalised(nested)   # must not raise, however deep
    assert tree is None or similarity.shingles(tree)
    assert similarity.normalised("x = 1\0") is None
