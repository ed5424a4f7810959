"""bench/gpu_check.py on a machine without a GPU: its plan, its refusals, and each of its parts
run on stand-ins (a tiny notebook, a fake nanoGPT, the gpu preset for two tiny steps on the
CPU). On a GPU machine the check itself runs this file among its CUDA tests."""
import json
import subprocess
import sys
import textwrap

import nbformat
import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import gpu_check  # noqa: E402

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")


def test_the_dry_run_prints_the_plan_on_any_machine(capsys, tmp_path):
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path), "--also", "sync_every=1"]) == 0
    said = capsys.readouterr().out
    assert "--preset gpu" in said and "train_shakespeare_char" in said and "1.4897" in said
    assert "the preset with sync_every=1" in said
    assert "06_training.ipynb alone first, then 4 at a time" in said
    assert "11_tokenization.ipynb" in said and "tests/test_fast_paths.py" in said


@NO_GPU
def test_without_a_gpu_it_says_so_and_stops(capsys):
    assert gpu_check.main(["--skip", "compare"]) == 2
    said = capsys.readouterr().err
    assert "no CUDA GPU here" in said and torch.__version__ in said and "--dry-run" in said


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--skip", "compare", "--lessons", "06", "99"], "no lesson numbered 99"),
    ([], "needs --nanogpt PATH"),
    (["--skip", "compare", "--also", "sync_every"], "expected NAME=VALUE"),
])
def test_bad_arguments_are_refused_by_name(argv, message, capsys):
    with pytest.raises(SystemExit):
        gpu_check.parse_args(argv)
    assert message in capsys.readouterr().err


def test_a_lesson_is_executed_whole_with_its_first_error_named(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from course_lib.device import pick_device\n"
                                          "print(pick_device(verbose=False).type)"),
                nbformat.v4.new_code_cell("assert 1 == 2, 'a sentence the GPU made false'"),
                nbformat.v4.new_code_cell("print('ran on')")]
    lesson = tmp_path / "99_stand_in.ipynb"
    nbformat.write(nb, lesson)
    env = dict(gpu_check.lesson_env(), COURSE_DEVICE="cpu")
    result = gpu_check.execute_lesson(lesson, tmp_path / "out", timeout=120, env=env)
    assert result["lesson"] == "99_stand_in.ipynb" and not result["ok"]
    assert result["errors"] == [dict(cell=1, error="AssertionError: a sentence the GPU made false")]
    ran = nbformat.read(result["saved"], as_version=4)
    assert ran.cells[0].outputs[0]["text"] == "cpu\n"
    assert ran.cells[2].outputs[0]["text"] == "ran on\n"  # past the error, so later cells show


def test_a_run_is_timed_line_by_line_and_stopped_where_asked(tmp_path):
    script = "import time\nfor i in range(50):\n    print(f'step {i}: validation loss {3 - i / 10:.4f}')\n    time.sleep(0.05)\n"
    hits, code, tail = gpu_check.timed_run([sys.executable, "-c", script], tmp_path,
                                           gpu_check.COURSE_EVAL, tmp_path / "log",
                                           stop=lambda g: float(g[1]) <= 2.5)
    assert [h[1:] for h in hits] == [(str(i), f"{3 - i / 10:.4f}") for i in range(6)]
    times = [h[0] for h in hits]
    assert times == sorted(times) and times[-1] - times[0] > 0.2  # as each line came
    assert code is None and tail[-1] == "step 5: validation loss 2.5000"
    assert "step 5" in (tmp_path / "log").read_text()


def _fake_nanogpt(tmp_path, losses):
    root = tmp_path / "nanoGPT"
    (root / "config").mkdir(parents=True)
    (root / "config" / "train_shakespeare_char.py").write_text("# the recipe's settings\n")
    (root / "model.py").write_text("")
    lines = "".join(f"print('step {250 * i}: train loss 2.0000, val loss {v:.4f}', flush=True)\n"
                    for i, v in enumerate(losses))
    (root / "train.py").write_text("import sys\nassert sys.argv[1] == "
                                   "'config/train_shakespeare_char.py'\n" + lines)
    data = root / "data" / "shakespeare_char"
    data.mkdir(parents=True)
    (data / "prepare.py").write_text(textwrap.dedent("""\
        for name in ("train.bin", "val.bin", "meta.pkl"):
            open(name, "w").write("made from input.txt")
        """))
    return root, data


def test_nanogpts_data_is_made_from_its_input_never_fetched(tmp_path):
    root, data = _fake_nanogpt(tmp_path, [4.2])
    with pytest.raises(SystemExit, match="input.txt is missing. The check downloads nothing"):
        gpu_check.prepare_nanogpt(root, None)
    (data / "input.txt").write_text("First Citizen:\n")
    assert gpu_check.prepare_nanogpt(root, None) == data / "input.txt"
    assert (data / "meta.pkl").read_text() == "made from input.txt"
    with pytest.raises(SystemExit, match="both runs must train on the same text"):
        gpu_check.prepare_nanogpt(root, tmp_path / "other.txt")
    with pytest.raises(SystemExit, match="must name a nanoGPT checkout"):
        gpu_check.prepare_nanogpt(tmp_path, None)


def test_nanogpt_is_read_and_stopped_at_its_first_evaluation_at_the_target(tmp_path):
    root, _ = _fake_nanogpt(tmp_path, [4.2, 1.9, 1.5, 1.465, 1.46, 1.44])
    run = gpu_check.run_nanogpt(root, tmp_path, 1.4697, limit=60)
    assert [e[1:] for e in run["evaluations"]] == [(0, 4.2), (250, 1.9), (500, 1.5), (750, 1.465)]
    assert run["reached"][1:] == (750, 1.465) and run["return_code"] is None


def test_the_preset_runs_from_its_command_and_its_evaluations_are_read(tmp_path):
    text = tmp_path / "input.txt"
    text.write_text("ROMEO:\nBut, soft! what light through yonder window breaks?\n" * 60)
    tiny = ["steps=2", "batch_size=2", "block_size=32", "eval_every=1", "eval_batches=1",
            "warmup_steps=1", "d_model=48", "n_layers=2"]  # the preset's settings, a small model
    run = gpu_check.run_course(text, tmp_path, target=99.0, settings=tiny)
    assert run["return_code"] == 0, run["last_lines"]
    assert [e[1] for e in run["evaluations"]] == [0, 1, 2]
    assert run["reached"] == run["evaluations"][0]  # any loss is under 99
    assert "--set steps=2" in run["command"]


def test_the_summary_line_of_a_run_names_the_gpu(capsys):
    run = dict(evaluations=[(5.0, 0, 5.5), (20.0, 1500, 1.48)], reached=(20.0, 1500, 1.48),
               return_code=0, last_lines=[])
    gpu_check.say_run("NVIDIA H200", "the gpu preset", run, 1.4897)
    said = capsys.readouterr().out
    assert said.startswith("[NVIDIA H200] the gpu preset: 1.4800 <= 1.4897 at step 1500, 20.0 s")
    assert "best 1.4800 at step 1500 (20.0 s)" in said
