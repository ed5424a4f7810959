"""Tests for the command `python -m course_lib.train`, single-process and under torchrun (gloo, CPU).

Two tests start the command as a learner does (a fresh Python, and torchrun's two); the others
call its `main` here, in the test's process, which runs the same code without paying a fresh
interpreter's import of torch for each (about 2 s of CPU a run)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_lib.checkpoint import load_checkpoint, load_model, parameter_checksum

ROOT = Path(__file__).resolve().parent.parent
TEXT = ("Now is the winter of our discontent made glorious summer by this sun of York; "
        "and all the clouds that lour'd upon our house in the deep bosom of the ocean buried.\n") * 30


def run(args, tmp_path, timeout=600, torchrun=False):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COURSE_DEVICE": "cpu"}
    cmd = [sys.executable]
    if torchrun:
        env.pop("COURSE_DEVICE")
        cmd += ["-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone"]
    cmd += ["-m", "course_lib.train", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def run_here(args, capsys):
    """`python -m course_lib.train ARGS` in this process: its exit status, stdout and stderr."""
    from course_lib import train
    try:
        code = train.main([str(a) for a in args])
    except SystemExit as exit:  # argparse refuses bad arguments with 2
        code = exit.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["course_lib.train", *args], code, out, err)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def checksums(stdout):
    return dict(re.findall(r"rank (\d+) parameter checksum ([0-9a-f]{64})", stdout))


def test_trains_and_writes_a_loadable_checkpoint(tmp_path, corpus):
    out = tmp_path / "run"
    res = run(["--data", str(corpus), "--preset", "tiny", "--steps", "3", "--out", str(out),
               "--no-progress"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"checkpoint written to {out / 'tinylm.pt'}" in res.stdout
    assert re.search(r"final validation loss \d+\.\d{4} at step 3", res.stdout)
    state = load_checkpoint(out / "tinylm.pt")
    assert state["step"] == 3 and state["train_config"]["steps"] == 3
    assert state["history"]["steps"] == [1, 2, 3]
    model = load_model(out / "tinylm.pt")
    assert checksums(res.stdout) == {"0": parameter_checksum(model)}


def test_resume_continues_from_the_saved_step(tmp_path, corpus, capsys):
    out = tmp_path / "run"
    base = ["--data", str(corpus), "--preset", "tiny", "--out", str(out), "--no-progress"]
    first = run_here(base + ["--steps", "3"], capsys)
    assert first.returncode == 0, first.stderr
    again = run_here(base + ["--steps", "5", "--resume"], capsys)
    assert again.returncode == 0, again.stderr
    state = load_checkpoint(out / "tinylm.pt")
    assert state["step"] == 5
    assert state["history"]["steps"] == [1, 2, 3, 4, 5]  # continued, not restarted
    assert "at step 5" in again.stdout


def test_resume_without_a_checkpoint(tmp_path, corpus, capsys):
    res = run_here(["--data", str(corpus), "--preset", "tiny", "--out", str(tmp_path / "none"),
                    "--resume"], capsys)
    assert res.returncode == 2
    assert "--resume needs" in res.stderr and "does not exist" in res.stderr


def test_slim_checkpoint_has_no_optimizer_state(tmp_path, corpus, capsys):
    out = tmp_path / "run"
    res = run_here(["--data", str(corpus), "--preset", "tiny", "--steps", "2", "--out", str(out),
                    "--no-progress", "--slim"], capsys)
    assert res.returncode == 0, res.stderr
    state = load_checkpoint(out / "tinylm.pt")
    assert state["optimizer_state"] is None and state["step"] == 2
    assert checksums(res.stdout)["0"] == parameter_checksum(load_model(out / "tinylm.pt"))


def test_missing_data_file(tmp_path, capsys):
    res = run_here(["--data", str(tmp_path / "missing.txt"), "--preset", "tiny"], capsys)
    assert res.returncode == 2
    assert "corpus file not found" in res.stderr and "missing.txt" in res.stderr
    assert "Traceback" not in res.stderr


def test_empty_data_file(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    res = run_here(["--data", str(empty), "--preset", "tiny"], capsys)
    assert res.returncode == 2
    assert "is empty" in res.stderr and "Traceback" not in res.stderr


def test_too_short_data_file(tmp_path, capsys):
    short = tmp_path / "short.txt"
    short.write_text("a short text, much shorter than the windows we train on.\n")
    res = run_here(["--data", str(short), "--preset", "tiny"], capsys)
    assert res.returncode == 2
    assert "window needs block_size + 1" in res.stderr and "Traceback" not in res.stderr


def test_bad_preset(tmp_path, corpus, capsys):
    res = run_here(["--data", str(corpus), "--preset", "huge"], capsys)
    assert res.returncode == 2
    assert "invalid choice: 'huge'" in res.stderr and "cpu" in res.stderr


def test_torchrun_two_processes_agree(tmp_path, corpus):
    if not torch.distributed.is_available():
        pytest.skip("this torch build has no torch.distributed")
    out = tmp_path / "ddp"
    res = run(["--data", str(corpus), "--preset", "tiny", "--steps", "3", "--out", str(out),
               "--no-progress"], tmp_path, timeout=600, torchrun=True)
    assert res.returncode == 0, res.stdout + res.stderr
    sums = checksums(res.stdout)
    assert set(sums) == {"0", "1"}, res.stdout
    assert sums["0"] == sums["1"]  # DDP kept the two replicas identical
    assert sums["0"] == parameter_checksum(load_model(out / "tinylm.pt"))
    assert "on 2 x cpu" in res.stdout
    assert res.stdout.count("checkpoint written to") == 1  # only rank 0 reports and saves
    state = load_checkpoint(out / "tinylm.pt")
    assert len(state["rank_generator_states"]) == 2
    # each rank drew its own batches (seed + rank), so their generators differ
    assert not torch.equal(state["rank_generator_states"][0], state["rank_generator_states"][1])


def test_beta2_is_adamws_second_moment_decay_and_shows_only_when_set():
    from course_lib.training import TrainConfig, configure_optimizer
    from course_lib.model import ModelConfig, TinyLM
    model = TinyLM(ModelConfig(vocab_size=256, max_len=16, d_model=32, n_heads=4, n_layers=1))
    assert configure_optimizer(model, TrainConfig()).defaults["betas"] == (0.9, 0.95)
    assert configure_optimizer(model, TrainConfig(beta2=0.99)).defaults["betas"] == (0.9, 0.99)
    assert "beta2" not in repr(TrainConfig())  # lessons print TrainConfigs; theirs stay as they were
    assert "beta2=0.99" in repr(TrainConfig(beta2=0.99))
    for bad in (1.0, -0.1, float("nan"), True):
        with pytest.raises(ValueError, match="TrainConfig.beta2 must be"):
            TrainConfig(beta2=bad)


def test_the_time_to_quality_bench_tunes_one_setting_at_a_time(capsys):
    import json
    sys.path.insert(0, str(ROOT / "bench"))
    import time_to_quality
    args = ["--quick", "--dev", "--only-fast", "--cpu-settings", "float32", "--fast-steps", "30",
            "--fast-warmup", "3", "--fast-weight-decay", "0", "--fast-beta2", "0.99",
            "--fast-grad-clip", "0.5"]
    assert time_to_quality.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tuned"] == dict(steps=30, warmup_steps=3, eval_every=30, weight_decay=0.0,
                                beta2=0.99, grad_clip=0.5)
    assert set(out["runs"]) == {"fast"} and out["measured_on"] == "the tuning split (--dev)"
    args = ["--quick", "--dev", "--only-fast", "--cpu-settings", "float32", "--fast-optimizer",
            "adamw", "--fast-muon-lr", "0.05", "--fast-norm", "rmsnorm", "--fast-mlp", "swiglu"]
    assert time_to_quality.main(args) == 0
    assert json.loads(capsys.readouterr().out)["tuned"] == dict(
        optimizer="adamw", muon_lr=0.05, norm="rmsnorm", mlp="swiglu")
    args = ["--quick", "--dev", "--only-fast", "--cpu-settings", "float32", "--fast-ns-steps", "3",
            "--fast-layers", "3", "--fast-d-ff", "384", "--fast-d-model", "96",
            "--fast-kv-heads", "2", "--fast-untied"]
    assert time_to_quality.main(args) == 0
    assert json.loads(capsys.readouterr().out)["tuned"] == dict(
        muon_ns_steps=3, n_layers=3, d_ff=384, d_model=96, n_kv_heads=2, tie_embeddings=False)


def test_the_train_step_bench_knows_its_variants_and_times_the_loop_bookkeeping(capsys):
    import json
    sys.path.insert(0, str(ROOT / "bench"))
    import train_step
    found = train_step.variants()
    assert {"preset", "adamw_fused", "flush_denormal", "no_clipping", "batch_32",
            "fused_flush"} <= set(found)
    assert found["no_clipping"][1].grad_clip == 0 and found["batch_32"][1].batch_size == 32
    assert found["preset"][1].optimizer == "muon" and found["adamw_only"][1].optimizer == "adamw"
    assert found["newton_schulz_3"][1].muon_ns_steps == 3 and found["four_by_128"][0].n_layers == 4
    with found["no_onednn"][2]():
        assert not torch.backends.mkldnn.enabled
    with found["flush_denormal"][2]():
        assert torch.tensor(1e-40).item() == 0.0  # a denormal reads as zero inside
    assert torch.tensor(1e-40).item() != 0.0      # and the switch is off again after
    assert train_step.main(["--bookkeeping"]) == 0
    assert json.loads(capsys.readouterr().out)["loop_bookkeeping_cpu_ms"] > 0
    assert train_step.main(["--newton-schulz"]) == 0
    ns = json.loads(capsys.readouterr().out)["newton_schulz"]
    assert ns["matrices"] == 12 and ns["cpu_ms_per_step"]["course_lib_float32"] > 0  # 3 layers x 4
