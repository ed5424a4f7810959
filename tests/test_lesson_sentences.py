"""Sentences about a measurement on the learner's machine are printed by the cell that measured
it, with words from course_lib.readings (tests/test_readings.py checks the words on numbers from
CPUs with and without bfloat16 instructions); the lessons' prose no longer asserts them.
"""
import json

import pytest

from notebook_tools import ROOT

# (lesson, words the prose once said about one machine's run, why they cannot stand in prose)
ONE_MACHINE_PROSE = [
    ("06_training", "two or three bytes each", "UTF-8 takes up to four bytes"),
    ("06_training", "a sixth longer", "17.5 s against 15.9 s is a tenth"),
    ("06_training", "to 2.583 at step", "a bf16 autocast run ends elsewhere"),
    ("08_the_modern_block", "less than half as much as the baseline's (3.19",
     "the loud start fell about half as much; the cell chooses the words"),
    ("08_the_modern_block", "At step 120 RoPE is lowest", "the cell names the lowest"),
    ("09_costs", "would appear as AVX512_BF16 or AMX",
     "get_cpu_capability never names them; cpu_has_bf16 says"),
    ("09_costs", "the missing bfloat16 arithmetic", "a CPU with AVX512-BF16 has it"),
    ("09_costs", "about one and a half times the time predicted", "the cell prints the ratio"),
    ("09_costs", "0.5 FLOP per byte, far to the left", "the balance point is measured"),
    ("09_costs", "both keep it below 100%", "runs on a busy machine measured 108%"),
    ("01_attention_by_hand", "such as the one these lessons were run on",
     "the saved outputs of 06 and 09 come from a CPU without bfloat16 instructions"),
]


def _markdown(path):
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                     if c["cell_type"] == "markdown")


@pytest.mark.parametrize("copy", ["notebooks", "exercises"])
@pytest.mark.parametrize("lesson, words, why", ONE_MACHINE_PROSE, ids=lambda v: str(v)[:30])
def test_prose_no_longer_states_one_machines_measurement(copy, lesson, words, why):
    assert words not in _markdown(ROOT / copy / f"{lesson}.ipynb"), why


# (lesson, what a cell calls to choose its words): the sentence is printed from the cell's numbers
CHOSEN_BY_THE_CELL = [
    ("08_the_modern_block", "seed_verdict("), ("08_the_modern_block", "gap_closed("),
    ("08_the_modern_block", "share("), ("09_costs", "bf16_arithmetic(cpu_has_bf16())"),
    ("09_costs", "roofline_side("), ("09_costs", "mfu_reading("), ("09_costs", "peak_reading("),
    ("09_costs", "ratio_words("), ("09_costs", "gpu_prediction("), ("09_costs", "causal_saving("),
]


@pytest.mark.parametrize("lesson, call", CHOSEN_BY_THE_CELL, ids=lambda v: str(v)[:24])
def test_the_cell_that_measures_chooses_the_words_and_printed_them(lesson, call):
    cells = json.loads((ROOT / "notebooks" / f"{lesson}.ipynb").read_text())["cells"]
    calling = [c for c in cells if c["cell_type"] == "code" and call in "".join(c["source"])]
    assert calling, f"no cell of {lesson} calls {call}"
    for cell in calling:
        assert any(o.get("text") for o in cell.get("outputs", [])), \
            f"the cell of {lesson} that calls {call} has no saved output; save the lesson again"
