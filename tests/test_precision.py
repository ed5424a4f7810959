"""course_lib.precision: float32 or bf16 for a CPU run, chosen by timing the run's own update each
way on this machine, or forced by COURSE_CPU_BF16. The timings themselves vary, so the rule is
tested on figures put in place of them; the real timing is checked for what must hold of it."""
from dataclasses import replace

import pytest
import torch

from course_lib import precision
from course_lib.data import get_batch
from course_lib.model import TinyLM
from course_lib.precision import BF16_PAYS, PrecisionChoice, choose_cpu_precision, update_ms
from course_lib.training import PRESETS, configure_optimizer, train, update

MODEL, RUN = PRESETS["tiny"]


@pytest.fixture(autouse=True)
def fresh_choice(monkeypatch):
    """Each test measures anew, unforced unless it says so."""
    monkeypatch.delenv("COURSE_CPU_BF16", raising=False)
    precision._measured.cache_clear()
    yield
    precision._measured.cache_clear()


@pytest.mark.parametrize("forced, autocast, settings", [("1", "bf16", "bf16"),
                                                        ("0", "off", "float32")])
def test_course_cpu_bf16_forces_the_choice_without_timing(monkeypatch, forced, autocast, settings):
    def must_not_time(*args, **kwargs):
        raise AssertionError("a forced choice timed the run")
    monkeypatch.setattr(precision, "update_ms", must_not_time)
    monkeypatch.setenv("COURSE_CPU_BF16", forced)
    choice = choose_cpu_precision(MODEL, RUN)
    assert (choice.autocast, choice.settings) == (autocast, settings)
    assert choice.forced_by == f"COURSE_CPU_BF16={forced}" and choice.why == f"forced by {choice.forced_by}"
    assert choice.float32_ms is None and choice.bf16_ms is None


def test_a_bad_course_cpu_bf16_is_refused_with_what_to_set(monkeypatch):
    monkeypatch.setenv("COURSE_CPU_BF16", "yes")
    with pytest.raises(ValueError, match="COURSE_CPU_BF16='yes' should be 1 .* or 0"):
        choose_cpu_precision(MODEL, RUN)


@pytest.mark.parametrize("float32_ms, bf16_ms, autocast", [
    (100.0, 60.0, "bf16"), (100.0, 100.0 * BF16_PAYS, "bf16"),      # pays, or just pays
    (100.0, 95.0, "off"), (100.0, 140.0, "off")])                    # too little, or slower
def test_bf16_is_chosen_only_where_its_update_takes_at_most_bf16_pays_of_float32s(
        monkeypatch, float32_ms, bf16_ms, autocast):
    seen = []

    def timed(model_config, configs):
        seen.append((model_config, configs))
        return [float32_ms, bf16_ms]
    monkeypatch.setattr(precision, "update_ms", timed)
    choice = choose_cpu_precision(MODEL, RUN)
    assert choice == PrecisionChoice(autocast, float32_ms, bf16_ms)
    assert f"{bf16_ms:.1f} ms in bf16 and {float32_ms:.1f} ms in float32" in choice.why
    assert f"({bf16_ms / float32_ms:.2f}x;" in choice.why
    assert choice.why.endswith("so bf16" if autocast == "bf16" else "so float32")
    # it timed this run's two precisions, and it times once a process
    ((model_config, (f32, b16)),) = seen
    assert model_config == MODEL and (f32.autocast, b16.autocast) == ("off", "bf16")
    assert f32 == replace(RUN, autocast="off") and b16 == replace(RUN, autocast="bf16")
    assert choose_cpu_precision(MODEL, RUN) is choice and len(seen) == 1


def test_the_bf16_settings_are_the_runs_own_where_given(monkeypatch):
    seen = []
    monkeypatch.setattr(precision, "update_ms", lambda m, configs: seen.append(configs) or [1.0, 2.0])
    choose_cpu_precision(MODEL, RUN, replace(RUN, muon_bf16=True, optimizer="muon"))
    ((f32, b16),) = seen
    assert not f32.muon_bf16 and b16.muon_bf16 and b16.autocast == "bf16"


def test_the_timed_choice_on_the_tiny_model_is_valid_and_follows_the_rule():
    choice = choose_cpu_precision(MODEL, RUN)
    assert choice.forced_by is None and choice.autocast in ("bf16", "off")
    assert choice.float32_ms > 0 and choice.bf16_ms > 0
    pays = choice.bf16_ms <= BF16_PAYS * choice.float32_ms
    assert choice.settings == ("bf16" if pays else "float32")


def test_timing_leaves_torchs_random_numbers_as_they_were():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    times = update_ms(MODEL, (replace(RUN, autocast="off"),), timed=1)
    assert len(times) == 1 and times[0] > 0
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize("args", [(MODEL.__dict__, RUN), (MODEL, "fast"), (RUN, MODEL)])
def test_wrong_arguments_get_a_type_error_that_names_them(args):
    with pytest.raises(TypeError, match="pass a ModelConfig and a TrainConfig, got"):
        choose_cpu_precision(*args)


def test_train_takes_the_same_steps_as_update_in_a_loop_of_its_own():
    """train's loop calls update; the same batches and learning rates by hand give the same
    losses, bit for bit (float32, no clipping differences, one thread)."""
    ids = torch.randint(0, MODEL.vocab_size, (2000,), generator=torch.Generator().manual_seed(1))
    cfg = replace(RUN, steps=6, warmup_steps=1, eval_every=6, eval_batches=1)
    torch.manual_seed(cfg.seed)
    history = train(TinyLM(MODEL), ids, ids, cfg, progress=False)
    torch.manual_seed(cfg.seed)
    model = TinyLM(MODEL).train()
    opt = configure_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    from course_lib.training import lr_at
    losses = []
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg) * group.get("lr_ratio", 1.0)
        batch = get_batch(ids, cfg.batch_size, cfg.block_size, gen)
        losses.append(update(model, opt, batch, cfg, torch.device("cpu")).item())
    assert history.losses == losses
