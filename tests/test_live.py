"""The lab, live, without a hub: the checks' event and its schema, the report from a learner's
kernel (no hub, a hub that refuses, a slow hub, a hub that is not there), the rate limit, the
escaping, the store and the room, and the service's events endpoint with a stand-in for the
hub's token look-up. tests/test_live_hub.py runs it all on a real JupyterHub."""
import asyncio
import csv
import io
import json
import os
import random
import re
import socket
import stat
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from course_lib.checks import report
from course_lib.checks.core import seeded
from course_lib.checks.report import EventError, validated
from course_lib.live.limits import Bucket, RateLimit
from course_lib.live.page import PAGE, SCRIPT
from course_lib.live.room import Room, course_exercises, session_csv
from course_lib.live.service import POLICY, Live
from course_lib.live.store import Store

RIGHT = {"lesson": "00", "exercise": "text_to_ids", "passed": True, "kind": None, "reason": None,
         "hints": 0, "solution": False}
WRONG = {**RIGHT, "passed": False, "kind": "wrong", "reason": "the ids are not right"}
PASSED = re.compile(r"(text_to_ids: \d+ checks passed\n)+")


def text_to_ids(text):
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


def text_to_ids_wrong(text):
    return torch.tensor([ord(c) for c in text], dtype=torch.long)   # not the UTF-8 bytes


def secret_raiser(text):
    raise KeyError("my secret answer")


# ---------------------------------------------------------------- the event's schema

def test_the_event_a_check_makes_is_one_the_service_takes():
    from course_lib.checks.rendering import STUB
    stub = NotImplementedError("Exercise 'softmax': write your solution here")
    assert STUB.fullmatch(str(stub))
    cases = [
        (None, (None, None)),
        (stub, ("unfinished", "the exercise still holds its stub")),
        (AssertionError("Exercise 'softmax': the weights do not sum to 1\n  input: x\nHint: y"),
         ("wrong", "the weights do not sum to 1")),
        (AssertionError("Exercise 'softmax': your function raised KeyError: 'my secret'\nHint: h"),
         ("raised", "your function raised KeyError")),
        (AssertionError("Exercise 'softmax': the check could not go on with what your function "
                        "returned (TypeError: my secret value 42)"),
         ("wrong", "the check could not go on with what your function returned (TypeError)")),
        (AssertionError("Exercise 'softmax': the grader cannot read this answer: it is a lambda"),
         ("unreadable", "the grader cannot read this answer")),
        (NotImplementedError("my own"), ("raised", "your function raised NotImplementedError")),
        (RuntimeError("my secret"), ("error", "the check stopped with RuntimeError")),
    ]
    for error, (kind, reason) in cases:
        made = report.event("01", "softmax", error, hints=2, solution=error is None)
        assert validated(json.loads(json.dumps(made))) == made
        assert (made["kind"], made["reason"], made["passed"]) == (kind, reason, error is None)
        assert "secret" not in json.dumps(made)     # the learner's own words stay in the kernel
    assert report.event("01", "softmax", None, hints=40)["hints"] == report.MAX_HINTS


@pytest.mark.parametrize("change, why", [
    ({"learner": "bob"}, "unknown field"),
    ({"code": "def f(): ..."}, "unknown field"),
    ({"lesson": "0"}, "lesson"), ({"lesson": 0}, "lesson"), ({"lesson": "1a"}, "lesson"),
    ({"exercise": "../x"}, "exercise"), ({"exercise": "Softmax"}, "exercise"),
    ({"exercise": "a" * 65}, "exercise"),
    ({"passed": 1}, "true or false"), ({"solution": "yes"}, "true or false"),
    ({"hints": True}, "hints"), ({"hints": 10}, "hints"), ({"hints": -1}, "hints"),
    ({"hints": 1.0}, "hints"),
    ({"kind": "wrong"}, "no kind"), ({"reason": "x"}, "no kind"),
])
def test_a_malformed_event_is_refused_saying_what_is_wrong(change, why):
    with pytest.raises(EventError, match=why):
        validated({**RIGHT, **change})


@pytest.mark.parametrize("change, why", [
    ({"kind": None}, "kind"), ({"kind": "bad"}, "kind"), ({"reason": None}, "reason"),
    ({"reason": ""}, "reason"), ({"reason": "x" * 201}, "reason"), ({"reason": 3}, "reason"),
])
def test_a_failed_event_needs_a_kind_and_a_short_reason(change, why):
    with pytest.raises(EventError, match=why):
        validated({**WRONG, **change})
    for missing in RIGHT:
        with pytest.raises(EventError, match="missing"):
            validated({k: v for k, v in WRONG.items() if k != missing})
    with pytest.raises(EventError, match="object"):
        validated([WRONG])


def test_random_events_are_refused_or_kept_within_the_schema():
    """Seeded random mutations of valid events: each either raises EventError or gives an event
    whose every field holds what the schema says (nothing else ever comes out)."""
    rng = random.Random(42)
    values = [None, True, False, 0, 1, 9, 10, -1, 2.5, "", "00", "99", "x", "softmax", "a b",
              "<img src=x onerror=alert(1)>", "\x1b[31mred\x1b[0m\nline", "=1+1", "é" * 300,
              [], {}, {"a": 1}, "wrong", "raised", "unfinished"]
    kept = 0
    for _ in range(3000):
        data = dict(rng.choice([RIGHT, WRONG]))
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(list(RIGHT) + ["learner", "extra"])
            if rng.random() < 0.15:
                data.pop(key, None)
            else:
                data[key] = rng.choice(values)
        try:
            got = validated(data)
        except EventError:
            continue
        kept += 1
        assert set(got) == set(RIGHT) and got["lesson"].isdigit() and len(got["lesson"]) == 2
        assert type(got["hints"]) is int and 0 <= got["hints"] <= report.MAX_HINTS
        if got["passed"]:
            assert got["kind"] is None and got["reason"] is None
        else:
            assert got["kind"] in report.KINDS and 0 < len(got["reason"]) <= report.REASON_CHARS
            assert got["reason"].isprintable() and "\x1b" not in got["reason"]
    assert kept > 50   # the mutations reach valid events too, not only refusals


def test_a_reason_is_one_line_without_colours_and_cut_to_200_characters():
    assert report.clean("\x1b[1;31mthe weights\x1b[0m\n are\tnot\x00 right") == "the weights are not right"
    assert len(report.clean("x" * 500)) == report.REASON_CHARS


# ---------------------------------------------------------------- the report from a kernel

class Hub:
    """A stand-in for the live view's endpoint on a local port: answers `status` to each POST,
    after `hold` is set when `hold` is given; keeps what it received."""

    def __init__(self, status=201, hold=None):
        self.status, self.hold, self.received = status, hold, []
        self.arrived = threading.Event()
        hub = self

        class Handle(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hub.received.append((self.headers["Authorization"], json.loads(body)))
                hub.arrived.set()
                if hub.hold is not None:
                    hub.hold.wait(30)
                self.send_response(hub.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"message": "refused by the test"}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.url = f"http://127.0.0.1:{self.server.server_port}/services/course-live/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def _settled(what, seconds=20):
    """Wait until report.last() starts with `what` (the sender thread posts in the background)."""
    end = time.monotonic() + seconds
    while not report.last().startswith(what) and time.monotonic() < end:
        time.sleep(0.02)
    return report.last()


@pytest.fixture
def kernel(monkeypatch, tmp_path):
    """A learner's kernel on a hub: its token, the live view's address, a home of its own."""
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-kernels-token")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("COURSE_LIVE", raising=False)
    return monkeypatch


def _reporting_threads():
    return {t for t in threading.enumerate() if t.name == "course-live-report"}


def test_with_no_hub_a_check_sends_nothing_and_starts_no_thread(monkeypatch, capsys):
    from course_lib.checks.lesson00 import check_text_to_ids
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    monkeypatch.delenv("COURSE_LIVE_URL", raising=False)
    monkeypatch.setattr(report, "_sender", None)
    before = _reporting_threads()
    check_text_to_ids(text_to_ids)
    with pytest.raises(AssertionError):
        check_text_to_ids(text_to_ids_wrong)
    assert report._sender is None and _reporting_threads() == before
    assert report.last().startswith("not sent: no hub")
    assert PASSED.fullmatch(capsys.readouterr().out)


def test_a_learner_switches_it_off_by_the_environment_or_for_good(kernel, capsys):
    from course_lib.checks.lesson00 import check_text_to_ids
    hub = Hub()
    try:
        kernel.setenv("COURSE_LIVE_URL", hub.url)
        kernel.setenv("COURSE_LIVE", "off")
        check_text_to_ids(text_to_ids)
        assert report.last() == "not sent: switched off by COURSE_LIVE in the environment"
        kernel.delenv("COURSE_LIVE")
        report.switch_off()
        check_text_to_ids(text_to_ids)
        assert report.last().startswith("not sent: switched off (")
        report.switch_on()
        check_text_to_ids(text_to_ids)
        assert _settled("sent").startswith("sent: 00 text_to_ids passed")
        assert len(hub.received) == 1
    finally:
        hub.close()


def test_a_check_on_a_hub_sends_one_event_named_by_the_token(kernel, capsys):
    from course_lib.checks import hint, solution
    from course_lib.checks.lesson00 import check_text_to_ids
    hub = Hub()
    try:
        kernel.setenv("COURSE_LIVE_URL", hub.url)
        hint("text_to_ids")
        hint("text_to_ids")
        solution("text_to_ids")
        capsys.readouterr()
        with pytest.raises(AssertionError) as failed:
            check_text_to_ids(secret_raiser)
        assert _settled("sent").startswith("sent: 00 text_to_ids failed")
        check_text_to_ids(text_to_ids)
        assert _settled("sent: 00 text_to_ids passed")
        assert PASSED.fullmatch(capsys.readouterr().out)
    finally:
        hub.close()
    assert "my secret answer" in str(failed.value)       # the learner sees it...
    (token, failing), (_, passing) = hub.received
    assert token == "token the-kernels-token"
    assert failing == {"lesson": "00", "exercise": "text_to_ids", "passed": False, "kind": "raised",
                       "reason": "your function raised KeyError", "hints": 2, "solution": True}
    assert passing == {**failing, "passed": True, "kind": None, "reason": None}
    assert "secret" not in json.dumps(hub.received)      # ...the live view does not


def test_a_hub_that_refuses_changes_nothing_in_the_lesson(kernel, capsys):
    from course_lib.checks.lesson00 import check_text_to_ids
    for status in (403, 429, 500):
        hub = Hub(status=status)
        try:
            kernel.setenv("COURSE_LIVE_URL", hub.url)
            check_text_to_ids(text_to_ids)
            assert _settled("not sent: the live view refused").endswith(
                f"({status}: refused by the test)")
        finally:
            hub.close()
    out, err = capsys.readouterr()
    assert PASSED.fullmatch(out) and out.count("\n") == 3 and err == ""


def test_a_slow_hub_never_holds_the_check_back(kernel, capsys):
    """The hub holds the request until the test lets go; the check has returned before that."""
    from course_lib.checks.lesson00 import check_text_to_ids
    hub = Hub(hold=threading.Event())
    try:
        kernel.setenv("COURSE_LIVE_URL", hub.url)
        check_text_to_ids(text_to_ids)   # returns while the request is still unanswered
        assert hub.arrived.wait(20) and not hub.hold.is_set()
        assert report.last().startswith("queued")
        hub.hold.set()
        assert _settled("sent").startswith("sent")
    finally:
        hub.close()


def test_a_hub_that_is_not_there_or_a_bad_address_changes_nothing(kernel, capsys):
    from course_lib.checks.lesson00 import check_text_to_ids
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]        # closed again: nothing listens there
    kernel.setenv("COURSE_LIVE_URL", f"http://127.0.0.1:{port}/")
    check_text_to_ids(text_to_ids)
    assert _settled("not sent: 00").endswith("cannot be reached (Connection refused)")
    kernel.setenv("COURSE_LIVE_URL", "file:///etc/passwd")
    check_text_to_ids(text_to_ids)
    assert report.last().startswith("not sent: COURSE_LIVE_URL is not an http(s) address")
    out, err = capsys.readouterr()
    assert PASSED.fullmatch(out) and out.count("\n") == 2 and err == ""


def test_a_graders_check_sends_nothing(kernel):
    """The grader's checks (course_lib.grading.remote.run_check, seeded) never send, even where
    the grader's own environment names a hub with a live view."""
    from course_lib.checks.lesson00 import check_text_to_ids
    hub = Hub()
    try:
        kernel.setenv("COURSE_LIVE_URL", hub.url)
        report._last = "before"
        with seeded(1234):
            check_text_to_ids(text_to_ids)
        assert report.last() == "before" and hub.received == []
    finally:
        hub.close()


# ---------------------------------------------------------------- the rate limit

def test_a_bucket_gives_its_burst_then_one_per_refill():
    b = Bucket(3, 0.5, now=0.0)
    assert [b.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert b.retry_after() == 2
    assert not b.take(1.0) and b.take(2.0) and not b.take(2.0)
    assert [b.take(100.0) for _ in range(4)] == [True, True, True, False]   # never above capacity


def test_the_rate_limit_is_per_learner_and_forgets_quiet_ones():
    limit = RateLimit(burst=5, per_minute=6)
    assert [limit.allow("ada", now=0.0) for _ in range(6)] == [True] * 5 + [False]
    assert limit.retry_after("ada") == 10
    assert all(limit.allow("bob", now=0.0) for _ in range(5))    # ada's flood costs bob nothing
    assert not limit.allow("ada", now=9.0) and limit.allow("ada", now=10.5)
    limit.allow("cy", now=200.0)                                  # a sweep: full buckets go
    assert set(limit.buckets) == {"cy"}
    with pytest.raises(ValueError, match="burst"):
        RateLimit(burst=0)


# ---------------------------------------------------------------- escaping

HOSTILE = '<img src=x onerror="document.title=1">&amp;<script>alert(1)</script>'


def test_the_page_escapes_what_it_holds_and_its_script_draws_text_only():
    html = PAGE.generate(prefix="/services/course-live/", poll=2000, xsrf="t\"<", name=HOSTILE).decode()
    assert "<img" not in html and "<script>alert" not in html
    assert "&lt;img src=x onerror=&quot;document.title=1&quot;&gt;&amp;amp;" in html
    assert 'value="t&quot;&lt;"' in html
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "Function(", "setTimeout(\""):
        assert sink not in SCRIPT, sink
    assert "textContent" in SCRIPT
    assert "script-src 'self'" in POLICY and "unsafe" not in POLICY and "default-src 'none'" in POLICY


def test_the_csv_quotes_what_a_spreadsheet_would_run():
    rows = [{"at": 0.0, "learner": "=cmd|' /C calc'!A0", "lesson": "00", "exercise": "text_to_ids",
             "passed": False, "kind": "wrong", "reason": '+1, "two"\nthree', "hints": 1,
             "solution": True},
            {"at": 60.0, "learner": "ada", "lesson": "00", "exercise": "text_to_ids", "passed": True,
             "kind": None, "reason": None, "hints": 0, "solution": False}]
    got = list(csv.reader(io.StringIO(session_csv(7, rows))))
    assert got[0] == ["session", "time", "learner", "lesson", "exercise", "result", "kind", "reason",
                      "hints", "solution"]
    assert got[1] == ["7", "1970-01-01T00:00:00+00:00", "'=cmd|' /C calc'!A0", "00", "text_to_ids",
                      "failed", "wrong", "'+1, \"two\"\nthree", "1", "yes"]
    assert got[2][2:] == ["ada", "00", "text_to_ids", "passed", "", "", "0", "no"]


# ---------------------------------------------------------------- the store and the room

def _row(learner, exercise="text_to_ids", passed=True, reason=None, kind="wrong", lesson="00", hints=0,
         solution=False):
    return {"lesson": lesson, "exercise": exercise, "passed": passed,
            "kind": None if passed else kind, "reason": None if passed else reason,
            "hints": hints, "solution": solution}


def test_the_store_keeps_sessions_across_a_restart_and_forgets_old_ones(tmp_path):
    path = tmp_path / "live.sqlite"
    store = Store(path, gap=3600, keep=86400)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    secret = store.secret("cookie")
    first, _ = store.add("ada", _row("ada"), at=1000.0)
    assert store.add("bob", _row("bob", passed=False, reason="r"), at=2000.0)[0] == first
    second, _ = store.add("ada", _row("ada"), at=2000.0 + 3601)     # a new lab after a quiet gap
    assert second != first
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in tmp_path.iterdir()} == {
        "live.sqlite": 0o600, "live.sqlite-wal": 0o600, "live.sqlite-shm": 0o600}
    store.close()
    again = Store(path, gap=3600, keep=86400)                      # the service restarted
    assert again.secret("cookie") == secret
    assert again.current()[0] == second
    assert [r["learner"] for r in again.events(first)] == ["ada", "bob"]
    assert next(again.events(first))["passed"] is True
    third = again.start(at=9000.0)
    assert again.current()[0] == third and [s[0] for s in again.sessions()] == [third, second, first]
    assert again.forget(now=2000.0 + 86400 + 1) == 1               # the first, quiet for a day
    assert [s[0] for s in again.sessions()] == [third, second] and list(again.events(first)) == []


def test_the_room_shows_each_learners_latest_result_and_where_the_room_is_stuck():
    room = Room(1, 0.0, course_exercises())
    at = iter(range(100))
    for learner, row in [
            ("ada", _row("ada", "text_to_ids", False, "the ids are not right", hints=1)),
            ("ada", _row("ada", "text_to_ids", True)),
            ("bob", _row("bob", "text_to_ids", False, "the ids are not right")),
            ("cy", _row("cy", "text_to_ids", False, "the result has the wrong shape", solution=True)),
            ("cy", _row("cy", "next_byte_loss", False, "the exercise still holds its stub", "unfinished")),
            ("bob", _row("bob", "next_byte_loss", False, HOSTILE)),
            ("ada", _row("ada", "next_byte_loss", False, HOSTILE))]:
        room.add({"at": float(next(at)), "learner": learner, **row})
    room.set_roster({"ada", "dee"})
    view = room.view()
    assert [c["exercise"] for c in view["columns"]] == ["text_to_ids", "next_token_targets",
                                                        "next_byte_loss"]
    grid = {r["learner"]: [c and c["state"] for c in r["cells"]] for r in view["rows"]}
    assert grid == {"ada": ["passed", None, "failing"], "bob": ["failing", None, "failing"],
                    "cy": ["failing", None, "stub"], "dee": [None, None, None]}
    ada = view["rows"][0]["cells"][0]
    assert (ada["hints"], ada["solution"], ada["tries"]) == (1, False, 2)
    assert view["stuck"] == [
        {"lesson": "00", "exercise": "text_to_ids", "failing": 2, "passed": 1,
         "reasons": [("the ids are not right", 1), ("the result has the wrong shape", 1)]},
        {"lesson": "00", "exercise": "next_byte_loss", "failing": 2, "passed": 0,
         "reasons": [(HOSTILE, 2)]}]
    assert (view["learners"], view["checked"]) == (4, 3)
    version = view["version"]
    room.set_roster({"ada", "dee"})
    assert room.version == version         # nothing changed, nothing to send
    room.add({"at": 50.0, "learner": "ee", **_row("ee", "softmax", lesson="01")})
    assert [c["lesson"] for c in room.view()["columns"]].count("01") == 3


# ---------------------------------------------------------------- the events endpoint

class FakeHub:
    """The hub's token look-up: a token is its owner's name; 'svc' is a service's; others unknown."""
    api_url, api_token = "http://127.0.0.1:9/hub/api", "x"

    def __init__(self):
        self.asked = 0

    async def user_for_token(self, token, use_cache=True, sync=True):
        self.asked += 1
        if token == "svc":
            return {"name": "svc", "kind": "service"}
        return {"name": token, "kind": "user"} if token in ("ada", "bob") else None


@pytest.fixture
def service(tmp_path):
    """The events endpoint on a local port, its tornado loop in a thread of its own."""
    from tornado import web
    from tornado.ioloop import IOLoop
    from course_lib.live.service import Events
    made, ready = {}, threading.Event()

    def serve():
        asyncio.set_event_loop(asyncio.new_event_loop())
        live = Live(Store(tmp_path / "live.sqlite"), FakeHub(), RateLimit(burst=3, per_minute=1))
        app = web.Application([("/services/course-live/api/events", Events, {"live": live})])
        server = app.listen(0, "127.0.0.1")
        made.update(live=live, loop=IOLoop.current(), server=server,
                    port=next(iter(server._sockets.values())).getsockname()[1])
        ready.set()
        IOLoop.current().start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(20)
    made["url"] = f"http://127.0.0.1:{made['port']}/services/course-live/api/events"
    yield made
    made["loop"].add_callback(made["loop"].stop)
    thread.join(10)
    made["server"].stop()


def _post(url, token, data, raw=None):
    import urllib.error
    import urllib.request
    body = raw if raw is not None else json.dumps(data).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"token {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=20) as r:
            return r.status, json.loads(r.read())["message"], r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["message"], e.headers


def test_the_endpoint_counts_an_event_as_the_tokens_owner_and_refuses_the_rest(service, tmp_path):
    url = service["url"]
    assert _post(url, "ada", WRONG)[:2] == (201, "counted")
    code, message, _ = _post(url, "ada", {**RIGHT, "learner": "bob"})       # a forgery for bob
    assert code == 400 and "unknown field(s) 'learner'" in message
    assert _post(url, "eve", RIGHT)[0] == 403                    # a token the hub does not know
    assert _post(url, "svc", RIGHT)[0] == 403                    # a service's token
    assert _post(url, None, RIGHT)[0] == 403
    assert _post(url, "bob", {**RIGHT, "exercise": "no_such"})[:2] == (
        400, "lesson 00 has no exercise 'no_such'")
    assert _post(url, "bob", None, raw=b"{not json")[:2] == (400, "an event is a JSON object")
    assert _post(url, "bob", None, raw=b" " * 3000)[0] == 413
    assert _post(url, "bob", RIGHT)[0] == 201                  # bob's third in his burst of 3
    code, message, headers = _post(url, "bob", RIGHT)          # his fourth
    assert (code, headers["Retry-After"]) == (429, "60") and "too many" in message
    assert _post(url, "ada", RIGHT)[0] == 201                  # ada's own bucket still has room
    rows = list(Store(tmp_path / "live.sqlite").events(service["live"].room.session))
    assert [(r["learner"], r["passed"], r["reason"]) for r in rows] == [
        ("ada", False, "the ids are not right"), ("bob", True, None), ("ada", True, None)]
    assert [c[0]["state"] for c in (r["cells"] for r in service["live"].room.view()["rows"])] == [
        "passed", "passed"]
    assert service["live"].auth.asked == 4     # each token asked of the hub once (eve's and svc's too)
    import urllib.error
    import urllib.request
    with pytest.raises(urllib.error.HTTPError) as read:     # no one reads events back from here
        urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "token ada"}))
    assert read.value.code == 405


def test_a_restarted_service_shows_the_same_session_and_a_new_one_starts_empty(tmp_path):
    live = Live(Store(tmp_path / "live.sqlite"), FakeHub(), RateLimit())
    live.add("ada", WRONG)
    live.add("bob", RIGHT)
    before, version = live.room.view(), live.version()
    live.store.close()
    again = Live(Store(tmp_path / "live.sqlite"), FakeHub(), RateLimit())
    assert again.room.view() == before and before["checked"] == 2
    assert again.version() != version     # a page from before the restart draws the state anew
    again.new_session()
    assert again.room.session == before["session"] + 1 and again.room.view()["rows"] == []


def test_the_roster_is_who_has_a_server_running_but_the_instructors(tmp_path):
    """The hub's /users?state=active, page by page; when the hub refuses, the page says why."""
    pages = {"0": {"items": [{"name": "ada", "groups": []}, {"name": "teacher", "groups": ["instructors"]}],
                   "_pagination": {"next": {"offset": 2}}},
             "2": {"items": [{"name": "dee", "groups": ["section-b"]}], "_pagination": {"next": None}}}
    asked = []

    class Users(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append((self.path, self.headers["Authorization"], self.headers["Accept"]))
            offset = re.search(r"offset=(\d+)", self.path).group(1)
            body = json.dumps(pages[offset]).encode() if "state=active" in self.path else b"{}"
            self.send_response(200 if hub.status == 200 else hub.status)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Hub(FakeHub):
        status = 200
    hub = Hub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Users)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hub.api_url = f"http://127.0.0.1:{server.server_port}/hub/api"
        live = Live(Store(tmp_path / "live.sqlite"), hub, RateLimit())
        asyncio.run(live.refresh_roster())
        assert live.room.roster == {"ada", "dee"} and live.room.roster_note is None
        assert asked[0][1:] == ("token x", "application/jupyterhub-pagination+json")
        assert [a[0].split("?")[1] for a in asked] == ["state=active&offset=0&limit=200",
                                                       "state=active&offset=2&limit=200"]
        hub.status = 403
        asyncio.run(live.refresh_roster())
        assert live.room.roster == {"ada", "dee"}    # kept as the hub said last
        assert "the hub answered 403" in live.room.view()["roster_note"]
    finally:
        server.shutdown()
        server.server_close()


def live_section():
    """docs/hub.md's section on the live view (from its heading to the next)."""
    from notebook_tools import ROOT
    guide = (ROOT / "docs" / "hub.md").read_text(encoding="utf-8")
    found = re.search(r"^## \d+\. The lab, live\b.*?(?=^## )", guide, re.M | re.S)
    assert found, "docs/hub.md has no section '## N. The lab, live'"
    return found.group(0)


def test_the_command_says_its_options_and_refuses_to_run_outside_a_hub(tmp_path):
    """docs/hub.md's `python -m course_lib.live --help`, and the service started by hand."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    helped = subprocess.run([sys.executable, "-m", "course_lib.live", "--help"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0
    docs = live_section()
    assert "python -m course_lib.live --help" in docs
    for option in re.findall(r"`(--[a-z-]+)`", docs):
        assert option in helped.stdout, option
    alone = subprocess.run([sys.executable, "-m", "course_lib.live", "--db", str(tmp_path / "x.sqlite")],
                           env=env, capture_output=True, text=True, timeout=120)
    assert alone.returncode == 1 and "runs as a JupyterHub service, started by the hub" in alone.stderr
    assert not (tmp_path / "x.sqlite").exists()


def test_the_guides_learner_lines_run(kernel, capsys):
    """docs/hub.md's Python blocks for a learner (last(), switch_off()), run as written."""
    docs = live_section()
    blocks = [b for b in re.findall(r"^ *```python\n(.*?)^ *```", docs, re.M | re.S)
              if "c.JupyterHub" not in b]
    assert len(blocks) == 2
    for block in blocks:
        exec(textwrap.dedent(block), {})
    assert (report._off_file().exists(), report.target()) == (
        True, "not sent: no hub with a live view here (JUPYTERHUB_API_TOKEN or COURSE_LIVE_URL unset)")
    kernel.setenv("COURSE_LIVE_URL", "http://127.0.0.1:9/services/course-live/")
    assert report.target().startswith("not sent: switched off (")
    assert "will send nothing" in capsys.readouterr().out
