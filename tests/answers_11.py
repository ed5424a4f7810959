"""Answers to lesson 11's exercises (tokenization), for testing the graders."""
from answers import Wrong

_MERGE = """\
out, i = [], 0
while i < len(ids):
    if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
        out.append(new_id)
        i += {step}
    else:
        out.append(ids[i])
        i += 1
return out"""

REFERENCE = {
    "count_pairs": """\
counts = {}
for piece, n in pieces.items():
    for pair in zip(piece, piece[1:]):
        counts[pair] = counts.get(pair, 0) + n
return counts""",
    "best_pair": """\
return min(counts, key=lambda pair: (-counts[pair], pair))""",
    "merge_pair": _MERGE.format(step=2),
    "encode_piece": """\
ranks = {tuple(pair): k for k, pair in enumerate(merges)}
ids = list(ids)
while len(ids) > 1:
    pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, math.inf))
    if pair not in ranks:
        break
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(256 + ranks[pair])
            i += 2
        else:
            out.append(ids[i])
            i += 1
    ids = out
return ids""",
    "decode_tokens": """\
return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")""",
}

# encode_piece by every merge in turn, once each (right: a merge never re-creates an earlier
# pair), making token {new}
_IN_ORDER = """\
for k, (a, b) in enumerate(merges):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == a and ids[i + 1] == b:
            out.append({new})
            i += 2
        else:
            out.append(ids[i])
            i += 1
    ids = out
return ids"""

# encode_piece with a different choice of the pair to merge next
_ENCODE = """\
ranks = {{tuple(p): k for k, p in enumerate(merges)}}
ids = list(ids)
while True:
    present = [p for p in zip(ids, ids[1:]) if p in ranks]
    if not present:
        return ids
    pair = {choose}
    new, out, i = 256 + ranks[pair], [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    ids = out{after}"""

WRONG = [
    # count_pairs
    Wrong("count_pairs", "pairs counted across piece boundaries", """\
counts = {}
ids = [t for piece, n in pieces.items() for _ in range(n) for t in piece]
for pair in zip(ids, ids[1:]):
    counts[pair] = counts.get(pair, 0) + 1
return counts""", "counted across piece boundaries", inject=True),
    Wrong("count_pairs", "all pieces joined once", """\
ids = [t for piece in pieces for t in piece]
counts = {}
for pair in zip(ids, ids[1:]):
    counts[pair] = counts.get(pair, 0) + 1
return counts""", "counted across piece boundaries"),
    Wrong("count_pairs", "frequencies ignored", """\
counts = {}
for piece in pieces:
    for pair in zip(piece, piece[1:]):
        counts[pair] = counts.get(pair, 0) + 1
return counts""", "each piece is counted once"),
    Wrong("count_pairs", "a pair counted once per piece", """\
counts = {}
for piece, n in pieces.items():
    for pair in set(zip(piece, piece[1:])):
        counts[pair] = counts.get(pair, 0) + n
return counts""", "counts twice"),
    Wrong("count_pairs", "the last pair left out", """\
counts = {}
for piece, n in pieces.items():
    for i in range(len(piece) - 2):
        pair = (piece[i], piece[i + 1])
        counts[pair] = counts.get(pair, 0) + n
return counts""", "the last pair of each piece is missing"),
    Wrong("count_pairs", "reads past the end of a piece", """\
counts = {}
for piece, n in pieces.items():
    for i in range(len(piece)):
        pair = (piece[i], piece[i + 1])
        counts[pair] = counts.get(pair, 0) + n
return counts""", "n - 1 pairs"),
    Wrong("count_pairs", "keys as lists", """\
return [([a, b], n) for piece, n in pieces.items() for a, b in zip(piece, piece[1:])]""",
          "should be a dict"),
    Wrong("count_pairs", "empties the input", """\
counts = {}
while pieces:
    piece, n = pieces.popitem()
    for pair in zip(piece, piece[1:]):
        counts[pair] = counts.get(pair, 0) + n
return counts""", "changed its argument 1 in place"),
    # best_pair
    Wrong("best_pair", "ties broken by the order of counting",
          "return max(counts, key=counts.get)", "ties broken inconsistently", inject=True),
    Wrong("best_pair", "ties to the largest pair",
          "return max(counts, key=lambda p: (counts[p], p))", "not the largest"),
    Wrong("best_pair", "the least frequent pair", "return min(counts, key=counts.get)",
          "merge the MOST frequent one"),
    Wrong("best_pair", "returns the count", "return max(counts.values())",
          "should be one pair"),
    Wrong("best_pair", "returns the (pair, count) item",
          "return min(counts.items(), key=lambda item: (-item[1], item[0]))",
          "not a (pair, count) item"),
    Wrong("best_pair", "sorted by count alone, last wins",
          "return sorted(counts, key=counts.get)[-1]", "ties broken inconsistently"),
    # merge_pair
    Wrong("merge_pair", "applied overlapping", _MERGE.format(step=1), "applied overlapping",
          inject=True),
    Wrong("merge_pair", "right to left", """\
out, i = [], len(ids) - 1
while i >= 0:
    if i >= 1 and (ids[i - 1], ids[i]) == tuple(pair):
        out.append(new_id)
        i -= 2
    else:
        out.append(ids[i])
        i -= 1
return out[::-1]""", "right to left"),
    Wrong("merge_pair", "the first occurrence only", """\
for i in range(len(ids) - 1):
    if (ids[i], ids[i + 1]) == tuple(pair):
        return ids[:i] + [new_id] + ids[i + 2:]
return ids""", "only the first occurrence"),
    Wrong("merge_pair", "the last id dropped", """\
out, i = [], 0
while i < len(ids) - 1:
    if (ids[i], ids[i + 1]) == tuple(pair):
        out.append(new_id)
        i += 2
    else:
        out.append(ids[i])
        i += 1
return out""", "the last id is lost"),
    Wrong("merge_pair", "either order", """\
out, i = [], 0
while i < len(ids):
    if i + 1 < len(ids) and tuple(pair) in ((ids[i], ids[i + 1]), (ids[i + 1], ids[i])):
        out.append(new_id)
        i += 2
    else:
        out.append(ids[i])
        i += 1
return out""", "the pair is ordered"),
    Wrong("merge_pair", "edits the list in place", """\
i = 0
while i < len(ids) - 1:
    if (ids[i], ids[i + 1]) == tuple(pair):
        ids[i:i + 2] = [new_id]
    i += 1
return ids""", "changed its argument 1 in place"),
    Wrong("merge_pair", "reads past the end", """\
out, i = [], 0
while i < len(ids):
    if (ids[i], ids[i + 1]) == tuple(pair):
        out.append(new_id)
        i += 2
    else:
        out.append(ids[i])
        i += 1
return out""", "only while i + 1 < len(ids)"),
    Wrong("merge_pair", "returns bytes", "return bytes(ids)", "should be a list of token ids"),
    # encode_piece
    Wrong("encode_piece", "the leftmost pair first",
          _ENCODE.format(choose="present[0]", after=""), "the first pair found from the left",
          inject=True),
    Wrong("encode_piece", "the latest merge first",
          _ENCODE.format(choose="max(present, key=ranks.get)", after=""), "latest first"),
    Wrong("encode_piece", "one merge only",
          _ENCODE.format(choose="min(present, key=ranks.get)", after="\n    return ids"),
          "only one merge was made"),
    Wrong("encode_piece", "merge k makes token k", _IN_ORDER.format(new="k"), "not k"),
    Wrong("encode_piece", "looks up every pair's rank", """\
ranks = {tuple(p): k for k, p in enumerate(merges)}
ids = list(ids)
while len(ids) > 1:
    pair = min(zip(ids, ids[1:]), key=lambda p: ranks[p])
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(256 + ranks[pair])
            i += 2
        else:
            out.append(ids[i])
            i += 1
    ids = out
return ids""", "must be skipped, not looked up"),
    # decode_tokens
    Wrong("decode_tokens", "drops invalid bytes",
          'return b"".join(vocab[i] for i in ids).decode("utf-8", errors="ignore")',
          "were dropped", inject=True),
    Wrong("decode_tokens", "each token decoded alone",
          'return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)',
          "each token was decoded on its own"),
    Wrong("decode_tokens", "a strict decode", 'return b"".join(vocab[i] for i in ids).decode()',
          "errors='replace'"),
    Wrong("decode_tokens", "returns bytes", 'return b"".join(vocab[i] for i in ids)',
          "the result is bytes"),
    Wrong("decode_tokens", "Latin-1",
          'return b"".join(vocab[i] for i in ids).decode("latin-1")', "as Latin-1"),
]

# The cases a BPE meets after its first merge (issue 35): ids of 256 and more, a top count of
# 1, ties between ids of different lengths, repeats in frequent pieces, ids that hold each
# other's digits, pairs in the other order, and text a decoder must keep as it is.
WRONG += [
    Wrong("count_pairs", "pieces as bytes", """\
counts = {}
for piece, n in pieces.items():
    data = bytes(piece)
    for pair in zip(data, data[1:]):
        counts[pair] = counts.get(pair, 0) + n
return counts""", "which bytes(...), bytearray and bytes.replace cannot hold"),
    Wrong("count_pairs", "a repeat inside a piece adds 1", """\
counts = {}
for piece, n in pieces.items():
    seen = set()
    for pair in zip(piece, piece[1:]):
        counts[pair] = counts.get(pair, 0) + (1 if pair in seen else n)
        seen.add(pair)
return counts""", "second occurrence in a piece added 1"),
    Wrong("count_pairs", "keys as text", """\
counts = {}
for piece, n in pieces.items():
    for a, b in zip(piece, piece[1:]):
        counts[f"{a},{b}"] = counts.get(f"{a},{b}", 0) + n
return counts""", "as tuples"),
    Wrong("count_pairs", "keys as NumPy pairs", """\
counts = {}
for piece, n in pieces.items():
    for a, b in zip(np.array(piece, dtype=float), np.array(piece, dtype=float)[1:]):
        counts[a, b] = counts.get((a, b), 0) + n
return counts""", "pairs of int ids"),
    Wrong("count_pairs", "calls train_bpe's counting", """\
from course_lib.bpe import train_bpe
train_bpe("ab", 257)
counts = {}
for piece, n in pieces.items():
    for pair in zip(piece, piece[1:]):
        counts[pair] = counts.get(pair, 0) + n
return counts""", "which this exercise asks you not to use"),
    Wrong("best_pair", "None when every count is 1", """\
best, most = None, 1
for pair, n in counts.items():
    if n > most or (n == most and best is not None and pair < best):
        best, most = pair, n
return best""", "starts from a best count of 1"),
    Wrong("best_pair", "ties compared as text",
          "return min(counts, key=lambda p: (-counts[p], str(p)))", "as text ('(12, 5)'"),
    Wrong("best_pair", "ties by a * 256 + b",
          "return min(counts, key=lambda p: (-counts[p], p[0] * 256 + p[1]))",
          "as one number, a * K + b or a + b / K"),
    Wrong("best_pair", "a list instead of a tuple",
          "return list(min(counts, key=lambda p: (-counts[p], p)))", "not a list"),
    Wrong("best_pair", "a pair of arrays", """\
a, b = min(counts, key=lambda p: (-counts[p], p))
return np.array([a]), np.array([b])""", "should hold two int ids"),
    Wrong("merge_pair", "merged as text", """\
text = " ".join(map(str, ids)).replace(f"{pair[0]} {pair[1]}", str(new_id))
return [int(t) for t in text.split()]""", "merged as text"),
    Wrong("merge_pair", "merged as text, with commas", """\
text = ",".join(map(str, ids)).replace(f"{pair[0]},{pair[1]}", str(new_id))
return [int(t) for t in text.split(",")] if text else []""", "merged as text"),
    Wrong("merge_pair", "bytes.replace", """\
return list(bytes(ids).replace(bytes(pair), bytes([new_id])))""",
          "which bytes(...), bytearray and bytes.replace cannot hold"),
    Wrong("merge_pair", "calls the course's merge_pair", """\
from course_lib.bpe import merge_pair as merged
return merged(ids, pair, new_id)""", "which this exercise asks you not to use"),
    Wrong("encode_piece", "pairs as unordered", """\
ranks = {}
for k, p in enumerate(merges):
    ranks.setdefault(frozenset(p), k)
ids = list(ids)
while len(ids) > 1:
    found = [(ranks[frozenset(p)], i) for i, p in enumerate(zip(ids, ids[1:]))
             if frozenset(p) in ranks]
    if not found:
        break
    k = min(found)[0]
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and frozenset(ids[i:i + 2]) == frozenset(merges[k]):
            out.append(256 + k)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    ids = out
return ids""", "a merge is an ordered pair"),
    Wrong("encode_piece", "merges as bytes", """\
data = bytes(ids)
for k, (a, b) in enumerate(merges):
    data = data.replace(bytes([a, b]), bytes([256 + k]))
return list(data)""", "which bytes(...), bytearray and bytes.replace cannot hold"),
    Wrong("encode_piece", "the course's tokenizer", """\
from course_lib.bpe import BPETokenizer
return BPETokenizer(merges, pattern=None).encode_bytes(bytes(ids))""",
          "which this exercise asks you not to use"),
    Wrong("decode_tokens", "stripped", """\
return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace").rstrip()""",
          "whitespace at the end was removed"),
    Wrong("decode_tokens", "utf-8-sig", """\
return b"".join(vocab[i] for i in ids).decode("utf-8-sig", errors="replace")""",
          "the byte-order mark at the start was dropped"),
    Wrong("decode_tokens", "NFC", """\
import unicodedata
return unicodedata.normalize("NFC", b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace"))""",
          "normalised (NFC)"),
    Wrong("decode_tokens", "NFKC", """\
import unicodedata
return unicodedata.normalize("NFKC", b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace"))""",
          "normalised (NFKC)"),
    Wrong("decode_tokens", "token by token when the whole is not UTF-8", """\
data = b"".join(vocab[i] for i in ids)
try:
    return data.decode("utf-8")
except UnicodeDecodeError:
    return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)""",
          "when the joined bytes were not valid UTF-8"),
]

# Issue 44: answers right on every named case, wrong somewhere in the domain the lesson states
# (ids past 999, pieces longer than five, ids whose digits hold another's, text with capitals,
# NUL or CR LF); the checks' drawn inputs find each, and shrink it before it is shown.
WRONG += [
    Wrong("best_pair", "ties by a * 1000 + b",
          "return min(counts, key=lambda p: (-counts[p], p[0] * 1000 + p[1]))",
          "as one number, a * K + b or a + b / K"),
    Wrong("best_pair", "ties by a + b / 1000",
          "return min(counts, key=lambda p: (-counts[p], p[0] + p[1] / 1000))",
          "as one number, a * K + b or a + b / K"),
    Wrong("best_pair", "ties by the float 'a.b'",
          'return min(counts, key=lambda p: (-counts[p], float(f"{p[0]}.{p[1]}")))',
          "as the number 'a.b'"),
    Wrong("best_pair", "ties by zero-padded text",
          'return min(counts, key=lambda p: (-counts[p], f"{p[0]:03d}{p[1]:03d}"))',
          "as zero-padded text"),
    Wrong("count_pairs", "the first five ids of each piece", """\
counts = {}
for piece, n in pieces.items():
    for pair in zip(piece[:5], piece[1:5]):
        counts[pair] = counts.get(pair, 0) + n
return counts""", "ids of each piece were counted"),
    Wrong("encode_piece", "merged as text", """\
text = " ".join(map(str, ids))
for k, (a, b) in enumerate(merges):
    text = text.replace(f"{a} {b}", str(256 + k))
return [int(t) for t in text.split()]""", "the ids were merged as text"),
    Wrong("decode_tokens", "lower-cased", """\
return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace").lower()""",
          "the text's case was changed (lower())"),
    Wrong("decode_tokens", "NUL stripped", """\
return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace").replace("\\x00", "")""",
          "NUL characters (byte 0) were dropped"),
    Wrong("decode_tokens", "CR LF as LF", """\
text = b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
return text.replace("\\r\\n", "\\n")""", "line endings were changed (CR LF became LF)"),
]

ALTERNATIVES = [
    ("count_pairs", "collections.Counter", """\
from collections import Counter
counts = Counter()
for piece, n in pieces.items():
    for i in range(len(piece) - 1):
        counts[piece[i], piece[i + 1]] += n
return counts"""),
    ("best_pair", "sorted by count, then pair", """\
ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
return ranked[0][0]"""),
    ("best_pair", "a loop", """\
best = None
for pair, n in counts.items():
    if best is None or n > counts[best] or (n == counts[best] and pair < best):
        best = pair
return best"""),
    ("merge_pair", "a for loop with a skip flag", """\
out, skip = [], False
for i, t in enumerate(ids):
    if skip:
        skip = False
    elif i + 1 < len(ids) and t == pair[0] and ids[i + 1] == pair[1]:
        out.append(new_id)
        skip = True
    else:
        out.append(t)
return tuple(out)"""),
    ("encode_piece", "every merge in rank order, once each", _IN_ORDER.format(new="256 + k")),
    ("encode_piece", "the lowest rank by min", """\
ranks = {tuple(p): k for k, p in enumerate(merges)}
ids = list(ids)
while len(ids) >= 2:
    pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, float("inf")))
    if pair not in ranks:
        break
    out, i = [], 0
    while i < len(ids):
        if ids[i:i + 2] == list(pair):
            out.append(256 + ranks[pair])
            i += 2
        else:
            out.append(ids[i])
            i += 1
    ids = out
return ids"""),
    ("count_pairs", "defaultdict over indices, NumPy ints", """\
from collections import defaultdict
counts = defaultdict(int)
for piece, n in pieces.items():
    row = np.array(piece, dtype=np.int64)
    for i in range(len(row) - 1):
        counts[row[i].item(), row[i + 1].item()] += n
return dict(counts)"""),
    ("best_pair", "max with the key (count, -a, -b)", """\
return max(counts, key=lambda p: (counts[p], -p[0], -p[1]))"""),
    ("best_pair", "sorted pairs, then the first of the top count", """\
top = max(counts.values())
return sorted(p for p in counts if counts[p] == top)[0]"""),
    ("merge_pair", "a list copy and index arithmetic", """\
out = []
i = 0
n = len(ids)
while i < n:
    if i < n - 1 and ids[i] == pair[0] and ids[i + 1] == pair[1]:
        out += [new_id]
        i += 2
        continue
    out += [ids[i]]
    i += 1
return out"""),
    ("encode_piece", "pairs ranked with a dict, merges with the lesson's merge_pair", """\
rank = dict(zip(map(tuple, merges), range(len(merges))))
ids = list(ids)
while True:
    present = [p for p in zip(ids, ids[1:]) if p in rank]
    if not present:
        return ids
    best = min(present, key=rank.__getitem__)
    merged, i = [], 0
    while i < len(ids):
        if tuple(ids[i:i + 2]) == best:
            merged.append(256 + rank[best])
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    ids = merged"""),
    ("decode_tokens", "bytes().join over a generator", """\
return bytes().join(vocab[t] for t in ids).decode(encoding="utf-8", errors="replace")"""),
    ("decode_tokens", "bytearray and bytes.decode", """\
data = bytearray()
for i in ids:
    data += vocab[i]
return bytes(data).decode(errors="replace")"""),
]
