"""Inputs drawn at random from the whole domain an exercise states, and the smallest that fails.

A check's named cases catch the usual mistakes; drawn inputs catch the rest: an answer that is
right on every example and wrong once an id passes 999, a piece is longer than five ids, a
text holds a capital or a mask is longer than a table. Beside its named cases a check calls

    each(c, draw, check_one, n=40, stream=3)

`draw(d)` builds one input from the choices of a `Draw` d (`d.integer(0, 2_000)`,
`d.size(1, 1_100)`, `d.many(...)`, `d.seed()` for an array's values) and returns it with the
text that names it in feedback; `check_one(c, input, case)` checks it the way the named cases
are checked (through `c.call`, `c.fail` and `c.ok`). The n inputs come from
`seed(stream)` (course_lib.checks.core): the same inputs in every run of a learner's own
check, others for each grading (the grader's seed, which the learner's process never sees). When one fails, the choices that made it are shrunk, as
Hypothesis shrinks (delete a block of choices, lower one towards its smallest value, keep the
result when the input still fails the same way), to the smallest input found, and that
input's feedback is shown. A drawn input that passes counts as one check; a failing check
counts the inputs that passed before it, never the tries the shrinking made.

Why not Hypothesis itself, which draws and shrinks this way and better: a learner's check must
draw the same inputs on every run (nbval compares its pass line, and feedback must be
reproducible), so the inputs must be a function of the seed alone, and Hypothesis 6 (6.170
tried) also draws, now and then, constants it reads from the source of the modules a process has loaded: importing a
module that holds `MAGIC = 987654` changed what `@seed(7)` drew from `integers(0, 10**6)`, and
987654 was among the draws. It also wrote a `.hypothesis/` folder into the working directory,
shrinks without a bound on the number of calls (each of which the grader sends to the learner's
process and waits for), and took 3 s
to build its Unicode tables the first time a process drew text. The drawer here is a few dozen
lines, draws from NumPy's generator alone (tests/test_domain.py asserts that a loaded module
changes nothing), and stops shrinking after a fixed number of calls, never after a time, so
that a loaded machine shows the same feedback as a quiet one.
"""
import re

import numpy as np

# Characters of every class a text holds: letters small and capital, digits, punctuation,
# spaces, tabs and line ends (CR LF as one unit too), NUL and other control characters, accented
# letters of two bytes, combining marks, characters that normalisation changes, three-byte CJK
# and currency, four-byte emoji, the byte-order mark, a zero-width joiner, the line separator.
CHARACTERS = ("abcxyz", "ABCXYZ", "0189", ".,;!?'-(", " ", "\t", "\n", "\r", ("\r\n",),
              "\x00\x01\x1b\x7f", "éüßÆñ", "\u0301\u0308", "ﬁ\u212b\u00c5", "€中文語",
              "💡😀👍🏽", "\ufeff\u200d\u2028")

SHRINK_CALLS = 200  # the most inputs tried while shrinking one failure (a grading sends each)


class Draw:
    """The choices that make one input: bounded ints, drawn at random or read back from `prefix`.

    Each choice is kept as its distance from its smallest value, so shrinking a choice towards
    0 moves it towards the simplest input. Read back from a prefix, a choice is clamped to its
    range, and a choice past the prefix's end is its smallest value.
    """

    def __init__(self, rng=None, prefix=None):
        self.rng, self.prefix, self.choices = rng, prefix, []

    def _choose(self, span, drawn):
        i = len(self.choices)
        if self.prefix is None:
            value = drawn()
        else:
            value = min(max(int(self.prefix[i]), 0), span) if i < len(self.prefix) else 0
        self.choices.append(value)
        return value

    def integer(self, lo, hi):
        """An int in [lo, hi], uniform."""
        if hi < lo:
            raise ValueError(f"an empty range [{lo}, {hi}]")
        return lo + self._choose(hi - lo, lambda: int(self.rng.integers(0, hi - lo + 1)))

    def boolean(self, p=0.5):
        """True with probability p (False is the simpler value)."""
        return bool(self._choose(1, lambda: int(self.rng.random() < p)))

    def choice(self, options):
        """One of `options`, uniform; the first is the simplest."""
        return options[self.integer(0, len(options) - 1)]

    def size(self, lo, hi, small=8, p_large=0.25):
        """A size in [lo, hi]: mostly at most `small`, and with probability p_large anywhere in
        the range (past every table a later cell or a learner might slice from)."""
        if self.boolean(p_large):
            return self.integer(lo, hi)
        return self.integer(lo, min(hi, max(lo, small)))

    def length(self, lo=1, small=16, tables=(128, 256, 512, 1024), p_long=0.3):
        """A length: mostly lo to `small`, and with probability p_long just past one of `tables`
        (129 to 136, 257 to 264, ...), where a table of that size, sliced, runs out. The longest
        tier shrinks to the next shorter, so a failure shows the shortest length that fails."""
        if self.boolean(p_long):
            past = tables[self.integer(0, len(tables) - 1)]
            return past + self.integer(1, 8)
        return self.integer(lo, max(lo, small))

    def many(self, draw_one, lo=0, hi=10, average=4):
        """A list of lo to hi items, each made by draw_one(self); deleting an item's choices
        deletes the item (a flag before each item says whether the list goes on)."""
        p_more = 1 - 1 / (1 + max(average - lo, 0.1))
        items = []
        while len(items) < hi and (len(items) < lo or self.boolean(p_more)):
            items.append(draw_one(self))
        return items

    def text(self, hi=30, average=10):
        """A str of 0 to hi characters of every class (`CHARACTERS`), CR LF as one unit too."""
        return "".join(self.many(lambda d: d.choice(d.choice(CHARACTERS)), hi=hi,
                                 average=average))

    def seed(self):
        """A seed for NumPy or torch's generators, for the values of an array."""
        return self.integer(0, 2**31 - 1)


def _kind(e):
    """What a failure says and its hint, without their numbers: shrinking keeps only inputs that
    fail the same way, so that the smallest input shows the diagnosis the first one had."""
    lines = str(e).split("\n")
    said = [lines[0]] + [line for line in lines if line.startswith("Hint:")]
    return type(e).__name__, tuple(re.sub(r"\d+", "#", line) for line in said)


def _smaller(a, b):
    """Whether choices a come before b: fewer choices, then the smaller values, in order."""
    return (len(a), a) < (len(b), b)


def _chunks(n):
    """(start, size) of the blocks a sequence of n choices is cut into: halves, then quarters,
    down to single choices, the later blocks first (deleting those ends lists sooner)."""
    size = n // 2
    while size >= 1:
        for start in range(n - size, -1, -size):
            yield start, size
        size //= 2


class _Shrinker:
    """Shrinks failing choices with a fixed budget of tries: blocks deleted (halves first, then
    every run of two or three, an item of a list), blocks set to their simplest values, then
    each value lowered by bisection. A try counts only when
    its input fails the same way and is smaller; the smallest such input wins."""

    def __init__(self, fails, best, budget):
        self.fails, self.best, self.left, self.tried = fails, list(best), budget, set()

    def attempt(self, candidate):
        """Whether `candidate` fails the same way (and is kept as the new best)."""
        key = tuple(candidate)
        if self.left <= 0 or key in self.tried or not _smaller(candidate, self.best):
            return False
        self.tried.add(key)
        self.left -= 1
        used = self.fails(candidate)
        if used is not None and _smaller(used, self.best):
            self.best = list(used)
            return True
        return False

    def run(self):
        while self.left > 0:
            before = list(self.best)
            for change in (self._delete, self._zero, self._lower):
                change()
            if self.best == before:
                break
        return self.best

    def _delete(self):
        for start, size in list(_chunks(len(self.best))):
            if start + size <= len(self.best):
                self.attempt(self.best[:start] + self.best[start + size:])
        for size in (2, 3):   # an item of a list: its flag and its one or two choices
            for start in range(len(self.best) - size, -1, -1):
                if start + size <= len(self.best):
                    self.attempt(self.best[:start] + self.best[start + size:])

    def _zero(self):
        for start, size in list(_chunks(len(self.best))):
            block = self.best[start:start + size]
            if any(block):
                self.attempt(self.best[:start] + [0] * len(block) + self.best[start + size:])

    def _lower(self):
        i = 0
        while i < len(self.best) and self.left > 0:
            value = self.best[i]
            if value and not self.attempt(self.best[:i] + [0] + self.best[i + 1:]):
                low, high = 0, value          # low passes (or is untried), high fails
                for _ in range(16 if value < 2**20 else 1):   # a seed's value means nothing
                    if high - low <= 1 or i >= len(self.best):
                        break
                    middle = (low + high) // 2
                    if self.attempt(self.best[:i] + [middle] + self.best[i + 1:]):
                        high = middle
                    else:
                        low = middle
            i += 1


def each(c, draw, check_one, n, stream):
    """check_one(c, input, case) on n inputs drawn by draw(Draw) from seed(stream); the first
    failure is shrunk to the smallest input that fails the same way, and its feedback raised.

    On success c counts n more checks passed.
    """
    __tracebackhide__ = True
    from course_lib.checks.core import Stopped, seed   # torch: only when checking
    rng = np.random.default_rng(seed(stream))
    before = c.passed
    for k in range(n):
        d = Draw(rng)
        example, case = draw(d)
        try:
            check_one(c, example, case)
        except (NotImplementedError, Stopped, KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:
            c.passed = before + k
            _shrunk(c, draw, check_one, d.choices, e)
    c.passed = before + n


def _attempt(c, draw, check_one, choices):
    """(the failure, or None, and the choices actually used) for the input `choices` make."""
    from course_lib.checks.core import Stopped
    d = Draw(prefix=choices)
    example, case = draw(d)
    count = c.passed
    try:
        check_one(c, example, case)
    except (NotImplementedError, Stopped, KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:
        return e, d.choices
    finally:
        c.passed = count
    return None, d.choices


def _shrunk(c, draw, check_one, choices, first):
    """Shrink the failing `choices`, then raise the smallest failing input's feedback."""
    __tracebackhide__ = True
    kind = _kind(first)

    def fails(candidate):
        failure, used = _attempt(c, draw, check_one, candidate)
        return used if failure is not None and _kind(failure) == kind else None

    best = _Shrinker(fails, choices, SHRINK_CALLS).run()
    failure, _ = _attempt(c, draw, check_one, best)
    failure = failure if failure is not None else first   # (a learner's answer that changes)
    _mark_drawn(failure)
    raise failure


def _mark_drawn(e):
    """Say in the feedback that its input was drawn at random and shrunk."""
    if not isinstance(e, AssertionError) or not e.args or not isinstance(e.args[0], str):
        return
    lines = e.args[0].split("\n")
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("  input:")), 1)
    while at < len(lines) and lines[at].startswith(" " * 12):   # the input's further lines
        at += 1
    lines.insert(at, "  (drawn at random from the exercise's domain, then made as small as it "
                     "could be while it still fails this way)")
    e.args = ("\n".join(lines),) + tuple(e.args[1:])
