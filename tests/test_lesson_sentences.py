"""Sentences about a measurement on the learner's machine are printed by the cell that measured
it, with words from course_lib.readings (tests/test_readings.py checks the words on numbers from
CPUs with and without bfloat16 instructions, and from a GPU); the lessons' prose no longer asserts
them. Where the prose says what a figure depends on (the precision a run trains in on a GPU), the
tests below read that branch of the code, forced on a CPU.
"""
import contextlib
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
     "the lessons are saved on whichever CPU re-runs them: without bfloat16 instructions "
     "once, an EPYC with AVX512-BF16 now"),
    # issue 46: what a GPU run would make false
    ("00_start_here", "the lessons that train use it by themselves.",
     "lessons 04 and 09 train on the CPU whatever the machine has"),
    ("01_attention_by_hand", "own training uses for its matrix products (lesson 06: on a CUDA GPU",
     "lesson 06's gpu preset trains in float32 on TF32 units"),
    ("02_causal_masking", "the loss ends at 0.17", "the cell prints each curve's end"),
    ("02_causal_masking", "averages 2.33, close to its training loss of 2.26",
     "the cell prints both means and asserts how close they are"),
    ("03_multi_head_attention", "(0.33 to 0.40)", "the run saved since gave 0.28 to 0.41"),
    ("03_multi_head_attention", "on another CPU the numbers move", "a GPU moves them too"),
    ("03_multi_head_attention", "and some keep returning to one early byte",
     "the cell counts the heads that do"),
    ("09_costs", "without bfloat16 instructions that saved this lesson",
     "it was saved again on a CPU with them"),
    ("09_costs", "which fits in this CPU's caches", "the cell prints this CPU's last-level cache"),
    ("11_tokenization", "the BPE model ends at 2.999 bits per byte",
     "the line under the figure gives where each model ended"),
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
    ("06_training", "choose_cpu_precision("), ("06_training", "speed_settings("),
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


# The precision each lesson's training runs in on a CUDA GPU, as the lessons state it, forced on
# a CPU: torch builds a CUDA autocast context without a GPU (it warns that it disables itself),
# so the branch `train` takes there is the one these tests read.
def test_lesson_08s_gpu_runs_train_in_bfloat16_where_a_cpus_train_in_float32(monkeypatch):
    """Lesson 08: on a CPU `train` computes in float32, on a CUDA GPU in bfloat16 by default."""
    import warnings

    import torch

    from course_lib import training
    cells = json.loads((ROOT / "notebooks" / "08_the_modern_block.ipynb").read_text())["cells"]
    ablation = next("".join(c["source"]) for c in cells if "TrainConfig(**budget, seed=seed)"
                    in "".join(c["source"]))
    assert "autocast" not in ablation                   # the ablation keeps TrainConfig's default
    default = training.TrainConfig().autocast
    assert isinstance(training._autocast(torch.device("cpu"), default),
                      contextlib.nullcontext)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # "CUDA is not available": no GPU here
        on_gpu = training._autocast(torch.device("cuda"), default)
    assert isinstance(on_gpu, torch.autocast) and on_gpu.fast_dtype == torch.bfloat16
    assert "in bfloat16 by default" in _markdown(ROOT / "notebooks" / "08_the_modern_block.ipynb")


@pytest.mark.parametrize("lesson", ["02_causal_masking", "03_multi_head_attention"])
def test_fit_trains_in_float32_on_every_device_as_lessons_02_and_03_say(lesson, monkeypatch):
    """`fit` has no precision branch: it never enters autocast, on any device."""
    import torch

    from course_lib import training
    from course_lib.model import ModelConfig, TinyLM

    def refused(*args, **kwargs):
        raise AssertionError("fit entered autocast")
    monkeypatch.setattr(torch, "autocast", refused)
    monkeypatch.setattr(training, "_autocast", refused)
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(max_len=8, d_model=16, n_heads=2, n_layers=1))
    losses = training.fit(model, torch.randint(0, 256, (200,)), steps=2, batch_size=2,
                          block_size=8, progress=False)
    assert len(losses) == 2
    said = _markdown(ROOT / "notebooks" / f"{lesson}.ipynb")
    assert "`fit` trains in float32 on every device" in said


def test_lesson_11s_runs_turn_autocast_off_on_every_device():
    """Lesson 11 says both runs train in float32 on any device: autocast off, no TF32."""
    import torch

    from course_lib import training
    cells = json.loads((ROOT / "notebooks" / "11_tokenization.ipynb").read_text())["cells"]
    run = next("".join(c["source"]) for c in cells if "cfg = TrainConfig(" in "".join(c["source"]))
    assert 'autocast="off"' in run and "tf32" not in run and not training.TrainConfig().tf32
    assert isinstance(training._autocast(torch.device("cuda"), "off"),
                      contextlib.nullcontext)
