"""Check an answer as the grader does: the checker on one side, the learner's function behind data.

`graded(name, fn)` runs check_<name> as the grader runs it (`remote.run_check`, with inputs
from a grading's seed) on a stand-in for `fn` that passes every call, follow-up and result
through the grader's wire format (`wire`: arguments encoded and decoded before fn sees them,
its result and the arguments as it left them encoded and decoded before the checker does),
with fn run in this process. A checker that reaches the learner's function any other way, or
passes something that cannot travel, fails here as it would in the grade; and the functions the
call is watched for are seen only where the graded kernel's watch sees them (`kernel._tables`:
course_lib's functions named in a checker module's module-level tables or named as the exercise,
others only when such a table names them), so a forbidden function written inline in a checker,
which the grade could not see, is not seen here either.
"""
import functools
import os
import sys

from course_lib import checks
from course_lib.checks import core
from course_lib.grading import remote, wire

BASE_SEED = 7_654_321   # not 0: the inputs a grading draws differ from the learner's own check's


class Loopback:
    """The grader's Remote, with the learner's function `fn` called in this process behind the wire."""

    def __init__(self, fn, exercise=None, modules=()):
        """With `exercise`, the watch's tables are those of the checker `modules` (its lesson's)."""
        self.fn, self.last = fn, None
        self.kind = None if callable(fn) else type(fn).__name__
        self.watch = (exercise, *_tables(tuple(modules))) if exercise else None

    def names(self, n):
        return core._parameter_names(self.fn, n)

    def _across(self, values):
        """values as the other side gets them: encoded, then decoded."""
        out = wire.Encoder(core.LEARNER_SIDE)
        data = out.arguments(list(values))
        return wire.Decoder(out.blob(), remote._resolve()).arguments(data)

    def call(self, args, kwargs, *, case, labels=(), around=None, observe=None):
        given = self._across(list(args) + list(kwargs.values()))
        a, k = given[:len(args)], dict(zip(kwargs, given[len(args):]))
        seen, found = {}, {}
        spy = _Labels(found, self.watch)
        inside = around() if around is not None else core.contextlib.nullcontext()
        try:
            with spy, inside:
                result = self.fn(*a, **k)
        except NotImplementedError:
            raise
        except Exception as e:
            seen["raised"], result = tuple(wire.exception_data(e)[::2]), None
        seen["labels"] = list(found)
        if around is not None:
            seen["around"] = self._across([inside.report()])[0]
        back = self._across([result, *a, *k.values()])
        if "raised" not in seen:
            seen["result"] = back[0]
        seen["after"] = [v if remote._mutable(v) else orig for v, orig in zip(back[1:], list(args) + list(kwargs.values()))]
        self.last = (result, a)
        if observe is not None:
            seen["observed"] = self._observe(observe, {})
        return seen

    def _observe(self, observer, data):
        result, args = self.last
        try:
            return self._across([observer(result, *args, **data)])[0]
        except Exception as e:
            return {"raised": f"{type(e).__name__}: {e}"}

    def follow(self, observer, data, *, case):
        return {"observed": self._observe(observer, self._across([data])[0])}


@functools.cache
def _tables(modules):
    """(course_lib's folder, the labels of the course's functions the tables name, {id(code): label},
    {id(builtin): label}) of the graded kernel's watch for these checker modules."""
    import course_lib
    from course_lib.grading import kernel
    lib = os.path.dirname(os.path.abspath(course_lib.__file__)) + os.sep
    (_, wanted, py_table, c_table, _), keep = kernel._tables(list(modules), lib, dict(core.LEARNER_SIDE))
    _KEPT.append(keep)   # (the ids stay theirs)
    return lib, wanted, py_table, c_table


_KEPT = []


class _Labels:
    """Notes the label of every function called that the grader's watch would report: with `watch`
    (exercise, lib, wanted, py_table, c_table) as the kernel's watch does, else every one."""

    def __init__(self, found, watch=None):
        self.found, self.cache, self.watch = found, {}, watch

    def _label(self, code, module):
        if self.watch is None:
            fake = type("f", (), {"__code__": code, "__module__": module, "__qualname__": code.co_qualname})
            return core.label_of(fake)
        exercise, lib, wanted, py_table, _ = self.watch
        if not code.co_filename.startswith(lib):
            return py_table.get(id(code))
        rel = code.co_filename[len(lib):-3].replace("/", ".").removesuffix(".__init__")
        label = f"course_lib.{rel}.{code.co_qualname}"
        seen = code.co_name == exercise or label in wanted or rel.startswith(("checks", "grading"))
        return label if seen else None

    def _profile(self, frame, event, arg):
        if event == "call":
            key = frame.f_code
            if key not in self.cache:
                self.cache[key] = self._label(key, frame.f_globals.get("__name__"))
        elif event == "c_call":
            key = id(arg)
            if key not in self.cache:
                self.cache[key] = core.label_of(arg) if self.watch is None else self.watch[4].get(key)
        else:
            return
        if self.cache[key] is not None:
            self.found[self.cache[key]] = True

    def __enter__(self):
        self.before = sys.getprofile()
        sys.setprofile(self._profile)

    def __exit__(self, *exc):
        sys.setprofile(self.before)


def graded(name, fn, base_seed=BASE_SEED):
    """(status, what the check said): passed (its pass line), failed (its feedback), unfinished (the
    stub's message), as the grader decides it for fn."""
    check = getattr(checks, f"check_{name}")   # its module imported: its learner_side functions known
    loop = Loopback(fn, name, [check.__module__])
    status, said, _ = remote.run_check(check, remote.Function(name, loop), base_seed)
    for prefix in ("AssertionError: ", "NotImplementedError: "):
        said = said.removeprefix(prefix)
    return status, said
