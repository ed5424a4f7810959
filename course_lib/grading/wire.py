"""Values as data between the grader and the learner's process: never pickle, never code.

A call's arguments go from the grader to the graded kernel's server, and its result, the
arguments as the call left them and an exception's type and message come back, each as one
message: a JSON header (the value's structure) and one blob of bytes (every tensor's and
array's data, in order). What can travel:

- None, bools, ints, floats (inf and nan too), complex numbers, strings, bytes; lists,
  tuples, dicts, sets of these; torch tensors (their requires_grad and .grad too) and NumPy
  arrays of plain dtypes, NumPy scalars, torch dtypes, devices and sizes; a torch.Generator
  (its state);
- the course's objects, built on the other side by the course's own classes from data: a
  module of course_lib (its class, what it was made from, its state dict, gradients and mode),
  one of torch's optimizers over such a module's parameters (its hyper-parameters and state),
  a frozen dataclass of course_lib (ModelConfig...), and a checker's function registered to
  run in the learner's process (`course_lib.checks.core.learner_side`), by name.

Anything else the learner's process returns travels as its type's name and repr (`Opaque`),
for feedback. Whatever arrives is hostile input: sizes, nesting and counts are bounded, and
anything malformed is a WireError, never a crash.
"""
import base64
import importlib
import json
import math
import os
import select
import struct
import time

import numpy as np
import torch

from course_lib.checks.core import load_module_state

MAX_BYTES = 256 * 2 ** 20    # one message, header and data together
MAX_DEPTH = 32               # nesting of lists, tuples and dicts in one value
MAX_ITEMS = 200_000          # encoded values in one message
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
          "bool", "complex64", "complex128")
NUMPY_ONLY = ("uint16", "uint32", "uint64")
OPTIMIZERS = ("torch.optim.sgd.SGD", "torch.optim.adam.Adam", "torch.optim.adamw.AdamW")
_LENGTHS = struct.Struct(">QQ")


class WireError(ValueError):
    """A message that cannot be read, or a value that cannot travel."""


class Opaque:
    """A value of a kind that does not travel, shown by its type's name and repr."""

    def __init__(self, text):
        self._text = text

    def __repr__(self):
        return self._text


def label(obj):
    """'module.qualname' of a class or function: how both sides name it."""
    return f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


# ---------------------------------------------------------------- encoding

class Encoder:
    """Encodes the values of one message; `blob()` is their data, in order."""

    def __init__(self, registry=None):
        self.parts, self.size, self.items = [], 0, 0
        self.registry = registry or {}   # functions that travel by name: label -> function
        self.params = {}                 # id(parameter) -> (argument index, its name), for optimizers

    def blob(self):
        return b"".join(self.parts)

    def _data(self, raw):
        self.size += len(raw)
        if self.size > MAX_BYTES:
            raise WireError(f"more than {MAX_BYTES // 2 ** 20} MB of data in one message")
        self.parts.append(raw)
        return [self.size - len(raw), len(raw)]

    def arguments(self, values):
        """Encode a call's arguments: a module's parameters are known to an optimizer among them."""
        for i, v in enumerate(values):
            if isinstance(v, torch.nn.Module):
                self.params.update({id(p): (i, name) for name, p in v.named_parameters()})
        return [self.encode(v) for v in values]

    def encode(self, value, depth=0):
        self.items += 1
        if depth > MAX_DEPTH or self.items > MAX_ITEMS:
            raise WireError(f"a value nested more than {MAX_DEPTH} deep, or of more than {MAX_ITEMS} items")
        kind = type(value)
        if value is None or kind in (bool, str):
            return value
        if kind is int:
            return {"int": str(value)}
        if kind is float:
            return value if math.isfinite(value) else {"float": repr(value)}
        plain = next((t for t in (list, tuple, set, frozenset, dict) if isinstance(value, t)), None)
        if plain is dict and not isinstance(value, torch.nn.Module):   # a Counter, a defaultdict: its items
            return {"dict": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in dict.items(value)]}
        if plain is not None and plain is not dict and not isinstance(value, torch.Size):
            items = [self.encode(v, depth + 1) for v in plain.__iter__(value)]   # a namedtuple: its items
            return items if plain is list else {plain.__name__: items}
        if kind in (bytes, bytearray):
            return {"bytes": base64.b64encode(bytes(value)).decode()}
        if kind is complex:
            return {"complex": [self.encode(value.real), self.encode(value.imag)]}
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        if isinstance(value, np.ndarray):
            return self._array(value)
        if isinstance(value, np.generic) and value.dtype.name in DTYPES + NUMPY_ONLY:
            return {"np": value.dtype.name, "value": self.encode(value.item(), depth + 1)}
        if isinstance(value, torch.dtype):
            return {"torch_dtype": str(value).removeprefix("torch.")}
        if isinstance(value, np.dtype):
            return {"np_dtype": value.name}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        if isinstance(value, torch.Size):
            return {"size": [int(n) for n in value]}
        if isinstance(value, torch.Generator):
            return {"generator": self._tensor(value.get_state())}
        if isinstance(value, torch.nn.Module) and type(value).__module__.startswith("course_lib."):
            return self._module(value)
        if isinstance(value, torch.optim.Optimizer) and label(type(value)) in OPTIMIZERS:
            return self._optimizer(value)
        if _course_dataclass(kind):
            import dataclasses
            return {"dataclass": label(kind), "fields": {f.name: self.encode(getattr(value, f.name), depth + 1)
                                                         for f in dataclasses.fields(value)}}
        if callable(value) and label(value) in self.registry:
            return {"function": label(value)}
        if isinstance(value, (int, float, str)):   # a subclass: its plain value
            return self.encode({int: int, float: float, str: str}[next(
                t for t in (bool, int, float, str) if isinstance(value, t))](value), depth)
        return _opaque(value)

    def _tensor(self, t):
        grad = bool(t.requires_grad)
        t = torch.Tensor.detach(t)
        name = str(t.dtype).removeprefix("torch.")
        if name not in DTYPES or t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
            return _opaque(t)
        data = t.to("cpu").contiguous().reshape(-1)
        raw = data.view(torch.uint8).numpy().tobytes() if data.numel() else b""
        return {"tensor": self._data(raw), "dtype": name, "shape": list(t.shape), "requires_grad": grad}

    def _array(self, a):
        a = np.asarray(a)
        if a.dtype.name not in DTYPES + NUMPY_ONLY:
            return _opaque(a)
        return {"array": self._data(np.ascontiguousarray(a).tobytes()), "dtype": a.dtype.name,
                "shape": list(a.shape)}

    def _module(self, m):
        params = dict(m.named_parameters())
        return {"module": label(type(m)), "init": self.encode(_recipe(m)),
                "state": {k: self._tensor(v) for k, v in m.state_dict(keep_vars=False).items()},
                "grads": {k: None if p.grad is None else self._tensor(p.grad) for k, p in params.items()},
                "requires_grad": {k: bool(p.requires_grad) for k, p in params.items()},
                "training": bool(m.training)}

    def _optimizer(self, opt):
        groups = []
        for group in opt.param_groups:
            where = [self.params.get(id(p)) for p in group["params"]]
            if None in where:
                raise WireError("an optimizer over parameters of no module among the arguments")
            groups.append({"params": [list(w) for w in where],
                           "options": self.encode({k: v for k, v in group.items() if k != "params"})})
        return {"optimizer": label(type(opt)), "groups": groups,
                "state": self.encode(opt.state_dict()["state"])}


def _opaque(value):
    try:
        shown = repr(value)
    except Exception:
        shown = f"<{type(value).__name__}>"
    return {"opaque": str(type(value).__qualname__)[:200], "module": str(type(value).__module__)[:200],
            "repr": shown[:300]}


def _course_dataclass(kind):
    params = getattr(kind, "__dataclass_params__", None)
    return params is not None and params.frozen and kind.__module__.startswith("course_lib.")


def _recipe(m):
    """What a course module is made from: its constructor's arguments, as data."""
    from course_lib.blocks import Block, RMSNorm, SwiGLU
    if hasattr(m, "config"):                 # TinyLM and its subclasses
        return {"args": [m.config], "kwargs": {}}
    if isinstance(m, Block):
        attn, mlp = m.attn, m.mlp
        return {"args": [attn.proj.in_features, attn.n_heads], "kwargs": {
            "causal": attn.causal, "residual": m.residual, "n_kv_heads": attn.n_kv_heads,
            "rope_base": attn.rope_base, "attn_bias": attn.proj.bias is not None,
            "norm": "rmsnorm" if isinstance(m.norm1, RMSNorm) else "layernorm", "norm_eps": m.norm1.eps,
            "mlp": "swiglu" if isinstance(mlp, SwiGLU) else "gelu",
            "d_ff": (mlp.w_up if isinstance(mlp, SwiGLU) else mlp.up).out_features,
            **({} if isinstance(mlp, SwiGLU) else {"gelu_approx": mlp.act.approximate})}}
    raise WireError(f"the course's {type(m).__qualname__} cannot be sent to the learner's process "
                    f"(no recipe for it in course_lib.grading.wire)")


# ---------------------------------------------------------------- decoding

class Decoder:
    """Decodes one message's values from its blob; `resolve(label)` finds a class or function by name."""

    def __init__(self, blob, resolve=None):
        self.blob, self.budget, self.resolve = blob, MAX_ITEMS, resolve
        self.args = []   # the arguments decoded so far, for an optimizer's parameters

    def arguments(self, data):
        for item in _list(data):
            self.args.append(self.decode(item))
        return self.args

    def decode(self, data, depth=0):
        self.budget -= 1
        if self.budget < 0 or depth > MAX_DEPTH:
            raise WireError("a value too large or nested too deep")
        if data is None or isinstance(data, (bool, str, float)):
            return data
        if isinstance(data, list):
            return [self.decode(v, depth + 1) for v in data]
        if not isinstance(data, dict) or not data:
            raise WireError(f"an unexpected {type(data).__name__}")
        tag = next(iter(data))
        body = data[tag]
        try:
            return self._tagged(tag, body, data, depth)
        except WireError:
            raise
        except (KeyError, TypeError, ValueError, OverflowError, RuntimeError, AttributeError) as e:
            raise WireError(f"a malformed {tag!r} value ({type(e).__name__}: {str(e)[:200]})") from None

    def _tagged(self, tag, body, data, depth):
        if tag == "int":
            if not isinstance(body, str) or len(body) > 5000:
                raise WireError("a malformed int")
            return int(body)
        if tag == "float":
            if body not in ("nan", "inf", "-inf"):
                raise WireError("a malformed float")
            return float(body)
        if tag in ("tuple", "set", "frozenset"):
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](
                self.decode(v, depth + 1) for v in _list(body))
        if tag == "dict":
            return {self.decode(k, depth + 1): self.decode(v, depth + 1) for k, v in (_pair(p) for p in _list(body))}
        if tag == "bytes":
            return base64.b64decode(body, validate=True)
        if tag == "complex":
            real, imag = (self.decode(v, depth + 1) for v in _list(body))
            return complex(float(real), float(imag))
        if tag == "tensor":
            return self._tensor(data)
        if tag == "array":
            return self._array(data)
        if tag == "np":
            if body not in DTYPES + NUMPY_ONLY:
                raise WireError(f"an unknown dtype {body!r}")
            item = self.decode(data["value"], depth + 1)
            if type(item) not in (bool, int, float, complex):
                raise WireError("a NumPy scalar whose value is not a number")
            return np.dtype(body).type(item)
        if tag == "torch_dtype":
            if body not in DTYPES:
                raise WireError(f"an unknown dtype {body!r}")
            return getattr(torch, body)
        if tag == "np_dtype":
            if body not in DTYPES + NUMPY_ONLY:
                raise WireError(f"an unknown dtype {body!r}")
            return np.dtype(body)
        if tag == "device":
            return torch.device(str(body))
        if tag == "size":
            return torch.Size([_count(n) for n in _list(body)])
        if tag == "generator":
            g = torch.Generator()
            g.set_state(self._tensor(body))
            return g
        if tag == "opaque":
            kind = type(str(body)[:200], (Opaque,), {"__module__": str(data.get("module"))[:200]})
            return kind(str(data.get("repr"))[:300])
        if tag in ("module", "optimizer", "dataclass", "function") and self.resolve is not None:
            return getattr(self, "_" + tag)(data, depth)
        raise WireError(f"an unknown kind of value {tag!r}")

    def _bytes(self, where):
        start, length = (_count(n) for n in _list(where))
        if start + length > len(self.blob):
            raise WireError("data past the message's end")
        return self.blob[start:start + length]

    def _tensor(self, data):
        name, shape = data.get("dtype"), [_count(n) for n in _list(data.get("shape"))]
        if name not in DTYPES:
            raise WireError(f"an unknown dtype {name!r}")
        dtype, raw = getattr(torch, name), self._bytes(data["tensor"])
        if math.prod(shape) * torch.empty((), dtype=dtype).element_size() != len(raw):
            raise WireError("a tensor whose data does not match its shape")
        t = torch.empty(shape, dtype=dtype) if not raw else \
            torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)
        if data.get("requires_grad") is True and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        return t

    def _array(self, data):
        name, shape = data.get("dtype"), [_count(n) for n in _list(data.get("shape"))]
        if name not in DTYPES + NUMPY_ONLY or name == "bfloat16":
            raise WireError(f"an unknown dtype {name!r}")
        raw = self._bytes(data["array"])
        if math.prod(shape) * np.dtype(name).itemsize != len(raw):
            raise WireError("an array whose data does not match its shape")
        return np.frombuffer(raw, dtype=name).reshape(shape).copy()

    def _module(self, data, depth):
        cls = self.resolve(str(data["module"]))
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise WireError(f"{data['module']!r} is not one of the course's modules")
        init = self.decode(data["init"], depth + 1)
        m = cls(*_list(init["args"]), **init["kwargs"])
        grads = {k: None if v is None else self._tensor(v) for k, v in data["grads"].items()}
        load_module_state(m, {k: self._tensor(v) for k, v in data["state"].items()}, grads,
                     data["requires_grad"], data["training"])
        return m

    def _optimizer(self, data, depth):
        cls = self.resolve(str(data["optimizer"]))
        if label(cls) not in OPTIMIZERS:
            raise WireError(f"{data['optimizer']!r} is not an optimizer the course uses")
        groups = []
        for group in _list(data["groups"]):
            params = [self.args[_count(i)].get_parameter(str(name)) for i, name in _list(group["params"])]
            groups.append(dict(self.decode(group["options"], depth + 1), params=params))
        opt = cls(groups)
        opt.load_state_dict({"state": self.decode(data["state"], depth + 1),
                             "param_groups": opt.state_dict()["param_groups"]})
        return opt

    def _dataclass(self, data, depth):
        cls = self.resolve(str(data["dataclass"]))
        if not (isinstance(cls, type) and _course_dataclass(cls)):
            raise WireError(f"{data['dataclass']!r} is not one of the course's configs")
        return cls(**self.decode({"dict": [[k, v] for k, v in data["fields"].items()]}, depth + 1))

    def _function(self, data, depth):
        return self.resolve(str(data["function"]))


def resolver(allowed):
    """A resolve(label) for a Decoder: the class or function `allowed` holds under that label."""
    def resolve(name):
        found = allowed.get(name)
        if found is None:
            raise WireError(f"{name!r} is not something the grader sends")
        return found
    return resolve


def course_classes():
    """{label: class} of what a Decoder may build: course_lib's modules and configs, torch's optimizers."""
    import sys
    found = {}
    for name, module in list(sys.modules.items()):
        if not (name == "course_lib" or name.startswith("course_lib.")) or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name and (
                    issubclass(value, torch.nn.Module) or _course_dataclass(value)):
                found[label(value)] = value
    for name in OPTIMIZERS:
        module, _, qualname = name.rpartition(".")
        found[name] = getattr(importlib.import_module(module), qualname)
    return found


def _count(n):
    if type(n) is not int or not 0 <= n < 2 ** 62:
        raise WireError("a malformed size")
    return n


def _list(body):
    if not isinstance(body, list):
        raise WireError("a malformed collection")
    return body


def _pair(p):
    if not (isinstance(p, list) and len(p) == 2):
        raise WireError("a malformed dict item")
    return p


# ---------------------------------------------------------------- messages

def message(header, blob=b""):
    """One message: the lengths, the JSON header, the blob."""
    text = json.dumps(header, separators=(",", ":")).encode()
    if len(text) + len(blob) > MAX_BYTES:
        raise WireError(f"a message of more than {MAX_BYTES // 2 ** 20} MB")
    return _LENGTHS.pack(len(text), len(blob)) + text + blob


def send(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Reader:
    """Messages from one fd: next(deadline) -> (header, blob), or raises TimeoutError / EOFError /
    WireError. `others` are fds whose being readable ends a wait early (`Interrupted`)."""

    def __init__(self, fd):
        self.fd, self.buffer = fd, bytearray()   # grown in place: a large reply is copied once, not per read

    def _fill(self, want, deadline, others=()):
        while len(self.buffer) < want:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd, *others], [], [], left)
            if self.fd not in ready:
                if ready:
                    raise Interrupted(ready)
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise EOFError
            self.buffer += chunk

    def next(self, deadline=None, others=()):
        self._fill(_LENGTHS.size, deadline, others)
        n, m = _LENGTHS.unpack(self.buffer[:_LENGTHS.size])
        if n + m > MAX_BYTES:
            raise WireError(f"a message of {n + m} bytes")
        self._fill(_LENGTHS.size + n + m, deadline, others)
        start = _LENGTHS.size
        text, blob = bytes(self.buffer[start:start + n]), bytes(self.buffer[start + n:start + n + m])
        del self.buffer[:start + n + m]
        try:
            header = json.loads(text)
        except (ValueError, RecursionError):
            raise WireError("a header that is not JSON") from None
        if not isinstance(header, dict):
            raise WireError("a header that is not an object")
        return header, blob


class Interrupted(Exception):
    """Another fd became readable while a Reader waited: args[0] lists the readable fds."""


def exception_data(e):
    """An exception as data: [type name, module, message]."""
    try:
        text = str(e)
    except Exception:
        text = f"<a {type(e).__name__} whose message could not be shown>"
    return [str(type(e).__name__)[:200], str(type(e).__module__)[:200], text[:20_000]]
