"""Every fast path equals its plain one: decoding token for token, and logit for logit (bit for bit
for FastDecoder's step; within float32 rounding for generate's loop, which runs without oneDNN);
training step for step in float32; the bf16 mode runs and learns; the cpu preset picks its
settings by timing both on this CPU; the benches run; bad options are refused."""
import contextlib
import json
from dataclasses import replace

import pytest
import torch

from course_lib.checkpoint import load_model
from course_lib.data import encode, train_val_split
from course_lib import generation
from course_lib.generation import FastDecoder, _without_onednn, generate
from course_lib.kv_cache import KVCache
from course_lib import training
from course_lib.training import TrainConfig, cpu_preset, train

from conftest import ROOT, random_ids, tiny_model

# The options of ModelConfig that change the decode step, alone and together.
CONFIGS = [
    dict(),
    dict(positions="rope"),
    dict(n_kv_heads=2),
    dict(n_kv_heads=1, positions="rope"),
    dict(norm="rmsnorm"),
    dict(mlp="swiglu"),
    dict(attn_bias=True, gelu_approx="tanh", tie_embeddings=False),
    dict(norm="rmsnorm", mlp="swiglu", positions="rope", n_kv_heads=2, tie_embeddings=False),
]


def _steps_side_by_side(options, onednn=True):
    """(position, the readable step's logits, FastDecoder's) for positions 5..19 of a batch of
    three, each from its own cache; the caches are compared at the end."""
    model = tiny_model(max_len=24, **options).eval()
    seq = random_ids(3, 20)
    plain, fast = KVCache.for_model(model, 3), KVCache.for_model(model, 3)
    with torch.inference_mode():
        model(seq[:, :5], plain)
        model(seq[:, :5], fast)
        decoder = FastDecoder(model, fast)
        for t in range(5, 20):
            want = model(seq[:, t:t + 1], plain)[:, -1]
            with contextlib.nullcontext() if onednn else _without_onednn():
                got = decoder.step(seq[:, t])
            yield t, want, got
    assert fast.length == plain.length == 20
    if onednn:
        assert torch.equal(fast.keys, plain.keys) and torch.equal(fast.values, plain.values)


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_a_fast_step_gives_the_readable_steps_logits_bit_for_bit(options):
    for t, want, got in _steps_side_by_side(options):
        assert torch.equal(got, want), f"position {t}: logits differ"


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_without_onednn_a_fast_step_is_within_float32_rounding_of_the_readable_one(options):
    """generate's fast loop runs its steps without oneDNN: only the exact GELU's kernel changes,
    so logits are bit for bit equal where the model has none, and within rounding elsewhere."""
    exact_gelu = options.get("mlp", "gelu") == "gelu" and options.get("gelu_approx", "none") == "none"
    worst = 0.0
    for t, want, got in _steps_side_by_side(options, onednn=False):
        assert torch.equal(got.argmax(-1), want.argmax(-1)), f"position {t}: greedy token differs"
        if not exact_gelu:
            assert torch.equal(got, want), f"position {t}: logits differ"
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        worst = max(worst, (got - want).abs().max().item())
    assert torch.backends.mkldnn.enabled  # restored after each step
    print(f"{options}: largest logit difference {worst:.2e}")


def test_without_onednn_restores_the_setting_even_after_an_error():
    before = torch.backends.mkldnn.enabled
    with pytest.raises(RuntimeError):
        with _without_onednn():
            assert not torch.backends.mkldnn.enabled
            raise RuntimeError("a failed step")
    assert torch.backends.mkldnn.enabled == before


def test_the_default_is_the_fast_loop_where_it_can_run(monkeypatch):
    calls = []
    original = generation._cached_fast
    monkeypatch.setattr(generation, "_cached_fast",
                        lambda *a: calls.append("fast") or original(*a))
    model = tiny_model()
    prompt = random_ids(2, 3)
    default = generate(model, prompt, 6, temperature=0)
    assert calls == ["fast"]
    assert torch.equal(default, generate(model, prompt, 6, temperature=0, fast=False))
    assert calls == ["fast"]  # fast=False: the readable loop
    for options, kwargs in ((dict(causal=False), {}), (dict(residual=False), {}),
                            ({}, dict(use_cache=False))):
        out = generate(tiny_model(**options), prompt, 4, temperature=0, **kwargs)
        assert out.shape == (2, 7)
    assert calls == ["fast"]  # where the fast loop cannot run, the default is the readable one


def test_the_fast_loops_tokens_can_feed_a_training_step():
    """The output is made outside inference_mode, so autograd may use it later."""
    model = tiny_model()
    out = generate(model, random_ids(1, 4), 8, temperature=0)
    assert not out.is_inference()
    model(out).sum().backward()
    assert model.tok_emb.weight.grad is not None


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("temperature, top_k", [(0, None), (1.0, None), (0.8, 5)])
def test_fast_generation_gives_the_same_tokens(options, temperature, top_k):
    model = tiny_model(max_len=24, **options)
    for seed in range(4):
        B, T = 1 + seed % 3, 1 + (7 * seed) % 24
        prompt = random_ids(B, T, seed=seed)
        n_new = 24 - T + 6 * (seed % 2)  # up to max_len, and past it on odd seeds
        runs = [generate(model, prompt, n_new, temperature, top_k, fast=fast,
                         generator=torch.Generator().manual_seed(seed)) for fast in (False, True)]
        assert runs[1].dtype == runs[0].dtype and runs[1].shape == runs[0].shape
        assert torch.equal(runs[0], runs[1]), f"seed {seed}: fast and readable tokens differ"


def test_fast_generation_on_the_trained_checkpoint_gives_the_same_tokens():
    model = load_model(ROOT / "data" / "tinylm.pt")
    prompt = torch.tensor([list(b"ROMEO:\n"), list(b"To be, ")])
    for temperature in (0, 0.8):
        a, b = (generate(model, prompt, 150, temperature=temperature, fast=fast,
                         generator=torch.Generator().manual_seed(3)) for fast in (False, True))
        assert torch.equal(a, b)


def test_fast_generation_leaves_the_model_as_it_found_it():
    model = tiny_model().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = generate(model, random_ids(2, 4).int(), 0, fast=True)
    assert out.dtype == torch.int32  # n_new = 0 returns the prompt itself, as the plain path does
    generate(model, random_ids(2, 4).int(), 5, fast=True)
    assert model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("kwargs, options, error, message", [
    (dict(fast=True, use_cache=False), {}, ValueError, "use_cache=False"),
    (dict(fast="yes"), {}, TypeError, "fast must be True, False or None"),
    (dict(fast=True), dict(causal=False), ValueError, "causal=False"),
    (dict(fast=True), dict(residual=False), ValueError, "residual=False"),
])
def test_bad_fast_options_are_refused(kwargs, options, error, message):
    model = tiny_model(**options)
    with pytest.raises(error, match=message):
        generate(model, random_ids(1, 3), 2, **kwargs)


# --- training ----------------------------------------------------------------------------

TEXT = ("to be, or not to be, that is the question: whether 'tis nobler in the mind "
        "to suffer the slings and arrows of outrageous fortune. ") * 20


def _run(steps=12, **options):
    train_ids, val_ids = train_val_split(encode(TEXT))
    model = tiny_model()
    cfg = TrainConfig(steps=steps, batch_size=4, block_size=16, lr=3e-3, warmup_steps=2,
                      eval_every=steps, eval_batches=2, **options)
    return model, train(model, train_ids, val_ids, cfg, progress=False)


@pytest.mark.parametrize("adamw", ["foreach", "fused"])
def test_foreach_and_fused_adamw_match_the_plain_run_in_float32(adamw):
    plain_model, plain = _run()
    fast_model, fast = _run(adamw=adamw, autocast="off")
    assert fast.losses == pytest.approx(plain.losses, rel=1e-5, abs=1e-5)
    for (name, a), b in zip(plain_model.named_parameters(), fast_model.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6), f"{name} differs"


def test_autocast_off_is_the_default_run_on_a_cpu():
    assert _run(steps=5, autocast="off")[1].losses == _run(steps=5)[1].losses


def test_bf16_autocast_runs_on_the_cpu_and_learns():
    model, history = _run(steps=30, autocast="bf16", adamw="foreach")
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the weights stay float32
    assert history.val_losses[-1] < history.val_losses[0] - 1.0
    plain = _run(steps=30)[1]
    assert abs(history.val_losses[-1] - plain.val_losses[-1]) < 0.3  # close, not equal: bf16 rounds


@pytest.mark.parametrize("causal", [True, False])
def test_under_cpu_bf16_autocast_attention_itself_runs_in_float32(causal):
    from course_lib.attention import _fused_attention
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 9, 8, generator=gen, requires_grad=True) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inputs = [x.to(torch.bfloat16) for x in (q, k, v)]  # what the bf16 projections give
        got = _fused_attention(*inputs, causal)
    want = torch.nn.functional.scaled_dot_product_attention(
        *[x.float() for x in inputs], is_causal=causal).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)
    got.float().sum().backward()
    assert all(x.grad is not None and x.grad.abs().sum() > 0 for x in (q, k, v))


def test_the_speed_options_show_in_repr_only_when_set():
    assert "autocast" not in repr(TrainConfig()) and "adamw" not in repr(TrainConfig())
    assert "autocast='bf16'" in repr(TrainConfig(autocast="bf16"))
    assert "adamw='fused'" in repr(TrainConfig(adamw="fused"))


@pytest.mark.parametrize("field, value", [("autocast", "fp16"), ("autocast", True),
                                          ("adamw", "fast"), ("adamw", None)])
def test_bad_speed_options_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=f"TrainConfig.{field} must be one of"):
        TrainConfig(**{field: value})


def test_the_time_to_quality_bench_runs_in_quick_mode(capsys):
    import json
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import time_to_quality
    assert time_to_quality.main(["--quick"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["median"]) == {"recipe", "fast"}
    assert out["fast_against_the_recipe"]["time_ratio"] > 0
    assert out["recipe"]["autocast"] == "auto" and out["recipe_model"]["positions"] == "learned"
    # the preset's precision is the one timed on this CPU (once a process), and the bench says why
    settings, _, _, why = cpu_preset()
    assert out["cpu_preset"]["settings"] == settings and out["cpu_preset"]["why"] == why
    assert out["fast"]["autocast"] == ("bf16" if settings == "bf16" else "off")
    assert " ms in bf16 and " in why or why.startswith("forced by COURSE_CPU_BF16=")
    assert isinstance(out["machine"]["cpu_flags"], list)  # the CPU's extensions beside its ratio
    assert out["fast_model"]["positions"] == "rope" and out["measured_on"] == "the validation part"
    assert len(out["machine"]["load_average_before"]) == 3 and out["data"]["slice_sha256"]
    assert time_to_quality.main(["--quick", "--cpu-settings", "float32"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cpu_preset"] == dict(settings="float32", why="chosen by hand", tuned=None,
                                     positions="rope")
    assert out["fast"]["autocast"] == "off"
    assert time_to_quality.main(["--quick", "--fast-steps", "40", "--fast-positions", "learned"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cpu_preset"]["tuned"]["steps"] == 40 and out["fast_model"]["positions"] == "learned"
    assert time_to_quality.main(["--quick", "--dev"]) == 0
    assert json.loads(capsys.readouterr().out)["measured_on"] == "the tuning split (--dev)"


def test_the_lesson06_bench_scores_both_runs_samples(capsys):
    import json
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import time_to_quality
    assert time_to_quality.main(["--quick", "--lesson06"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["before"]["autocast"] == "auto" and out["after"]["adamw"] == "foreach"
    # the lesson's precision, timed on this CPU, and the reason beside it
    assert out["after"]["autocast"] == ("bf16" if out["precision"]["settings"] == "bf16" else "off")
    assert out["precision"]["why"]
    for name in ("before", "after"):
        (result,) = out["runs"][name]
        assert 0 <= result["sample_words_in_corpus"] <= 1 and "model" not in result
        assert 0 < result["sample_loss_under_judge"] < 20


def test_the_train_command_takes_the_speed_options(tmp_path, capsys):
    from course_lib.checkpoint import load_checkpoint
    from course_lib.train import main
    data = tmp_path / "text.txt"
    data.write_text(TEXT)
    args = ["--data", str(data), "--preset", "tiny", "--steps", "3", "--out", str(tmp_path),
            "--no-progress", "--autocast", "bf16", "--adamw", "foreach"]
    assert main(args) == 0
    saved = load_checkpoint(tmp_path / "tinylm.pt")["train_config"]
    assert saved["autocast"] == "bf16" and saved["adamw"] == "foreach"
    with pytest.raises(SystemExit):
        main(args[:-1] + ["fastest"])
    assert "invalid choice: 'fastest'" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_the_gpu_bench_says_when_there_is_no_gpu(capsys):
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import time_to_quality
    assert time_to_quality.main(["--gpu", "--quick"]) == 2
    assert "--gpu needs a CUDA GPU" in capsys.readouterr().err


def test_the_throughput_bench_refuses_unknown_options_and_restores_what_it_patches(capsys):
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import train_throughput
    from course_lib import attention
    assert train_throughput.main(["--fastest"]) == 2
    assert "usage: train_throughput.py [--cpu-bf16]" in capsys.readouterr().err
    original = attention._fused_attention
    with pytest.raises(RuntimeError):
        with train_throughput._patched(attention, "_fused_attention", lambda *a: None):
            assert attention._fused_attention is not original
            raise RuntimeError("a failed measurement")
    assert attention._fused_attention is original


def test_the_lesson06_benchs_judge_scores_every_byte_after_the_prompt_once():
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import time_to_quality
    judge = tiny_model(max_len=8).eval()
    seq = random_ids(1, 30)[0]
    want = []
    with torch.no_grad():  # blocks of max_len / 2 = 4 positions, each after the 8 - 4 before it
        for s in range(5, 30, 4):
            e = min(s + 4, 30)
            lo = max(0, e - 8)
            for p in range(s, e):  # byte p after the bytes lo .. p - 1
                want.append(-torch.log_softmax(judge(seq[lo:p][None])[0, -1], -1)[seq[p]])
    assert len(want) == 25
    got = time_to_quality.judged_loss(judge, seq, 5)
    assert got == pytest.approx(torch.stack(want).mean().item(), rel=1e-5)
    short = seq[:8]
    with torch.no_grad():
        whole = torch.nn.functional.cross_entropy(judge(short[None, :-1])[0], short[1:]).item()
    assert time_to_quality.judged_loss(judge, short, 1) == pytest.approx(whole, rel=1e-5)


@pytest.mark.parametrize("timed, settings, autocast", [((100.0, 60.0), "bf16", "bf16"),
                                                       ((100.0, 95.0), "float32", "off")])
def test_the_cpu_preset_picks_its_settings_by_timing_both(monkeypatch, timed, settings, autocast):
    from course_lib import precision, training
    monkeypatch.delenv("COURSE_CPU_BF16", raising=False)
    monkeypatch.setattr(precision, "update_ms", lambda model_config, configs: list(timed))
    precision._measured.cache_clear()
    try:
        name, model_cfg, cfg, why = training.cpu_preset()
    finally:
        precision._measured.cache_clear()  # later tests time this CPU for real
    assert (name, cfg.autocast) == (settings, autocast)
    assert f"{timed[1]:.1f} ms in bf16 and {timed[0]:.1f} ms in float32" in why
    assert model_cfg.positions == "rope" and cfg.block_size <= model_cfg.max_len
    forced = training.cpu_preset("float32")
    assert forced[0] == "float32" and forced[2].autocast == "off" and forced[3] == "chosen by hand"
    # the two differ only in precision: the same model, steps, batches and schedule
    (m32, c32), (m16, c16) = training.CPU_PRESETS["float32"], training.CPU_PRESETS["bf16"]
    assert (c16.steps, c16.muon_bf16) == (300, True)
    assert m32 == m16 and c32 == replace(c16, autocast="off", muon_bf16=False)
    with pytest.raises(ValueError, match="settings must be 'auto' or one of"):
        training.cpu_preset("fp8")


def test_the_train_command_says_which_cpu_settings_it_picked(tmp_path, capsys):
    from course_lib.checkpoint import load_checkpoint
    from course_lib.train import main
    data = tmp_path / "text.txt"
    data.write_text(TEXT)
    args = ["--data", str(data), "--preset", "cpu", "--steps", "2", "--out", str(tmp_path),
            "--no-progress", "--cpu-settings", "float32"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "preset cpu (float32 settings: chosen by hand)" in out
    assert "Muon for the hidden matrices and AdamW for the rest" in out.splitlines()[0]
    saved = load_checkpoint(tmp_path / "tinylm.pt")
    assert saved["train_config"]["autocast"] == "off" and saved["model_config"]["positions"] == "rope"
    assert main(args[:-1] + ["auto"]) == 0
    settings, _, _, why = training.cpu_preset()  # timed once a process: the command's choice
    assert f"preset cpu ({settings} settings: {why})" in capsys.readouterr().out


def test_the_nanogpt_shaped_reference_scores_the_last_position_with_tied_weights():
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    from nanogpt_reference import NanoGPTShaped
    torch.manual_seed(0)
    ref = NanoGPTShaped(block_size=16, width=32, n_heads=4, n_layers=2).eval()
    assert ref.wte.weight is ref.lm_head.weight
    assert all(m.bias is None for m in ref.modules() if isinstance(m, torch.nn.Linear))
    idx = random_ids(2, 5)
    with torch.no_grad():
        out = ref(idx)
        assert out.shape == (2, 1, 256)
        assert torch.equal(ref(idx[:, :1]), ref(idx[:, :1]))  # no state kept between calls
    with pytest.raises(AssertionError, match="longer than 16"):
        ref(random_ids(1, 17))


def test_the_decode_bench_prints_both_goal_ratios(capsys):
    import json
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import decode
    assert decode.main(["--lengths", "3", "5", "--batches", "1", "--repeats", "1",
                        "--prompt", "4", "--d-model", "32", "--n-layers", "1", "--device", "cpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    goals = out["goals"]
    assert goals["new_tokens"] == 5 and goals["fast_over_nanogpt_forward"] > 0
    assert goals["uncached_over_fast"] > 0 and isinstance(goals["at_most_half"], bool)
    assert all(run["same_tokens"] for run in out["decode"])
    assert len(out["machine"]["load_average_before"]) == 3


def test_the_decode_benchs_tied_layers_share_block_0s_tensors_and_decode_the_same(capsys):
    import json
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import decode
    model = tiny_model(n_layers=3)
    untied = sum(p.numel() for p in model.parameters())
    per_block = sum(p.numel() for p in model.blocks[0].parameters())
    decode.tie_layers(model)
    assert sum(p.numel() for p in model.parameters()) == untied - 2 * per_block
    for block in model.blocks[1:]:
        for (name, mine), (_, first) in zip(block.named_parameters(remove_duplicate=False),
                                            model.blocks[0].named_parameters(remove_duplicate=False)):
            assert mine is first, f"{name} is not block 0's tensor"
    prompt = random_ids(1, 4)
    assert torch.equal(generate(model, prompt, 6, temperature=0),
                       generate(model, prompt, 6, temperature=0, use_cache=False))
    assert decode.main(["--lengths", "3", "--batches", "1", "--repeats", "1", "--prompt", "4",
                        "--d-model", "32", "--n-layers", "2", "--device", "cpu", "--tied-layers"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"]["tied_layers"] is True and all(run["same_tokens"] for run in out["decode"])


def test_the_decode_benchs_compiled_steps_give_the_eager_steps_tokens(monkeypatch, capsys):
    """bench/decode.py --compiled, every way's graph traced or exported as it is for real but
    run without inductor's C++ (which takes minutes on a busy CPU): torch.compile with the
    eager backend, AOTInductor's exported program run as a module. Every way's logits follow
    the eager step's and give its greedy tokens."""
    import os
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import decode
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real(
        fn, **{**kw, "backend": "eager", "options": None}))
    exported = {}

    def package(program, package_path):
        exported[package_path] = program
        return package_path
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", package)
    monkeypatch.setattr(torch._inductor, "aoti_load_package", lambda path: exported[path].module())
    cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # importing torch._inductor may set it
    assert decode.main(["--compiled", "--repeats", "1", "--lengths", "40", "--d-model", "32",
                        "--n-layers", "2", "--prompt", "4", "--steps", "30"]) == 0
    said = json.loads(capsys.readouterr().out)
    ways = {"compile", "compile_cpp_wrapper", "compile_cpp_wrapper_freezing", "compile_static",
            "jit_trace_freeze", "aot_inductor"}
    assert len(exported) == 1 and said["steps"] == 30
    assert set(said["cpu_ms_per_step"]) == ways | {"eager", "nanogpt_forward"}
    assert said["same_greedy_tokens"] == dict.fromkeys(ways, True)
    assert max(said["largest_logit_difference_to_eager"].values()) < 1e-5
    assert said["machine"]["load_average_before"] and "cpu_flags" in said["machine"]
    assert said["inductor_cache"] == "new and empty"
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") == cache_dir  # put back as it was
    assert decode.main(["--compiled", "--ways", "nonsense"]) == 2


@pytest.mark.parametrize("settings", ["float32", "bf16"])
def test_the_profile_bench_splits_both_steps_by_operator_class(settings, capsys):
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import profile_steps
    assert profile_steps.kind("aten::addmm") == profile_steps.kind("aten::mm") == "matmul"
    assert profile_steps.kind("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention"
    assert profile_steps.kind("aten::native_layer_norm") == "other"
    assert profile_steps.main(["--steps", "1", "--decode-steps", "3", "--warmup", "1",
                               "--cpu-settings", settings]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["preset_branch"]["settings"] == settings
    for step in ("training_step", "decode_step"):
        figures = said[step]
        assert sum(figures["ms_by_class"].values()) == pytest.approx(figures["ms_per_step"],
                                                                     abs=0.01)
        assert 0 < figures["share_outside_matrix_products"] < 1
        assert figures["top_operators"][0]["ms_per_step"] > 0
    assert set(said["training_step"]["ms_by_phase"]) == {"forward", "backward", "clip", "update"}
