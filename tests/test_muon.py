"""Tests for course_lib.muon and TrainConfig(optimizer="muon")."""
import math

import pytest
import torch

from course_lib.data import encode, train_val_split
from course_lib.muon import Muon, MuonWithAdamW, hidden_matrices, orthogonalize
from course_lib.training import TrainConfig, configure_optimizer, train

from conftest import tiny_model

TEXT = ("to be, or not to be, that is the question: whether 'tis nobler in the mind "
        "to suffer the slings and arrows of outrageous fortune. ") * 20


def small_cfg(**kw):
    base = dict(steps=12, batch_size=4, block_size=16, lr=3e-3, warmup_steps=2,
                eval_every=5, eval_batches=2, seed=0, optimizer="muon")
    return TrainConfig(**{**base, **kw})


@pytest.mark.parametrize("shape", [(32, 32), (96, 32), (32, 128)])
def test_orthogonalize_brings_every_singular_value_near_one(shape):
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    g = g * torch.logspace(-1, 0, shape[1])  # column scales spread over a decade
    s = torch.linalg.svdvals(orthogonalize(g))
    assert orthogonalize(g).shape == g.shape
    assert s.min() > 0.5 and s.max() < 1.3, s  # Newton-Schulz's band, not exactly 1
    # and the directions are g's: for g = U S V^T, U^T X V is close to diagonal
    u, _, vh = torch.linalg.svd(g, full_matrices=False)
    core = u.T @ orthogonalize(g) @ vh.T
    off = core - torch.diag(torch.diagonal(core))
    assert off.abs().max() < 0.05


def test_orthogonalize_rejects_a_vector():
    with pytest.raises(ValueError, match="2-D matrix, got shape \\(5,\\)"):
        orthogonalize(torch.ones(5))


def test_muon_rejects_bad_settings_and_non_matrices():
    w = torch.nn.Parameter(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="momentum must be in \\[0, 1\\)"):
        Muon([w], momentum=1.0)
    with pytest.raises(ValueError, match="lr must be >= 0"):
        Muon([w], lr=-1.0)
    with pytest.raises(ValueError, match="ns_steps must be a positive integer"):
        Muon([w], ns_steps=0)
    with pytest.raises(ValueError, match="2-D weight matrices only.*give it to AdamW"):
        Muon([torch.nn.Parameter(torch.zeros(3))])


def test_muon_step_moves_a_matrix_by_lr_times_an_orthogonal_update():
    w = torch.nn.Parameter(torch.zeros(8, 8))
    w.grad = torch.randn(8, 8, generator=torch.Generator().manual_seed(0))
    Muon([w], lr=0.1, momentum=0.0).step()
    s = torch.linalg.svdvals(w.detach() / 0.1)
    assert s.min() > 0.5 and s.max() < 1.3


@pytest.mark.parametrize("overrides", [{}, dict(tie_embeddings=False),
                                       dict(mlp="swiglu", norm="rmsnorm", attn_bias=True),
                                       dict(positions="rope")])
def test_every_parameter_is_in_exactly_one_group(overrides):
    model = tiny_model(**overrides)
    opt = configure_optimizer(model, small_cfg())
    assert isinstance(opt, MuonWithAdamW)
    grouped = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(grouped) == len(set(grouped))                       # none twice
    assert set(grouped) == {id(p) for p in model.parameters()}     # none left out
    muon = {id(p) for g in opt.muon.param_groups for p in g["params"]}
    for name, p in model.named_parameters():  # named_parameters lists a tied weight once
        hidden = name.startswith("blocks.") and name.endswith(".weight") and p.ndim == 2
        assert (id(p) in muon) == hidden, name
    assert id(model.tok_emb.weight) not in muon and id(model.head.weight) not in muon


def test_the_groups_learning_rates_follow_the_schedule():
    cfg = small_cfg(lr=2e-3, muon_lr=0.05)
    opt = configure_optimizer(tiny_model(), cfg)
    ratios = [g["lr_ratio"] for g in opt.param_groups]
    assert ratios[0] == pytest.approx(0.05 / 2e-3) and set(ratios[1:]) == {1.0}
    assert all(g["weight_decay"] == 0 for g in opt.muon.param_groups)
    assert {g["weight_decay"] for g in opt.adamw.param_groups} == {0.0, cfg.weight_decay}


def test_hidden_matrices_of_the_tiny_model():
    model = tiny_model()
    names = {id(p): n for n, p in model.named_parameters()}
    found = sorted(names[id(p)] for p in hidden_matrices(model))
    layers = model.config.n_layers
    assert len(found) == 4 * layers  # qkv, proj, up, down in each block
    assert all(n.startswith("blocks.") for n in found)


def test_the_muon_path_trains_a_tiny_model_and_lowers_the_loss():
    tr, va = train_val_split(encode(TEXT))
    h = train(tiny_model(), tr, va, small_cfg(steps=40, eval_every=10), progress=False)
    assert all(math.isfinite(x) for x in h.losses)
    assert h.val_losses[-1] < h.val_losses[0] - 1.0
    assert sum(h.losses[-5:]) / 5 < sum(h.losses[:5]) / 5 - 1.0


def test_muon_resumes_bit_for_bit(tmp_path, monkeypatch):
    import course_lib.checkpoint as ck
    tr, va = train_val_split(encode(TEXT))
    cfg = small_cfg(steps=8, eval_every=4)
    full = train(tiny_model(), tr, va, cfg, progress=False)
    real = ck.save_checkpoint

    def save_then_stop(*a, **k):  # the same run, interrupted after its step-4 save
        real(*a, **k)
        if k["step"] == 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(ck, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_model(), tr, va, cfg, checkpoint_path=tmp_path / "run.pt", progress=False)
    monkeypatch.undo()
    resumed = train(tiny_model(seed=5), tr, va, cfg, checkpoint_path=tmp_path / "run.pt",
                    resume=True, progress=False)
    assert resumed.losses == full.losses  # Muon's momentum and AdamW's moments came back


@pytest.mark.parametrize("kw, message", [
    (dict(optimizer="sgd"), r"optimizer must be one of \('adamw', 'muon'\), got 'sgd'"),
    (dict(muon_lr=0.0), r"muon_lr must be > 0, got 0.0"),
    (dict(muon_lr=float("inf")), r"muon_lr must be a finite number"),
    (dict(muon_ns_steps=0), r"muon_ns_steps must be a positive integer, got 0"),
    (dict(muon_ns_steps=2.5), r"muon_ns_steps must be a positive integer, got 2.5"),
])
def test_bad_optimizer_settings_get_a_clear_error(kw, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kw)


def test_the_newton_schulz_iterations_reach_muon():
    opt = configure_optimizer(tiny_model(), small_cfg(muon_ns_steps=3))
    assert {g["ns_steps"] for g in opt.muon.param_groups} == {3}
    assert {g["ns_steps"] for g in configure_optimizer(tiny_model(), small_cfg()).muon.param_groups} == {5}
    assert "muon_ns_steps=3" in repr(small_cfg(muon_ns_steps=3))
    assert "muon_ns_steps" not in repr(small_cfg())


def test_the_default_repr_does_not_show_the_optimizer():
    assert "optimizer" not in repr(TrainConfig()) and "muon_lr" not in repr(TrainConfig())
    assert "optimizer='muon'" in repr(TrainConfig(optimizer="muon"))


def test_a_muon_state_does_not_load_into_adamw_and_back():
    model = tiny_model()
    muon_opt = configure_optimizer(model, small_cfg())
    with pytest.raises(ValueError, match="not saved by MuonWithAdamW"):
        muon_opt.load_state_dict(torch.optim.AdamW(model.parameters()).state_dict())
