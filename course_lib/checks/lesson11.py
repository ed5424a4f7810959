"""Checkers for lesson 11, tokenization: the pieces of byte-pair encoding, written by the learner.

The cases are those a BPE meets after its first merge, not only on raw bytes: ids of 256 and
more inside pieces and id lists, ids whose digits hold another id's (11 and 1), a top count
of 1, ties between pairs whose ids have different numbers of digits, a pair given in the other
order; and text a decoder must keep exactly (a trailing space, a byte-order mark, characters
Unicode normalisation would change) beside bytes that are not UTF-8. Calling course_lib.bpe,
the course's own answer, is reported, not passed.
"""
import copy
import numbers
from collections.abc import Mapping

from course_lib import bpe
from course_lib.bpe import BPETokenizer, merge_pair
from course_lib.checks.core import Checker, checker

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


@checker
def check_count_pairs(fn):
    """Check count_pairs(pieces) -> {(a, b): how often a is followed by b inside the pieces}."""
    __tracebackhide__ = True
    c = Checker("count_pairs", fn, forbidden=_TRAIN)
    for pieces, words in _COUNT_CASES:
        case = f"count_pairs({pieces}), {words}"
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
            hint = next((h for kw, h in _COUNT_HINTS if _count(pieces, **kw) == got != want),
                        "count every adjacent pair (piece[i], piece[i + 1]) of every piece, "
                        "adding the piece's frequency each time")
            c.fail("the counts are not right", case=case, expected=want, got=got,
                   hint=hint)
        c.ok()
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


def _tie_hint(mine, counts, tied):
    """The hint for a wrong pair among the tied ones."""
    if mine == min(tied, key=str) and mine != min(tied, key=lambda p: p[0] * 256 + p[1]):
        return ("the pairs were compared as text: '(12, 5)' sorts before '(9, 7)' because '1' "
                "comes before '9'; compare the ids as numbers, a first, then b")
    if mine == min(tied, key=lambda p: p[0] * 256 + p[1]):
        return ("a * 256 + b does not order the pairs once ids pass 255 ((3, 1) gives 769, "
                "(2, 1000) gives 1512); compare the pairs themselves: a first, then b")
    return None


@checker
def check_best_pair(fn):
    """Check best_pair(counts) -> the most frequent pair, ties going to the smallest pair."""
    __tracebackhide__ = True
    c = Checker("best_pair", fn, forbidden=_TRAIN)
    for counts, words in _BEST_CASES:
        top = max(counts.values())
        tied = sorted(p for p, n in counts.items() if n == top)
        want = tied[0]
        got = {}
        for order in ("as written", "in reverse order"):
            given = counts if order == "as written" else dict(reversed(list(counts.items())))
            case = f"best_pair({given}), {words}, the pairs {order}"
            got[order] = _one_pair(c, _call_unchanged(c, fn, (given,), case,
                                                      none_hint=_NONE_HINT), case)
        if got["as written"] == got["in reverse order"] == want:
            c.ok()
            continue
        order = "as written" if got["as written"] != want else "in reverse order"
        given = counts if order == "as written" else dict(reversed(list(counts.items())))
        case = f"best_pair({given}), {words}, the pairs {order}"
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


@checker
def check_merge_pair(fn):
    """Check merge_pair(ids, pair, new_id): every occurrence merged, left to right, no overlaps."""
    __tracebackhide__ = True
    c = Checker("merge_pair", fn, forbidden=_MERGE_KEY)
    for ids, pair, new_id, words in _MERGE_CASES:
        case = f"merge_pair({ids}, {pair}, {new_id}), {words}"
        got = _ids(c, _call_unchanged(c, fn, (list(ids), pair, new_id), case,
                                      crash_hint=_crash(_MERGE_CRASH)), case)
        want = merge_pair(ids, pair, new_id)
        if got != want:
            hint = next((h for wrong, h in _MERGE_HINTS if ids and wrong(list(ids), pair, new_id)
                         == got != want), None)
            if hint is None and got in _as_text(ids, pair, new_id):
                hint = _TEXT_HINT
            c.fail("the merged ids are not right", case=case, expected=want, got=got,
                   hint=hint or "walk the ids from the left: where a neighbouring pair is the "
                                "pair, emit new_id and jump past both; otherwise emit the id "
                                "and move on by one")
        c.ok()
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


@checker
def check_encode_piece(fn):
    """Check encode_piece(ids, merges): merges applied lowest rank first, merges[k] -> 256 + k."""
    __tracebackhide__ = True
    c = Checker("encode_piece", fn, forbidden=_ENCODE_KEY)
    for ids, merges, words in _ENCODE_CASES:
        case = f"encode_piece({ids}, merges={merges}), {words}"
        got = _ids(c, _call_unchanged(c, fn, (list(ids), list(merges)), case,
                                      crash_hint=_crash(_ENCODE_CRASH)), case)
        want = encode_with_ranks(ids, merges)
        if got != want:
            hint = next((h for wrong, h in _ENCODE_HINTS if wrong(list(ids), merges) == got),
                        "while some adjacent pair has a merge, take the pair whose merge comes "
                        "first in merges (rank k) and merge all its occurrences into 256 + k")
            c.fail("the encoded ids are not right", case=case, expected=want, got=got, hint=hint)
        c.ok()
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
    return [(text, hint) for text, hint in found if text != want]


@checker
def check_decode_tokens(fn):
    """Check decode_tokens(ids, vocab): the bytes joined, then decoded as UTF-8 with replacement."""
    __tracebackhide__ = True
    c = Checker("decode_tokens", fn, forbidden=_DECODE_KEY)
    vocab = _vocab()
    for ids, words in _DECODE_CASES:
        case = f"decode_tokens({ids}, vocab), {words}; vocab[256:] = {vocab[256:]}"
        got = _call_unchanged(c, fn, (list(ids), vocab), case,
                              crash_hint="join the tokens' bytes first, then decode once with "
                                         "errors='replace': bytes that are not valid "
                                         "UTF-8 (a lone 0xff, half a character) make a strict "
                                         "decode raise")
        if isinstance(got, (bytes, bytearray)):
            c.fail("the result is bytes, not text", case=case, got=repr(got),
                   hint="decode the joined bytes to a str, as UTF-8")
        if not isinstance(got, str):
            c.fail("the result should be a str", case=case, got=type(got).__name__,
                   hint="join the bytes of the tokens and decode them to a str")
        c.ok()
        want = b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
        if got == want:
            c.ok()
            continue
        hint = next((h for text, h in _decode_mistakes(ids, vocab) if got == text),
                    "look up every token's bytes in vocab, join them into one bytes object, and "
                    "decode that once as UTF-8, each invalid sequence shown as U+FFFD")
        c.fail("the text is not right", case=case, expected=want, got=got, hint=hint)
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
