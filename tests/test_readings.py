"""The words lessons 06, 08 and 09 print about their own measurements, on numbers from machines
of both kinds: a 2-core CPU without bfloat16 instructions on which the lessons were saved before
(peak 12.9 GFLOP/s, bandwidth 3.1 GB/s, attention at 32.5 GFLOP/s in the same run);
the CPUs with them that docs/benchmarks.md measured (peak 64.5 and 85.7 GFLOP/s, bandwidth
3.8 GB/s); and the 2-core AMD EPYC with AVX512-BF16 on which the lessons in notebooks/ are saved
now (lesson 09's run: peak 89.0 to 96.7 GFLOP/s, bandwidth 14.4 GB/s, attention at up to
56.6 GFLOP/s).
"""
import pytest

from course_lib import readings

NO_BF16 = dict(peaks=[12.9e9, 13.0e9, 13.7e9], bandwidth=3.1e9, attention=32.5e9)
WITH_BF16 = dict(peaks=[85.7e9, 64.5e9, 80.0e9], bandwidth=3.8e9, attention=40.0e9)
SAVED = dict(peaks=[89.0e9, 96.7e9], bandwidth=14.4e9, attention=56.6e9)


def test_ratio_words_says_about_the_same_only_within_a_tenth():
    assert readings.ratio_words(1.0) == readings.ratio_words(1.09) == "about the same as"
    assert readings.ratio_words(1.54) == "1.5 times"           # lesson 09's prefill, 727 / 472 ms
    assert readings.ratio_words(0.74) == "0.74 times"
    assert readings.ratio_words(1.2) == "1.2 times"
    with pytest.raises(ValueError, match="positive finite number, got 0"):
        readings.ratio_words(0)


@pytest.mark.parametrize("part, whole, words", [
    (0.075, 0.181, "less than half as much as"),      # lesson 08: quiet SwiGLU against baseline
    (0.096, 0.181, "about half as much as"),          # the loud start: 0.53 of it, not "less"
    (0.14, 0.181, "less than"),
    (0.18, 0.181, "about as much as"),
    (0.25, 0.181, "more than"),
    (-0.01, 0.181, "less than half as much as"),      # a loss that rose fell "less than half"
])
def test_share_picks_the_band_of_the_ratio(part, whole, words):
    assert readings.share(part, whole) == words


def test_share_refuses_a_whole_that_is_not_positive():
    with pytest.raises(ValueError, match="whole must be a positive"):
        readings.share(0.1, 0.0)


@pytest.mark.parametrize("machine", [NO_BF16, WITH_BF16, SAVED], ids=["no-bf16", "bf16", "saved"])
def test_decode_is_left_and_prefill_right_of_the_balance_point_on_every_machine(machine):
    balance = max(machine["peaks"]) / machine["bandwidth"]
    decode = readings.roofline_side(0.5, balance)
    prefill = readings.roofline_side(227.6, balance)
    assert decode.startswith("far left of the balance point") and decode.endswith("bandwidth-bound")
    assert prefill.startswith("far right of the balance point") and prefill.endswith("compute-bound")


def test_roofline_side_says_far_only_a_factor_of_four_away():
    assert readings.roofline_side(3.9, 4.4).startswith("left of")       # batch-8 decode, 0.89
    assert readings.roofline_side(28.4, 4.4).startswith("far right of")
    assert readings.roofline_side(10.0, 4.4).startswith("right of")
    assert "(0.5 of it)" in readings.roofline_side(2.0, 4.0)


def test_peak_reading_says_the_peak_was_measured_low_when_attention_beat_it():
    said = readings.peak_reading(NO_BF16["peaks"], NO_BF16["attention"], "attention at T = 128")
    assert "12.9 to 13.7 GFLOP/s" in said and "1.06x" in said
    assert "attention at T = 128 reached 32.5 GFLOP/s, 2.4x" in said and "floor" in said
    # with bfloat16 instructions the peak is high and nothing in the run beats it
    said = readings.peak_reading(WITH_BF16["peaks"], WITH_BF16["attention"])
    assert "64.5 to 85.7 GFLOP/s" in said and "measured low" not in said
    said = readings.peak_reading(SAVED["peaks"], SAVED["attention"])
    assert "89.0 to 96.7 GFLOP/s (1.09x" in said and "measured low" not in said


def test_mfu_reading_names_each_case():
    over = readings.mfu_reading(14e9, [13e9, 34e9])                   # 41% to 108%
    assert over.startswith("MFU against the measured peak: 41% to 108%") and "over 100%" in over
    spread = readings.mfu_reading(6.1e9, [12.9e9, 20e9])
    assert "moved 1.55x" in spread and "over 100%" not in spread
    steady = readings.mfu_reading(6.1e9, NO_BF16["peaks"])               # 45% to 47%
    assert "45% to 47%" in steady and "below 100% against every" in steady
    with_bf16 = readings.mfu_reading(51e9, WITH_BF16["peaks"])          # 0.60 of 85.7, docs
    assert "60% to 79%" in with_bf16 and "moved 1.33x" in with_bf16
    with pytest.raises(ValueError, match="peaks is empty"):
        readings.mfu_reading(1e9, [])


@pytest.mark.parametrize("diffs, spread, start", [
    ([-0.502, -0.144, -0.175], 0.199, "lower than the baseline for every seed, by 0.274"),   # RoPE
    ([0.111, 0.419, 0.485], 0.199, "higher than the baseline for every seed, by 0.338"),     # SwiGLU
    ([0.064, 0.007, -0.002], 0.199, "within the noise: lower for 1 of 3 seeds, +0.023"),     # RMSNorm
    ([-0.348, 0.030, 0.032], 0.199, "within the noise: lower for 1 of 3 seeds, -0.095"),     # GQA
    ([-0.9, 0.01, 0.02], 0.199, "mixed: lower for 1 of 3 seeds, -0.290"),
])
def test_seed_verdict_reads_lesson_08s_table(diffs, spread, start):
    assert readings.seed_verdict(diffs, spread).startswith(start)


@pytest.mark.parametrize("gap, closed, start", [
    (0.338, -0.000, "closed none of the gap"),
    (0.338, 0.1, "closed part of the gap"),
    (0.338, 0.25, "closed most of the gap"),
    (0.338, 0.33, "closed the gap"),
    (-0.02, 0.01, "had no gap to close"),
])
def test_gap_closed(gap, closed, start):
    assert readings.gap_closed(gap, closed).startswith(start)


def test_bf16_arithmetic_follows_cpu_has_bf16_either_way(monkeypatch):
    from course_lib.device import cpu_has_bf16
    for forced, word in (("1", "has"), ("0", "lacks")):
        monkeypatch.setenv("COURSE_CPU_BF16", forced)
        said = readings.bf16_arithmetic(cpu_has_bf16())
        assert said.startswith(f"this CPU {word} bfloat16 instructions")
    assert "widen" in readings.bf16_arithmetic(False) and "widen" not in readings.bf16_arithmetic(True)
    with pytest.raises(TypeError, match="True or False"):
        readings.bf16_arithmetic("AVX512")


def test_gpu_prediction_is_close_only_within_a_quarter():
    assert readings.gpu_prediction(0.74, 0.5, "bf16").startswith("bf16: 0.74x, far from the 0.5x")
    assert "close to the 0.5x" in readings.gpu_prediction(0.55, 0.5, "bf16")
    assert "far from the 1x" in readings.gpu_prediction(2.4, 1, "batch 4")
    assert "close to the 1x" in readings.gpu_prediction(1.2, 1, "batch 4")


def test_causal_saving_reads_both_kinds_of_run():
    assert "skips the key blocks" in readings.causal_saving(0.61, 1.0)
    assert "did not show" in readings.causal_saving(36.03, 36.86)
    partly = readings.causal_saving(6.97, 8.99)                 # 0.78x, a run at load 7
    assert "somewhat less" in partly and "did not show" not in partly


# Lessons 06 and 07 on a CPU and on a GPU. The GPU figures are the H200 run of issue 46
# (lesson 06's old gpu preset: 5.518 at step 0, 1.628 at step 2,000; lesson 07: 1.55 to
# 1.65 ms a token for both loops); the CPU figures are a run of lesson 06 saved in notebooks/.
CPU_RUN = dict(eval_steps=[0, 40, 80, 120, 160], val_losses=[5.583, 2.828, 2.648, 2.602, 2.583])
GPU_RUN = dict(eval_steps=[0, 200, 400, 2000], val_losses=[5.518, 2.512, 2.101, 1.628])
LN_V, BASELINE = 5.5452, 3.330


def test_start_milestone_reads_a_run_that_starts_above_ln_256():
    said = readings.start_milestone(**CPU_RUN, ln_v=LN_V, baseline=BASELINE)
    assert said.startswith("the untrained model scored 5.583 at step 0, about ln 256 = 5.545")
    assert "below it by step 40, the first evaluation after step 0" in said
    assert said.endswith("baseline (3.330) was first beaten at step 40")


def test_start_milestone_reads_a_run_already_below_ln_256_at_step_0():
    said = readings.start_milestone(**GPU_RUN, ln_v=LN_V, baseline=BASELINE)
    assert said.startswith("the untrained model already scored 5.518 at step 0, a hair below")
    assert "passing it means nothing here" in said and "first beaten at step 200" in said
    assert "first evaluation after step 0" not in said


def test_start_milestone_says_when_a_line_was_not_passed():
    said = readings.start_milestone([0, 10, 20], [5.6, 5.58, 5.5], LN_V, BASELINE)
    assert "below it by step 20;" in said and "not beaten in this run" in said
    said = readings.start_milestone([0, 10], [5.6, 5.58], LN_V, BASELINE)
    assert "never went below it" in said
    with pytest.raises(ValueError, match="from step 0 on"):
        readings.start_milestone([10, 20], [5.0, 4.0], LN_V, BASELINE)


def test_memorising_reads_the_cpu_runs_gaps_as_none():
    gaps = [(40, -0.006), (80, 0.035), (120, 0.058), (160, 0.062)]
    said = readings.memorising(gaps, 0.084, 0.075)
    assert said.startswith("at every evaluation the validation loss was within 0.062 nats")
    assert "after reading 7.5% of the training text's length" in said
    assert said.endswith("no sign of memorising")


def test_memorising_reads_a_long_runs_gap_as_memorising_and_dropouts_as_its_handicap():
    grown = [(250, 0.01), (1000, 0.08), (2000, 0.26)]
    said = readings.memorising(grown, 0.03, 7.5, dropout=0.2)
    assert "by step 2000 the validation loss was 0.260 nats above" in said
    assert "the training text 7.5 times over" in said and "begun to memorise" in said
    below = [(250, -0.05), (2000, -0.24)]
    said = readings.memorising(below, 0.03, 7.5, dropout=0.2)
    assert "0.240 nats below" in said and "dropout on (0.2" in said
    assert "no sign of memorising" in said
    assert "easier for this model" in readings.memorising(below, 0.03, 7.5)
    with pytest.raises(ValueError, match="finite"):
        readings.memorising([(10, float("nan"))], 0.03, 1.0)


@pytest.mark.parametrize("args, words", [
    ((1.61, "cpu", True), "the run trains in bf16 on this CPU: bf16 matrix products and the "
                          "foreach update trained 1.61x"),
    ((1.02, "cpu", True), "less than CPUs where bf16 pays have given elsewhere"),
    ((0.98, "cpu", False), "trains in float32 on this CPU, so only the foreach update differs"),
    ((1.70, "cuda", False), "launching kernels and waiting for the GPU"),
    ((1.03, "cuda", False), "made little difference here"),
    ((1.2, "mps", False), "on this mps device the run's settings trained 1.20x"),
])
def test_speed_settings_reads_each_kind_of_device(args, words):
    said = readings.speed_settings(*args)
    assert words in said and "either way" not in said


def test_speed_settings_warns_of_a_busy_machine():
    assert "could have come out either way" in readings.speed_settings(1.3, "cpu", True, 5.0, 2)
    assert "either way" not in readings.speed_settings(1.3, "cpu", True, 1.5, 2)


def test_climb_reads_a_cpu_run_and_a_gpu_run():
    cpu = readings.climb(8.9, 1.1)  # the saved run: 1.98 -> 17.60 ms, 1.38 -> 1.54 ms
    assert "8.9x" in cpu and "so it climbs" in cpu and "so it does not" in cpu
    gpu = readings.climb(1.65 / 1.55, 1.6 / 1.55)  # the H200's
    assert "neither climbed much" in gpu and "in parallel" in gpu


def test_cache_payoff_reads_batch_1_on_a_cpu_and_a_batch_sweep_on_a_gpu():
    cpu = readings.cache_payoff([(1, 0.0176, 0.0014)], 4.0, capped=False)
    assert "12.6x a cached one" in cpu and "from the start" in cpu
    rows = [(1, 1.6e-3, 1.5e-3), (2, 1.6e-3, 1.5e-3), (64, 2.4e-3, 1.5e-3), (512, 7.5e-3, 1.6e-3)]
    gpu = readings.cache_payoff(rows, 4.0, capped=False)
    assert gpu.startswith("at batch 1 an uncached step took 1.1x a cached one; at batch 512, 4.7x")
    assert "(the uncached step 4.7x its batch-1 time, the cached one 1.1x)" in gpu
    assert "the work the cache saves is time saved" in gpu
    small = readings.cache_payoff(rows[:3], 4.0, capped=True)
    assert "up to batch 64, the largest this device's memory" in small
    assert "stayed below 4x" in small


def test_same_logits_and_gelu_kernels_name_what_was_found():
    assert readings.same_logits(True, 0.0, "cpu") == "bit for bit equal at every step"
    said = readings.same_logits(False, 3e-7, "cuda")
    assert "within 3.0e-07" in said and "not bit for bit" in said and "cuda device" in said
    assert "cost 4.0x torch's own" in readings.gelu_kernels(14.1, 3.5, 512)
    assert "the cheaper one here (0.67x" in readings.gelu_kernels(2.0, 3.0, 512)
    assert "about the same either way" in readings.gelu_kernels(3.0, 3.1, 512)


def test_decode_loop_says_which_loop_ran_and_why_not_a_compiled_one():
    said = readings.decode_loop(None, "cpu")
    assert "ran its fast loop eagerly" in said and "has a C++ compiler" in said
    said = readings.decode_loop("torch.compile needs a C++ compiler on a CPU and none was found "
                                "(set CXX, or install g++ or clang++)", "cpu")
    assert "cannot compile a step at all (torch.compile needs a C++ compiler" in said
    assert "on cuda no compiled step has been measured" in readings.decode_loop(None, "cuda")
