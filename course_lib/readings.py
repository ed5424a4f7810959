"""What a measurement on this machine shows, in words chosen from its own numbers.

A lesson that times or trains something on the learner's machine cannot know the numbers in
advance: a CPU with bfloat16 instructions, a busy machine or a GPU changes them. So a sentence
that reads a measurement is printed by the cell from the numbers it measured, with the words
chosen here, and tests/test_readings.py checks the words on numbers from machines of both kinds.
Lessons 06, 08 and 09 use it.
"""
import math


def _positive(name, value):
    """value as a float, or a ValueError that says what arrived."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}; pass the "
                         f"measured figure (a time, a rate or a loss), not a ratio of zero")
    return float(value)


def ratio_words(ratio):
    """A ratio as words for "took ___ the time": "about the same as", "1.5 times", "0.74 times"."""
    ratio = _positive("ratio", ratio)
    if 0.9 <= ratio <= 1.1:
        return "about the same as"
    return f"{ratio:.1f} times" if ratio > 1 else f"{ratio:.2f} times"


def share(part, whole):
    """How `part` compares with `whole` (two positive amounts) as "___ the baseline's".

    "less than half as much as", "about half as much as", "less than", "about as much as",
    "more than". The bands: below 0.45, 0.45 to 0.55, to 0.9, to 1.1, above.
    """
    if isinstance(part, bool) or not isinstance(part, (int, float)) or not math.isfinite(part):
        raise ValueError(f"part must be a finite number, got {part!r}")
    ratio = part / _positive("whole", whole)
    if ratio < 0.45:
        return "less than half as much as"
    if ratio <= 0.55:
        return "about half as much as"
    if ratio < 0.9:
        return "less than"
    if ratio <= 1.1:
        return "about as much as"
    return "more than"


def roofline_side(intensity, balance):
    """Where an arithmetic intensity sits against the machine's balance point, and what bounds it.

    Returns e.g. "far left of the balance point (0.12 of it): bandwidth-bound". Far means a
    factor of 4 or more away.
    """
    ratio = _positive("intensity", intensity) / _positive("balance", balance)
    side = "left" if ratio < 1 else "right"
    far = "far " if ratio <= 0.25 or ratio >= 4 else ""
    bound = "bandwidth-bound" if ratio < 1 else "compute-bound"
    return f"{far}{side} of the balance point ({ratio:.2g} of it): {bound}"


def peak_reading(peaks, fastest=None, fastest_what="another operation"):
    """What repeated measurements of the matmul "peak" support, in one or two sentences.

    peaks: the rates (FLOP/s) one float32 product reached, measured at several moments of a run.
    fastest: the highest rate any other operation of the same run reached, if known. A peak
    measured on a shared machine is the best rate that one product reached then: a floor on
    what the core can do, not its ceiling, and a rate above it shows that it was measured low.
    """
    peaks = [_positive("each peak", p) for p in peaks]
    if not peaks:
        raise ValueError("peaks is empty; pass the rate of at least one matmul measurement")
    low, high = min(peaks), max(peaks)
    said = (f"the matmul 'peak' measured {len(peaks)} time{'s' if len(peaks) > 1 else ''}: "
            f"{low / 1e9:.1f} to {high / 1e9:.1f} GFLOP/s ({high / low:.2f}x from lowest to highest)")
    if fastest is not None and _positive("fastest", fastest) > high:
        said += (f"; {fastest_what} reached {fastest / 1e9:.1f} GFLOP/s, {fastest / high:.1f}x "
                 f"the highest of them, so the 'peak' was measured low (other work on the "
                 f"machine, or a product shape this core is not fastest at): it is a floor on "
                 f"what this core can do, not its ceiling")
    return said


def mfu_reading(achieved, peaks):
    """The MFU of a run against several peak measurements, and what it can and cannot support.

    achieved: the FLOP/s the run's tokens needed; peaks: the matmul rates measured in the run.
    """
    achieved = _positive("achieved", achieved)
    peaks = [_positive("each peak", p) for p in peaks]
    if not peaks:
        raise ValueError("peaks is empty; pass the rate of at least one matmul measurement")
    low, high = achieved / max(peaks), achieved / min(peaks)
    said = f"MFU against the measured peak: {low:.0%} to {high:.0%}"
    if high > 1:
        said += (" (over 100%, which no run can reach against the real peak: a peak "
                 "measurement was slowed by other work more than the training was, so only the "
                 "order of magnitude of this MFU holds)")
    elif high / low > 1.25:
        said += (f" (the peak moved {high / low:.2f}x within the run, so the MFU is known only "
                 f"to within that range)")
    else:
        said += (" (below 100% against every peak measurement: the formula does not count the "
                 "norms, the softmax, the optimizer or Python, which take time all the same)")
    return said


def seed_verdict(differences, spread):
    """A swap's verdict from its per-seed differences to the baseline run of the same seed.

    differences: variant loss - baseline loss, one per seed (lower is better);
    spread: the baseline's own standard deviation across seeds.
    """
    diffs = [float(d) for d in differences]
    if not diffs or not all(math.isfinite(d) for d in diffs):
        raise ValueError(f"differences must be finite numbers, one per seed, got {differences!r}")
    spread = _positive("spread", spread)
    lower, n, mean = sum(d < 0 for d in diffs), len(diffs), sum(diffs) / len(diffs)
    if lower == n:
        return f"lower than the baseline for every seed, by {-mean:.3f} on average"
    if lower == 0:
        return f"higher than the baseline for every seed, by {mean:.3f} on average"
    if abs(mean) < spread:
        return (f"within the noise: lower for {lower} of {n} seeds, {mean:+.3f} on average, "
                f"less than the baseline's own spread across seeds ({spread:.3f})")
    return (f"mixed: lower for {lower} of {n} seeds, {mean:+.3f} on average, more than the "
            f"baseline's own spread across seeds ({spread:.3f})")


def gap_closed(gap, closed):
    """How much of a loss gap a change closed: "closed none of", "closed part of", ...

    gap: how far the variant ended above the baseline (nats); closed: how much lower the
    changed variant ended than the unchanged one (nats, negative when it ended higher).
    """
    if not math.isfinite(gap) or not math.isfinite(closed):
        raise ValueError(f"gap and closed must be finite numbers, got {gap!r} and {closed!r}")
    if gap <= 0:
        return "had no gap to close (the variant did not end above the baseline)"
    fraction = closed / gap
    if fraction < 0.1:
        return f"closed none of the gap ({closed:+.3f} of {gap:.3f} nats)"
    if fraction < 0.5:
        return f"closed part of the gap ({closed:+.3f} of {gap:.3f} nats)"
    if fraction < 0.9:
        return f"closed most of the gap ({closed:+.3f} of {gap:.3f} nats)"
    return f"closed the gap ({closed:+.3f} of {gap:.3f} nats)"


def bf16_arithmetic(has_bf16):
    """What course_lib.device.cpu_has_bf16() means for a bfloat16 matrix product on this CPU."""
    if not isinstance(has_bf16, bool):
        raise TypeError(f"has_bf16 must be True or False (course_lib.device.cpu_has_bf16()), "
                        f"got {has_bf16!r}")
    if has_bf16:
        return ("this CPU has bfloat16 instructions (AVX512-BF16): its kernels multiply "
                "bfloat16 numbers as they are")
    return ("this CPU lacks bfloat16 instructions (AVX512-BF16): its kernels widen each "
            "bfloat16 number to float32 before they multiply it")


def gpu_prediction(measured, predicted, what):
    """A CPU measurement set beside what a GPU's roofline predicts, e.g. 0.5x for bfloat16.

    Close means within 25% of the prediction.
    """
    measured, predicted = _positive("measured", measured), _positive("predicted", predicted)
    close = abs(measured / predicted - 1) <= 0.25
    verdict = "close to" if close else "far from"
    return f"{what}: {measured:.2f}x, {verdict} the {predicted:g}x a GPU's roofline predicts"


def causal_saving(causal_seconds, full_seconds):
    """Whether a causal attention call took visibly less time than the unmasked one."""
    ratio = _positive("causal_seconds", causal_seconds) / _positive("full_seconds", full_seconds)
    if ratio <= 0.75:
        return (f"the causal call took {ratio:.2f}x the unmasked call's time: the kernel skips "
                f"the key blocks the mask hides (about 0.5x would mean it skips all of them)")
    if ratio <= 0.9:
        return (f"the causal call took {ratio:.2f}x the unmasked call's time: somewhat less, "
                f"though skipping every hidden key block would give about 0.5x (other work on "
                f"the machine blurs timings this short)")
    return (f"the causal call took {ratio:.2f}x the unmasked call's time: at this length, on "
            f"this machine, skipping the hidden key blocks did not show (other work on the "
            f"machine, or a kernel that computes them all)")
