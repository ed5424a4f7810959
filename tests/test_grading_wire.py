"""Values as data between the grader and the learner's process (`course_lib.grading.wire`).

What the learner's process sends is hostile: a malformed message, a value too large or nested
too deep, a class the grader does not send, is a WireError, never a crash, a pickle or code.
"""
import json
import math
import os
import struct

import numpy as np
import pytest
import torch

from course_lib.grading import wire
from course_lib.model import ModelConfig, TinyLM


def round_trip(value, classes=None):
    out = wire.Encoder()
    data = json.loads(json.dumps(out.arguments([value])))
    return wire.Decoder(out.blob(), wire.resolver(classes or wire.course_classes())).arguments(data)[0]


def test_plain_values_tensors_and_arrays_come_back_equal():
    value = {"a": [1, 2 ** 80, -0.5, math.inf, None, True, "x"], (1, 2): {3, 4}, b"k": frozenset({"y"}),
             "t": torch.arange(6, dtype=torch.float32).reshape(2, 3), "n": np.arange(4, dtype=np.uint16),
             "s": np.float32(1.5), "d": torch.bfloat16, "size": torch.Size([2, 3]), "c": 1 + 2j}
    back = round_trip(value)
    assert back.keys() == value.keys()
    assert back["a"][:3] == [1, 2 ** 80, -0.5] and back["a"][3] == math.inf and back["a"][4:] == [None, True, "x"]
    assert back[(1, 2)] == {3, 4} and back[b"k"] == frozenset({"y"}) and back["c"] == 1 + 2j
    assert torch.equal(back["t"], value["t"]) and back["t"].dtype == torch.float32
    assert back["n"].dtype == np.uint16 and (back["n"] == value["n"]).all()
    assert type(back["s"]) is np.float32 and back["d"] is torch.bfloat16 and back["size"] == torch.Size([2, 3])
    assert math.isnan(round_trip(float("nan")))


def test_a_course_model_comes_back_with_its_state_and_gradients():
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(vocab_size=16, d_model=8, n_heads=2, n_layers=1, max_len=8))
    model(torch.zeros(1, 4, dtype=torch.int64)).sum().backward()
    model.eval()
    back = round_trip(model)
    assert type(back) is TinyLM and not back.training
    for (name, p), (_, q) in zip(model.named_parameters(), back.named_parameters()):
        assert torch.equal(p, q) and torch.equal(p.grad, q.grad), name


def test_what_does_not_travel_comes_as_its_repr_and_never_runs():
    class Mine:
        def __repr__(self):
            return "<mine>"
    back = round_trip(Mine())
    assert isinstance(back, wire.Opaque) and repr(back) == "<mine>" and type(back).__name__.endswith(".Mine")


@pytest.mark.parametrize("data, blob", [
    ({"int": "1" * 6000}, b""),                                        # a huge int
    ({"float": "1e999999"}, b""),                                      # not nan or inf
    ({"tensor": [0, 8], "dtype": "float32", "shape": [3]}, b"\0" * 8),  # data and shape disagree
    ({"tensor": [4, 8], "dtype": "float32", "shape": [2]}, b"\0" * 8),  # past the blob's end
    ({"tensor": [0, 4], "dtype": "object", "shape": [1]}, b"\0" * 4),   # no such dtype
    ({"array": [-1, 4], "dtype": "int32", "shape": [1]}, b"\0" * 4),    # a negative offset
    ({"module": "os.system", "init": None}, b""),                      # not a class the grader sends
    ({"function": "builtins.eval"}, b""),
    ({"dict": [[1]]}, b""),                                            # a malformed item
    ({"bytes": "not base64!"}, b""),
    ({"pickle": "gASV"}, b""),                                         # no such kind
    ({}, b""),
])
def test_a_malformed_value_is_a_wire_error(data, blob):
    with pytest.raises(wire.WireError):
        wire.Decoder(blob, wire.resolver(wire.course_classes())).decode(data)


def test_nesting_and_sizes_are_bounded():
    deep = None
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(wire.WireError):
        wire.Encoder().encode(deep)
    with pytest.raises(wire.WireError):
        wire.Decoder(b"").decode(json.loads(json.dumps(deep)))
    with pytest.raises(wire.WireError):
        wire.Decoder(b"").decode([0.0] * (wire.MAX_ITEMS + 1))


def test_a_reader_refuses_a_huge_or_non_json_message_and_reads_the_next():
    read, write = os.pipe()
    try:
        os.write(write, struct.pack(">QQ", 5, 0) + b"[1,2]" + struct.pack(">QQ", 3, 0) + b"{x}"
                 + wire.message({"ok": 1}, b"ab") + struct.pack(">QQ", wire.MAX_BYTES, 1))
        reader = wire.Reader(read)
        for _ in range(2):
            with pytest.raises(wire.WireError):
                reader.next(deadline=None)
        assert reader.next() == ({"ok": 1}, b"ab")
        with pytest.raises(wire.WireError):
            reader.next()
    finally:
        os.close(read)
        os.close(write)
