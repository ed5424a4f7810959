"""Tests for the full training loop in course_lib.training: schedule, config, train()."""
import math

import pytest
import torch

import course_lib.checkpoint as ck
from course_lib.data import encode, train_val_split
from course_lib.model import ModelConfig
from course_lib.training import PRESETS, History, TrainConfig, configure_optimizer, lr_at, train

from conftest import tiny_model

TEXT = ("to be, or not to be, that is the question: whether 'tis nobler in the mind "
        "to suffer the slings and arrows of outrageous fortune. ") * 20


def small_cfg(**kw):
    base = dict(steps=12, batch_size=4, block_size=16, lr=3e-3, warmup_steps=2,
                eval_every=5, eval_batches=2, seed=0)
    return TrainConfig(**{**base, **kw})


def split():
    return train_val_split(encode(TEXT))


# --- lr schedule ---------------------------------------------------------------------


def test_lr_warmup_is_linear_and_reaches_peak():
    cfg = TrainConfig(steps=100, lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    warm = [lr_at(s, cfg) for s in range(10)]
    assert warm == pytest.approx([1e-3 * (s + 1) / 10 for s in range(10)])
    assert lr_at(10, cfg) == pytest.approx(1e-3)  # first cosine step is the peak


def test_lr_cosine_decays_monotonically_to_the_floor():
    cfg = TrainConfig(steps=100, lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    decay = [lr_at(s, cfg) for s in range(10, 100)]
    assert all(a > b for a, b in zip(decay, decay[1:]))
    assert lr_at(99, cfg) == pytest.approx(1e-4)
    assert lr_at(500, cfg) == pytest.approx(1e-4)  # past the end: stays at the floor
    # halfway through the cosine the rate is halfway between peak and floor
    mid = 10 + (99 - 10) / 2
    assert lr_at(int(mid), cfg) > 5.5e-4 > lr_at(int(mid) + 1, cfg)


def test_lr_without_warmup_starts_at_peak():
    cfg = TrainConfig(steps=10, lr=2e-3, warmup_steps=0, min_lr_ratio=0.0)
    assert lr_at(0, cfg) == pytest.approx(2e-3)
    assert lr_at(9, cfg) == pytest.approx(0.0, abs=1e-12)


def test_lr_rejects_negative_step():
    with pytest.raises(ValueError, match="step must be an integer >= 0"):
        lr_at(-1, TrainConfig())


# --- TrainConfig ---------------------------------------------------------------------


@pytest.mark.parametrize("kw, message", [
    (dict(steps=0), r"steps must be a positive integer, got 0"),
    (dict(batch_size=2.5), r"batch_size must be a positive integer"),
    (dict(steps=10, warmup_steps=10), r"warmup_steps=10 must be smaller than steps=10"),
    (dict(warmup_steps=-1), r"warmup_steps must be an integer >= 0"),
    (dict(lr=0.0), r"lr must be > 0, got 0.0"),
    (dict(lr=float("nan")), r"lr must be a finite number"),
    (dict(min_lr_ratio=1.5), r"min_lr_ratio must be in \[0, 1\]"),
    (dict(weight_decay=-0.1), r"weight_decay must be >= 0"),
    (dict(grad_clip=-1.0), r"grad_clip must be >= 0"),
    (dict(eval_every=0), r"eval_every must be a positive integer"),
])
def test_train_config_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kw)


def test_presets_are_consistent():
    assert {"cpu", "gpu"} <= set(PRESETS)
    gpu_model, gpu_run = PRESETS["gpu"]
    # nanoGPT's Shakespeare model and batch, which bench/gpu_check.py sets it beside
    assert (gpu_model.n_layers, gpu_model.n_heads, gpu_model.d_model) == (6, 6, 384)
    assert (gpu_model.dropout, gpu_model.positions) == (0.2, "rope")
    assert (gpu_run.batch_size, gpu_run.block_size, gpu_run.tokens_per_step) == (64, 256, 16_384)
    assert gpu_run.sync_every == gpu_run.eval_every and not gpu_run.compile
    for model_cfg, run in PRESETS.values():
        assert run.block_size <= model_cfg.max_len


# --- optimizer -----------------------------------------------------------------------


def test_weight_decay_only_on_matrices():
    model = tiny_model()
    opt = configure_optimizer(model, small_cfg(weight_decay=0.1))
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    for name, p in model.named_parameters():
        assert (id(p) in decayed) == (p.dim() == 2), name
    n_opt = sum(len(g["params"]) for g in opt.param_groups)
    assert n_opt == len(list(model.parameters()))  # the tied embedding appears once


# --- train ---------------------------------------------------------------------------


def test_train_losses_fall_and_history_is_complete():
    tr, va = split()
    model = tiny_model()
    cfg = small_cfg(steps=40, eval_every=10)
    h = train(model, tr, va, cfg, progress=False)
    assert isinstance(h, History)
    assert h.steps == list(range(1, 41))
    assert len(h.losses) == 40 and all(type(x) is float and math.isfinite(x) for x in h.losses)
    assert h.eval_steps == [0, 10, 20, 30, 40]
    assert len(h.val_losses) == 5
    assert abs(h.val_losses[0] - math.log(256)) < 0.1  # untrained: near uniform over 256 bytes
    assert h.val_losses[-1] < h.val_losses[0] - 1.0
    assert sum(h.losses[-5:]) / 5 < sum(h.losses[:5]) / 5 - 1.0
    assert h.tokens_per_second > 0 and h.device == "cpu"


def test_eval_at_the_end_when_steps_not_a_multiple():
    tr, va = split()
    h = train(tiny_model(), tr, va, small_cfg(steps=7, eval_every=3), progress=False)
    assert h.eval_steps == [0, 3, 6, 7]


def test_train_is_seeded():
    tr, va = split()
    a = train(tiny_model(), tr, va, small_cfg(steps=5), progress=False)
    b = train(tiny_model(), tr, va, small_cfg(steps=5), progress=False)
    c = train(tiny_model(), tr, va, small_cfg(steps=5, seed=1), progress=False)
    assert a.losses == b.losses
    assert a.losses != c.losses


def test_train_uses_the_schedule(monkeypatch):
    """The optimizer's learning rate after the run is the schedule's value for the last update."""
    tr, va = split()
    model = tiny_model()
    cfg = small_cfg(steps=6, warmup_steps=3)
    seen = []
    orig = torch.optim.AdamW.step

    def spy(self, *a, **k):
        seen.append(self.param_groups[0]["lr"])
        return orig(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    train(model, tr, va, cfg, progress=False)
    assert seen == pytest.approx([lr_at(s, cfg) for s in range(6)])


def test_gradient_clipping_bounds_the_update(monkeypatch):
    """The gradients the optimizer sees never have a global norm above grad_clip."""
    tr, va = split()
    model = tiny_model()
    norms = []
    orig = torch.optim.AdamW.step

    def spy(self, *a, **k):
        g = torch.cat([p.grad.flatten() for grp in self.param_groups for p in grp["params"]])
        norms.append(g.norm().item())
        return orig(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    train(model, tr, va, small_cfg(steps=3, grad_clip=0.01), progress=False)
    assert all(n <= 0.01 + 1e-6 for n in norms)


def test_nan_loss_names_the_step():
    tr, va = split()
    model = tiny_model()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match=r"at step 1 .*lower TrainConfig.lr"):
        train(model, tr, va, small_cfg(), progress=False)


def test_diverging_run_names_a_later_step():
    tr, va = split()
    with pytest.raises(FloatingPointError, match=r"at step ([2-9]|\d\d+) "):
        train(tiny_model(), tr, va, small_cfg(steps=30, lr=1e30, grad_clip=0.0, warmup_steps=0),
              progress=False)


def test_train_rejects_bad_inputs():
    tr, va = split()
    with pytest.raises(ValueError, match="val_ids has 10 ids but a window needs block_size \\+ 1 = 17"):
        train(tiny_model(), tr, va[:10], small_cfg(), progress=False)
    with pytest.raises(ValueError, match="block_size=32 is longer than the model's max_len=16"):
        train(tiny_model(), tr, va, small_cfg(block_size=32), progress=False)
    with pytest.raises(TypeError, match="cfg must be a TrainConfig"):
        train(tiny_model(), tr, va, {"steps": 3}, progress=False)
    with pytest.raises(ValueError, match="resume=True needs checkpoint_path"):
        train(tiny_model(), tr, va, small_cfg(), resume=True, progress=False)


# --- resume --------------------------------------------------------------------------


def test_resume_gives_exactly_the_uninterrupted_run(tmp_path, monkeypatch):
    tr, va = split()
    cfg = small_cfg(steps=12, eval_every=3)
    full_model = tiny_model()
    full = train(full_model, tr, va, cfg, progress=False)

    path = tmp_path / "run.pt"
    # stop at step 6: a run of the same config interrupted by an exception after its step-6 save
    model = tiny_model()
    calls = {"n": 0}
    orig_save = ck.save_checkpoint

    def save_then_stop(*a, **k):
        orig_save(*a, **k)
        calls["n"] += 1
        if k["step"] == 6:
            raise KeyboardInterrupt

    monkeypatch.setattr(ck, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train(model, tr, va, cfg, checkpoint_path=path, progress=False)
    monkeypatch.undo()
    assert calls["n"] == 2  # saved at steps 3 and 6

    resumed_model = tiny_model(seed=99)  # different initial weights: all must come from the file
    resumed = train(resumed_model, tr, va, cfg, checkpoint_path=path, resume=True, progress=False)
    assert resumed.steps == full.steps
    assert resumed.losses == full.losses  # exact floats
    assert resumed.eval_steps == full.eval_steps
    assert resumed.val_losses == full.val_losses
    for a, b in zip(full_model.parameters(), resumed_model.parameters()):
        assert torch.equal(a, b)


def test_fit_and_train_decay_the_same_parameters(monkeypatch):
    """Both loops decay weight matrices and embeddings, never biases or norm gains."""
    from course_lib import training
    made = []
    real = torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda groups, **kw: made.append(groups) or real(groups, **kw))
    model = tiny_model()
    training.fit(model, torch.randint(0, 256, (200,)), steps=1, batch_size=2, block_size=8, progress=False)
    training.configure_optimizer(model, small_cfg())
    for groups in made:
        decayed = {id(p) for g in groups if g["weight_decay"] > 0 for p in g["params"]}
        assert decayed == {id(p) for p in model.parameters() if p.dim() == 2}
