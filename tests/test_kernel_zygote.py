"""A kernel forked from the suite's zygote (tests/kernel_zygote.py) is what a fresh kernel is, and
one kernel's doings are invisible to the next."""
import json
import os

import pytest
from jupyter_client import KernelManager

from kernel_zygote import ZYGOTE, fresh_kernels

pytestmark = pytest.mark.skipif(os.environ.get("COURSE_FRESH_KERNELS") == "1",
                                reason="COURSE_FRESH_KERNELS=1: the zygote is off")

# What a kernel reports of itself: everything a fresh start decides, and two random draws.
PROBE = r"""
_names = sorted(k for k in globals() if not k.startswith("_"))
import json, os, sys, random
_loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("course_lib", "tests", "conftest"))
import numpy as np, torch, matplotlib
print(json.dumps({
    "namespace": _names, "course_modules_loaded": _loaded,
    "cwd": os.getcwd(), "path": sys.path, "argv": sys.argv[1:2],
    "env": {k: v for k, v in os.environ.items() if not k.startswith("JPY_")},
    "main": type(sys.modules["__main__"]).__name__,
    "torch_seed": torch.initial_seed(), "torch_draw": torch.rand(3).tolist(),
    "threads": torch.get_num_threads(), "backend": matplotlib.get_backend(),
    "dont_write_bytecode": sys.dont_write_bytecode,
    "random": random.random(), "numpy": float(np.random.rand()),
    "leaked": [hasattr(np, "leaked"), torch.nn.functional.softmax.__name__,
               "LEAKED" in os.environ, "leaked" in dir(__builtins__)],
}))
"""
# What a notebook might do to the process it runs in.
MISCHIEF = r"""
import builtins, os
import numpy as np, torch
LEAKED = 1
np.leaked = True
torch.nn.functional.softmax = lambda *a, **k: None
torch.manual_seed(123)
os.environ["LEAKED"] = "1"
builtins.leaked = True
print("done")
"""


def run_in_kernel(code, cwd):
    """The text a kernel of its own prints running `code`, and whether it was forked."""
    before = ZYGOTE.forked
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        printed = []
        reply = kc.execute_interactive(code, timeout=120, output_hook=lambda msg: printed.append(
            msg["content"].get("text", "")) if msg["msg_type"] == "stream" else None)
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return "".join(printed), ZYGOTE.forked > before


def test_a_forked_kernel_is_what_a_fresh_kernel_is(tmp_path):
    forked_text, forked = run_in_kernel(PROBE, tmp_path)
    with fresh_kernels():
        fresh_text, was_forked = run_in_kernel(PROBE, tmp_path)
    assert forked and not was_forked, "one kernel forked, one started the usual way"
    got, want = json.loads(forked_text), json.loads(fresh_text)
    for key in ("random", "numpy", "torch_seed", "torch_draw"):   # drawn afresh in each kernel
        assert got.pop(key) != want.pop(key), key
    assert got == want
    assert want["namespace"] == ["In", "Out", "exit", "get_ipython", "open", "quit"]
    assert want["course_modules_loaded"] == []
    assert want["leaked"] == [False, "softmax", False, False]


def test_nothing_one_forked_kernel_does_reaches_the_next(tmp_path):
    printed, forked = run_in_kernel(MISCHIEF, tmp_path)
    assert forked and printed.strip() == "done"
    after, forked = run_in_kernel(PROBE, tmp_path)
    assert forked
    seen = json.loads(after)
    assert seen["namespace"] == ["In", "Out", "exit", "get_ipython", "open", "quit"]
    assert seen["leaked"] == [False, "softmax", False, False]
    assert seen["torch_seed"] != 123
    again, _ = run_in_kernel(PROBE, tmp_path)
    for key in ("random", "numpy", "torch_seed", "torch_draw"):   # two forks, two seeds
        assert json.loads(again)[key] != seen[key], key
