"""Checkers for lesson 11, tokenization: the pieces of byte-pair encoding, written by the learner.

The cases are those a BPE meets after its first merge, not only on raw bytes: ids of 256 and
more inside pieces and id lists, ids whose digits hold another id's (11 and 1), a top count
of 1, ties between pairs whose ids have different numbers of digits, a pair given in the other
order; and text a decoder must keep exactly (a trailing space, a byte-order mark, characters
Unicode normalisation would change) beside bytes that are not UTF-8. Beside these named
cases each check draws inputs from the whole domain the lesson states (course_lib.checks.domain):
ids from single digits to past the lesson's 2,048-token vocabulary, ids whose digits end with
another's (97 and 197), pieces and id lists of up to 40 ids, ties among pairs anywhere in the
dict, and text of every character class (capitals, NUL, CR LF, controls, accents, combining
marks, CJK, emoji, the byte-order mark) cut into tokens at any byte, beside invalid bytes.
Calling course_lib.bpe, the course's own answer, is reported, not passed.
"""
import copy
import numbers
from collections.abc import Mapping

from course_lib import bpe
from course_lib.bpe import BPETokenizer, merge_pair
from course_lib.checks.core import Checker, checker
from course_lib.checks.domain import each

# The course's own BPE: the answer key, which an exercise's answer must not call.
_TRAIN = {"course_lib.bpe.train_bpe": bpe.train_bpe}
_MERGE_KEY = {"course_lib.bpe.merge_pair": bpe.merge_pair, **_TRAIN}
_ENCODE_KEY = {**_MERGE_KEY, "BPETokenizer.encode": BPETokenizer.encode,
               "BPETokenizer.encode_bytes": BPETokenizer.encode_bytes,
               "BPETokenizer's own encoding": BPETokenizer._encode_piece}
_DECODE_KEY = {"BPETokenizer.decode": BPETokenizer.decode,
               "BPETokenizer.decode_bytes": BPETokenizer.decode_bytes}

_BYTES_HINT = ("after the first merge, ids reach 256 and more, which bytes(...), bytearray and "
               "bytes.replace cannot hold (bytes are 0 to 255): work on lists (or tuples) of "
               "int ids throughout")


def _crash(hint):
    """A crash hint that names the bytes mistake when bytes(...) refused an id of 256 or more."""
    def choose(kind, text):
        return _BYTES_HINT if "range(0, 256)" in text or "bytes must be" in text else hint
    return choose


def _is_id(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _ids(c, got, case, what="the result"):
    """The learner's list (or tuple) of ids as a list of ints, or feedback that it isn't one."""
    __tracebackhide__ = True
    if isinstance(got, (bytes, bytearray)):
        c.fail(f"{what} should be a list of token ids, not bytes", case=case,
               got=type(got).__name__, hint=_BYTES_HINT)
    if isinstance(got, str) or not isinstance(got, (list, tuple)):
        c.fail(f"{what} should be a list of token ids", case=case, got=type(got).__name__,
               hint="build a new list: start with out = [] and append one id at a time")
    if not all(_is_id(i) for i in got):
        c.fail(f"{what} should hold integer token ids", case=case, got=repr(list(got))[:80],
               hint="append the ids themselves (ints), not pairs, strings or lists of them")
    c.ok()
    return [int(i) for i in got]


def _call_unchanged(c, fn, args, case, **kw):
    """fn(*args) on deep copies, with feedback when it changes a list or dict argument in place."""
    __tracebackhide__ = True
    before = copy.deepcopy(args)
    passed = copy.deepcopy(args)
    got = c.call(*passed, case=case, **kw)
    after = passed   # as the call left them
    for i, (was, now) in enumerate(zip(before, after)):
        if was != now:
            c.fail(f"your function changed its argument {i + 1} in place", case=case,
                   expected=repr(was)[:80], got=repr(now)[:80],
                   hint="build a new list or dict for the result; the caller still needs "
                        "its input as it was (the next merge reads it again)")
    return got


# Ids as a BPE meets them: bytes, tokens that merges made, and ids past the lesson's 2,048-token
# vocabulary, of one to five digits.
_ID_TIERS = ((0, 9), (10, 99), (100, 255), (256, 999), (1_000, 2_047), (2_048, 99_999))


def _draw_id(d, tiers=_ID_TIERS):
    lo, hi = d.choice(tiers)
    return d.integer(lo, hi)


def _draw_alphabet(d, lo=1, tiers=_ID_TIERS):
    """A few distinct ids to build pieces from, so that pairs repeat and counts tie; often with
    an id whose digits end with another's (97 and 197, 5 and 45), and one next to another."""
    ids = d.many(lambda d: _draw_id(d, tiers), lo=lo, hi=6, average=3)
    if d.boolean(0.5):
        longer = int(f"{d.integer(1, 9)}{d.choice(ids)}")
        if tiers is _ID_TIERS or longer < 256:
            ids.append(longer)
    if d.boolean(0.5):   # a near neighbour: pairs that differ in a by 1 to 3
        near = d.choice(ids) + d.integer(1, 3)
        if tiers is _ID_TIERS or near < 256:
            ids.append(near)
    return list(dict.fromkeys(ids))


def _shown(value, limit=300):
    """repr(value), cut to `limit` characters for feedback."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


# Exercise: count_pairs(pieces) -> {(a, b): count}

def _count(pieces, across=False, weighted=True, distinct=False, skip_last=False,
           repeats_once=False):
    counts = {}

    def add(word, f):
        pairs = list(zip(word, word[1:]))
        if skip_last:
            pairs = pairs[:-1]
        if distinct:
            pairs = list(dict.fromkeys(pairs))
        seen = set()
        for p in pairs:
            counts[p] = counts.get(p, 0) + (1 if repeats_once and p in seen else
                                            f if weighted else 1)
            seen.add(p)

    if across:
        add([t for piece, f in pieces.items() for _ in range(f if weighted else 1)
             for t in piece], 1)
    else:
        for piece, f in pieces.items():
            add(list(piece), f)
    return counts


_COUNT_HINTS = [
    (dict(across=True, weighted=False), "pairs are counted across piece boundaries: a pair is "
                                        "two neighbours inside one piece; the last id of a "
                                        "piece and the first of the next are never a pair"),
    (dict(across=True), "pairs are counted across piece boundaries: a pair is two neighbours "
                        "inside one piece; the last id of a piece and the first of the next "
                        "are never a pair (count each piece on its own)"),
    (dict(weighted=False), "each piece is counted once, whatever its frequency: pieces[piece] "
                           "says how often it occurs, so add that number for each of its pairs"),
    (dict(distinct=True), "a pair that occurs twice in a piece counts twice: (7, 7, 7) holds "
                          "(7, 7) at positions 0 and 1 (counting is not merging)"),
    (dict(repeats_once=True), "a pair's second occurrence in a piece added 1, not the piece's "
                              "frequency: each occurrence of a pair adds the count of its piece, "
                              "so (7, 7, 7) seen 3 times gives (7, 7) 6"),
    (dict(skip_last=True), "the last pair of each piece is missing: a piece of n ids has n - 1 "
                           "pairs, one for each id but the last"),
]

_COUNT_CASES = [
    ({(104, 105): 1}, "one piece 'hi' seen once"),
    ({(1, 2, 3): 2, (2, 3): 1}, "two pieces, one of them seen twice"),
    ({(7, 7, 7): 1}, "a repeated id: (7, 7, 7) seen once"),
    ({(1, 2): 1, (3, 4): 1}, "two pieces that must not be joined"),
    ({(5,): 4, (5, 6): 1, (): 2}, "a piece of one id, and an empty one"),
    ({}, "no pieces at all"),
    ({(32, 116, 104, 101): 5, (116, 104, 101): 2, (32, 116, 111): 3, (104, 101, 104, 101): 1},
     "' the' x5, 'the' x2, ' to' x3, 'hehe' x1"),
    ({(7, 7, 7): 3, (256, 257, 256, 257, 256): 2}, "pairs repeated inside pieces seen more than "
                                                   "once"),
    ({(32, 259): 5, (262, 110, 256): 2, (1000, 25, 6): 1},
     "pieces after some merges: ids of 256 and more"),
]


_PAIRS_CRASH = ("a piece of n ids has n - 1 pairs, starting at i = 0 to n - 2: stop the loop "
                "where i + 1 still lies inside the piece (and a piece of one id, or none, gives "
                "no pair)")


def _count_one(c, fn, pieces, case):
    """Check count_pairs on one input."""
    __tracebackhide__ = True
    got = _call_unchanged(c, fn, (pieces,), case, crash_hint=_crash(_PAIRS_CRASH))
    if not isinstance(got, Mapping):
        c.fail("the result should be a dict {(a, b): count}", case=case,
               got=type(got).__name__, hint="return a dict whose keys are pairs (a, b) "
                                            "and values their counts")
    got = {k: v for k, v in got.items() if not (_is_id(v) and v == 0)}
    if not all(isinstance(k, tuple) and len(k) == 2 for k in got):
        c.fail("the keys should be pairs (a, b) of ids, as tuples", case=case,
               got=repr(list(got))[:80],
               hint="key the counts by the tuple (piece[i], piece[i + 1]): the next cells "
                    "look pairs up as tuples")
    if not all(_is_id(a) and _is_id(b) for a, b in got):
        c.fail("the keys should be pairs of int ids", case=case, got=repr(list(got))[:80],
               hint="key the counts by the ids themselves, ints: no bytes, strings or "
                    "arrays (the next cells append the pair to the merge list)")
    if not all(_is_id(v) for v in got.values()):
        c.fail("the counts should be ints", case=case, got=repr(list(got.values()))[:80],
               hint="add up whole numbers: each occurrence adds the piece's frequency")
    c.ok()
    got = {(int(a), int(b)): int(v) for (a, b), v in got.items()}
    want = _count(pieces)
    if got != want:
        c.fail("the counts are not right", case=case, expected=want, got=got,
               hint=_count_hint(pieces, got, want))
    c.ok()


def _count_hint(pieces, got, want):
    """The hint for counts `got` that differ from `want`: every usual mistake that gives them
    (on some inputs two give the same counts, and the hint cannot tell which was made)."""
    found = [h for kw, h in _COUNT_HINTS if _count(pieces, **kw) == got != want]
    longest = max((len(p) for p in pieces), default=0)
    first = next((n for n in range(2, longest) if _count(_cut(pieces, n)) == got), None)
    if first is not None:
        found.append(f"only the first {first} ids of each piece were counted: a piece can be "
                     f"as long as a word (or longer), so count every neighbouring pair of the "
                     f"whole piece, to its last id")
    if len(found) > 1:
        return "these counts fit more than one slip: " + "; or ".join(found)
    return found[0] if found else ("count every adjacent pair (piece[i], piece[i + 1]) of every "
                                   "piece, adding the piece's frequency each time")


def _cut(pieces, n):
    """The pieces cut to their first n ids, the counts of pieces that become equal added."""
    cut = {}
    for piece, f in pieces.items():
        cut[piece[:n]] = cut.get(piece[:n], 0) + f
    return cut


def _draw_pieces(d):
    """Pieces of 0 to 40 ids from a small alphabet (repeated pairs), seen 1 to 1,000 times."""
    alphabet = _draw_alphabet(d)
    pieces = {}
    for _ in range(d.integer(0, 6)):
        piece = tuple(d.many(lambda d: d.choice(alphabet), hi=40, average=6))
        pieces[piece] = d.size(1, 1_000, small=5)
    return pieces, f"count_pairs({_shown(pieces)})"


@checker
def check_count_pairs(fn):
    """Check count_pairs(pieces) -> {(a, b): how often a is followed by b inside the pieces}."""
    __tracebackhide__ = True
    c = Checker("count_pairs", fn, forbidden=_TRAIN)
    for pieces, words in _COUNT_CASES:
        _count_one(c, fn, pieces, f"count_pairs({pieces}), {words}")
    each(c, _draw_pieces, lambda c, pieces, case: _count_one(c, fn, pieces, case), n=40, stream=1101)
    c.done()


# Exercise: best_pair(counts) -> the pair to merge next

_BEST_CASES = [
    ({(1, 2): 3, (2, 3): 5, (3, 4): 1}, "one clear winner"),
    ({(5, 9): 4, (3, 7): 4, (3, 2): 1}, "a tie at 4"),
    ({(3, 9): 4, (3, 7): 4}, "a tie between pairs with the same first id"),
    ({(9, 1): 2, (1, 9): 2, (4, 4): 2}, "a three-way tie"),
    ({(200, 300): 7}, "a single pair"),
    ({(104, 105): 1, (116, 104): 1, (32, 116): 1}, "every pair seen once, as late in training"),
    ({(12, 5): 2, (9, 7): 2}, "a tie between ids of one and two digits"),
    ({(3, 1): 3, (2, 1000): 3}, "a tie where one id is past 255"),
    ({(10, 2): 4, (100, 5): 4, (9, 300): 4}, "a tie between ids of one, two and three digits"),
]

_NONE_HINT = ("return the pair itself; and when every pair occurs once (late in training the "
              "top count is 1) some pair must still win: a search that starts from a best count "
              "of 1 and keeps only larger counts finds none")


def _one_pair(c, got, case):
    __tracebackhide__ = True
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        c.fail("the result should be one pair (a, b)", case=case, got=repr(got)[:80],
               hint="return the pair itself, a key of counts, not its count")
    if isinstance(got[0], (tuple, list)):
        c.fail("the result should be one pair (a, b), not a (pair, count) item", case=case,
               got=repr(got)[:80], hint="max or min over counts.items() gives (pair, count): "
                                        "return its first element, the pair")
    if not (_is_id(got[0]) and _is_id(got[1])):
        c.fail("the pair should hold two int ids", case=case, got=repr(got)[:80],
               hint="return a key of counts as it is: a tuple of two ints")
    if not isinstance(got, tuple):
        c.fail("the pair should be a tuple (a, b), not a list", case=case, got=repr(got)[:80],
               hint="return a key of counts as it is, a tuple: the next cell appends it to the "
                    "merge list and compares that list with train_bpe's, which holds tuples")
    c.ok()
    return (int(got[0]), int(got[1]))


# The ways a class ranks tied pairs by something made from the pair rather than the pair: each
# right while the ids are small, wrong once an id has more digits than the key leaves room for
# (the lesson trains a vocabulary of 2,048 tokens). One input may not tell them apart (a * K + b
# and a + b / K rank alike), so the hint names every way that gives the learner's pair.
_TIE_KEYS = [
    ([str], "as text ('(12, 5)' sorts before '(9, 7)' because '1' comes before '9')"),
    ([lambda p, w=w: f"{p[0]:0{w}d}{p[1]:0{w}d}" for w in (2, 3, 4)]
     + [lambda p, w=w, sep=sep: f"{p[0]:0{w}d}{sep}{p[1]:0{w}d}" for w in (2, 3, 4)
        for sep in (",", " ", ".")],
     "as zero-padded text, which holds only while every id fits the padding"),
    ([lambda p, k=k: p[0] * k + p[1] for k in (100, 256, 1_000, 1_024, 10_000)]
     + [lambda p, k=k: p[0] + p[1] / k for k in (100, 256, 1_000, 1_024, 10_000)],
     "as one number, a * K + b or a + b / K, which holds only while every b stays below K"),
    ([lambda p: float(f"{p[0]}.{p[1]}")],
     "as the number 'a.b' (a, a point, then b, read as a float), which reads b as a decimal "
     "fraction: (1, 25) gives 1.25, before the 1.3 of (1, 3)"),
]


def _tie_hint(mine, counts, tied):
    """The hint for a wrong pair among the tied ones, or None."""
    ways = [way for keys, way in _TIE_KEYS if any(mine == min(tied, key=key) for key in keys)]
    if not ways:
        return None
    return ("the tied pairs were ranked by something made from them, not by the pairs "
            "themselves: " + "; or ".join(ways) + ". Ids pass 999 once merges have made new "
            "tokens (the lesson trains 2,048), and then such a ranking breaks; compare the "
            "ids as numbers: the pairs themselves, as tuples, a first, then b")


def _best_one(c, fn, counts, words):
    """Check best_pair on one dict of counts, as given and in reverse order."""
    __tracebackhide__ = True
    top = max(counts.values())
    tied = sorted(p for p, n in counts.items() if n == top)
    want = tied[0]
    got = {}
    for order in ("as written", "in reverse order"):
        given = counts if order == "as written" else dict(reversed(list(counts.items())))
        case = f"best_pair({_shown(given)}), {words}, the pairs {order}"
        got[order] = _one_pair(c, _call_unchanged(c, fn, (given,), case,
                                                  none_hint=_NONE_HINT), case)
    if got["as written"] == got["in reverse order"] == want:
        c.ok()
        return
    order = "as written" if got["as written"] != want else "in reverse order"
    given = counts if order == "as written" else dict(reversed(list(counts.items())))
    case = f"best_pair({_shown(given)}), {words}, the pairs {order}"
    mine = got[order]
    if mine not in counts or counts[mine] != top:
        hint = ("that is the least frequent pair: merge the MOST frequent one"
                if mine in counts and counts[mine] == min(counts.values()) else
                "return the pair with the highest count")
    elif got["as written"] != got["in reverse order"]:
        other = got["in reverse order" if order == "as written" else "as written"]
        hint = (f"ties broken inconsistently: the answer changed with the order in which the "
                f"pairs were counted (in the other order you returned {other}; max with "
                f"key=counts.get keeps the first it meets); among pairs of equal count "
                f"the smallest pair must win, whatever the order")
    elif _tie_hint(mine, counts, tied):
        hint = _tie_hint(mine, counts, tied)
    elif mine == tied[-1]:
        hint = ("ties go to the smallest pair (compare a first, then b), not the largest")
    else:
        hint = "among the tied pairs take the smallest, comparing a first, then b"
    c.fail("the pair to merge is not right", case=case, expected=want, got=mine, hint=hint)


def _draw_counts(d):
    """Counts of up to 12 pairs, often several tied at the top count, in any order in the dict:
    among the tied, often two whose a's are equal or next to each other, so that b decides,
    with b's of different numbers of digits, or two whose a's differ in digits."""
    firsts = d.many(_draw_id, lo=1, hi=3, average=1)
    seconds = _draw_alphabet(d)
    every = firsts + seconds
    top = d.size(1, 10_000, small=3)
    shape = d.choice(("b decides", "a decides", "b decides", "any"))
    if shape == "b decides":   # equal or near a's, b's of different digit counts
        a, step = d.choice(firsts), d.choice((0, 1, 0, 1, 2))
        small, big = _draw_id(d, _ID_TIERS[:4] + _ID_TIERS[2:4]), _draw_id(d, _ID_TIERS[4:])
        tied = [(a, big), (a + step, small)]
    elif shape == "a decides":   # a's of different digit counts
        tied = [(_draw_id(d, _ID_TIERS[4:]), d.choice(seconds)),
                (_draw_id(d, _ID_TIERS[:4] + _ID_TIERS[2:4]), d.choice(seconds))]
    else:
        tied = [(d.choice(firsts) if d.boolean(0.8) else d.choice(every), d.choice(seconds))
                for _ in range(d.integer(1, 4))]
    below = [(d.choice(every), d.choice(every)) for _ in range(d.integer(0, 8))] if top > 1 else []
    counts = {pair: d.integer(1, top - 1) for pair in below}
    counts.update({pair: top for pair in tied})
    order = list(counts.items())
    for k in range(len(order) - 1, 0, -1):   # the tied pairs anywhere in the dict
        j = d.integer(0, k)
        order[k], order[j] = order[j], order[k]
    return dict(order), "a drawn dict of counts"


@checker
def check_best_pair(fn):
    """Check best_pair(counts) -> the most frequent pair, ties going to the smallest pair."""
    __tracebackhide__ = True
    c = Checker("best_pair", fn, forbidden=_TRAIN)
    for counts, words in _BEST_CASES:
        _best_one(c, fn, counts, words)
    each(c, _draw_counts, lambda c, counts, words: _best_one(c, fn, counts, words), n=100,
         stream=1102)
    c.done()


# Exercise: merge_pair(ids, pair, new_id) -> ids with each occurrence of pair replaced

def _scan(ids, pair, new_id, step=2, keep_last=True, either_order=False):
    """merge_pair, or one of the usual wrong ways of writing it (a step of 1 overlaps)."""
    out, i = [], 0
    end = len(ids) if keep_last else len(ids) - 1
    while i < end:
        here = tuple(ids[i:i + 2])
        if len(here) == 2 and (here == tuple(pair) or either_order and here == tuple(pair)[::-1]):
            out.append(new_id)
            i += step
        else:
            out.append(ids[i])
            i += 1
    return out


def _merge_from_right(ids, pair, new_id):
    return merge_pair(ids[::-1], pair[::-1], new_id)[::-1]


def _merge_first(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)


def _as_text(ids, pair, new_id):
    """The ids merged as text, each way a class writes it: [joined by sep, then replaced]."""
    found = []
    for sep in (" ", ",", ", ", ""):
        text = sep.join(map(str, ids)).replace(f"{pair[0]}{sep}{pair[1]}", str(new_id))
        try:
            found.append([int(t) for t in (text.split(sep) if sep else [text])] if text else [])
        except ValueError:
            pass
    return found


_MERGE_HINTS = [
    (_merge_from_right, "the merge went from right to left: scan from the left, so (7, 7, 7) "
                        "with the pair (7, 7) becomes [new_id, 7]"),
    (lambda *args: _scan(*args, step=1), "the merge was applied overlapping: once two ids are merged, the "
                         "second cannot start another pair; skip past both (i += 2)"),
    (_merge_first, "only the first occurrence was merged: replace every occurrence of the pair"),
    (lambda *args: _scan(*args, either_order=True), "the pair is ordered: (1, 2) merges 1 followed by 2, never 2 "
                          "followed by 1"),
    (lambda *args: _scan(*args, keep_last=False), "the last id is lost: when the scan reaches the last id without a "
                        "pair, append it too"),
]

_TEXT_HINT = ("the ids were merged as text: in '11 2' the text '1 2' occurs although the pair "
              "(1, 2) does not; compare the ids themselves, two neighbours at a time")

_MERGE_CASES = [
    ([1, 2, 3, 1, 2], (1, 2), 9, "two occurrences"),
    ([5, 1, 2], (1, 2), 9, "the pair at the end"),
    ([7, 7, 7], (7, 7), 9, "three equal ids"),
    ([7, 7, 7, 7], (7, 7), 9, "four equal ids"),
    ([2, 1, 2, 1], (1, 2), 300, "the pair's reverse next to it"),
    ([4, 5, 6], (1, 2), 9, "no occurrence"),
    ([3], (1, 2), 9, "one id"),
    ([], (1, 2), 9, "no ids"),
    ([104, 101, 32, 104, 101, 104, 101], (104, 101), 256, "'he he' as bytes with 'hehe'"),
    ([32, 258, 256, 258, 256, 115], (258, 256), 263, "ids of 256 and more, after some merges"),
    ([11, 2, 1, 2, 21, 12], (1, 2), 300, "ids whose digits hold the pair's: 11, 2 and 21, 12"),
    ([261, 25, 6, 2, 56], (25, 6), 262, "ids whose digits run into each other: 261, 25, 6"),
]


_MERGE_CRASH = ("look at ids[i + 1] only while i + 1 < len(ids): at the last id there is no "
                "pair left, so append it and stop (an empty list gives an empty list)")


def _merge_one(c, fn, ids, pair, new_id, case):
    """Check merge_pair on one input."""
    __tracebackhide__ = True
    got = _ids(c, _call_unchanged(c, fn, (list(ids), pair, new_id), case,
                                  crash_hint=_crash(_MERGE_CRASH)), case)
    _same_ids(c, got, merge_pair(ids, pair, new_id), "the merged ids", case,
              [(lambda wrong=wrong: wrong(list(ids), pair, new_id) if ids else None, h)
               for wrong, h in _MERGE_HINTS],
              lambda: _as_text(ids, pair, new_id), _TEXT_HINT,
              "walk the ids from the left: where a neighbouring pair is the pair, emit new_id "
              "and jump past both; otherwise emit the id and move on by one")


def _same_ids(c, got, want, what, case, mistakes, as_text, text_hint, otherwise):
    """Fail unless got == want, with the hint of the first (result, hint) of `mistakes` whose
    result() is got, else text_hint when got is among as_text() (the ids merged as text), else
    `otherwise`."""
    __tracebackhide__ = True
    if got != want:
        hint = next((h for wrong, h in mistakes if wrong() == got), None)
        if hint is None and got in as_text():
            hint = text_hint
        c.fail(f"{what} are not right", case=case, expected=want, got=got,
               hint=hint or otherwise)
    c.ok()


def _draw_merge(d):
    """0 to 40 ids from a small alphabet, a pair (mostly one that occurs) and a fresh id."""
    alphabet = _draw_alphabet(d)
    ids = d.many(lambda d: d.choice(alphabet), hi=40, average=8)
    if len(ids) > 1 and d.boolean(0.8):
        i = d.integer(0, len(ids) - 2)
        pair = (ids[i], ids[i + 1])
    else:
        pair = (d.choice(alphabet), d.choice(alphabet))
    new_id = max(alphabet + [255]) + d.integer(1, 1_000)
    return (ids, pair, new_id), f"merge_pair({_shown(ids)}, {pair}, {new_id})"


@checker
def check_merge_pair(fn):
    """Check merge_pair(ids, pair, new_id): every occurrence merged, left to right, no overlaps."""
    __tracebackhide__ = True
    c = Checker("merge_pair", fn, forbidden=_MERGE_KEY)
    for ids, pair, new_id, words in _MERGE_CASES:
        _merge_one(c, fn, ids, pair, new_id, f"merge_pair({ids}, {pair}, {new_id}), {words}")
    each(c, _draw_merge, lambda c, args, case: _merge_one(c, fn, *args, case), n=40, stream=1103)
    c.done()


# Exercise: encode_piece(ids, merges) -> the ids after the merges, lowest rank first

def encode_with_ranks(ids, merges):
    """The reference: while a pair has a merge, merge the one of lowest rank (merges[k] -> 256 + k)."""
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    ids = list(ids)
    while len(ids) > 1:
        pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, len(ranks)))
        if pair not in ranks:
            break
        ids = merge_pair(ids, pair, 256 + ranks[pair])
    return ids


def _leftmost_first(ids, merges):
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    while True:
        found = next((p for p in zip(ids, ids[1:]) if p in ranks), None)
        if found is None:
            return ids
        ids = merge_pair(ids, found, 256 + ranks[found])


def _highest_first(ids, merges):
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    while True:
        present = [p for p in zip(ids, ids[1:]) if p in ranks]
        if not present:
            return ids
        pair = max(present, key=ranks.get)
        ids = merge_pair(ids, pair, 256 + ranks[pair])


def _one_merge(ids, merges):
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    present = [p for p in zip(ids, ids[1:]) if p in ranks]
    if not present:
        return ids
    pair = min(present, key=ranks.get)
    return merge_pair(ids, pair, 256 + ranks[pair])


def _rank_as_id(ids, merges):
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    out = encode_with_ranks(ids, merges)
    back = {256 + k: k for k in ranks.values()}
    return [back.get(t, t) for t in out]


def _unordered(ids, merges):
    """Merges read as unordered pairs: (a, b) also joins b followed by a."""
    ranks = {}
    for k, p in enumerate(merges):
        ranks.setdefault(frozenset(p), k)
    ids = list(ids)
    while len(ids) > 1:
        at = [(ranks[frozenset(p)], i) for i, p in enumerate(zip(ids, ids[1:]))
              if frozenset(p) in ranks]
        if not at:
            return ids
        k = min(at)[0]
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and frozenset((ids[i], ids[i + 1])) == frozenset(merges[k]):
                out.append(256 + k)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids


_ENCODE_HINTS = [
    (_leftmost_first, "the first pair found from the left was merged, not the pair of lowest "
                      "rank: among the pairs present, merge the one whose merge was learned "
                      "first (smallest index in merges)"),
    (_highest_first, "the merges were applied latest first: the lowest rank (the earliest "
                     "merge in the list) goes first, because later merges were learned on "
                     "text where the earlier ones had already been made"),
    (_one_merge, "only one merge was made: repeat until no adjacent pair has a merge"),
    (_rank_as_id, "merge k makes token 256 + k, not k: ids 0 to 255 are the bytes"),
    (_unordered, "a merge is an ordered pair: (98, 97) joins 98 followed by 97, never 97 "
                 "followed by 98, which has no merge of its own here"),
]

_ENCODE_CASES = [
    ([97, 98], [(97, 98)], "'ab' with the one merge (a, b)"),
    ([97, 98, 99], [(97, 98), (98, 99), (256, 99)], "'abc', where 'ab' then 'ab' + 'c' merge"),
    ([97, 98, 99], [(98, 99), (97, 98)], "'abc', where (b, c) was learned before (a, b)"),
    ([97, 97, 97, 97, 97], [(97, 97), (256, 256)], "'aaaaa' with 'aa' and 'aaaa'"),
    ([120, 121], [(97, 98)], "no pair has a merge"),
    ([], [(97, 98)], "no ids"),
    ([104], [(104, 105)], "one id"),
    (list(b" the then"), [(116, 104), (32, 256), (256, 101), (257, 101), (258, 110)],
     "' the then' with five merges"),
    (list(b"abcd"), [(99, 100), (98, 99), (97, 98), (256, 98)],
     "'abcd', merges learned right to left"),
    ([97, 98], [(98, 97)], "'ab' where only (b, a) has a merge"),
    (list(b"bab"), [(97, 98), (98, 256)], "'bab', where (a, b) has a merge and (b, a) none"),
]


_ENCODE_CRASH = ("a pair with no merge must be skipped, not looked up: ranks.get(pair) or "
                 "`pair in ranks` first; and a piece of one id, or none, has no pair to merge "
                 "(min of an empty sequence raises)")


def _encode_as_text(ids, merges):
    """The piece encoded as text, each way a class writes it: the ids joined by a separator,
    then each merge's 'a b' replaced by its new id, in rank order."""
    found = []
    for sep in (" ", ",", ", "):
        text = sep.join(map(str, ids))
        for k, (a, b) in enumerate(merges):
            text = text.replace(f"{a}{sep}{b}", str(256 + k))
        try:
            found.append([int(t) for t in text.split(sep)] if text else [])
        except ValueError:
            pass
    return found


_ENCODE_TEXT_HINT = ("the ids were merged as text: in '197 98' the text '97 98' occurs although "
                     "the pair (97, 98) does not, so 197, 98 became 1256; compare the ids "
                     "themselves, two neighbours at a time")


def _encode_one(c, fn, ids, merges, case):
    """Check encode_piece on one input."""
    __tracebackhide__ = True
    got = _ids(c, _call_unchanged(c, fn, (list(ids), list(merges)), case,
                                  crash_hint=_crash(_ENCODE_CRASH)), case)
    _same_ids(c, got, encode_with_ranks(ids, merges), "the encoded ids", case,
              [(lambda wrong=wrong: wrong(list(ids), merges), h) for wrong, h in _ENCODE_HINTS],
              lambda: _encode_as_text(ids, merges), _ENCODE_TEXT_HINT,
              "while some adjacent pair has a merge, take the pair whose merge comes first in "
              "merges (rank k) and merge all its occurrences into 256 + k")


_BYTE_TIERS = ((0, 9), (10, 99), (100, 255))


def _draw_encode(d):
    """A piece of 0 to 30 bytes from a small alphabet, and 0 to 12 distinct merges, each of two
    bytes of it or tokens earlier merges made (often pairs the piece holds)."""
    alphabet = _draw_alphabet(d, tiers=_BYTE_TIERS)
    piece = d.many(lambda d: d.choice(alphabet), hi=30, average=8)
    merges = []
    for _ in range(d.integer(0, 12)):
        tokens = alphabet + [256 + k for k in range(len(merges))]
        merge = (d.choice(tokens), d.choice(tokens))
        if merge not in merges:
            merges.append(merge)
    byte_merges = [m for m in merges if max(m) < 256]
    if byte_merges and d.boolean(0.5):   # ids that hold a merge's digits beside its other id:
        a, b = d.choice(byte_merges)     # 197 before 98 for (97, 98), or 97 before 981
        digit = d.integer(1, 9)
        near = ([int(f"{digit}{a}"), b] if d.boolean() else [a, int(f"{b}{digit}")])
        if max(near) < 256:
            at = d.integer(0, len(piece))
            piece = piece[:at] + near + piece[at:]
    return (piece, merges), f"encode_piece({_shown(piece)}, merges={_shown(merges)})"


@checker
def check_encode_piece(fn):
    """Check encode_piece(ids, merges): merges applied lowest rank first, merges[k] -> 256 + k."""
    __tracebackhide__ = True
    c = Checker("encode_piece", fn, forbidden=_ENCODE_KEY)
    for ids, merges, words in _ENCODE_CASES:
        _encode_one(c, fn, ids, merges, f"encode_piece({ids}, merges={merges}), {words}")
    each(c, _draw_encode, lambda c, args, case: _encode_one(c, fn, *args, case), n=40,
         stream=1104)
    c.done()


# Exercise: decode_tokens(ids, vocab) -> str

def _vocab():
    vocab = [bytes([b]) for b in range(256)]
    vocab += [b"caf\xc3", b"\xa9!", b" th", b"\xe2\x82", b"\xac"]  # 256-260
    return vocab


_DECODE_CASES = [
    ([104, 105], "'hi', two byte tokens"),
    ([256, 257], "'café!' with é split across two tokens"),
    ([258, 101, 32, 259, 260], "' the €', € split across two tokens"),
    ([255, 104, 105], "a byte that is not UTF-8 (0xff), then 'hi'"),
    ([104, 195], "'h' then the first half of a two-byte character"),
    ([], "no ids"),
    ([256, 257, 255], "'café!' with é split across two tokens, then the invalid byte 0xff"),
    ([259, 255, 260, 32, 104, 105], "€'s first two bytes, 0xff, €'s last byte, then ' hi': "
                                    "three invalid sequences"),
    ([104, 105, 32, 32], "'hi' and two trailing spaces"),
    ([239, 187, 191, 104, 105], "a byte-order mark (EF BB BF), then 'hi'"),
    ([101, 204, 129, 32, 239, 172, 129, 32, 195, 169], "'e' with a combining accent, the "
                                                      "ligature 'ﬁ', and 'é'"),
]


def _decode_mistakes(ids, vocab):
    """(text a usual wrong decode gives, hint) for the ids."""
    import unicodedata

    joined = b"".join(vocab[i] for i in ids)
    want = joined.decode("utf-8", errors="replace")
    per_token = "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)
    try:
        fallback = joined.decode("utf-8")
    except UnicodeDecodeError:
        fallback = per_token
    found = [
        (joined.decode("utf-8", errors="ignore"),
         "bytes that are not valid UTF-8 were dropped: decode with errors='replace' so that "
         "each invalid sequence shows as \ufffd and the reader sees that something was there"),
        (fallback, "when the joined bytes were not valid UTF-8, the tokens were decoded one by "
                   "one, which breaks the characters split across tokens: decode the joined "
                   "bytes once, whatever they hold, with invalid sequences replaced"),
        (per_token, "each token was decoded on its own, which breaks a character whose bytes "
                    "span two tokens: join all the bytes first, then decode once"),
        (joined.decode("latin-1"), "the bytes were decoded as Latin-1: decode them as UTF-8"),
        (joined.decode("utf-8-sig", errors="replace"),
         "the byte-order mark at the start was dropped ('utf-8-sig'): decode as plain 'utf-8', "
         "which keeps every character of the text, U+FEFF too"),
    ]
    for strip in ("rstrip", "strip"):
        found.append((getattr(want, strip)(), "whitespace at the end was removed: a trailing "
                                              "space is part of the text; return the decoded "
                                              "text as it is"))
    for form in ("NFC", "NFKC", "NFD", "NFKD"):
        found.append((unicodedata.normalize(form, want),
                      f"the text was normalised ({form}), which changes characters: decoding "
                      f"returns exactly the characters the bytes hold"))
    for case in ("lower", "casefold", "upper"):
        found.append((getattr(want, case)(), f"the text's case was changed ({case}()): "
                                             f"decoding returns the characters the bytes hold, "
                                             f"capitals and small letters as they are"))
    found += [
        (want.replace("\x00", ""), "NUL characters (byte 0) were dropped: a NUL is a "
                                   "character like any other, and a token can hold it; keep "
                                   "every character the bytes spell"),
        (want.replace("\r\n", "\n"), "line endings were changed (CR LF became LF): the bytes "
                                      "13, 10 spell two characters, and decoding keeps both; "
                                      "no newline translation"),
        (want.replace("\r\n", "\n").replace("\r", "\n"),
         "line endings were changed (CR became LF): decoding keeps the characters the bytes "
         "spell; no newline translation"),
        ("".join(ch for ch in want if ch.isprintable() or ch in " \n\t"),
         "characters that do not print (NUL, other control characters, U+FEFF) were dropped: "
         "decoding keeps every character the bytes spell"),
    ]
    return [(text, hint) for text, hint in found if text != want]


_DECODE_CRASH = ("join the tokens' bytes first, then decode once with errors='replace': bytes "
                 "that are not valid UTF-8 (a lone 0xff, half a character) make a strict "
                 "decode raise")


def _decode_one(c, fn, ids, vocab, case):
    """Check decode_tokens on one input."""
    __tracebackhide__ = True
    got = _call_unchanged(c, fn, (list(ids), vocab), case, crash_hint=_DECODE_CRASH)
    if isinstance(got, (bytes, bytearray)):
        c.fail("the result is bytes, not text", case=case, got=repr(got),
               hint="decode the joined bytes to a str, as UTF-8")
    if not isinstance(got, str):
        c.fail("the result should be a str", case=case, got=type(got).__name__,
               hint="join the bytes of the tokens and decode them to a str")
    c.ok()
    want = b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
    if got != want:
        hint = next((h for text, h in _decode_mistakes(ids, vocab) if got == text),
                    "look up every token's bytes in vocab, join them into one bytes object, and "
                    "decode that once as UTF-8, each invalid sequence shown as U+FFFD")
        c.fail("the text is not right", case=case, expected=want, got=got, hint=hint)
    c.ok()


_INVALID = (0xFF, 0xFE, 0xC3, 0xE2, 0x80, 0xBF)   # never valid alone: bytes of no character


def _draw_decode(d):
    """Text of every character class, as UTF-8 with invalid bytes put in, cut into tokens at any
    byte; the vocabulary holds the 256 bytes, then the tokens of two bytes or more."""
    text = d.text()
    data = bytearray(text.encode("utf-8"))
    for _ in range(d.integer(0, 3) if d.boolean(0.4) else 0):
        data.insert(d.integer(0, len(data)), d.choice(_INVALID))
    vocab = [bytes([b]) for b in range(256)]
    ids, start = [], 0
    while start < len(data):
        end = min(len(data), start + d.integer(1, 4))
        token = bytes(data[start:end])
        if len(token) == 1:
            ids.append(token[0])
        else:
            if token not in vocab[256:]:
                vocab.append(token)
            ids.append(vocab.index(token, 256))
        start = end
    case = f"decode_tokens({ids}, vocab); vocab[256:] = {vocab[256:]}, the bytes {bytes(data)!r}"
    return (ids, vocab), case


@checker
def check_decode_tokens(fn):
    """Check decode_tokens(ids, vocab): the bytes joined, then decoded as UTF-8 with replacement."""
    __tracebackhide__ = True
    c = Checker("decode_tokens", fn, forbidden=_DECODE_KEY)
    vocab = _vocab()
    for ids, words in _DECODE_CASES:
        _decode_one(c, fn, ids, vocab, f"decode_tokens({ids}, vocab), {words}; "
                                       f"vocab[256:] = {vocab[256:]}")
    each(c, _draw_decode, lambda c, args, case: _decode_one(c, fn, *args, case), n=40,
         stream=1105)
    c.done()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "count_pairs": (
        "Walk each piece once, look at every two neighbouring ids in it, and add the piece's "
        "count to that pair's total.",
        "Pairs never span two pieces, so do not join the pieces into one sequence first; and a "
        "piece adds its count, not 1, for every pair it holds (repeats inside a piece too).",
        "A dict filled in a double loop: over (piece, count) items, then over the neighbouring "
        "pairs of the piece (zip of the piece with itself shifted by one).",
    ),
    "best_pair": (
        "Pick the pair with the highest count; only when counts tie does the pair itself decide: "
        "the smallest (a, b) wins.",
        "`max(counts, key=counts.get)` breaks ties by dict order, which changes with how the "
        "pairs were counted; the rule must give the same pair whatever the order.",
        "One min or max over the pairs with a key that puts the count first (negated for min) "
        "and the pair second.",
    ),
    "merge_pair": (
        "Scan the ids from left to right; where the pair starts at the current position, emit "
        "the new id and jump past both ids, otherwise emit the id and move on by one.",
        "After a merge, skip both ids: checking the next position without skipping merges "
        "overlapping pairs, and [7, 7, 7] becomes [9, 9] instead of [9, 7]. Build a new list; "
        "do not edit ids in place.",
        "A while loop with an index, a bounds check before looking at the next id, and a list "
        "you append to.",
    ),
    "encode_piece": (
        "Among the neighbouring pairs of the piece, find the one whose merge was learned first "
        "(lowest rank), merge it everywhere, and repeat until no pair of the piece has a merge.",
        "Merging the pairs in the order they appear in the piece (leftmost first) gives other "
        "tokens than training learned: among the pairs present, the lowest rank goes first. And "
        "a merge is an ordered pair: (a, b) never joins b followed by a.",
        "A dict from pair to rank, a loop that stops when the piece has one id or no mergeable "
        "pair, and your merge_pair with the id 256 + rank.",
    ),
    "decode_tokens": (
        "Look up every token's bytes, join them into one bytes object, and decode that once as "
        "UTF-8.",
        "Decoding each token on its own (always, or only when the joined bytes are not valid "
        "UTF-8) breaks a character whose bytes sit in two tokens, and errors='ignore' silently "
        "drops invalid bytes. Return the text exactly: no stripping, no normalising, no "
        "'utf-8-sig'.",
    ),
}


# Questions on this lesson's ideas: `answer("11-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "11-merges": Number(
        prompt="`train_bpe(text, vocab_size=1256)` returns a tokenizer. How many merges did it "
               "learn?",
        after="## 1. Byte-pair encoding by hand",
        value=1000, tolerance=0,
        why="the vocabulary counts the 256 byte tokens, which need no merge; each merge adds "
            "one token, so 1,256 - 256 = 1,000 merges.",
        wrong=((1256, 1256, "that is the whole vocabulary, and not every token in it was made "
                            "by a merge."),
               (999, 999, "check both ends of your count: which token does the first merge "
                          "make, and which the last?")),
        otherwise="subtract the tokens that are there before any merge from the vocabulary "
                  "size."),
    "11-no-overlap": Number(
        prompt="How many ids does `merge_pair([7, 7, 7, 7, 7], (7, 7), 9)` return, merging left "
               "to right without overlaps?",
        after="### Exercise 3: apply one merge",
        value=3, tolerance=0,
        why="[7, 7] becomes 9, the next [7, 7] becomes 9, and the last 7 has no partner: "
            "[9, 9, 7].",
        wrong=((4, 4, "that merges overlapping pairs, as if each 7 could belong to two "
                      "merges; once two ids are merged, the second cannot start another "
                      "pair."),
               (5, 5, "the pair (7, 7) occurs in the list, so at least one merge happens."),
               (1, 2, "that counts merges (or pairs), not the ids returned: a merge turns two "
                      "ids into one, and an id with no partner is returned as it is.")),
        otherwise="walk the list from the left: merge a pair, skip both its ids, go on."),
    "11-bits-per-byte": Number(
        prompt="A TinyLM on BPE tokens reaches a loss of 3.0 nats per token, and its tokens "
               "hold 2.5 bytes of text on average. What is its loss in bits per byte, the "
               "measure that compares it fairly with a model on bytes?",
        after="## 5. TinyLM on BPE tokens against TinyLM on bytes",
        value=1.731, tolerance=0.01, unit="bits per byte",
        why="3.0 / ln 2 = 4.33 bits per token, spread over 2.5 bytes: 1.73 bits per byte.",
        wrong=((1.19, 1.21, "that is nats per byte; divide by ln 2 = 0.693 to get bits."),
               (4.32, 4.34, "that is bits per token; a token holds 2.5 bytes, so divide by "
                            "2.5."),
               (10.8, 10.9, "that multiplies by the bytes per token; a token's loss is shared "
                            "among the bytes it holds, so divide.")),
        otherwise="convert nats to bits (divide by ln 2), then per token to per byte (divide "
                  "by the bytes per token)."),
    "11-leading-space": Choice(
        prompt="With GPT-2's pre-tokenization, `\"the\"` at the start of a text and `\" the\"` "
               "in the middle of a sentence are encoded as different tokens. Why?",
        after="## 6. Pitfalls",
        choices={
            "a": ("the pattern keeps a word's leading space in the same piece, so ' the' and "
                  "'the' are different byte strings, merged into different tokens",
                  "GPT-2's pattern reads an optional space and then the letters as one piece, "
                  "so the space is part of what BPE merges."),
            "b": ("BPE learns tokens for the first word of a text separately",
                  "BPE knows nothing of positions in the text: it merges byte pairs inside "
                  "pieces, wherever they occur."),
            "c": ("the tokenizer lower-cases words after a space",
                  "no case is changed anywhere: every byte string round-trips exactly, so "
                  "'The' and 'the' stay different too."),
        },
        right="a"),
}
