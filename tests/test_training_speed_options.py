"""The training options a GPU run uses, run on a CPU: the loss read back every few steps,
dropout, TF32, torch.compile, the batch's way to the device, the time of each evaluation,
one CPU thread in the train command, and `--set`; and the gpu preset itself, a few tiny steps."""
from dataclasses import replace

import pytest
import torch
from torch.overrides import TorchFunctionMode

import course_lib.train as command
import course_lib.training as training
from course_lib.data import encode, train_val_split
from course_lib.model import ModelConfig, TinyLM
from course_lib.training import PRESETS, History, TrainConfig, train

from conftest import random_ids, tiny_model

TEXT = ("to be, or not to be, that is the question: whether 'tis nobler in the mind "
        "to suffer the slings and arrows of outrageous fortune. ") * 20


def _run(seed=0, model=None, on_eval=None, **options):
    train_ids, val_ids = train_val_split(encode(TEXT))
    model = model or tiny_model(seed)
    cfg = TrainConfig(**{**dict(steps=12, batch_size=4, block_size=16, lr=3e-3, warmup_steps=2,
                                eval_every=5, eval_batches=2), **options})
    return model, train(model, train_ids, val_ids, cfg, progress=False, on_eval=on_eval)


def test_reading_the_loss_every_few_steps_records_the_same_run():
    _, every = _run()
    for sync_every in (3, 5, 100):
        _, few = _run(sync_every=sync_every)
        assert few.steps == every.steps == list(range(1, 13))
        assert few.losses == every.losses and few.val_losses == every.val_losses
        assert few.eval_steps == every.eval_steps == [0, 5, 10, 12]
        assert few.tokens_per_second > 0


def test_a_loss_that_is_not_finite_is_named_by_its_step_when_read_back_later(monkeypatch):
    calls = []
    real = training.next_token_loss

    def poisoned(logits, targets):
        calls.append(1)
        loss = real(logits, targets)
        return loss * float("nan") if len(calls) == 4 + 1 else loss  # the evaluation at step 0 is call 1

    monkeypatch.setattr(training, "next_token_loss", poisoned)
    model, _ = tiny_model(), None
    train_ids, val_ids = train_val_split(encode(TEXT))
    cfg = TrainConfig(steps=12, batch_size=4, block_size=16, warmup_steps=2, eval_every=12,
                      eval_batches=1, sync_every=6)
    with pytest.raises(FloatingPointError, match="became nan at step 4 "):
        train(model, train_ids, val_ids, cfg, progress=False)


def test_each_evaluation_has_its_time_and_is_reported_as_it_comes():
    said = []
    _, history = _run(on_eval=lambda *a: said.append(a))
    assert len(history.eval_seconds) == len(history.eval_steps) == 4
    assert history.eval_seconds == sorted(history.eval_seconds) and history.eval_seconds[0] >= 0
    assert said == list(zip(history.eval_steps, history.val_losses, history.eval_seconds))
    again = History.from_dict(history.to_dict())
    assert again == history
    old = {k: v for k, v in history.to_dict().items() if k != "eval_seconds"}
    assert History.from_dict(old).eval_seconds == []  # a checkpoint written before the field


def test_a_resumed_run_counts_its_time_on_from_the_saved_one(tmp_path):
    path = tmp_path / "run.pt"
    train_ids, val_ids = train_val_split(encode(TEXT))
    cfg = TrainConfig(steps=10, batch_size=4, block_size=16, warmup_steps=2, eval_every=5,
                      eval_batches=1)
    first = train(tiny_model(), train_ids, val_ids, replace(cfg, steps=5), checkpoint_path=path,
                  progress=False)
    resumed = train(tiny_model(), train_ids, val_ids, cfg, checkpoint_path=path, resume=True,
                    progress=False)
    assert resumed.eval_steps == [0, 5, 10]
    assert resumed.eval_seconds[:2] == first.eval_seconds
    assert resumed.eval_seconds[2] > first.eval_seconds[1]


def test_dropout_acts_only_while_training_and_costs_no_operation_when_off():
    model = tiny_model(dropout=0.2)
    plain = tiny_model()  # the same seed: the same weights
    idx = random_ids(2, 10)
    model.eval(), plain.eval()
    with torch.no_grad():
        assert torch.equal(model(idx), plain(idx))
        model.train()
        a, b = model(idx), model(idx)
    assert not torch.equal(a, b)  # a fresh mask each call
    assert [n for n, _ in model.named_modules()] == [n for n, _ in plain.named_modules()]

    class Count(TorchFunctionMode):
        n = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    counts = []
    for m in (plain.train(), model.train()):
        Count.n = 0
        with torch.no_grad(), Count():
            m(idx)
        counts.append(Count.n)
    assert counts[1] == counts[0] + 1 + 2 * model.config.n_layers  # the embedding's, 2 a block


@pytest.mark.parametrize("value", [-0.1, 1.0, True, "0.2"])
def test_dropout_refuses_what_is_not_a_share(value):
    with pytest.raises(ValueError, match="dropout must be a number in \\[0, 1\\)"):
        ModelConfig(dropout=value)


def test_tf32_is_switched_on_for_cuda_only_and_restored(monkeypatch):
    before = torch.get_float32_matmul_precision()
    with training._matmul_precision(torch.device("cpu"), True):
        assert torch.get_float32_matmul_precision() == before
    with pytest.raises(RuntimeError):
        with training._matmul_precision(torch.device("cuda"), True):
            assert torch.get_float32_matmul_precision() == "high"
            raise RuntimeError("a failed step")
    assert torch.get_float32_matmul_precision() == before
    assert _run(tf32=True)[1].losses == _run()[1].losses  # nothing changes on a CPU


def test_a_batch_goes_to_a_cpu_as_it_is():
    batch = random_ids(3, 9)
    assert training._batch_to(batch, torch.device("cpu")) is batch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bench/gpu_check.py)")
def test_a_batch_goes_to_a_gpu_through_pinned_memory():
    batch = random_ids(3, 9)
    there = training._batch_to(batch, torch.device("cuda"))
    torch.cuda.synchronize()
    assert there.device.type == "cuda" and torch.equal(there.cpu(), batch)


def test_compile_compiles_the_model_for_the_steps_and_learns_the_same(monkeypatch):
    compiled = []
    real = torch.compile

    def eager_compile(model):  # dynamo's tracing without inductor's C++: seconds, not minutes
        compiled.append(model)
        return real(model, backend="eager")

    monkeypatch.setattr(torch, "compile", eager_compile)
    model, history = _run(compile=True)
    assert compiled == [model]
    assert history.losses == pytest.approx(_run()[1].losses, rel=1e-5, abs=1e-6)


def test_compile_says_why_where_this_machine_cannot(monkeypatch):
    monkeypatch.setattr(training, "cannot_compile", lambda device: "no compiler here (a test)")
    with pytest.raises(ValueError, match="compile=True, but no compiler here .*compile=False"):
        _run(compile=True)


def test_cannot_compile_names_what_is_missing(monkeypatch):
    from course_lib import device
    monkeypatch.setattr(device.shutil, "which", lambda name: None)
    assert "needs a C++ compiler" in device.cannot_compile("cpu")
    monkeypatch.setattr(device.shutil, "which", lambda name: "/usr/bin/" + name)
    assert device.cannot_compile("cpu") is None
    monkeypatch.setattr(device.importlib.util, "find_spec", lambda name: None)
    assert "triton" in device.cannot_compile("cuda")
    assert "does not compile for mps" in device.cannot_compile("mps")


def test_the_gpu_preset_trains_a_few_tiny_steps_on_a_cpu():
    model_config, cfg = PRESETS["gpu"]
    model = TinyLM(model_config)
    assert 10.5e6 < sum(p.numel() for p in model.parameters()) < 11e6  # nanoGPT's 10.65M
    short = replace(cfg, steps=3, batch_size=2, block_size=32, warmup_steps=1, eval_every=3,
                    eval_batches=1)
    train_ids, val_ids = train_val_split(encode(TEXT))
    history = train(model, train_ids, val_ids, short, progress=False)
    assert history.steps == [1, 2, 3] and len(history.eval_seconds) == 2


def test_the_train_command_keeps_torch_to_one_thread_before_it_picks_a_device(monkeypatch,
                                                                            tmp_path, capsys):
    corpus = tmp_path / "text.txt"
    corpus.write_text(TEXT)
    seen = []

    def setup():
        seen.append(torch.get_num_threads())
        return torch.device("cpu"), False

    for name in ("COURSE_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(command, "_setup_distributed", setup)
    torch.set_num_threads(2)
    try:
        assert command.main(["--data", str(corpus), "--preset", "tiny", "--out", str(tmp_path),
                             "--no-progress", "--set", "steps=6", "--set", "eval_every=3"]) == 0
    finally:
        torch.set_num_threads(1)
    assert seen == [1]
    out = capsys.readouterr().out
    for step in (0, 3, 6):
        assert f"step {step}: validation loss " in out  # with the seconds, for gpu_check


def test_set_changes_either_config_by_the_fields_type():
    model_cfg, cfg = PRESETS["tiny"]
    m, c = command.apply_settings(model_cfg, cfg, ["dropout=0.1", "steps=7", "autocast=bf16",
                                                  "tf32=true", "n_kv_heads=2", "lr=1e-3"])
    assert (m.dropout, m.n_kv_heads, c.steps, c.autocast, c.tf32, c.lr) == (0.1, 2, 7, "bf16",
                                                                            True, 1e-3)
    for bad, message in (("nonsense=1", "a field of TrainConfig or ModelConfig"),
                         ("steps", "NAME=VALUE"), ("steps=many", "expected a number"),
                         ("tf32=maybe", "true or false")):
        with pytest.raises(ValueError, match=message):
            command.apply_settings(model_cfg, cfg, [bad])
    with pytest.raises(ValueError, match="autocast must be one of"):
        command.apply_settings(model_cfg, cfg, ["autocast=fp8"])


def test_muons_iterations_in_bfloat16_update_about_as_float32_does():
    from course_lib.muon import Muon
    torch.manual_seed(0)
    grads = [torch.randn(48, 16), torch.randn(16, 64)]
    moved = []
    for ns_dtype in (None, torch.bfloat16):
        weights = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
        for w, g in zip(weights, grads):
            w.grad = g.clone()
        Muon(weights, lr=0.1, ns_dtype=ns_dtype).step()
        moved.append([w.detach().clone() for w in weights])
    for a, b in zip(*moved):
        assert b.dtype == torch.float32 and not torch.equal(a, b)  # rounded in bfloat16
        assert ((a - b).norm() / a.norm()).item() < 0.05  # bfloat16 keeps about 3 digits
    with pytest.raises(ValueError, match="ns_dtype must be None"):
        Muon([torch.nn.Parameter(torch.zeros(4, 4))], ns_dtype=torch.float16)


def test_the_cpu_presets_bf16_branch_runs_muons_iterations_in_bfloat16_and_learns():
    from course_lib.training import CPU_PRESETS
    assert CPU_PRESETS["bf16"][1].muon_bf16 and not CPU_PRESETS["float32"][1].muon_bf16
    _, history = _run(steps=30, optimizer="muon", muon_lr=0.03, muon_bf16=True)
    assert history.val_losses[-1] < history.val_losses[0] - 1.0


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bench/gpu_check.py)")


@CUDA
def test_the_gpu_presets_settings_train_on_a_gpu_as_on_the_cpu():
    """The preset's speed settings on a real GPU: the losses read back every 5 steps, TF32, the
    fused update, pinned batches; float32 arithmetic on TF32 units stays close to the CPU's."""
    _, on_cpu = _run(steps=12, sync_every=5)
    _, on_gpu = _run(model=tiny_model().cuda(), steps=12, sync_every=5, tf32=True,
                     adamw="fused", autocast="off")
    assert on_gpu.device.startswith("cuda") and on_gpu.steps == on_cpu.steps
    assert on_gpu.losses[0] == pytest.approx(on_cpu.losses[0], abs=1e-2)
    assert on_gpu.val_losses[-1] == pytest.approx(on_cpu.val_losses[-1], abs=0.1)
    assert torch.get_float32_matmul_precision() == "highest"  # restored after the run


@CUDA
def test_generation_on_a_gpu_gives_the_same_tokens_fast_and_readable():
    from course_lib.generation import generate
    model = tiny_model(max_len=24, positions="rope").cuda()
    prompt = random_ids(2, 5).cuda()
    for temperature in (0, 0.8):
        a, b = (generate(model, prompt, 30, temperature=temperature, fast=fast,
                         generator=torch.Generator().manual_seed(0)) for fast in (False, True))
        assert torch.equal(a, b)
