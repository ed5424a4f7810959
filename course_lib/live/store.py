"""The live view's records: one SQLite file of lab sessions and the checks' events in each.

A session is one lab: it opens with the first event after the previous one went quiet for
`gap` seconds (three hours by default), or when an instructor starts a new one, and ends when
the next begins. Each event row keeps the learner's hub name, the time, and the event's own
fields (course_lib.checks.report.EVENT), nothing else. Sessions whose last event is older
than `keep` seconds (30 days by default) are deleted with their events, at start-up and
hourly. The file is made readable by its owner alone: it also holds the secret that signs
the instructors' login cookies, so that a restarted service keeps them signed in.
"""
import contextlib
import os
import secrets
import sqlite3
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    started REAL NOT NULL,     -- seconds since the epoch
    last REAL NOT NULL,        -- the latest event's time, or the start
    ended REAL                 -- NULL while it is the current session
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL REFERENCES sessions(id),
    at REAL NOT NULL,
    learner TEXT NOT NULL,     -- the hub's name for the token's owner
    lesson TEXT NOT NULL,
    exercise TEXT NOT NULL,
    passed INTEGER NOT NULL,
    kind TEXT,
    reason TEXT,
    hints INTEGER NOT NULL,
    solution INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_session ON events(session, id);
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
FIELDS = ("at", "learner", "lesson", "exercise", "passed", "kind", "reason", "hints", "solution")
HOURS, DAYS = 3600, 86400


class Store:
    """The sessions and events in the SQLite file at `path` (made when missing)."""

    def __init__(self, path, gap=3 * HOURS, keep=30 * DAYS):
        self.path, self.gap, self.keep = str(path), float(gap), float(keep)
        fresh = not os.path.exists(self.path)
        if fresh:   # created readable by its owner alone, before any data goes in
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
        self.db = sqlite3.connect(self.path, isolation_level=None)   # autocommit, or _transaction
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA secure_delete=ON")    # what `forget` deletes is overwritten
        self.db.executescript(SCHEMA)

    @contextlib.contextmanager
    def _transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self):
        self.db.close()

    def secret(self, name):
        """A random secret kept in the file under `name` (made the first time it is asked for)."""
        row = self.db.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()
        if row:
            return row[0]
        value = secrets.token_hex(32)
        self.db.execute("INSERT OR IGNORE INTO settings VALUES (?, ?)", (name, value))
        return self.db.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()[0]

    def current(self):
        """(id, started, last) of the open session, or None."""
        return self.db.execute("SELECT id, started, last FROM sessions WHERE ended IS NULL "
                               "ORDER BY id DESC LIMIT 1").fetchone()

    def start(self, at=None):
        """End the open session (if any) and open a new one; returns its id."""
        at = time.time() if at is None else at
        with self._transaction():
            self.db.execute("UPDATE sessions SET ended = ? WHERE ended IS NULL", (at,))
            return self.db.execute("INSERT INTO sessions (started, last) VALUES (?, ?)",
                                   (at, at)).lastrowid

    def session_for(self, at):
        """The id of the session an event at `at` belongs to: the open one, or a new one after a gap."""
        open_ = self.current()
        if open_ is None or at - open_[2] > self.gap:
            return self.start(at)
        return open_[0]

    def add(self, learner, event, at=None):
        """Store one validated event of `learner`; returns (session id, the row as a dict)."""
        at = time.time() if at is None else at
        session = self.session_for(at)
        row = {"at": at, "learner": learner, **event}
        with self._transaction():
            self.db.execute(f"INSERT INTO events (session, {', '.join(FIELDS)}) VALUES "
                            f"(?, {', '.join('?' * len(FIELDS))})",
                            (session, *(row[f] for f in FIELDS)))
            self.db.execute("UPDATE sessions SET last = max(last, ?) WHERE id = ?", (at, session))
        return session, row

    def events(self, session):
        """The events of `session`, oldest first, each a dict of FIELDS."""
        cursor = self.db.execute(f"SELECT {', '.join(FIELDS)} FROM events WHERE session = ? "
                                 f"ORDER BY id", (session,))
        for values in cursor:
            row = dict(zip(FIELDS, values))
            row["passed"], row["solution"] = bool(row["passed"]), bool(row["solution"])
            yield row

    def sessions(self):
        """[(id, started, last, ended, events)] of every session kept, newest first."""
        return self.db.execute("SELECT s.id, s.started, s.last, s.ended, "
                               "(SELECT count(*) FROM events e WHERE e.session = s.id) "
                               "FROM sessions s ORDER BY s.id DESC").fetchall()

    def forget(self, now=None):
        """Delete the sessions (and their events) whose last event is older than `keep` seconds;
        returns how many were deleted."""
        before = (time.time() if now is None else now) - self.keep
        with self._transaction():
            old = [r[0] for r in self.db.execute("SELECT id FROM sessions WHERE last < ?", (before,))]
            for session in old:
                self.db.execute("DELETE FROM events WHERE session = ?", (session,))
                self.db.execute("DELETE FROM sessions WHERE id = ?", (session,))
        return len(old)
