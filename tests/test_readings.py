"""The words lessons 06, 08 and 09 print about their own measurements, on numbers from machines
of both kinds: the 2-core CPU without bfloat16 instructions whose runs are saved in notebooks/
(peak 12.9 GFLOP/s, bandwidth 3.1 GB/s, attention at 32.5 GFLOP/s in the same run), and the
CPUs with them that docs/benchmarks.md measured (peak 64.5 and 85.7 GFLOP/s, bandwidth 3.8 GB/s).
"""
import pytest

from course_lib import readings

NO_BF16 = dict(peaks=[12.9e9, 13.0e9, 13.7e9], bandwidth=3.1e9, attention=32.5e9)
WITH_BF16 = dict(peaks=[85.7e9, 64.5e9, 80.0e9], bandwidth=3.8e9, attention=40.0e9)


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


@pytest.mark.parametrize("machine", [NO_BF16, WITH_BF16], ids=["no-bf16", "bf16"])
def test_decode_is_left_and_prefill_right_of_the_balance_point_on_both_machines(machine):
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
