"""Pick the device the notebooks run on, and how many CPU threads torch uses."""
import os

import torch


def cpu_threads():
    """How many threads torch should use on the CPU: COURSE_THREADS, else OMP_NUM_THREADS, else 1.

    Why one by default: the course's models are small, so a second thread gains little even on a
    quiet machine, and when other programs keep the cores busy, threads that wait for each other
    stall. Lesson 03's training took 2.7 s on one thread and 46 s on torch's default two on a
    2-core machine with other work running (measured 2026-11-30, torch 2.13).
    """
    for name in ("COURSE_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{name}={value!r} should be a whole number of threads, 1 or more; "
                                 f"e.g. {name}=2, or unset it to use one thread")
            return int(value)
    return 1


def use_cpu_threads():
    """Set torch's number of CPU threads by cpu_threads().

    Returns None, so that a notebook cell ending with this call shows nothing.
    """
    n = cpu_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def cpu_has_bf16():
    """Whether this CPU multiplies bfloat16 numbers natively (the AVX512-BF16 instructions).

    There, training with TrainConfig(autocast="bf16") is faster than float32 (lesson 06;
    bench/time_to_quality.py measures it); elsewhere torch emulates bf16, and it is slower.
    """
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)  # torch's own CPU probe
    return bool(probe()) if probe is not None else False


def pick_device(verbose=True):
    """The best available device: CUDA, then Apple's MPS, then the CPU.

    Set the environment variable COURSE_DEVICE (e.g. COURSE_DEVICE=cpu) to choose by hand.
    It also sets the number of CPU threads torch uses (use_cpu_threads: one unless COURSE_THREADS
    or OMP_NUM_THREADS says otherwise), so every lesson that picks a device gets it.
    """
    use_cpu_threads()
    chosen = os.environ.get("COURSE_DEVICE")
    if chosen:
        device = torch.device(chosen)
        reason = "chosen by COURSE_DEVICE"
    elif torch.cuda.is_available():
        device = torch.device("cuda")
        reason = f"CUDA GPU: {torch.cuda.get_device_name(0)}"
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
        reason = "Apple GPU through MPS"
    else:
        device = torch.device("cpu")
        reason = "no CUDA or MPS GPU found"
    if verbose:
        print(f"Using device {device.type} ({reason})")
    return device
