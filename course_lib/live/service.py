"""The live view as a JupyterHub service: the instructors' page, the events' endpoint, the command.

    python -m course_lib.live --db /srv/course-live/live.sqlite

runs under a hub that starts it (a managed service, docs/hub.md, section 6), which gives it its
address, its prefix (/services/course-live/) and its token in JUPYTERHUB_* variables. It serves,
under that prefix:

- `/` (the page), `/state` (the room as JSON), `/session.csv` and, by POST, `/sessions` (start a
  new session): for those whom the hub gives `access:services!service=<name>` (a role given to
  the instructors' group), signed in with the hub's OAuth; anyone else gets 403;
- `/api/events`, by POST: one check's event from a learner's kernel, authenticated with the
  kernel's hub token. The hub says whose token it is, so the learner is who the hub says; the
  event itself names no one. A malformed event gets 400, an unknown token 403, a learner past
  their rate limit 429 (course_lib.live.limits).

Every page response carries a Content-Security-Policy that allows the page's own script and
style and nothing else.
"""
import argparse
import hashlib
import json
import logging
import os
import secrets
import signal
import sys
import time
from datetime import datetime, timezone

from tornado import web
from tornado.httpclient import AsyncHTTPClient
from tornado.ioloop import IOLoop, PeriodicCallback

from course_lib.checks.report import EventError, validated
from course_lib.live.limits import Bucket, RateLimit
from course_lib.live.page import PAGE, POLL_MS, SCRIPT, STYLE
from course_lib.live.room import Room, course_exercises, session_csv
from course_lib.live.store import DAYS, HOURS, Store

log = logging.getLogger("course_lib.live")

MAX_EVENT_BYTES = 2048      # an event is a few hundred bytes
TOKEN_MEMORY = 300          # seconds the owner of a token is remembered
ROSTER_EVERY = 15           # seconds between asking the hub who has a server running
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
          "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


class Live:
    """The service's state: the store, the current session's room, the limits, the hub."""

    def __init__(self, store, auth, limit, instructors="instructors", exercises=None):
        self.store, self.auth, self.limit = store, auth, limit
        self.instructors = instructors
        self.exercises = course_exercises() if exercises is None else exercises
        self.unknown_tokens = Bucket(300, 10)   # hub look-ups of tokens not seen lately
        self.owners = {}                        # sha256 of a token -> (user model or None, until)
        self.room = None
        self.epoch = secrets.token_hex(4)   # a page's state from before a restart is never "the same"
        self.load()

    def load(self):
        """The room of the open session, rebuilt from its events (an empty one when there is none)."""
        current = self.store.current() or (None, None)
        roster = self.room.roster if self.room else set()
        self.room = Room(current[0], current[1], self.exercises)
        self.room.roster = roster
        for row in self.store.events(current[0]) if current[0] is not None else ():
            self.room.add(row)

    def version(self):
        """What the page quotes to ask whether anything changed: this process, session and change."""
        return f"{self.epoch}.{self.room.session}.{self.room.version}"

    def new_session(self):
        self.store.start()
        self.load()

    def add(self, learner, event):
        session, row = self.store.add(learner, event)
        if session != self.room.session:
            self.load()
        else:
            self.room.add(row)

    async def owner(self, token):
        """The hub's model of the token's owner, None for a token the hub does not know."""
        key = hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()
        now = time.monotonic()
        known = self.owners.get(key)
        if known and known[1] > now:
            return known[0]
        if not self.unknown_tokens.take(now):
            raise web.HTTPError(429, "too many unknown tokens just now; try again in a minute")
        model = await self.auth.user_for_token(token, use_cache=False, sync=False)
        if len(self.owners) > 10_000:
            self.owners = {k: v for k, v in self.owners.items() if v[1] > now}
        self.owners[key] = (model, now + TOKEN_MEMORY)
        return model

    async def refresh_roster(self):
        """Ask the hub which learners have a server running (all but the instructors' group)."""
        names, offset = set(), 0
        client = AsyncHTTPClient()
        try:
            while True:
                reply = await client.fetch(
                    f"{self.auth.api_url}/users?state=active&offset={offset}&limit=200",
                    headers={"Authorization": f"token {self.auth.api_token}",
                             "Accept": "application/jupyterhub-pagination+json"},
                    raise_error=False, request_timeout=10)
                if reply.code != 200:
                    raise RuntimeError(f"the hub answered {reply.code} to /users?state=active")
                page = json.loads(reply.body)
                names |= {u["name"] for u in page["items"]
                          if self.instructors not in (u.get("groups") or ())}
                following = (page.get("_pagination") or {}).get("next")
                if not following:
                    break
                offset = following["offset"]
        except Exception as e:   # the grid still shows everyone who checked something
            self.room.set_roster(self.room.roster,
                                 note=f"The hub did not say who has a server running ({e}), so "
                                      f"learners who have not checked anything may be missing "
                                      f"here. The service's role needs list:users, read:users:name, "
                                      f"read:users:groups and read:servers (docs/hub.md, section 6).")
            return
        self.room.set_roster(names)

    def forget(self):
        if self.store.forget():
            self.load()


# ---------------------------------------------------------------- handlers

class Handler(web.RequestHandler):
    def initialize(self, live):
        self.live = live

    def set_default_headers(self):
        self.set_header("Content-Security-Policy", POLICY)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("Cache-Control", "no-store")


class Asset(Handler):
    """The page's script or style (no data in them)."""

    def initialize(self, live, body, kind):
        self.live, self.body, self.kind = live, body, kind

    def get(self):
        self.set_header("Content-Type", self.kind)
        self.set_header("Cache-Control", "max-age=300")
        self.write(self.body)


class Events(Handler):
    """POST /api/events: one check's event, from the kernel of the learner the token names."""

    def check_xsrf_cookie(self):
        """Events come with a token from a kernel, never with a browser's cookie."""

    retry_after = None   # seconds, for a 429

    def write_error(self, status, **kwargs):
        error = kwargs.get("exc_info", (None, None))[1]
        if status == 429 and self.retry_after:
            self.set_header("Retry-After", str(self.retry_after))
        self.finish({"message": getattr(error, "log_message", None) or self._reason})

    async def post(self):
        if len(self.request.body) > MAX_EVENT_BYTES:
            raise web.HTTPError(413, f"an event is at most {MAX_EVENT_BYTES} bytes")
        auth = self.request.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() not in ("token", "bearer") or not token.strip():
            raise web.HTTPError(403, "send the kernel's hub token: Authorization: token ...")
        model = await self.live.owner(token.strip())
        if not model or model.get("kind", "user") != "user":
            raise web.HTTPError(403, "the hub does not know this token as a user's")
        learner = model["name"]
        if not self.live.limit.allow(learner):
            self.retry_after = self.live.limit.retry_after(learner)
            raise web.HTTPError(429, "too many events from you just now; they are dropped")
        try:
            event = validated(json.loads(self.request.body))
        except (ValueError, UnicodeDecodeError) as e:   # EventError is a ValueError
            raise web.HTTPError(400, str(e) if isinstance(e, EventError)
                                else "an event is a JSON object") from None
        if not self.live.room.known(event["lesson"], event["exercise"]):
            raise web.HTTPError(400, f"lesson {event['lesson']} has no exercise "
                                     f"{event['exercise']!r}")
        self.live.add(learner, event)
        self.set_status(201)
        self.finish({"message": "counted"})


def handlers(live, prefix):
    """The service's routes under `prefix` (ending in /)."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated

    class Instructor(HubOAuthenticated, Handler):
        """A page for those the hub lets in (access:services!service=<this service>); 403 for others."""

    class Page(Instructor):
        @web.authenticated
        def get(self):
            self.write(PAGE.generate(prefix=prefix, poll=POLL_MS, xsrf=self.xsrf_token,
                                     name=self.current_user["name"]))

    class State(Instructor):
        @web.authenticated
        def get(self):
            version = self.live.version()
            if self.get_argument("v", "") == version:
                self.write({"version": version, "same": True})
                return
            view = self.live.room.view()
            view["version"] = version
            view["sessions"] = [{"id": s[0], "started": s[1], "events": s[4]}
                                for s in self.live.store.sessions()[:10]]
            self.write(view)

    class Csv(Instructor):
        @web.authenticated
        def get(self):
            try:
                session = int(self.get_argument("session", str(self.live.room.session or 0)))
            except ValueError:
                raise web.HTTPError(400, "session must be a session's number") from None
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M")
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.set_header("Content-Disposition",
                            f'attachment; filename="lab-session-{session}-{stamp}.csv"')
            self.write(session_csv(session, self.live.store.events(session)))

    class Sessions(Instructor):
        @web.authenticated
        def post(self):
            self.live.new_session()
            log.info("%s started session %s", self.current_user["name"], self.live.room.session)
            self.redirect(prefix)

    return [
        (prefix, Page, {"live": live}),
        (prefix + "state", State, {"live": live}),
        (prefix + "session.csv", Csv, {"live": live}),
        (prefix + "sessions", Sessions, {"live": live}),
        (prefix + "api/events", Events, {"live": live}),
        (prefix + "live.js", Asset, {"live": live, "body": SCRIPT,
                                     "kind": "text/javascript; charset=utf-8"}),
        (prefix + "live.css", Asset, {"live": live, "body": STYLE, "kind": "text/css; charset=utf-8"}),
        (prefix + "oauth_callback", HubOAuthCallbackHandler),
        (prefix.rstrip("/"), web.RedirectHandler, {"url": prefix}),
    ]


# ---------------------------------------------------------------- the command

def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog="python -m course_lib.live",
        description="The instructors' live view of a lab, as a JupyterHub service (docs/hub.md, section 6).")
    parser.add_argument("--db", default="course-live.sqlite",
                        help="the SQLite file of sessions and events (made when missing)")
    parser.add_argument("--keep-days", type=float, default=30,
                        help="delete sessions whose last event is older than this (default 30)")
    parser.add_argument("--gap-hours", type=float, default=3,
                        help="an event after this long a quiet spell starts a new session (default 3)")
    parser.add_argument("--instructors", default="instructors",
                        help="the hub group whose members are not listed as learners")
    parser.add_argument("--burst", type=int, default=30, help="events a learner may send at once")
    parser.add_argument("--per-minute", type=float, default=20,
                        help="events a learner may send per minute, past the burst")
    return parser.parse_args(argv)


def main(argv=None):
    args = _arguments(argv)
    missing = [v for v in ("JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_SERVICE_PREFIX", "JUPYTERHUB_API_TOKEN")
               if not os.environ.get(v)]
    if missing:
        sys.exit(f"course_lib.live runs as a JupyterHub service, started by the hub ({', '.join(missing)} "
                 f"not set): add it to the hub's configuration as docs/hub.md (section 6) shows")
    try:
        import jupyterhub.services.auth  # noqa: F401
    except ImportError:
        sys.exit("course_lib.live needs the jupyterhub package in the Python that runs it "
                 "(the hub's user environment has it: pip install jupyterhub)")
    from urllib.parse import urlparse

    from jupyterhub.services.auth import HubOAuth

    logging.basicConfig(level=logging.INFO, format="[%(levelname)s %(asctime)s %(name)s] %(message)s")
    store = Store(args.db, gap=args.gap_hours * HOURS, keep=args.keep_days * DAYS)
    store.forget()
    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]
    prefix = prefix if prefix.endswith("/") else prefix + "/"
    auth = HubOAuth.instance(cache_max_age=60)
    live = Live(store, auth, RateLimit(args.burst, args.per_minute), instructors=args.instructors)
    app = web.Application(handlers(live, prefix), cookie_secret=store.secret("cookie"),
                          xsrf_cookies=True, login_url=auth.login_url)
    where = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    app.listen(where.port or 80, where.hostname or "127.0.0.1", max_body_size=64 * 1024)
    log.info("the live view serves %s at %s, keeping %s (session %s)", prefix,
             os.environ["JUPYTERHUB_SERVICE_URL"], args.db, live.room.session)
    loop = IOLoop.current()
    for stop in (signal.SIGINT, signal.SIGTERM):   # how the hub stops its services
        loop.asyncio_loop.add_signal_handler(stop, loop.stop)
    loop.add_callback(live.refresh_roster)
    PeriodicCallback(live.refresh_roster, ROSTER_EVERY * 1000).start()
    PeriodicCallback(live.forget, HOURS * 1000).start()
    try:
        loop.start()
    finally:
        store.close()
        log.info("the live view stopped; its sessions are kept in %s", args.db)
