"""Record what a learner's function did, and replay it where no learner code runs.

A check runs in one of three modes:

- **direct** (a learner's own check cell): every probe runs, nothing is kept;
- **record** (the graded notebook, in the sandbox): every probe runs, and what it returned or
  raised is kept as plain data (`Recording`), written by `Recording.save` as JSON and safetensors;
- **replay** (the grader's own process, with no learner code in it): no probe runs; each
  returns, or raises, what the record says, and the checker's comparisons run on that.

A *probe* is the only place a checker touches the learner's code or what it made: calling
the function, reading a module it changed, back-propagating through its graph. Everything
else a checker does (drawing inputs, computing the expected answer, comparing, choosing the
feedback) runs in every mode, so in replay the grader decides the verdict itself. A record
is hostile input: `load` reads it without running code (JSON and safetensors, never pickle),
refuses anything malformed or too large with `RecordError`, and a replayed check whose probes
do not line up with the record fails with feedback rather than passing.

Inputs are drawn from `seed(n)`: n itself in direct mode (the learner's feedback is
reproducible), n offset by a seed drawn afresh for each grading in record and replay.
"""
import base64
import builtins
import contextlib
import json
import math
import os

import numpy as np
import torch

MAX_BYTES = 64 * 2**20       # a record's JSON and tensors together, per exercise
MAX_DEPTH = 32               # nesting of lists, tuples and dicts in one value
MAX_ITEMS = 200_000          # encoded values in one record

TORCH_DTYPES = {name: getattr(torch, name) for name in (
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
    "bool", "complex64", "complex128")}
NUMPY_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                "uint16", "uint32", "uint64", "bool", "complex64", "complex128")


class RecordError(ValueError):
    """A record that cannot be read: malformed, too large, or not what a probe could write."""


class ReplayMismatch(AssertionError):
    """A replayed check asked for a probe the record does not hold: a failed check, with feedback."""


_MODE = None   # None (direct), a Recording, or a Replay


def mode():
    """'direct', 'record' or 'replay'."""
    return "direct" if _MODE is None else _MODE.mode


def seed(n=0):
    """The seed for a check's n-th random input: n in direct mode, offset per grading otherwise."""
    return n if _MODE is None else (_MODE.base_seed + n) % 2**63


def made(checker):
    """Note a Checker made while recording or replaying, so the grader can read its count of passed cases."""
    if _MODE is not None:
        _MODE.checkers.append(checker)


def probe(label, thunk):
    """thunk() in direct and record mode (recorded in the latter); in replay, what the record holds.

    `label` names the probe (e.g. the call's input); a replay checks that the record's
    probes come with the same labels in the same order.
    """
    if _MODE is None:
        return thunk()
    return _MODE.probe(label, thunk)


class Recording:
    """The probes of one check, as they ran: labels, values returned (encoded at once, so that
    nothing done to a value afterwards changes its record), exceptions raised."""
    mode = "record"

    def __init__(self, base_seed):
        self.base_seed = int(base_seed)
        self.observations = []   # JSON-ready: {"label", "value"} or {"label", "raised"}
        self.tensors = {}
        self.checkers = []       # the Checkers made while recording (see `made`)

    def probe(self, label, thunk):
        try:
            value = thunk()
        except (KeyboardInterrupt, SystemExit):
            raise                    # the record ends here; a replay reports it unfinished
        except BaseException as e:
            self.observations.append({"label": str(label), "raised": _exception_data(e)})
            raise
        try:
            encoded = _encode(value, self.tensors)
        except RecordError as e:
            error = RecordError(f"the value could not be recorded: {e}")
            self.observations.append({"label": str(label), "raised": _exception_data(error)})
            raise error from None
        self.observations.append({"label": str(label), "value": encoded})
        return value

    def save(self, stem):
        """Write the record to stem.json and stem.safetensors (no pickle, no code)."""
        from safetensors.torch import save_file
        stem = os.fspath(stem)
        save_file(self.tensors, stem + ".safetensors")
        with open(stem + ".json", "w") as f:
            json.dump({"format": 1, "observations": self.observations}, f)


class Replay:
    """Answers each probe from a record, in order, without running it."""
    mode = "replay"

    def __init__(self, observations, base_seed, exercise="?"):
        self.base_seed = int(base_seed)
        self.observations = list(observations)
        self.exercise = exercise
        self.next = 0
        self.checkers = []       # the Checkers made while replaying (see `made`)

    def probe(self, label, thunk):
        if self.next >= len(self.observations):
            raise ReplayMismatch(
                f"Exercise '{self.exercise}': the check stopped in your notebook before it "
                f"reached {label} (the grader has no result for it)\n"
                f"Hint: run the check cell in your notebook: it must finish without an error "
                f"(an endless loop, a crash of the kernel, or an exit inside your function "
                f"stop it)")
        seen = self.observations[self.next]
        self.next += 1
        if seen["label"] != str(label):
            raise ReplayMismatch(
                f"Exercise '{self.exercise}': the results your notebook recorded do not match "
                f"the check (expected a result for {label}, found one for {seen['label']})\n"
                f"Hint: grade the notebook again; the record is written by the grader's probe "
                f"cell and is not to be changed")
        if "raised" in seen:
            raise _exception_from(seen["raised"])
        return seen["value"]

    def finished(self):
        """Whether every recorded probe was asked for."""
        return self.next == len(self.observations)


@contextlib.contextmanager
def recording(base_seed):
    """Record the probes of the checks run inside; yields the Recording."""
    global _MODE
    previous, _MODE = _MODE, Recording(base_seed)
    try:
        yield _MODE
    finally:
        _MODE = previous


@contextlib.contextmanager
def replaying(observations, base_seed, exercise="?"):
    """Replay the probes of a check from `observations` (a Recording's, or `load`'s)."""
    global _MODE
    previous, _MODE = _MODE, Replay(observations, base_seed, exercise)
    try:
        yield _MODE
    finally:
        _MODE = previous


class Replayed:
    """The learner's function in replay: present (callable), never called (a probe answers instead)."""

    def __init__(self, name):
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"the check of {self.__name__} called the learner's function outside a "
                           f"probe: a bug in the checker (course_lib.checks), not in the answer")


# ---------------------------------------------------------------- exceptions as data

def _exception_data(e):
    kind = type(e)
    try:
        text = str(e)
    except Exception:  # a learner's exception whose __str__ fails
        text = f"<{kind.__name__} whose message could not be shown>"
    return {"type": str(kind.__name__), "module": str(kind.__module__),
            "qualname": str(kind.__qualname__), "message": text[:20_000]}


def _exception_from(data):
    """An exception like the recorded one: same class name and message (a builtin's subclass)."""
    name, module, text = data["type"], data["module"], data["message"]
    if module == "builtins" and name == "NotImplementedError":
        return NotImplementedError(text)
    base = getattr(builtins, name, None) if module == "builtins" else None
    if not (isinstance(base, type) and issubclass(base, Exception)):
        base = Exception
    kind = type(name, (base,), {"__str__": lambda self: text, "__module__": module,
                                "__qualname__": data["qualname"]})
    return kind(text)


# ---------------------------------------------------------------- values as data

def _opaque(value):
    kind = type(value)
    try:
        shown = repr(value)
    except Exception:
        shown = f"<{kind.__name__}>"
    return {"opaque": str(kind.__qualname__), "module": str(kind.__module__), "repr": shown[:300]}


class Opaque:
    """A recorded value of a kind that is not plain data, replayed by its type's name and repr."""

    def __init__(self, text):
        self._text = text

    def __repr__(self):
        return self._text


def _encode(value, tensors, depth=0):
    """JSON-ready data for `value`; arrays and tensors go into `tensors` (name -> tensor)."""
    if depth > MAX_DEPTH:
        raise RecordError(f"a value nested more than {MAX_DEPTH} deep")
    kind = type(value)
    if value is None or kind in (bool, str):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int) and not isinstance(value, np.generic):
        return {"int": str(int(value))}
    if isinstance(value, float) and not isinstance(value, np.generic):
        return _float(float(value))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, complex):
        return {"complex": [_float(value.real), _float(value.imag)]}
    if isinstance(value, torch.Size):
        return {"size": [int(n) for n in value]}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_encode(v, tensors, depth + 1) for v in value]
        if isinstance(value, list):
            return items
        tag = "tuple" if isinstance(value, tuple) else "frozenset" if isinstance(value, frozenset) else "set"
        return {tag: items}
    if isinstance(value, dict):
        return {"dict": [[_encode(k, tensors, depth + 1), _encode(v, tensors, depth + 1)]
                         for k, v in value.items()]}
    if isinstance(value, torch.dtype):
        return {"torch_dtype": str(value).removeprefix("torch.")}
    if isinstance(value, np.dtype):
        return {"np_dtype": value.name}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.Tensor):
        return _tensor(value, tensors)
    if isinstance(value, np.ndarray):
        return _ndarray(value, tensors)
    if isinstance(value, np.generic) and value.dtype.name in NUMPY_DTYPES:
        return {"npscalar": value.dtype.name, "value": _encode(value.item(), tensors, depth + 1)}
    return _opaque(value)


def _float(x):
    return x if math.isfinite(x) else {"float": repr(x)}


def _tensor(t, tensors):
    name = str(t.dtype).removeprefix("torch.")
    if name not in TORCH_DTYPES or t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
        return _opaque(t)
    key = f"t{len(tensors)}"
    tensors[key] = torch.Tensor.detach(t).to("cpu", copy=True).contiguous()
    return {"tensor": key, "dtype": name, "requires_grad": bool(t.requires_grad),
            "device": t.device.type}


def _ndarray(a, tensors):
    a = np.asarray(a)               # a subclass is kept as its plain data
    if a.dtype.name not in NUMPY_DTYPES or a.dtype.name in ("uint16", "uint32", "uint64"):
        return _opaque(a)
    key = f"t{len(tensors)}"
    tensors[key] = torch.from_numpy(np.array(a, order="C", copy=True))  # 0-d stays 0-d
    return {"ndarray": key, "dtype": a.dtype.name, "shape": [int(n) for n in a.shape]}


def _decode(data, tensors, budget, depth=0):
    """The value `_encode` wrote; RecordError for anything it could not have written."""
    budget[0] -= 1
    if budget[0] < 0:
        raise RecordError(f"more than {MAX_ITEMS} values in one record")
    if depth > MAX_DEPTH:
        raise RecordError(f"a value nested more than {MAX_DEPTH} deep")
    if data is None or isinstance(data, (bool, str)):
        return data
    if isinstance(data, float):
        return data
    if isinstance(data, list):
        return [_decode(v, tensors, budget, depth + 1) for v in data]
    if not (isinstance(data, dict) and len(data) >= 1):
        raise RecordError(f"an unexpected {type(data).__name__} in a record")
    tag = next(iter(data))
    body = data[tag]
    try:
        if tag == "int":
            if not isinstance(body, str) or len(body) > 5000:
                raise RecordError("a malformed int")
            return int(body)
        if tag == "float":
            if body not in ("nan", "inf", "-inf"):
                raise RecordError("a malformed float")
            return float(body)
        if tag == "bytes":
            return base64.b64decode(body, validate=True)
        if tag == "complex":
            real, imag = (_decode(v, tensors, budget, depth + 1) for v in _list(body))
            if type(real) is not float or type(imag) is not float:
                raise RecordError("a malformed complex number")
            return complex(real, imag)
        if tag == "size":
            return torch.Size([_int(n) for n in _list(body)])
        if tag in ("tuple", "set", "frozenset"):
            items = [_decode(v, tensors, budget, depth + 1) for v in _list(body)]
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
        if tag == "dict":
            return {_decode(k, tensors, budget, depth + 1): _decode(v, tensors, budget, depth + 1)
                    for k, v in (_pair(p) for p in _list(body))}
        if tag == "torch_dtype":
            return TORCH_DTYPES[body]
        if tag == "np_dtype":
            if body not in NUMPY_DTYPES:
                raise RecordError(f"an unknown dtype {body!r}")
            return np.dtype(body)
        if tag == "device":
            return torch.device(str(body))
        if tag == "tensor":
            t = _stored(tensors, body, data.get("dtype"))
            if data.get("requires_grad") is True and (t.is_floating_point() or t.is_complex()):
                t = t.clone().requires_grad_(True)
            return t
        if tag == "ndarray":
            t = _stored(tensors, body, data.get("dtype"), numpy=True)
            a = t.numpy().copy()
            if list(a.shape) != data.get("shape"):
                raise RecordError("an array whose shape does not match its record")
            return a
        if tag == "npscalar":
            if body not in NUMPY_DTYPES:
                raise RecordError(f"an unknown dtype {body!r}")
            item = _decode(data.get("value"), tensors, budget, depth + 1)
            if type(item) not in (bool, int, float, complex):
                raise RecordError("a NumPy scalar whose value is not a number")
            return np.dtype(body).type(item)
        if tag == "opaque":
            kind = type(str(body)[:200], (Opaque,), {"__module__": str(data.get("module"))[:200]})
            return kind(str(data.get("repr"))[:300])
    except RecordError:
        raise
    except (KeyError, TypeError, ValueError, OverflowError, RuntimeError) as e:
        raise RecordError(f"a malformed {tag!r} value ({type(e).__name__}: {e})") from None
    raise RecordError(f"an unknown kind of value {tag!r}")


def _int(n):
    if type(n) is not int or not 0 <= n < 2**63:
        raise RecordError("a malformed size")
    return n


def _list(body):
    if not isinstance(body, list):
        raise RecordError("a malformed collection")
    return body


def _pair(p):
    if not (isinstance(p, list) and len(p) == 2):
        raise RecordError("a malformed dict item")
    return p


def _stored(tensors, key, dtype, numpy=False):
    if not isinstance(key, str) or key not in tensors:
        raise RecordError(f"a tensor {key!r} missing from the record")
    t = tensors[key]
    if dtype not in (NUMPY_DTYPES if numpy else TORCH_DTYPES):
        raise RecordError(f"an unknown dtype {dtype!r}")
    want = TORCH_DTYPES.get(dtype) or getattr(torch, dtype)
    if t.dtype != want:
        raise RecordError(f"a tensor stored as {t.dtype}, recorded as {dtype}")
    return t


# ---------------------------------------------------------------- files

def load(stem, max_bytes=MAX_BYTES):
    """The observations `Recording.save` wrote, decoded; RecordError when they are missing, malformed or too large."""
    from safetensors import SafetensorError
    from safetensors.torch import load as load_bytes
    stem = os.fspath(stem)
    parts = []
    for suffix in (".json", ".safetensors"):
        parts.append(_read_regular(stem + suffix, max_bytes - sum(len(p) for p in parts)))
    try:
        doc = json.loads(parts[0])
    except (ValueError, RecursionError) as e:
        raise RecordError(f"the record is not valid JSON ({type(e).__name__})") from None
    try:
        tensors = load_bytes(parts[1])
    except (SafetensorError, ValueError, RuntimeError, OSError) as e:
        raise RecordError(f"the record's tensors cannot be read ({type(e).__name__}: {e})") from None
    if not (isinstance(doc, dict) and doc.get("format") == 1 and isinstance(doc.get("observations"), list)):
        raise RecordError("the record is not in the grader's format")
    budget, out = [MAX_ITEMS], []
    for seen in doc["observations"]:
        if not (isinstance(seen, dict) and isinstance(seen.get("label"), str)):
            raise RecordError("a probe without a label")
        if "raised" in seen:
            r = seen["raised"]
            if not (isinstance(r, dict) and all(isinstance(r.get(k), str) for k in
                                                ("type", "module", "qualname", "message"))):
                raise RecordError("a malformed exception")
            if not r["type"].isidentifier():
                raise RecordError("an exception whose class name is not a name")
            out.append({"label": seen["label"], "raised": r})
        elif "value" in seen:
            out.append({"label": seen["label"], "value": _decode(seen["value"], tensors, budget)})
        else:
            raise RecordError("a probe with neither a value nor an exception")
    return out


def _read_regular(path, limit):
    """The bytes of a regular file (not a link, FIFO or device), refused above `limit` bytes."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise RecordError(f"there is no record {os.path.basename(path)}") from None
    except OSError as e:
        raise RecordError(f"the record {os.path.basename(path)} cannot be opened "
                          f"({e.strerror}; a link?)") from None
    try:
        info = os.fstat(fd)
        import stat
        if not stat.S_ISREG(info.st_mode):
            raise RecordError(f"the record {os.path.basename(path)} is not a regular file")
        if info.st_size > limit:
            raise RecordError(f"the record is larger than {MAX_BYTES // 2**20} MB")
        with os.fdopen(fd, "rb") as f:
            fd = None
            data = f.read(limit + 1)
        if len(data) > limit:
            raise RecordError(f"the record is larger than {MAX_BYTES // 2**20} MB")
        return data
    finally:
        if fd is not None:
            os.close(fd)
