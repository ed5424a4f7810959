"""Shared test set-up: tiny models on one thread."""
from pathlib import Path

import pytest
import torch

from course_lib.model import ModelConfig, TinyLM
# The classroom on a real JupyterHub, one per session: tests/test_hub.py and tests/test_live_hub.py share it
from hub_classroom import classroom, hub, stop_after  # noqa: F401  (the fixtures)

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(vocab_size=256, max_len=16, d_model=32, n_heads=4, n_layers=2)


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """Tiny models run fastest on one thread, and do not stall when other jobs share the CPUs."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True)
def _hints_kept_apart(tmp_path_factory, monkeypatch):
    """Each test's hint() remembers what it showed in a folder of its own, never in the home of
    whoever runs the tests (course_lib.checks.hints.state_file), so no test sees another's hints."""
    monkeypatch.setenv("COURSE_STATE_DIR", str(tmp_path_factory.mktemp("state")))


def tiny_model(seed=0, **overrides):
    """A seeded TinyLM of the TINY shape, with any field overridden."""
    torch.manual_seed(seed)
    return TinyLM(ModelConfig(**{**TINY, **overrides}))


def random_ids(B, T, seed=1, V=256):
    """A seeded (B, T) batch of ids below V."""
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def pytest_runtest_teardown(item, nextitem):
    """The classroom's hub stops after the last test that uses it (tests/hub_classroom.py)."""
    stop_after(item, nextitem)
