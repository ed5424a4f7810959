"""Records of what a learner's function did: written as plain data, read back strictly, replayed in order."""
import json
import math
import os

import numpy as np
import pytest
import torch

from course_lib.checks import record
from course_lib.checks.record import RecordError, ReplayMismatch, load, probe, recording, replaying


def round_trip(values, tmp_path):
    with recording(0) as rec:
        for i, v in enumerate(values):
            probe(f"value {i}", lambda v=v: v)
    rec.save(tmp_path / "r")
    return [seen["value"] for seen in load(tmp_path / "r")]


def test_plain_values_come_back_as_they_were(tmp_path):
    values = [None, True, 3, -2**70, 1.5, math.inf, "text", b"\x00\xff", (1, "a"), [1, [2]],
              {("a", 1): [1.0], 2: None}, {1, 2}, frozenset({3}), 2 + 3j,
              torch.Size([2, 3]), torch.float16, np.dtype("float64"), np.float32(1.25), np.int64(7)]
    back = round_trip(values, tmp_path)
    assert back[:-2] == values[:-2]
    assert type(back[-2]) is np.float32 and back[-2] == np.float32(1.25)
    assert type(back[-1]) is np.int64 and back[-1] == 7
    nan = round_trip([math.nan], tmp_path)[0]
    assert math.isnan(nan)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                   torch.int64, torch.bool])
def test_tensors_keep_dtype_values_and_the_requires_grad_flag(dtype, tmp_path):
    t = (torch.arange(6.0).reshape(2, 3) - 2).to(dtype)
    back, grad = round_trip([t, torch.ones(2, requires_grad=True) * 2], tmp_path)
    assert back.dtype == dtype and torch.equal(back, t) and not back.requires_grad
    assert grad.requires_grad and torch.equal(grad.detach(), torch.full((2,), 2.0))


def test_an_array_subclass_is_recorded_as_its_plain_data(tmp_path):
    class Agreeable(np.ndarray):
        def __eq__(self, other):
            return np.ones(self.shape, bool)
    a = np.arange(3.0).view(Agreeable)
    back = round_trip([a, np.arange(4, dtype=np.float16)], tmp_path)
    assert type(back[0]) is np.ndarray and not np.array_equal(back[0], np.zeros(3))
    assert back[1].dtype == np.float16


def test_anything_else_is_recorded_by_its_type_name_and_repr(tmp_path):
    back = round_trip([torch.nn.Linear(2, 3), object], tmp_path)
    assert type(back[0]).__name__ == "Linear" and "in_features=2" in repr(back[0])
    assert not isinstance(back[0], torch.nn.Module)


def test_an_exception_is_replayed_with_its_class_name_and_message(tmp_path):
    class MyError(Exception):
        pass
    with recording(0) as rec:
        for i, e in enumerate([KeyError("k"), MyError("mine"), NotImplementedError("todo")]):
            with pytest.raises(type(e)):
                probe(f"p{i}", lambda e=e: (_ for _ in ()).throw(e))
    rec.save(tmp_path / "r")
    with replaying(load(tmp_path / "r"), 0):
        with pytest.raises(KeyError) as one:
            probe("p0", None)
        with pytest.raises(Exception) as two:
            probe("p1", None)
        with pytest.raises(NotImplementedError, match="todo"):
            probe("p2", None)
    assert str(one.value) == "'k'" and type(two.value).__name__ == "MyError" and str(two.value) == "mine"


def test_a_replay_never_runs_the_probe_and_checks_the_order():
    ran = []
    with replaying([{"label": "a", "value": 1}], 0, "demo") as replay:
        assert probe("a", lambda: ran.append(1)) == 1
        assert replay.finished()
        with pytest.raises(ReplayMismatch, match="stopped in your notebook before"):
            probe("b", lambda: ran.append(1))
    with replaying([{"label": "a", "value": 1}], 0, "demo"):
        with pytest.raises(ReplayMismatch, match="do not match the check"):
            probe("z", lambda: ran.append(1))
    assert ran == []


def test_the_seed_is_the_case_number_directly_and_offset_when_graded():
    assert record.seed(3) == 3 and record.mode() == "direct"
    with recording(1000):
        assert record.seed(3) == 1003 and record.mode() == "record"
    with replaying([], 1000):
        assert record.seed(3) == 1003 and record.mode() == "replay"


def saved(tmp_path, doc=None, tensors=None):
    from safetensors.torch import save_file
    save_file(tensors or {}, str(tmp_path / "r.safetensors"))
    (tmp_path / "r.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return tmp_path / "r"


@pytest.mark.parametrize("doc, says", [
    ("{not json", "not valid JSON"),
    ({"format": 2, "observations": []}, "not in the grader's format"),
    ({"format": 1, "observations": [{"value": 1}]}, "without a label"),
    ({"format": 1, "observations": [{"label": "a"}]}, "neither a value"),
    ({"format": 1, "observations": [{"label": "a", "value": {"pickle": "x"}}]}, "unknown kind"),
    ({"format": 1, "observations": [{"label": "a", "value": {"tensor": "t9", "dtype": "float32"}}]},
     "missing from the record"),
    ({"format": 1, "observations": [{"label": "a", "value": {"torch_dtype": "object"}}]}, "malformed"),
    ({"format": 1, "observations": [{"label": "a", "value": {"int": "1" * 6000}}]}, "malformed int"),
    ({"format": 1, "observations": [{"label": "a", "raised": {"type": "x; import os"}}]}, "malformed"),
    ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
])
def test_a_malformed_record_is_refused_in_words(tmp_path, doc, says):
    with pytest.raises(RecordError, match=says):
        load(saved(tmp_path, doc))


def test_a_tensor_stored_as_another_dtype_than_recorded_is_refused(tmp_path):
    doc = {"format": 1, "observations": [{"label": "a", "value": {"tensor": "t0", "dtype": "float64"}}]}
    with pytest.raises(RecordError, match="stored as torch.float32"):
        load(saved(tmp_path, doc, {"t0": torch.zeros(2)}))


def test_links_fifos_and_large_records_are_refused_unopened(tmp_path):
    target = saved(tmp_path / "x" if (tmp_path / "x").mkdir() is None else None, {"format": 1, "observations": []})
    (tmp_path / "r.json").symlink_to(str(target) + ".json")
    (tmp_path / "r.safetensors").symlink_to(str(target) + ".safetensors")
    with pytest.raises(RecordError, match="a link"):
        load(tmp_path / "r")
    os.mkfifo(tmp_path / "f.json")
    with pytest.raises(RecordError, match="not a regular file"):
        load(tmp_path / "f")
    big = saved(tmp_path / "x", {"format": 1, "observations": [], "pad": "x" * 2000})
    with pytest.raises(RecordError, match="larger than"):
        load(big, max_bytes=1000)
    with pytest.raises(RecordError, match="there is no record"):
        load(tmp_path / "absent")


def test_a_value_too_deep_to_record_fails_the_probe_in_both_modes(tmp_path):
    deep = []
    for _ in range(100):
        deep = [deep]
    with recording(0) as rec:
        with pytest.raises(RecordError, match="could not be recorded"):
            probe("deep", lambda: deep)
    rec.save(tmp_path / "r")
    with replaying(load(tmp_path / "r"), 0):
        with pytest.raises(Exception, match="could not be recorded"):
            probe("deep", None)


@pytest.mark.parametrize("value", [{"device": "no such device"},
                                   {"npscalar": "float32", "value": [1.0, 2.0]},
                                   {"complex": [1.0]}, {"bytes": "***"}, {"size": [-1]}])
def test_values_that_no_probe_could_write_are_refused(tmp_path, value):
    with pytest.raises(RecordError):
        load(saved(tmp_path, {"format": 1, "observations": [{"label": "a", "value": value}]}))


def test_a_zero_dimensional_array_keeps_its_shape(tmp_path):
    back = round_trip([np.array(2.5), np.float64(1.0) * np.ones(())], tmp_path)
    assert back[0].shape == () and back[0] == 2.5 and back[1].shape == ()
