"""The grader's side of a graded kernel's server: each exercise checked by the grader's own checker.

A `Served` holds the grader's ends of a served notebook's five pipes (`kernel`): CTL and CST
(commands to, reports from, the server C), REQ and REP (calls to, replies from, the server of one
exercise S) and FLAG (what S's watch saw). `Served.check` runs the exercise's checker here,
seeded, on a stand-in (`Function`) whose calls `Checker.call` and `Checker.follow` send to S as
data (`wire`, `Remote`). A pass is the lesson's exact pass line with nothing flagged
(`flags_for`): otherwise no credit, and the feedback says what was seen.
"""
import contextlib
import functools
import io
import os
import re
import secrets
import select
import sys
import time
from dataclasses import dataclass, field

from course_lib.grading import wire

def ended(status):
    """Why the server of an exercise ended while the grader's check ran, in words (its exit status)."""
    from course_lib.grading.plugin import death
    code = int(status) if str(status).lstrip("-").isdigit() else status
    return f"your function ended the grader's process while it was checked: {death(code, 'it')}"


CLEAR_TIMEOUT = 10   # seconds the server may take to answer a command of the grader's
PAST = ("your function ran past the notebook's time limit, which counts its run and every call of "
        "its functions (an endless loop, or far too slow?)")
_LINE = re.compile(r"^F ([\w.:<>()' ,-]{1,300})$")


@dataclass
class Outcome:
    """What checking one exercise came to."""
    status: str                  # passed, failed, unfinished, not defined
    feedback: str
    flagged: list = field(default_factory=list)   # what the watch saw that earns no credit, in words
    labels: list = field(default_factory=list)    # every label the watch reported
    cases_passed: int | None = None               # the cases its Checkers counted as passed


def server_pipes():
    """The five pipes of a notebook's server: (the server's ends: CTL, REQ to read, REP, FLAG, CST to
    write; the grader's ends: the others), the replies' and flags' pipes made large (1 MiB)."""
    import fcntl
    pairs = [os.pipe() for _ in range(5)]
    for read_end, _ in pairs[2:4]:
        with contextlib.suppress(OSError):
            fcntl.fcntl(read_end, 1031, 1 << 20)   # F_SETPIPE_SZ
    theirs = [pairs[0][0], pairs[1][0], pairs[2][1], pairs[3][1], pairs[4][1]]
    mine = [pairs[0][1], pairs[1][1], pairs[2][0], pairs[3][0], pairs[4][0]]
    return theirs, mine


class Unserved(Exception):
    """The server cannot be reached, or answered out of turn: why, in words."""


class Served:
    """The grader's ends of a served notebook's pipes (fds it owns), and the notebook's deadline."""

    def __init__(self, ctl, req, rep, flag, cst, deadline, call_timeout):
        self.ctl, self.req, self.rep, self.flag, self.cst = ctl, req, rep, flag, cst
        self.deadline, self.call_timeout = deadline, call_timeout
        self.replies, self.reports = wire.Reader(rep), b""
        self.flags, self.gone = b"", None

    # ------------------------------------------------ C: commands and reports
    def _command(self, line):
        if self.gone:
            raise Unserved(self.gone)
        try:
            wire.send(self.ctl, line.encode() + b"\n")
        except OSError as e:
            raise Unserved(f"the grader's server could not be reached ({e.strerror})") from None

    def _report(self, deadline):
        """C's next report line (words), or None by the deadline."""
        while b"\n" not in self.reports:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.cst], [], [], left)
            if ready:
                chunk = os.read(self.cst, 4096)
                if not chunk:
                    raise Unserved("the grader's server ended")
                self.reports += chunk
        line, _, self.reports = self.reports.partition(b"\n")
        words = line.decode("ascii", "replace").split(" ")
        if words[0] == "gone":
            self.gone = "the grader's server ended (its process was killed, or ended itself)"
            raise Unserved(self.gone)
        return words

    def _drain(self, fd):
        data = b""
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            data += chunk
        return data

    def reset(self):
        """Make sure what is read from here on is the server's answer to the grader alone: what the
        notebook's processes wrote on the pipes before they were killed is read and dropped."""
        nonce = secrets.token_hex(8)
        self._command(f"reset {nonce}")
        limit = time.monotonic() + CLEAR_TIMEOUT
        while True:
            words = self._report(limit)
            if words is None:
                raise Unserved("the grader's server did not answer")
            if words == ["reset", nonce]:
                break
        self._drain(self.rep)
        self._drain(self.flag)
        self.replies.buffer, self.flags = bytearray(), b""

    # ------------------------------------------------ one exercise
    def check(self, exercise, checker, seed, pass_line):
        """Check `exercise` with `checker` (check_<name>, the grader's own) on the learner's function; an Outcome."""
        remote = Remote(self, exercise)
        try:
            ready = remote.start()
        except Unserved as e:
            return Outcome("failed", f"the grader could not check it: {e}")
        if not ready["defined"]:
            remote.end()
            return Outcome("not defined", f"name '{exercise}' is not defined: no cell defined it, or the "
                                          f"cell that does stopped with an error")
        try:
            status, feedback, made = run_check(checker, Function(exercise, remote), seed)
        finally:
            remote.end()
        if status == "passed" and feedback != pass_line.strip():
            status, feedback = "failed", (f"the check printed {feedback!r}, not the lesson's pass line "
                                          f"{pass_line.strip()!r} (the lesson and its checker disagree: tell "
                                          f"the instructor)")
        flagged = flags_for(exercise, remote.labels)
        if flagged and status == "passed":
            status, feedback = "failed", "no credit: " + "; ".join(flagged)
        elif flagged:
            feedback = feedback + "\n(also seen: " + "; ".join(flagged) + ")"
        cases = sum(c.passed for c in made) if made else None
        return Outcome(status, feedback, flagged, list(remote.labels), cases)


def run_check(checker, function, seed):
    """(status, what it said, the Checkers it made): checker(function) run with inputs from `seed`;
    status passed (its last printed line), failed (AssertionError's feedback), unfinished
    (NotImplementedError's), or failed with the checker's own error (never a pass)."""
    from course_lib.checks.core import seeded
    out, made = io.StringIO(), []
    try:
        with seeded(seed) as made, contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            checker(function)
        lines = out.getvalue().strip().splitlines()
        return "passed", lines[-1] if lines else "", made
    except NotImplementedError as e:
        return "unfinished", f"NotImplementedError: {e}", made
    except AssertionError as e:
        return "failed", f"AssertionError: {e}", made
    except Exception as e:   # the checker's own bug: never a pass
        return "failed", f"the grader's check stopped with {type(e).__name__}: {e}", made


class Function:
    """What the grader's checker is given in place of the learner's function (`Checker` reaches it by .remote)."""

    def __init__(self, name, remote):
        self.__name__ = self.__qualname__ = name
        self.remote = remote

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"the check of {self.__name__} called the learner's function outside "
                           f"Checker.call: a bug in course_lib.checks, not in the answer")


class Remote:
    """The server of one exercise (S), as `Checker.call` and `Checker.follow` use it."""

    def __init__(self, served, exercise):
        self.served, self.exercise, self.nonce = served, exercise, secrets.token_hex(8)
        self.labels, self.ended, self.ready = [], None, {}
        self.kind = None

    def start(self):
        s = self.served
        if time.monotonic() >= s.deadline:
            raise Unserved(PAST)
        s._drain(s.rep)             # what an earlier exercise's server wrote past its replies
        s.replies.buffer = bytearray()
        s._command(f"serve {self.nonce} {self.exercise}")
        header = self._reply(time.monotonic() + CLEAR_TIMEOUT + s.call_timeout)
        if "ready" not in header:
            raise Unserved(self.ended or f"the grader's server did not start ({header})")
        self.ready = header
        self.kind = None if header.get("callable") else str(header.get("kind"))[:100]
        return header

    def names(self, n):
        """The learner's function's first n parameter names (positions where unknown)."""
        params = self.ready.get("params")
        names = [str(p)[:100] for p in params][:n] if isinstance(params, list) else []
        return names + [f"argument {i + 1}" for i in range(len(names), n)]

    def _reply(self, deadline):
        """S's next reply for this exercise (a header with "blob"), flags read meanwhile; {} and
        self.ended set when S ends, runs past the deadline, or breaks the protocol."""
        s = self.served
        deadline = min(deadline, s.deadline)
        while self.ended is None:
            try:
                header, blob = s.replies.next(deadline, others=(s.flag, s.cst))
            except wire.Interrupted as e:
                self._read_others(e.args[0])
                continue
            except TimeoutError:
                limit = s.call_timeout if deadline < s.deadline else None
                self._stop(f"your function ran past the {limit:g} s time limit for a call (an endless loop, "
                           f"or far too slow?)" if limit else PAST)
                break
            except (EOFError, OSError, wire.WireError) as e:
                self._stop(f"the grader's server broke off ({type(e).__name__}: {e})")
                break
            if header.get("n") != self.nonce:
                continue            # not this exercise's
            self._read_others([s.flag])
            header["blob"] = blob
            return header
        return {}

    def _read_others(self, ready):
        s = self.served
        if s.flag in ready:
            s.flags += s._drain(s.flag)
            while b"\n" in s.flags:
                line, _, s.flags = s.flags.partition(b"\n")
                found = _LINE.match(line.decode("utf-8", "replace"))
                self.labels.append(found.group(1) if found else "tamper:something else wrote on the grader's flag pipe")
        if s.cst in ready:
            s.reports += s._drain(s.cst)
            while b"\n" in s.reports:
                line, _, s.reports = s.reports.partition(b"\n")
                words = line.decode("ascii", "replace").split(" ")
                if words[:2] == ["ended", self.nonce]:
                    self._read_others([s.flag])
                    self.ended = ended(words[2] if len(words) > 2 else "?")
                elif words[0] == "gone":
                    self.ended = s.gone = "the grader's server ended (its process was killed, or ended itself)"

    def _stop(self, why):
        """Kill S (C reports it ended), and remember why."""
        s = self.served
        self.ended = why
        with contextlib.suppress(Unserved):
            s._command("kill")
            limit = time.monotonic() + CLEAR_TIMEOUT
            while True:
                words = s._report(limit)
                if words is None or words[:2] == ["ended", self.nonce]:
                    break
        self._read_others([s.flag])

    def end(self):
        """End S (C kills it, and says so once its last flags are written)."""
        if self.ended is None:
            self._stop("ended")

    def _send(self, header, blob=b""):
        try:
            wire.send(self.served.req, wire.message(dict(header, n=self.nonce), blob))
        except OSError as e:
            self._stop(f"the grader's server could not be reached ({e.strerror})")

    def call(self, args, kwargs, *, case, labels=(), around=None, observe=None):
        """Send one call; a dict as Checker.call reads it: "result" or "raised" or "ended", "after"
        (each argument as the call left it), "labels" (what the watch saw during it), "around",
        "observed"."""
        if self.ended is None and time.monotonic() >= self.served.deadline:
            self._stop(PAST)
        if self.ended:
            return {"ended": self.ended, "after": list(args) + list(kwargs.values()), "labels": []}
        from course_lib.checks.core import LEARNER_SIDE, label_of
        out = wire.Encoder(LEARNER_SIDE)
        values = list(args) + list(kwargs.values())
        header = {"op": "call", "args": out.arguments(list(args)),
                  "kwargs": out.encode(dict(kwargs)),
                  "after": [i for i, v in enumerate(args) if _mutable(v)],
                  "after_kw": [k for k, v in kwargs.items() if _mutable(v)]}
        if observe is not None:
            header["observe"] = label_of(observe)
        if around is not None:
            header["around"] = label_of(around)
        before = len(self.labels)
        self._send(header, out.blob())
        reply = self._reply(time.monotonic() + self.served.call_timeout)
        seen = {"labels": self.labels[before:], "after": values}
        if self.ended:
            return dict(seen, ended=self.ended)
        try:
            seen.update(self._decode_call(reply, args, kwargs))
        except (wire.WireError, KeyError, TypeError) as e:
            seen["raised"] = ("ValueError", f"the grader could not read what your function returned ({e})")
        return seen

    def _decode_call(self, reply, args, kwargs):
        if "error" in reply:
            return {"raised": ("ValueError", str(reply["error"])[:2000])}
        decoder = wire.Decoder(reply["blob"], _resolve())
        after = list(args) + list(kwargs.values())
        mutable = [i for i, v in enumerate(args) if _mutable(v)]
        for i, data in zip(mutable, reply.get("after", [])):
            after[i] = decoder.decode(data)
        names = list(kwargs)
        for k, data in (reply.get("kw_after") or {}).items():
            if k in kwargs:
                after[len(args) + names.index(k)] = decoder.decode(data)
        seen = {"after": after}
        if "around" in reply:
            seen["around"] = _observed(reply["around"], decoder)
        if "raised" in reply:
            kind, _, message = (str(x) for x in reply["raised"])
            if reply.get("not_implemented"):
                raise NotImplementedError(message)
            seen["raised"] = (kind, message)
        else:
            seen["result"] = decoder.decode(reply["result"])
        if "observed" in reply:
            seen["observed"] = _observed(reply["observed"], decoder)
        return seen

    def follow(self, observer, data, *, case):
        """Run a learner_side observer on the last call, in S; {"observed": its value} or {"ended"}."""
        if self.ended:
            return {"ended": self.ended}
        from course_lib.checks.core import LEARNER_SIDE, label_of
        out = wire.Encoder(LEARNER_SIDE)
        self._send({"op": "observe", "name": label_of(observer), "data": out.encode(dict(data))}, out.blob())
        reply = self._reply(time.monotonic() + self.served.call_timeout)
        if self.ended:
            return {"ended": self.ended}
        if "error" in reply:
            return {"observed": {"raised": str(reply["error"])[:2000]}}
        decoder = wire.Decoder(reply["blob"], _resolve())
        return {"observed": _observed(reply.get("observed") or {}, decoder)}


def _resolve():
    """What a reply may hold besides plain data: the course's classes, the checkers' learner_side functions."""
    from course_lib.checks.core import LEARNER_SIDE
    return wire.resolver({**_classes(len(sys.modules)), **LEARNER_SIDE})


@functools.lru_cache(maxsize=4)
def _classes(_):
    return wire.course_classes()


def _observed(data, decoder):
    if "raised" in data:
        kind, _, message = (str(x) for x in data["raised"])
        return {"raised": f"{kind}: {message}"}
    return decoder.decode(data.get("value"))


def _mutable(value):
    """Whether an argument can come back changed: not a plain number, string or None."""
    return not (value is None or type(value) in (bool, int, float, complex, str, bytes))


def flags_for(exercise, labels):
    """What of the watch's `labels` earns `exercise` no credit, in words (each once)."""
    found = []
    for label in dict.fromkeys(labels):
        original = label.removeprefix("copy:")
        copied = "a copy of " if label.startswith("copy:") else ""
        if label.startswith("tamper:"):
            what = label[7:]
            found.append(f"while it was checked your function used {what}, which the grader does not "
                         f"allow (it would switch off what watches for the course's answer, or run "
                         f"code where it cannot be watched); flagged for the instructor's look")
        elif original.startswith(("course_lib.checks.", "course_lib.grading.")):
            found.append(f"your function called {copied}{original}, the grader's own code (the checker's "
                         f"reference); flagged for the instructor's look")
        elif original.startswith("course_lib.") and original.rsplit(".", 1)[-1] == exercise:
            found.append(f"your function called {copied}{original}, the course's own {exercise}: the answer "
                         f"this exercise asks you to write; flagged for the instructor's look")
    return found
