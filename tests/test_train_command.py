"""Tests for the command `python -m course_lib.train`, single-process and under torchrun (gloo, CPU)."""
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


def test_resume_continues_from_the_saved_step(tmp_path, corpus):
    out = tmp_path / "run"
    base = ["--data", str(corpus), "--preset", "tiny", "--out", str(out), "--no-progress"]
    first = run(base + ["--steps", "3"], tmp_path)
    assert first.returncode == 0, first.stderr
    again = run(base + ["--steps", "5", "--resume"], tmp_path)
    assert again.returncode == 0, again.stderr
    state = load_checkpoint(out / "tinylm.pt")
    assert state["step"] == 5
    assert state["history"]["steps"] == [1, 2, 3, 4, 5]  # continued, not restarted
    assert "at step 5" in again.stdout


def test_resume_without_a_checkpoint(tmp_path, corpus):
    res = run(["--data", str(corpus), "--preset", "tiny", "--out", str(tmp_path / "none"),
               "--resume"], tmp_path)
    assert res.returncode == 2
    assert "--resume needs" in res.stderr and "does not exist" in res.stderr


def test_slim_checkpoint_has_no_optimizer_state(tmp_path, corpus):
    out = tmp_path / "run"
    res = run(["--data", str(corpus), "--preset", "tiny", "--steps", "2", "--out", str(out),
               "--no-progress", "--slim"], tmp_path)
    assert res.returncode == 0, res.stderr
    state = load_checkpoint(out / "tinylm.pt")
    assert state["optimizer_state"] is None and state["step"] == 2
    assert checksums(res.stdout)["0"] == parameter_checksum(load_model(out / "tinylm.pt"))


def test_missing_data_file(tmp_path):
    res = run(["--data", str(tmp_path / "missing.txt"), "--preset", "tiny"], tmp_path)
    assert res.returncode == 2
    assert "corpus file not found" in res.stderr and "missing.txt" in res.stderr
    assert "Traceback" not in res.stderr


def test_empty_data_file(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    res = run(["--data", str(empty), "--preset", "tiny"], tmp_path)
    assert res.returncode == 2
    assert "is empty" in res.stderr and "Traceback" not in res.stderr


def test_too_short_data_file(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("a short text, much shorter than the windows we train on.\n")
    res = run(["--data", str(short), "--preset", "tiny"], tmp_path)
    assert res.returncode == 2
    assert "window needs block_size + 1" in res.stderr and "Traceback" not in res.stderr


def test_bad_preset(tmp_path, corpus):
    res = run(["--data", str(corpus), "--preset", "huge"], tmp_path)
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
