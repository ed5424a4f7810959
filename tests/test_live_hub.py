"""The lab, live, on a real JupyterHub: the classroom of tests/hub_classroom.py (the hub and the
learners' work that tests/test_hub.py looks at), whose hub has the live view turned on by the
configuration docs/hub.md gives, read from that page, and runs the service with the learners'
Python (the course from its wheel). Its learners' checks ran in their own servers' kernels:
ada's last answers right, bob's text_to_ids wrong, cy's wrong after a hint. Then:

- each learner's kernel sent its last check's event, and the live view answered 201;
- the view, opened in Chromium at 1366 x 768 as the instructor, shows each learner's state on
  each exercise and where the room is stuck, in the checks' own words (a screenshot goes to
  tests/artefacts/live/, from which docs/images/hub-live.png is taken);
- a learner gets 403 for the view in their browser, and for its state and CSV with a token of
  their own;
- an event that names another learner is refused (400), one with a made-up token too (403), and
  an event's text shows on the open page, within seconds and without reloading, as text, never
  as HTML;
- the hub restarted (and the service with it) shows the same session on the open page, and an
  event sent after it joins that session (the CSV says so); "Start a new session" starts an
  empty one.

`make test-browser` runs it, in one process with tests/test_hub.py (one hub for both); `make
test` skips it in one line.
"""
import re
import time
from pathlib import Path

import requests
from browser_tools import chromium
from hub_classroom import FIXED, HINTED, INSTRUCTOR, LIVE, WORKERS, hub_test
from hub_fixture import PASSWORD

hub_test("the live view on a hub")

from playwright.sync_api import sync_playwright  # noqa: E402

from course_lib.checks.report import failure, post  # noqa: E402

ARTEFACTS = Path(__file__).resolve().parent / "artefacts" / "live"
LAPTOP = {"width": 1366, "height": 768}
SHOWN_S = 30          # for a state to show in the view (it asks every 2 s; the roster every 15 s)
HOSTILE = '<img src=x onerror="document.title=1"><b>bold</b>'


def _until(what, check, seconds=SHOWN_S, every=0.5, shown=None):
    """check()'s first true value, asked every `every` s; AssertionError after `seconds`, saying
    what `shown()` gives then."""
    end = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting {seconds} s for {what}"
                                 + (f"; it shows:\n{shown()}" if shown else ""))
        time.sleep(every)


def test_each_learners_kernel_sent_its_checks_to_the_live_view(classroom):
    for name in WORKERS:
        session = classroom["sessions"][name]
        assert session["last_event"].startswith("sent: 00 text_to_ids"), (name, session["last_event"])
        assert session["last_event"].endswith("(the live view answered 201)"), (name, session["last_event"])
    hinted = classroom["sessions"][HINTED]["hinted"]
    assert "Hint 1 of" in "".join(o.get("text", "") for o in hinted)
    defined, checked = classroom["sessions"][FIXED]["fixed"]
    assert "text_to_ids: " in "".join(o.get("text", "") for o in checked)
    assert not [o for o in defined + checked if o["output_type"] == "error"]


def test_the_instructor_sees_each_state_in_chromium_and_a_learner_gets_403(hub, classroom):
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    view = f"{hub.url}/services/{LIVE}/"
    ada, bob, cy = (hub.learner(name).name for name in WORKERS)
    expected = {ada: ["✓", "✓", "✓"], bob: ["✗", "✓", "✓"], cy: ["✗h1", "✓", "✓"]}
    # the reason bob's check gave, in the check's own words
    [error] = [o for o in classroom["sessions"]["bob"]["wrong"][1] if o["output_type"] == "error"]
    reason = failure("text_to_ids", AssertionError(error["evalue"]))[1]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            teacher = _signed_in(browser, hub, INSTRUCTOR)
            page = teacher.new_page()
            page.goto(view)
            # (a learner with a server but no check has an empty row: dee's, until the service
            # next asks the hub who has a server running, 15 s at most after the culler stopped it)
            grid = _until("every learner's state in the grid", lambda: (lambda grid: (
                grid if _checked(grid) == expected else None))(_grid(page)),
                shown=lambda: f"{page.url}\n{page.inner_text('body')}")
            assert all(not any(cells) for name, cells in grid.items() if name not in expected)
            stuck = page.inner_text("#stuck")
            assert re.search(r"00 text_to_ids\s+2 failing now, 1 passed", stuck), stuck
            assert f"2 × {reason}" in stuck, (reason, stuck)
            page.screenshot(path=str(ARTEFACTS / "view.png"))

            # a learner: 403 for the page in their browser, and for the state with their token
            learner = _signed_in(browser, hub, ada)
            assert learner.new_page().goto(view).status == 403
            ada_token = hub.token_for(hub.learner("ada"))
            for path in ("state", "session.csv"):
                assert requests.get(view + path, headers={"Authorization": f"token {ada_token}"},
                                    timeout=60).status_code == 403

            # a forged event, a made-up token, and text that would be HTML, as a learner's
            # kernel posts them (with its own token, to COURSE_LIVE_URL)
            forged = {"lesson": "00", "exercise": "text_to_ids", "passed": False, "kind": "wrong",
                      "reason": "forged", "hints": 0, "solution": False, "learner": bob}
            assert "(400: unknown field(s) 'learner'" in post(hub.live_events, ada_token, forged)
            del forged["learner"]
            assert post(hub.live_events, "a-made-up-token", forged).endswith(
                "(403: the hub does not know this token as a user's)")
            forged.update(exercise="next_byte_loss", reason=HOSTILE)
            assert post(hub.live_events, ada_token, forged).startswith("sent:")
            _until("the event's text on the open page", lambda: HOSTILE in page.inner_text("#stuck"))
            assert page.evaluate("document.querySelectorAll('main img, main script, main b').length") == 0
            assert page.title() == "The lab, live"
            assert _grid(page)[bob] == expected[bob]     # the forgery changed nothing of bob's

            # the hub and its service restarted: the open page shows the same session, and the
            # next event joins it
            before = _checked(_grid(page))
            session = _csv(teacher, view)[1][0]
            hub.restart()
            passed = {"lesson": "00", "exercise": "text_to_ids", "passed": True, "kind": None,
                      "reason": None, "hints": 1, "solution": False}
            assert post(hub.live_events, hub.token_for(hub.learner("cy")), passed).startswith("sent:")
            _until("cy's pass after the restart", lambda: _grid(page).get(cy, [None])[0] == "✓h1",
                   shown=lambda: page.inner_text("body"))
            assert _checked(_grid(page)) == {**before, cy: ["✓h1", *before[cy][1:]]}
            assert "not updating" not in page.inner_text("#status")
            rows = _csv(teacher, view)
            assert {row[0] for row in rows[1:]} == {session}
            assert rows[-1][2:6] == [cy, "00", "text_to_ids", "passed"]
            # ada's events: 3 right, the wrong one, the right one again, and the text above
            assert sum(row[2] == ada for row in rows[1:]) == 6

            # a new lab: a new session, empty but for the learners whose servers still run
            page.click("text=Start a new session")
            _until("the new session", lambda: f"session {int(session) + 1} since" in
                   page.inner_text("#status"))
            assert _checked(_grid(page)) == {}
            assert f"session {session} (" in page.inner_text("#sessions")
            assert len(_csv(teacher, view)) == 1                    # the header alone
        finally:
            browser.close()


def _signed_in(browser, hub, name):
    """A browser context signed in to the hub as `name` (through its login form)."""
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login?next=%2Fhub%2Fhome")    # home, not a server spawned for them
    page.fill("#username_input", name)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")
    page.wait_for_url(re.compile(r".*/hub/home"), timeout=120_000)
    page.close()
    return context


def _grid(page):
    """{learner: [cell text, ...]} of the view's grid, as drawn."""
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#grid tbody tr')]
        .map(tr => [tr.querySelector('th').textContent,
                    [...tr.querySelectorAll('td')].map(td => td.textContent)]))""")


def _checked(grid):
    """The grid's rows of learners who checked something (the others' rows are empty)."""
    return {name: cells for name, cells in grid.items() if any(cells)}


def _csv(context, view):
    import csv
    import io
    reply = context.request.get(f"{view}session.csv")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(reply.text())))
