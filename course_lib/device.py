"""Pick the device the notebooks run on, check that it computes what the CPU computes, and
how many CPU threads torch uses."""
import functools
import importlib.util
import math
import os
import shutil
from dataclasses import dataclass

import torch

from course_lib import hub


def cpu_threads():
    """How many threads torch should use on the CPU: COURSE_THREADS, else OMP_NUM_THREADS, else
    the whole cores of a JupyterHub's CPU_LIMIT (at least 1), else 1.

    Why one by default: the course's models are small, so a second thread gains little even on a
    quiet machine, and when other programs keep the cores busy, threads that wait for each other
    stall. Lesson 03's training took 2.7 s on one thread and 46 s on torch's default two on a
    2-core machine with other work running (measured 2026-11-30, torch 2.13).
    On a JupyterHub, a server limited to CPU_LIMIT cores gets that many threads (a limit of 0.5
    gets one), so that no lesson runs more threads than its share of the machine (docs/hub.md).
    """
    for name in ("COURSE_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{name}={value!r} should be a whole number of threads, 1 or more; "
                                 f"e.g. {name}=2, or unset it to use one thread")
            return int(value)
    cores = hub.cpu_limit()
    return max(1, math.floor(cores)) if cores is not None else 1


def use_cpu_threads():
    """Set torch's number of CPU threads by cpu_threads().

    Returns None, so that a notebook cell ending with this call shows nothing.
    """
    n = cpu_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def forced_cpu_bf16():
    """True or False where COURSE_CPU_BF16 is 1 or 0 (run a lesson down the bfloat16 path or
    the float32 one whatever the CPU), None where it is unset or empty."""
    forced = os.environ.get("COURSE_CPU_BF16", "").strip()
    if not forced:
        return None
    if forced not in ("0", "1"):
        raise ValueError(f"COURSE_CPU_BF16={forced!r} should be 1 (train in bfloat16 as if this "
                         f"CPU did it best) or 0 (in float32); or unset it")
    return forced == "1"


def cpu_has_bf16():
    """Whether this CPU multiplies bfloat16 numbers natively (the AVX512-BF16 instructions).

    Elsewhere torch emulates bf16, slower than float32; but having them does not say that a
    training run gains from bf16 (an AMX Xeon gained almost nothing on the cpu preset), so the
    training runs choose their precision by timing it (course_lib.precision), and this answer
    is what lesson 09 says of bf16 arithmetic. COURSE_CPU_BF16=1 or 0 overrides the probe, so
    that a lesson can be run down the other path (the answer changes what lessons 06 and 09
    run and say, not what the CPU can do).
    """
    forced = forced_cpu_bf16()
    if forced is not None:
        return forced
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)  # torch's own CPU probe
    return bool(probe()) if probe is not None else False


def cannot_compile(device):
    """Why torch.compile cannot build kernels for `device` here, or None when it can.

    On a CPU its compiler (inductor) writes C++ and needs a C++ compiler (CXX, or g++,
    c++ or clang++ on the PATH); on a CUDA GPU it writes Triton kernels and needs the
    triton package, which torch's CUDA builds bring. Other devices are not compiled for.
    """
    device = torch.device(device)
    if device.type == "cpu":
        names = [os.environ.get("CXX", "").strip()] + ["g++", "c++", "clang++"]
        if not any(name and shutil.which(name) for name in names):
            return ("torch.compile needs a C++ compiler on a CPU and none was found "
                    "(set CXX, or install g++ or clang++)")
        return None
    if device.type == "cuda":
        if importlib.util.find_spec("triton") is None:
            return "torch.compile needs the triton package on a CUDA GPU, and it is not installed"
        return None
    return f"the course does not compile for {device.type}"


# How far a GPU's float32 logits may sit from the CPU's for the check's small TinyLM. Summing in
# another order moves them by about 1e-6; the wrong results reported for PyTorch's MPS backend
# (a kernel returning zeros, stale or garbled values) move them by far more than this.
DEVICE_TOLERANCE = 1e-3


@dataclass(frozen=True)
class DeviceCheck:
    """The largest difference between a small TinyLM's logits on `device` and on the CPU."""
    device: str
    max_diff: float
    tolerance: float = DEVICE_TOLERANCE

    @property
    def agrees(self):
        return math.isfinite(self.max_diff) and self.max_diff <= self.tolerance

    def __str__(self):
        verdict = "agrees with" if self.agrees else "DISAGREES with"
        return (f"{self.device} {verdict} the CPU: largest logit difference {self.max_diff:.2e} "
                f"(tolerance {self.tolerance:.0e}) on a small TinyLM forward")


def tinylm_logits(device):
    """Float32 logits (B=2, T=16, V=256) of a seeded 2-layer TinyLM run on `device`, on the CPU."""
    from course_lib.model import ModelConfig, TinyLM  # model imports nothing from here; lazily all the same
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = TinyLM(ModelConfig(vocab_size=256, max_len=32, d_model=64, n_heads=4, n_layers=2))
        idx = torch.randint(0, 256, (2, 16))
    model.eval()
    with torch.no_grad():
        return model.to(device)(idx.to(device)).float().cpu()


def check_device(device, logits_on=tinylm_logits):
    """Run the same small TinyLM forward on `device` and on the CPU, and compare the logits."""
    device = torch.device(device)
    on_cpu, there = logits_on(torch.device("cpu")), logits_on(device)
    if there.shape != on_cpu.shape:
        return DeviceCheck(str(device), math.inf)
    diff = (on_cpu - there).abs().max().item()
    return DeviceCheck(str(device), diff if math.isfinite(diff) else math.inf)


@functools.lru_cache(maxsize=None)
def _checked(name):
    return check_device(torch.device(name))


def pick_device(verbose=True):
    """The best available device that computes what the CPU does: CUDA, then Apple's MPS, then the CPU.

    Set the environment variable COURSE_DEVICE (e.g. COURSE_DEVICE=cpu) to choose by hand.
    A GPU, found or chosen, is used only after check_device: a small TinyLM forward there must
    give the CPU's logits to DEVICE_TOLERANCE; otherwise this says so, names the PyTorch version,
    and returns the CPU. It also sets the number of CPU threads torch uses (use_cpu_threads:
    one unless COURSE_THREADS or OMP_NUM_THREADS says otherwise), so every lesson that picks a
    device gets it.
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
    if device.type != "cpu":
        check = _checked(str(device))
        if not check.agrees:
            # Said whether or not verbose: wrong numbers on a GPU must never pass silently.
            print(f"{check}, under PyTorch {torch.__version__}; using the CPU instead "
                  f"(a newer PyTorch may mend it)")
            device, reason = torch.device("cpu"), f"{device.type} failed the check against the CPU"
        else:
            reason += f"; agrees with the CPU to {check.max_diff:.1e}"
    if verbose:
        print(f"Using device {device.type} ({reason})")
    return device


# Every lesson imports this module in its first cell: there, on a hub whose memory limit is below
# the lesson's measured peak, the lesson says so (course_lib.hub.memory_warning).
hub.warn_when_short_of_memory()
