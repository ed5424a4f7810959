"""What a measurement on this machine shows, in words chosen from its own numbers.

A lesson that times or trains something on the learner's machine cannot know the numbers in
advance: a CPU with bfloat16 instructions, a busy machine or a GPU changes them. So a sentence
that reads a measurement is printed by the cell from the numbers it measured, with the words
chosen here, and tests/test_readings.py checks the words on numbers from machines of both kinds.
Lessons 06, 07, 08 and 09 use it.
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
                f"though skipping every hidden key block would give about 0.5x (the kernel "
                f"skipped some of the hidden key blocks, not all: how many depends on the CPU "
                f"and the kernel PyTorch picks, more than on the machine's load)")
    return (f"the causal call took {ratio:.2f}x the unmasked call's time: at this length, on "
            f"this machine, skipping the hidden key blocks did not show (a kernel that computes "
            f"them all, or calls too short to tell apart)")


# ---------------------------------------------------------------------------
# Lessons 06 and 07: what a run or a timing showed, on a CPU or a GPU
# ---------------------------------------------------------------------------

def start_milestone(eval_steps, val_losses, ln_v, baseline):
    """Lesson 06: where a run's validation loss stood against ln V (guessing evenly) and the
    byte-frequency baseline, read from the run's own evaluations (step 0 first)."""
    if len(eval_steps) != len(val_losses) or len(eval_steps) < 2 or eval_steps[0] != 0:
        raise ValueError(f"pass the run's evaluations from step 0 on, at least two: got steps "
                         f"{list(eval_steps)!r} and {len(val_losses)} losses")
    ln_v, baseline = _positive("ln_v", ln_v), _positive("baseline", baseline)
    first, later = val_losses[0], list(zip(eval_steps[1:], val_losses[1:]))
    below_v = [s for s, v in later if v < ln_v]
    if first >= ln_v:
        said = (f"the untrained model scored {first:.3f} at step 0, about ln 256 = {ln_v:.3f}")
        said += (f", and was below it by step {below_v[0]}"
                 + (", the first evaluation after step 0" if below_v[0] == eval_steps[1] else "")
                 if below_v else ", and never went below it")
    else:
        said = (f"the untrained model already scored {first:.3f} at step 0, a hair below "
                f"ln 256 = {ln_v:.3f}: small random weights score the bytes almost, not "
                f"exactly, alike, which can land a little above ln 256 or a little below, so "
                f"passing it means nothing here")
    below_f = [s for s, v in later if v < baseline]
    said += (f"; the byte-frequency baseline ({baseline:.3f}) was first beaten at step "
             f"{below_f[0]}" if below_f else
             f"; the byte-frequency baseline ({baseline:.3f}) was not beaten in this run")
    return said


def memorising(gaps, scatter, times_read, dropout=0.0):
    """Lesson 06: what the gaps between the validation loss and the training loss around the
    same steps say. gaps: (step, validation - training) for each evaluation after step 0;
    scatter: the training loss's own step-to-step scatter; times_read: the training text's
    length trained on, as a multiple of it (0.075 for 7.5%); dropout: the model's."""
    gaps = [(int(s), float(g)) for s, g in gaps]
    if not gaps or not all(math.isfinite(g) for _, g in gaps):
        raise ValueError(f"gaps must be finite (step, gap) pairs, at least one, got {gaps!r}")
    scatter = _positive("scatter", scatter)
    times_read = _positive("times_read", times_read)
    read = (f"{times_read:.1%} of the training text's length" if times_read < 1
            else f"the training text {times_read:.1f} times over")
    worst = max(abs(g) for _, g in gaps)
    step, last = gaps[-1]
    if worst < 0.2:
        return (f"at every evaluation the validation loss was within {worst:.3f} nats of the "
                f"training loss around it (the training loss scatters by {scatter:.3f} from one "
                f"batch to the next): after reading {read}, the model does about as well on "
                f"text it never read as on the text it trains on, no sign of memorising")
    if last > 0:
        return (f"by step {step} the validation loss was {last:.3f} nats above the training "
                f"loss around it, more than the training loss's scatter ({scatter:.3f}): after "
                f"reading {read}, the model does better on the text it trains on than on text "
                f"it never read; it has begun to memorise"
                + (" (and the training loss, measured with dropout on, flatters it less than "
                   "it would without)" if dropout else ""))
    if dropout:
        return (f"by step {step} the validation loss was {-last:.3f} nats below the training "
                f"loss around it: the training loss is measured with dropout on ({dropout:g} of "
                f"each sublayer's output zeroed), a handicap the validation loss, measured "
                f"without it, does not carry; no sign of memorising after reading {read}")
    return (f"by step {step} the validation loss was {-last:.3f} nats below the training loss "
            f"around it, more than the training loss's scatter ({scatter:.3f}): the validation "
            f"text is easier for this model than the training text; no sign of memorising "
            f"after reading {read}")


def speed_settings(ratio, device_type, bf16, load=None, cores=None):
    """Lesson 06: what this lesson's training settings bought against plain float32 with
    AdamW's loop, from their measured ratio of tokens per second on this device; `bf16` is
    whether the run trains in bf16 here (on a CPU, as course_lib.precision timed it)."""
    ratio = _positive("ratio", ratio)
    if device_type == "cuda":
        said = (f"on this GPU, the run's settings (float32 on TF32 units, AdamW's fused update, "
                f"the loss read back only every few hundred steps) trained {ratio:.2f}x the "
                f"tokens per second of plain float32 (AdamW's default update, the loss read "
                f"back every step)")
        said += (": a step of this size is bound by launching kernels and waiting for the GPU, "
                 "and the settings do less of both" if ratio > 1.1 else
                 ": at this size they made little difference here")
    elif device_type != "cpu":
        said = (f"on this {device_type} device the run's settings trained {ratio:.2f}x the "
                f"tokens per second of plain float32 with AdamW's default update")
    elif bf16:
        said = (f"the run trains in bf16 on this CPU: bf16 matrix products and the foreach "
                f"update trained {ratio:.2f}x the tokens per second of plain float32")
        if ratio <= 1.1:
            said += (", less than CPUs where bf16 pays have given elsewhere (1.5x and more, "
                     "docs/benchmarks.md)")
    else:
        said = (f"the run trains in float32 on this CPU, so only the foreach update differs from "
                f"plain float32: {ratio:.2f}x its tokens per second"
                + (", about the same" if 0.9 <= ratio <= 1.1 else ""))
    if load is not None and cores and math.isfinite(load) and load > cores:
        said += (f"; the load average ({load:.1f}) was above the number of logical CPUs "
                 f"({cores}), so other programs slowed these short timings unevenly and the "
                 f"ratio could have come out either way")
    return said


def climb(uncached, cached):
    """Lesson 07: how the time per token grew from the first 8 generated tokens to the last 8,
    without the cache (`uncached`, a ratio) and with it (`cached`)."""
    uncached, cached = _positive("uncached", uncached), _positive("cached", cached)
    figures = (f"without the cache the time per token went {uncached:.1f}x from the first 8 "
               f"tokens to the last 8, with it {cached:.1f}x")
    if uncached > 2 * cached:
        return (f"{figures}: uncached, each step pays for every position of its prefix, so it "
                f"climbs; cached, a step pays for one new position, so it does not")
    return (f"{figures}: neither climbed much. Here a step of this tiny model costs about its "
            f"fixed cost whatever its prefix: the device does the uncached loop's extra "
            f"positions in parallel, in time the step spends anyway (section 4 goes on to give "
            f"a step more work)")


def cache_payoff(rows, goal, capped):
    """Lesson 07: what the cache saved as the batch grew. rows: (batch, uncached step seconds,
    cached step seconds), batch doubling; goal: the ratio looked for; capped: whether the
    batch stopped at the device's memory or time limit before reaching it."""
    rows = [(int(b), _positive("uncached", u), _positive("cached", c)) for b, u, c in rows]
    if not rows:
        raise ValueError("rows is empty; pass at least the batch-1 measurement")
    goal = _positive("goal", goal)
    b0, u0, c0 = rows[0]
    b, u, c = rows[-1]
    if len(rows) == 1 and u / c >= goal:
        return (f"at batch {b0} an uncached step took {u0 / c0:.1f}x a cached one: on this "
                f"device the prefix's work outweighs a step's fixed cost from the start")
    said = (f"at batch {b0} an uncached step took {u0 / c0:.1f}x a cached one; at batch {b}, "
            f"{u / c:.1f}x (the uncached step {u / u0:.1f}x its batch-{b0} time, the cached one "
            f"{c / c0:.1f}x)")
    if u / c >= goal:
        return (f"{said}: once a step carries enough work to keep the device busy, the work "
                f"the cache saves is time saved")
    why = "this device's memory or the cell's time limit" if capped else "the batches tried"
    return (f"{said}: up to batch {b}, the largest {why} allowed, the cache's saving stayed "
            f"below {goal:g}x; a wider model or a longer prefix puts more work in each step")


def same_logits(bit_equal, max_diff, device_type):
    """Lesson 07: how a fast decode step's logits compared with the readable step's."""
    if bit_equal:
        return "bit for bit equal at every step"
    if not math.isfinite(max_diff) or max_diff < 0:
        raise ValueError(f"max_diff must be a finite number >= 0, got {max_diff!r}")
    return (f"equal to within {max_diff:.1e} at every step, not bit for bit: on this "
            f"{device_type} device the two paths' kernels round differently")


def gelu_kernels(onednn_us, torch_us, size):
    """Lesson 07: oneDNN's exact GELU against torch's own CPU kernel, timed at one size."""
    onednn_us, torch_us = _positive("onednn_us", onednn_us), _positive("torch_us", torch_us)
    ratio = onednn_us / torch_us
    if ratio > 1.1:
        verdict = f"oneDNN's call cost {ratio:.1f}x torch's own"
    elif ratio < 0.9:
        verdict = (f"oneDNN's call was the cheaper one here ({ratio:.2f}x torch's), so turning "
                   f"it off saves nothing on this CPU at this size")
    else:
        verdict = "about the same either way"
    return (f"a GELU of {size} numbers, a decode step's, took {onednn_us:.1f} us through oneDNN "
            f"and {torch_us:.1f} us through torch's own kernel: {verdict}")


def decode_loop(cannot_compile_why, device_type):
    """Lesson 07: which decode loop `generate` ran here, and why it was not a compiled one.

    cannot_compile_why is course_lib.device.cannot_compile(device): None where torch.compile
    could build kernels for the device, else the reason it cannot.
    """
    ran = "generate ran its fast loop eagerly, one torch call after another (FastDecoder)"
    if device_type != "cpu":
        return (f"{ran}: on {device_type} no compiled step has been measured yet, so generate "
                f"does not compile one")
    if cannot_compile_why:
        return (f"{ran}: this machine cannot compile a step at all "
                f"({cannot_compile_why[0].lower() + cannot_compile_why[1:]})")
    return (f"{ran}: this machine has a C++ compiler, so a compiled step could be built here, "
            f"but on a CPU none of the ways measured pays for its build within a lesson "
            f"(below)")
