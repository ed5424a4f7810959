"""What the tests that drive Chromium share: finding it, and running only under `make test-browser`.

A browser test calls `browser_test(name, missing)` at its top: `make test` (no
COURSE_BROWSER_TEST=1) skips the module in one line saying whether it could run here;
`make test-browser` fails it, saying what is missing, where Playwright, Chromium or anything
`missing()` names is not there, so that it never passes by not running.
"""
import os
import shutil
import socket

import pytest


def chromium():
    """The path of Debian's Chromium (or another Chrome) on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_browser():
    """Why Chromium cannot be driven here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install playwright)"
    if chromium() is None:
        return "Chromium is not installed (apt-get install chromium)"
    return None


def browser_test(name, missing=lambda: None):
    """Skip the calling module outside `make test-browser`; fail it there when something is missing."""
    why = missing() or missing_browser()
    if os.environ.get("COURSE_BROWSER_TEST") != "1":
        pytest.skip(f"{name}: {why or 'all it needs is here'}; `make test-browser` runs it",
                    allow_module_level=True)
    if why:
        pytest.fail(f"make test-browser: {why}", pytrace=False)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
