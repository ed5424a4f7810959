"""The event a check sends to the course's live view on a JupyterHub (`course_lib.live`).

On a hub where the live view is turned on, each check run in a learner's kernel sends one
small event: the lesson, the exercise, whether it passed or else the failure's kind and its
reason in the check's own words (the first line of its feedback, without the learner's
values), and the help taken (the highest hint shown, whether the solution was). Never code,
answers, inputs or outputs. The hub's token names the learner; the event does not.

It sends only when all of these hold, and otherwise does nothing at all (no thread, no
network, no message):

- the check runs in the learner's own kernel, not in the grader (whose checks run inside
  `course_lib.checks.core.seeded`; a graded kernel's environment holds neither variable below);
- JUPYTERHUB_API_TOKEN (every single-user server on a hub has it, and its kernels inherit it)
  and COURSE_LIVE_URL (the hub's configuration sets it for single-user servers where the
  service runs; docs/hub.md, section 6) are both set: a self-paced learner and a grader's sandbox
  have neither;
- the learner has not switched it off: `COURSE_LIVE=off` in the environment, or
  `switch_off()` (kept in ~/.config/course_lib/live-off for every later kernel).

Sending never delays or disturbs the lesson: the event goes into a short queue that one
background thread posts from, with a short timeout; whatever fails is dropped without an
exception or a message. `last()` says what became of the latest event, for a learner who asks.

The event's schema (`EVENT`, `validated`) lives here, and the service checks each event it
receives with `validated`.
"""
import functools
import json
import os
import queue
import re
import sys
import threading
from pathlib import Path

# ---------------------------------------------------------------- the event

KINDS = ("unfinished", "wrong", "raised", "unreadable", "error")   # why a check failed
EVENT = {   # field -> what it holds (the service refuses any other field)
    "lesson": "two digits, the lesson's number: '00'",
    "exercise": "the exercise's name: 'text_to_ids'",
    "passed": "true or false",
    "kind": f"null when passed, else one of {', '.join(KINDS)}",
    "reason": "null when passed, else the check's first line of feedback, at most 200 characters",
    "hints": "the highest hint shown for the exercise in this kernel, 0 to 9",
    "solution": "whether the exercise's solution was shown in this kernel",
}
REASON_CHARS = 200
MAX_HINTS = 9
LESSON = re.compile(r"\d\d")
EXERCISE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_CONTROL = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|[\x00-\x1f\x7f-\x9f]")


class EventError(ValueError):
    """An event that is not what a check sends."""


def validated(data):
    """The event `data` (parsed JSON) as the service stores it; EventError saying what is wrong."""
    if not isinstance(data, dict):
        raise EventError("an event is a JSON object")
    unknown = sorted(set(data) - set(EVENT))
    if unknown:
        raise EventError(f"unknown field(s) {', '.join(map(repr, unknown))[:200]}: an event holds "
                         f"{', '.join(EVENT)} only (the hub's token names the learner)")
    missing = [k for k in EVENT if k not in data]
    if missing:
        raise EventError(f"missing field(s) {', '.join(missing)}")
    lesson, exercise, passed = data["lesson"], data["exercise"], data["passed"]
    if not (isinstance(lesson, str) and LESSON.fullmatch(lesson)):
        raise EventError("lesson must be two digits, as a string")
    if not (isinstance(exercise, str) and EXERCISE.fullmatch(exercise)):
        raise EventError("exercise must be an exercise's name (lower case, digits, _)")
    if type(passed) is not bool or type(data["solution"]) is not bool:
        raise EventError("passed and solution must be true or false")
    hints = data["hints"]
    if type(hints) is not int or not 0 <= hints <= MAX_HINTS:
        raise EventError(f"hints must be a whole number from 0 to {MAX_HINTS}")
    kind, reason = data["kind"], data["reason"]
    if passed:
        if kind is not None or reason is not None:
            raise EventError("a passed check has no kind and no reason (null)")
    else:
        if kind not in KINDS:
            raise EventError(f"kind must be one of {', '.join(KINDS)}")
        if not (isinstance(reason, str) and 0 < len(reason) <= REASON_CHARS):
            raise EventError(f"reason must be text of 1 to {REASON_CHARS} characters")
        reason = clean(reason)
    return {"lesson": lesson, "exercise": exercise, "passed": passed, "kind": kind,
            "reason": reason, "hints": hints, "solution": data["solution"]}


def clean(text):
    """`text` on one line, without terminal colours or control characters, cut to REASON_CHARS."""
    text = " ".join(_CONTROL.sub(" ", str(text)).split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1] + "…"


def failure(exercise, error):
    """(kind, reason) of a check's exception, the reason in the check's own words.

    Where the check quotes the learner (what their function raised, an error on what it
    returned) only the exception's class is kept: the message may hold their values.
    """
    try:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    except Exception:   # an exception that cannot show itself
        first = ""
    what = first.removeprefix(f"Exercise '{exercise}': ")
    if isinstance(error, NotImplementedError):
        if what == "write your solution here":
            return "unfinished", "the exercise still holds its stub"
        return "raised", "your function raised NotImplementedError"
    if not isinstance(error, AssertionError):
        return "error", f"the check stopped with {type(error).__name__}"
    raised = re.match(r"your function raised (\w+)", what)
    if raised:
        return "raised", f"your function raised {raised.group(1)}"
    returned = re.match(r"(the check could not go on with what your function returned) \((\w+)", what)
    if returned:
        return "wrong", f"{returned.group(1)} ({returned.group(2)})"
    if what.startswith("the grader cannot read this answer"):
        return "unreadable", clean(what.split(":")[0])
    return "wrong", clean(what) or "the check failed"


def event(lesson, exercise, error=None, hints=0, solution=False):
    """The event of one check of `exercise` in `lesson`: passed when `error` is None."""
    kind, reason = (None, None) if error is None else failure(exercise, error)
    return {"lesson": lesson, "exercise": exercise, "passed": error is None, "kind": kind,
            "reason": reason, "hints": min(int(hints), MAX_HINTS), "solution": bool(solution)}


# ---------------------------------------------------------------- switching it off

def _off_file():
    home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(home) / "course_lib" / "live-off"


def switch_off():
    """Send nothing to the live view from now on, in this kernel and every later one."""
    path = _off_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("The checks send nothing to the course's live view while this file exists "
                    "(course_lib.checks.report.switch_on() removes it).\n", encoding="utf-8")
    print("The checks will send nothing to the live view (switch_on() sends again).")


def switch_on():
    """Send again (on a hub where the live view is turned on), undoing `switch_off()`."""
    _off_file().unlink(missing_ok=True)
    print("The checks send each result to the live view where the hub has one "
          "(COURSE_LIVE=off in the environment still stops them).")


def target():
    """(events URL, token) where checks are sent, or a string saying why nothing is sent."""
    token, url = os.environ.get("JUPYTERHUB_API_TOKEN"), os.environ.get("COURSE_LIVE_URL")
    if not token or not url:
        return "not sent: no hub with a live view here (JUPYTERHUB_API_TOKEN or COURSE_LIVE_URL unset)"
    if os.environ.get("COURSE_LIVE", "").strip().lower() in ("off", "0", "no", "false"):
        return "not sent: switched off by COURSE_LIVE in the environment"
    if _off_file().exists():
        return f"not sent: switched off ({_off_file()} exists; switch_on() removes it)"
    if not url.startswith(("http://", "https://")):
        return f"not sent: COURSE_LIVE_URL is not an http(s) address: {url[:100]!r}"
    return url.rstrip("/") + "/api/events", token


# ---------------------------------------------------------------- sending

QUEUED = 32        # events waiting to be sent; past this, new ones are dropped
TIMEOUT = 3.0      # seconds a post may take before it is given up
_last = "nothing checked yet"
_sender = None
_lock = threading.Lock()


def last():
    """What became of the latest check's event, in words."""
    return _last


@functools.cache
def _opener():
    """urllib's opener, direct (no proxy) and following no redirect, so that the token goes to
    the address the hub set and nowhere else. Made on first use: a kernel without a hub never
    imports urllib.request (about 30 ms)."""
    import urllib.request

    class Refuse(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    return urllib.request.build_opener(urllib.request.ProxyHandler({}), Refuse())


def post(url, token, data, timeout=TIMEOUT):
    """POST one event; a sentence saying what happened (never raises)."""
    import urllib.error
    import urllib.request
    what = f"{data['lesson']} {data['exercise']} {'passed' if data['passed'] else 'failed'}"
    request = urllib.request.Request(url, data=json.dumps(data).encode(), method="POST", headers={
        "Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with _opener().open(request, timeout=timeout) as reply:
            return f"sent: {what} (the live view answered {reply.status})"
    except urllib.error.HTTPError as e:
        try:
            why = json.loads(e.read(2000)).get("message", "")
        except Exception:
            why = ""
        return f"not sent: the live view refused {what} ({e.code}{': ' + clean(why) if why else ''})"
    except urllib.error.URLError as e:   # no service there, a name that does not resolve
        why = getattr(e.reason, "strerror", None) or e.reason
        return f"not sent: {what}: the live view cannot be reached ({clean(why)})"
    except Exception as e:   # no answer in time, a broken connection
        return f"not sent: {what}: {type(e).__name__}: {clean(e)}"


class _Sender:
    """One daemon thread that posts queued events in order; started with the first event."""

    def __init__(self):
        self.queue = queue.Queue(maxsize=QUEUED)
        self.thread = threading.Thread(target=self._run, name="course-live-report", daemon=True)
        self.thread.start()

    def _run(self):
        global _last
        while True:
            url, token, data = self.queue.get()
            _last = post(url, token, data)


def send(where, data):
    """Queue `data` for `where` (target()'s URL and token); returns at once, never raises."""
    global _last, _sender
    try:
        with _lock:
            if _sender is None:
                _sender = _Sender()
        try:
            _sender.queue.put_nowait((*where, data))
            _last = f"queued: {data['lesson']} {data['exercise']}"
        except queue.Full:
            _last = "not sent: the live view is not answering and the queue is full"
    except Exception as e:   # nothing here may disturb the lesson
        _last = f"not sent: {type(e).__name__}"


def _help_taken(exercise):
    """(highest hint shown in this folder, solution shown in this kernel) for `exercise`
    (course_lib.checks.hints.help_taken)."""
    hints = sys.modules.get("course_lib.checks.hints")
    if hints is None:   # never imported: no help asked for
        return 0, False
    return hints.help_taken(exercise)


def _direct():
    """Whether checks run as a learner's own (not the grader's, `course_lib.checks.core.grading`)."""
    core = sys.modules.get("course_lib.checks.core")
    return core is None or not core.grading()


def checked(lesson, exercise, error):
    """Report one check's outcome where this kernel reports; never raises."""
    global _last
    try:
        if not _direct():
            return
        where = target()
        if isinstance(where, str):
            _last = where
            return
        send(where, event(lesson, exercise, error, *_help_taken(exercise)))
    except Exception as e:
        _last = f"not sent: {type(e).__name__}"


def reported(exercise, run):
    """`run` (a checker), reporting each outcome with `checked`; what it returns or raises is unchanged."""
    lesson = run.__module__.rpartition(".lesson")[2]
    if not LESSON.fullmatch(lesson):   # a checker outside course_lib/checks/lessonNN.py
        return run

    @functools.wraps(run)
    def check(fn):
        __tracebackhide__ = True
        try:
            result = run(fn)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            checked(lesson, exercise, e)
            raise
        checked(lesson, exercise, None)
        return result

    return check
