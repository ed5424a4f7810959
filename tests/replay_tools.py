"""Check an answer as the grader does: the checker on one side, the learner's function behind data.

`replayed(name, fn)` runs check_<name> as the grader runs it (`remote.run_check`, with inputs
from a grading's seed) on a stand-in for `fn` that passes every call, follow-up and result
through the grader's wire format (`wire`: arguments encoded and decoded before fn sees them,
its result and the arguments as it left them encoded and decoded before the checker does),
with fn run in this process. A checker that reaches the learner's function any other way, or
passes something that cannot travel, fails here as it would in the grade.
"""
import sys

from course_lib import checks
from course_lib.checks import core
from course_lib.grading import remote, wire

BASE_SEED = 7_654_321   # not 0: the inputs a grading draws differ from the learner's own check's


class Loopback:
    """The grader's Remote, with the learner's function `fn` called in this process behind the wire."""

    def __init__(self, fn):
        self.fn, self.last = fn, None
        self.kind = None if callable(fn) else type(fn).__name__

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
        spy = _Labels(found)
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


class _Labels:
    """Notes the label of every course_lib function and builtin called, as the grader's watch names them."""

    def __init__(self, found):
        self.found, self.cache = found, {}

    def _profile(self, frame, event, arg):
        if event == "call":
            key = frame.f_code
            if key not in self.cache:
                fake = type("f", (), {"__code__": key, "__module__": frame.f_globals.get("__name__"),
                                      "__qualname__": key.co_qualname})
                self.cache[key] = core.label_of(fake)
        elif event == "c_call":
            key = id(arg)
            if key not in self.cache:
                self.cache[key] = core.label_of(arg)
        else:
            return
        if self.cache[key] is not None:
            self.found[self.cache[key]] = True

    def __enter__(self):
        self.before = sys.getprofile()
        sys.setprofile(self._profile)

    def __exit__(self, *exc):
        sys.setprofile(self.before)


def replayed(name, fn, base_seed=BASE_SEED):
    """(status, what the check said): passed (its pass line), failed (its feedback), unfinished (the
    stub's message), as the grader decides it for fn."""
    check = getattr(checks, f"check_{name}")   # its module imported: its learner_side functions known
    status, said, _ = remote.run_check(check, remote.Function(name, Loopback(fn)), base_seed)
    for prefix in ("AssertionError: ", "NotImplementedError: "):
        said = said.removeprefix(prefix)
    return status, said
