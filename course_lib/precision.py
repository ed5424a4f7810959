"""Float32 or bfloat16 for a training run on this CPU, chosen by timing the run's own step both ways.

Whether a CPU has bfloat16 instructions (course_lib.device.cpu_has_bf16) does not say whether a
training step gains from them. With AVX512-BF16, an EPYC ran the `cpu` preset's step in about
0.6 of its float32 time; without them torch widens every bfloat16 number to float32 first, and
the step is slower than in float32; with AMX, an Intel Xeon gained almost nothing on the same
preset (issue 45). So the choice is measured on the learner's machine: a few updates of the
run's own model and batch shape, each way, taken in turns so that a busy moment slows both,
once per process and run shape (about a second for lesson 06's run). bf16 is chosen only where
its update takes at most BF16_PAYS of float32's time: it rounds the matrix products, so it has
to pay for that. COURSE_CPU_BF16=1 or 0 forces either choice without measuring.
"""
import functools
import os
import time
from dataclasses import dataclass, replace

import torch

from course_lib.device import forced_cpu_bf16
from course_lib.model import ModelConfig, TinyLM
from course_lib.training import TrainConfig, configure_optimizer, update

BF16_PAYS = 0.9     # bf16 is chosen where its update takes at most this share of float32's
TIMED_UPDATES = 3   # updates timed each way after one untimed each; the fastest counts


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run trains in on this CPU, and the figures it was chosen from."""
    autocast: str                    # TrainConfig.autocast: "bf16" or "off" (float32)
    float32_ms: float | None = None  # the fastest timed update in float32 (None: forced)
    bf16_ms: float | None = None     # the same in bf16
    forced_by: str | None = None     # "COURSE_CPU_BF16=1" or "=0" when not measured

    @property
    def settings(self):
        """The name of the choice: "bf16" or "float32"."""
        return "bf16" if self.autocast == "bf16" else "float32"

    @property
    def why(self):
        """Why this choice, in words, with its figures."""
        if self.forced_by:
            return f"forced by {self.forced_by}"
        ratio = self.bf16_ms / self.float32_ms
        verdict = (f"at most {BF16_PAYS:g} of float32's, so bf16" if ratio <= BF16_PAYS else
                   f"more than {BF16_PAYS:g} of float32's, so float32")
        return (f"an update of this run took {self.bf16_ms:.1f} ms in bf16 and "
                f"{self.float32_ms:.1f} ms in float32 on this CPU ({ratio:.2f}x; the fastest of "
                f"{TIMED_UPDATES} each, timed in turns): {verdict}")

    def __str__(self):
        return f"{self.settings}: {self.why}"


def choose_cpu_precision(model_config, float32_config, bf16_config=None):
    """bf16 or float32 for training `model_config` with `float32_config` on this CPU.

    bf16_config is the run's bf16 settings (default: float32_config with autocast="bf16"; the
    `cpu` preset also runs Muon's iterations in bfloat16). Each is timed on this machine, with
    torch's current number of threads, unless COURSE_CPU_BF16 forces the answer; the result is
    kept for the rest of the process.
    """
    if not isinstance(model_config, ModelConfig) or not isinstance(float32_config, TrainConfig):
        raise TypeError(f"pass a ModelConfig and a TrainConfig, got "
                        f"{type(model_config).__name__} and {type(float32_config).__name__}")
    float32_config = replace(float32_config, autocast="off")
    bf16_config = replace(bf16_config or float32_config, autocast="bf16")
    forced = forced_cpu_bf16()
    if forced is not None:
        return PrecisionChoice("bf16" if forced else "off",
                               forced_by=f"COURSE_CPU_BF16={os.environ['COURSE_CPU_BF16'].strip()}")
    return _measured(model_config, float32_config, bf16_config, torch.get_num_threads())


@functools.lru_cache(maxsize=None)
def _measured(model_config, float32_config, bf16_config, threads):
    float32_ms, bf16_ms = update_ms(model_config, (float32_config, bf16_config))
    return PrecisionChoice("bf16" if bf16_ms <= BF16_PAYS * float32_ms else "off",
                           float32_ms, bf16_ms)


def update_ms(model_config, configs, timed=TIMED_UPDATES):
    """The fastest of `timed` updates on the CPU under each TrainConfig in `configs`, in ms.

    Each config trains its own fresh model (the same weights for all) on the same random batch
    of its shape; after one untimed update each (the first builds kernels), the configs take
    turns, update by update, so that other work on the machine slows them alike. Torch's global
    random numbers are left as they were.
    """
    device = torch.device("cpu")
    runs = []
    with torch.random.fork_rng(devices=[]):
        for cfg in configs:
            torch.manual_seed(0)
            model = TinyLM(model_config).train()
            batch = torch.randint(0, model_config.vocab_size, (cfg.batch_size, cfg.block_size + 1),
                                  generator=torch.Generator().manual_seed(0))
            runs.append((model, configure_optimizer(model, cfg), batch, cfg))
        best = [float("inf")] * len(runs)
        for round_ in range(timed + 1):
            for k, (model, opt, batch, cfg) in enumerate(runs):
                start = time.perf_counter()
                update(model, opt, batch, cfg, device)
                if round_:
                    best[k] = min(best[k], time.perf_counter() - start)
    return [1e3 * b for b in best]
