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
    monkeypatch.delenv("COURSE_CPU_BF16", raising=False)
    for answer in (True, False):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: answer)
        assert cpu_has_bf16() is answer
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert cpu_has_bf16() is False  # a torch without the probe: assume emulated bf16


def test_cpu_has_bf16_can_be_forced_either_way_and_refuses_other_values(monkeypatch):
    from course_lib.device import cpu_has_bf16
    for probe in (True, False):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: probe)
        for forced, answer in (("1", True), ("0", False)):
            monkeypatch.setenv("COURSE_CPU_BF16", forced)
            assert cpu_has_bf16() is answer
    monkeypatch.setenv("COURSE_CPU_BF16", "yes")
    with pytest.raises(ValueError, match="COURSE_CPU_BF16='yes' should be 1 .* or 0"):
        cpu_has_bf16()


def _stand_in(offset):
    """Logits as tinylm_logits gives them, moved by `offset` on any device but the CPU."""
    from course_lib.device import tinylm_logits
    cpu = tinylm_logits(torch.device("cpu"))
    return lambda device: cpu if device.type == "cpu" else cpu + offset


def test_the_cpu_agrees_with_itself():
    from course_lib.device import check_device
    check = check_device("cpu")
    assert check.agrees and check.max_diff == 0.0
    assert "agrees with the CPU" in str(check)


@pytest.mark.parametrize("offset, agrees", [(1e-6, True), (0.05, False), (float("nan"), False)])
def test_check_device_compares_with_the_cpu(offset, agrees):
    from course_lib.device import check_device
    check = check_device("meta", logits_on=_stand_in(offset))
    assert check.agrees is agrees
    assert ("DISAGREES" in str(check)) is not agrees


def _a_gpu_that_is(clean_env, offset):
    import course_lib.device as device
    clean_env.setattr(torch.cuda, "is_available", lambda: True)
    clean_env.setattr(torch.cuda, "get_device_name", lambda i: "Stand-in GPU")
    stand_in = _stand_in(offset)
    clean_env.setattr(device, "_checked",
                      lambda name: device.check_device(name, logits_on=stand_in))


def test_a_gpu_that_disagrees_is_refused_and_named(clean_env, capsys):
    _a_gpu_that_is(clean_env, 0.5)
    chosen = pick_device(verbose=False)
    assert chosen.type == "cpu"
    said = capsys.readouterr().out
    assert "cuda DISAGREES with the CPU" in said and torch.__version__ in said
    assert "using the CPU instead" in said


def test_a_gpu_that_agrees_is_used(clean_env, capsys):
    _a_gpu_that_is(clean_env, 0.0)
    assert pick_device().type == "cuda"
    assert "agrees with the CPU" in capsys.readouterr().out


def test_a_chosen_gpu_is_checked_too(clean_env, capsys):
    _a_gpu_that_is(clean_env, 1.0)
    clean_env.setenv("COURSE_DEVICE", "cuda")
    assert pick_device(verbose=False).type == "cpu"
