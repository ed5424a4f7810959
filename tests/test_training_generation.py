"""Tests for course_lib.training, course_lib.generation and course_lib.device."""
import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.data import encode, get_batch, split_inputs_targets
from course_lib.device import pick_device
from course_lib.generation import generate
from course_lib.training import evaluate, fit, next_token_loss, train_step

from conftest import random_ids, tiny_model


# --- next_token_loss / train_step ----------------------------------------------


def test_next_token_loss_matches_cross_entropy():
    gen = torch.Generator().manual_seed(0)
    B, T, V = 3, 5, 11
    logits = torch.randn(B, T, V, generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    # independent: log-softmax by hand, pick the target entries, average
    logp = logits - logits.logsumexp(-1, keepdim=True)
    manual = -logp.gather(-1, targets[..., None]).mean()
    got = next_token_loss(logits, targets)
    assert got.ndim == 0
    assert abs(got.item() - manual.item()) < 1e-5
    ref = F.cross_entropy(logits.permute(0, 2, 1), targets)  # (B, V, T) layout, no reshape
    assert abs(got.item() - ref.item()) < 1e-6


def test_train_step_returns_float_and_changes_parameters():
    model = tiny_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    loss = train_step(model, opt, random_ids(4, 9))
    assert type(loss) is float
    assert math.isfinite(loss)
    changed = [not torch.equal(b, p) for b, p in zip(before, model.parameters())]
    assert all(changed)


def test_train_step_learns_the_next_token_not_the_same_one():
    model = tiny_model(seed=1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = encode("abcd" * 4)[None, :13]  # (1, 13): a b c d a b c d ...
    for _ in range(60):
        train_step(model, opt, batch)
    inputs, targets = batch[:, :-1], batch[:, 1:]
    with torch.no_grad():
        pred = model(inputs).argmax(-1)
    assert torch.equal(pred, targets)
    assert not torch.equal(pred, inputs)


# --- fit / evaluate ---------------------------------------------------------------


def test_fit_returns_one_loss_per_step():
    model = tiny_model()
    ids = encode("the quick brown fox jumps over the lazy dog. " * 4)
    losses = fit(model, ids, steps=7, batch_size=4, block_size=8, lr=1e-3, progress=False)
    assert len(losses) == 7
    assert all(type(x) is float and math.isfinite(x) for x in losses)


def test_fit_raises_on_nan_loss_at_step_zero():
    model = tiny_model()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="at step 0"):
        fit(model, encode("abcdefgh" * 4), steps=3, batch_size=2, block_size=4, progress=False)


def test_fit_raises_on_diverging_learning_rate():
    model = tiny_model()
    with pytest.raises(FloatingPointError, match=r"at step [1-9]\d*;.*lower the learning rate"):
        fit(model, encode("abcdefgh" * 4), steps=20, batch_size=2, block_size=4, lr=1e30, progress=False)


def test_evaluate_deterministic_matches_manual_and_restores_train_mode():
    model = tiny_model()
    ids = encode("to be or not to be, that is the question. " * 3)
    assert model.training
    a = evaluate(model, ids, batch_size=3, block_size=8, n_batches=2, seed=5)
    b = evaluate(model, ids, batch_size=3, block_size=8, n_batches=2, seed=5)
    assert a == b
    assert model.training
    gen = torch.Generator().manual_seed(5)
    manual = []
    with torch.no_grad():
        for _ in range(2):
            x, y = split_inputs_targets(get_batch(ids, 3, 8, gen))
            manual.append(F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1)).item())
    assert abs(a - sum(manual) / 2) < 1e-6
    assert evaluate(model, ids, batch_size=3, block_size=8, n_batches=2, seed=6) != a


# --- generate ----------------------------------------------------------------------


def test_generate_shape_and_prompt_preserved():
    model = tiny_model()
    prompt = random_ids(2, 4)
    out = generate(model, prompt, 6, generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 10)
    assert out.dtype == prompt.dtype
    assert torch.equal(out[:, :4], prompt)
    assert int(out.min()) >= 0 and int(out.max()) < 256


def test_generate_greedy_is_argmax_step_by_step():
    model = tiny_model()
    prompt = random_ids(2, 3)
    out = generate(model, prompt, 4, temperature=0)
    assert torch.equal(generate(model, prompt, 4, temperature=0), out)
    idx = prompt
    with torch.no_grad():
        for _ in range(4):
            nxt = model(idx)[:, -1, :].argmax(-1)  # (B,)
            idx = torch.cat([idx, nxt[:, None]], dim=1)
    assert torch.equal(out, idx)


def test_generate_seeded_sampling():
    model = tiny_model()
    prompt = random_ids(2, 3)
    a = generate(model, prompt, 12, generator=torch.Generator().manual_seed(1))
    b = generate(model, prompt, 12, generator=torch.Generator().manual_seed(1))
    c = generate(model, prompt, 12, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_generate_top_k_one_is_greedy():
    model = tiny_model()
    prompt = random_ids(3, 2)
    greedy = generate(model, prompt, 6, temperature=0)
    top1 = generate(model, prompt, 6, temperature=1.5, top_k=1, generator=torch.Generator().manual_seed(3))
    assert torch.equal(top1, greedy)


def test_generate_crops_to_last_max_len_tokens():
    model = tiny_model()  # max_len 16
    prompt = random_ids(2, 20)
    out = generate(model, prompt, 5, temperature=0)
    assert out.shape == (2, 25)
    assert torch.equal(out[:, :20], prompt)
    cropped = generate(model, prompt[:, -16:], 5, temperature=0)
    assert torch.equal(out[:, 20:], cropped[:, 16:])


def test_generate_past_max_len():
    model = tiny_model()
    out = generate(model, random_ids(1, 10), 12, generator=torch.Generator().manual_seed(4))
    assert out.shape == (1, 22)


def test_generate_rejects_negative_temperature():
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        generate(tiny_model(), random_ids(1, 2), 3, temperature=-0.5)


def test_generate_rejects_top_k_zero():
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        generate(tiny_model(), random_ids(1, 2), 3, top_k=0)


# --- pick_device ---------------------------------------------------------------------


def _has_accelerator():
    return torch.cuda.is_available() or torch.backends.mps.is_available()


def test_pick_device_cpu_verbose(monkeypatch, capsys):
    if _has_accelerator():
        pytest.skip("a CUDA or MPS device is available, so pick_device does not fall back to the CPU")
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert pick_device() == torch.device("cpu")
    out = capsys.readouterr().out
    assert out.startswith("Using device cpu")
    assert "no CUDA or MPS" in out


def test_pick_device_quiet(monkeypatch, capsys):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    pick_device(verbose=False)
    assert capsys.readouterr().out == ""


def test_pick_device_env_override(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert pick_device() == torch.device("cpu")
    assert "chosen by COURSE_DEVICE" in capsys.readouterr().out
