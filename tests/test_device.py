"""The CPU thread policy every lesson gets from pick_device, and the CPU bf16 probe."""
import pytest
import torch

from course_lib.device import cpu_threads, pick_device, use_cpu_threads


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("COURSE_THREADS", "OMP_NUM_THREADS", "COURSE_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    n = torch.get_num_threads()
    yield monkeypatch
    torch.set_num_threads(n)


def test_one_thread_by_default(clean_env):
    torch.set_num_threads(2)
    assert cpu_threads() == 1
    assert use_cpu_threads() is None
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("name", ["COURSE_THREADS", "OMP_NUM_THREADS"])
def test_environment_chooses(clean_env, name):
    clean_env.setenv(name, "2")
    use_cpu_threads()
    assert torch.get_num_threads() == 2


def test_course_threads_wins_over_omp(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "1")
    clean_env.setenv("COURSE_THREADS", "2")
    assert cpu_threads() == 2


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_bad_value_is_named(clean_env, value):
    clean_env.setenv("COURSE_THREADS", value)
    with pytest.raises(ValueError, match=f"COURSE_THREADS='{value}'.*whole number"):
        cpu_threads()


def test_pick_device_sets_the_threads(clean_env, capsys):
    torch.set_num_threads(2)
    pick_device(verbose=False)
    assert torch.get_num_threads() == 1
    assert capsys.readouterr().out == ""


def test_cpu_has_bf16_follows_torchs_probe(monkeypatch):
    from course_lib.device import cpu_has_bf16
    for answer in (True, False):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: answer)
        assert cpu_has_bf16() is answer
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert cpu_has_bf16() is False  # a torch without the probe: assume emulated bf16
