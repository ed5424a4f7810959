"""Byte-level byte-pair encoding (BPE): training, encoding, decoding, saving (lesson 11).

The vocabulary starts as the 256 byte values, ids 0-255. Training splits the text into
pieces (GPT-2's pattern: a word with the space before it, a run of digits, a run of
punctuation, whitespace), counts every adjacent pair of tokens inside the pieces, and
merges the most frequent pair into a new token, id 256 + k for the k-th merge, until the
vocabulary has `vocab_size` tokens. Pairs never span two pieces, so no token holds the end
of one word and the start of the next.

Tie-breaking: among pairs with the same count, the merge is the smallest pair (a, b) of
token ids (compare a first, then b). The rule is deterministic and independent of the
order in which pairs were counted.

Encoding applies the merges to each piece lowest rank first: while some adjacent pair of
the piece has a merge, merge every occurrence of the pair of lowest rank, left to right
and non-overlapping (a a a with the merge (a, a) becomes (aa) a). Every byte string
round-trips: `decode_bytes(encode_bytes(b)) == b`, and `decode(encode(s)) == s`.

Saved tokenizers are JSON (the merge list and the pattern's name); loading one parses
numbers and strings and runs no code. `load_gpt2(folder)` reads GPT-2's own vocab.json and
merges.txt (the Hugging Face format) into the same encoder, giving GPT-2's ids.
"""
import heapq
import json
import numbers
import os
from collections import Counter
from itertools import chain
from pathlib import Path

import regex

# GPT-2's pre-tokenization (Radford et al. 2019; the pattern of its encoder.py):
# contractions, a word with an optional leading space, a number, punctuation, whitespace.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
PATTERNS = {"gpt2": GPT2_PATTERN, None: None}
FORMAT = "course_lib.bpe"
_CACHE_LIMIT = 200_000  # pieces whose encoding is remembered; the cache is emptied when full


def _check_pattern(pattern):
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be 'gpt2' (GPT-2's pre-tokenization) or None (the "
                         f"text as one piece), got {pattern!r}")
    return pattern


def _as_text(data, what):
    """The str to split into pieces; bytes that are not UTF-8 ride along as lone surrogates."""
    if isinstance(data, (bytes, bytearray)):
        return bytes(data).decode("utf-8", errors="surrogateescape")
    if isinstance(data, str):
        return data
    raise TypeError(f"{what} needs a str (or bytes), got {type(data).__name__}")


def _piece_bytes(piece):
    try:
        return piece.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as err:
        raise ValueError(f"the text holds {piece[err.start:err.end]!r} at a piece "
                         f"{piece!r}, a lone surrogate that has no UTF-8 encoding; pass "
                         f"the bytes you mean to encode_bytes instead") from None


def split_pieces(text, pattern="gpt2"):
    """The pieces the text is cut into before merging: a list of str (one piece for None)."""
    _check_pattern(pattern)
    text = _as_text(text, "split_pieces")
    if pattern is None:
        return [text] if text else []
    return regex.findall(PATTERNS[pattern], text)


def _pairs(word):
    return zip(word, word[1:])


def merge_pair(word, pair, new_id):
    """A new list: word with every occurrence of pair replaced by new_id, left to right, non-overlapping."""
    a, b = pair
    out, i, n = [], 0, len(word)
    while i < n:
        if i + 1 < n and word[i] == a and word[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def train_bpe(text, vocab_size, pattern="gpt2"):
    """A BPETokenizer with `vocab_size` tokens (256 bytes + merges) learned from `text`.

    Pair counts are kept over the unique pieces with their frequencies and updated after
    each merge only in the pieces that held the merged pair. Training stops early, with
    fewer tokens, when no piece has two tokens left to merge. With pattern=None the whole
    text is one piece, which every merge rewrites: keep such texts to a few kilobytes.
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    if vocab_size < 256:
        raise ValueError(f"vocab_size={vocab_size} is below the 256 byte tokens every "
                         f"byte-level BPE starts with; ask for 256 + the number of merges")
    pieces = Counter(split_pieces(text, pattern))
    if not pieces:
        raise ValueError("the training text is empty: BPE learns its merges from pair "
                         "counts, so give it some text")
    words = [list(_piece_bytes(p)) for p in pieces]
    freqs = list(pieces.values())
    counts, where = Counter(), {}
    for i, (word, f) in enumerate(zip(words, freqs)):
        for pair in _pairs(word):
            counts[pair] += f
            where.setdefault(pair, set()).add(i)
    heap = [(-c, pair) for pair, c in counts.items()]  # most frequent, then smallest pair
    heapq.heapify(heap)
    merges = []
    while 256 + len(merges) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -neg:
            continue  # a stale entry: the pair's count changed and was pushed again
        new_id = 256 + len(merges)
        merges.append(pair)
        changed = set()
        for i in where.pop(pair):
            word, f = words[i], freqs[i]
            new = merge_pair(word, pair, new_id)
            if len(new) == len(word):
                continue  # an earlier merge already took this word's occurrences
            for p in _pairs(word):
                counts[p] -= f
                changed.add(p)
            for p in _pairs(new):
                counts[p] += f
                changed.add(p)
                where.setdefault(p, set()).add(i)
            words[i] = new
        for p in changed:
            c = counts[p]
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                del counts[p]
                where.pop(p, None)
    return BPETokenizer(merges, pattern=pattern)


def _encode_short(ids, ranks):
    """A short piece's ids after the merges, lowest rank first (the textbook loop)."""
    get, none = ranks.get, len(ranks)
    while len(ids) > 1:
        rank, at = none, -1
        for i, pair in enumerate(zip(ids, ids[1:])):
            r = get(pair, none)
            if r < rank:
                rank, at = r, i  # the first occurrence of the lowest rank
        if at < 0:
            break
        ids = ids[:at] + merge_pair(ids[at:], (ids[at], ids[at + 1]), 256 + rank)
    return ids


def _encode_long(ids, ranks):
    """The same result as _encode_short in O(n log n): a linked list and a heap of pairs.

    The heap is ordered by (rank, position), so all occurrences of the lowest-ranked pair
    merge left to right before any pair of higher rank, exactly as in _encode_short.
    """
    tok, nxt, prv = list(ids), list(range(1, len(ids) + 1)), list(range(-1, len(ids) - 1))
    n = len(ids)
    heap = [(ranks[p], i) for i, p in enumerate(_pairs(ids)) if p in ranks]
    heapq.heapify(heap)
    while heap:
        rank, i = heapq.heappop(heap)
        j = nxt[i] if tok[i] is not None else n
        if j >= n or ranks.get((tok[i], tok[j])) != rank:
            continue  # stale: one side was merged away since this entry was pushed
        tok[i], tok[j] = 256 + rank, None
        nxt[i] = nxt[j]
        if nxt[i] < n:
            prv[nxt[i]] = i
            r = ranks.get((tok[i], tok[nxt[i]]))
            if r is not None:
                heapq.heappush(heap, (r, i))
        if prv[i] >= 0:
            r = ranks.get((tok[prv[i]], tok[i]))
            if r is not None:
                heapq.heappush(heap, (r, prv[i]))
    return [t for t in tok if t is not None]


class _Cache(dict):
    """{piece: its ids}, filled on first look-up; emptied when it reaches _CACHE_LIMIT."""

    def __init__(self, encode_piece):
        super().__init__()
        self.encode_piece = encode_piece

    def __missing__(self, piece):
        if len(self) >= _CACHE_LIMIT:
            self.clear()
        ids = self[piece] = self.encode_piece(_piece_bytes(piece))
        return ids


class BPETokenizer:
    """A byte-level BPE: 256 byte tokens, then merges[k] = (a, b) makes token 256 + k.

    `ids`, when given, renumbers the tokens: token t gets the id ids[t] (distinct integers
    >= 0), as GPT-2's files number them; the default keeps the numbering above.
    """

    def __init__(self, merges, pattern="gpt2", ids=None):
        self.pattern = _check_pattern(pattern)
        self._regex = regex.compile(GPT2_PATTERN) if pattern else None
        self.merges = []
        self._ranks = {}
        self._vocab = [bytes([b]) for b in range(256)]
        for k, pair in enumerate(merges):
            if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                    or not all(_is_int(t) and 0 <= t < 256 + k for t in pair)):
                raise ValueError(f"merge {k} must be a pair of token ids below {256 + k} "
                                 f"(the tokens that exist before it), got {pair!r}")
            pair = (int(pair[0]), int(pair[1]))
            if pair in self._ranks:
                raise ValueError(f"merge {k} repeats merge {self._ranks[pair]}, {pair}: each "
                                 f"pair is merged once")
            self._ranks[pair] = k
            self.merges.append(pair)
            self._vocab.append(self._vocab[pair[0]] + self._vocab[pair[1]])
        n = len(self._vocab)
        if ids is not None:
            ids = list(ids)
            if (len(ids) != n or not all(_is_int(i) and i >= 0 for i in ids)
                    or len(set(ids)) != n):
                raise ValueError(f"ids must be {n} distinct integers >= 0, one per token")
            self._out = [int(i) for i in ids]
            self._in = {e: t for t, e in enumerate(self._out)}
        else:
            self._out = self._in = None
        self._cache = _Cache(self._encode_piece)

    @property
    def vocab_size(self):
        return len(self._vocab)

    def token_bytes(self, token_id):
        """The bytes a token id stands for."""
        return self._vocab[self._internal([token_id])[0]]

    def __repr__(self):
        return (f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"pattern={self.pattern!r})")

    # Encoding: split into pieces, merge each piece (remembered per distinct piece).

    def _encode_piece(self, data):
        ids = list(data)
        ids = (_encode_short if len(ids) <= 64 else _encode_long)(ids, self._ranks)
        return [self._out[t] for t in ids] if self._out else ids

    def _encode_text(self, text):
        if self._regex is None:
            return self._encode_piece(_piece_bytes(text)) if text else []
        return list(chain.from_iterable(map(self._cache.__getitem__, self._regex.findall(text))))

    def encode(self, text):
        """The token ids of a str: list[int]."""
        if not isinstance(text, str):
            raise TypeError(f"encode needs a str, got {type(text).__name__}; "
                            f"use encode_bytes for bytes")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"the text holds {text[err.start:err.end]!r} at index {err.start}, "
                             f"a lone surrogate with no UTF-8 encoding; pass the bytes you mean "
                             f"to encode_bytes instead") from None
        return self._encode_text(text)

    def encode_bytes(self, data):
        """The token ids of any bytes, UTF-8 or not: list[int]."""
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"encode_bytes needs bytes, got {type(data).__name__}")
        return self._encode_text(_as_text(data, "encode_bytes"))

    # Decoding.

    def _internal(self, ids):
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, (int, str, bytes)):
            raise TypeError(f"decode needs a sequence of token ids, got {type(ids).__name__}")
        ids = list(ids)
        n = self.vocab_size
        for pos, i in enumerate(ids):
            if not _is_int(i) or not (0 <= i < n if self._in is None else i in self._in):
                known = (f"ids 0 to {n - 1}" if self._in is None
                         else f"{n} ids from {min(self._in)} to {max(self._in)}")
                raise ValueError(f"id {i!r} at position {pos} is not a token of this "
                                 f"vocabulary ({known}); decode only ids this tokenizer made")
        return [self._in[i] for i in ids] if self._in else ids

    def decode_bytes(self, ids):
        """The exact bytes that token ids stand for."""
        vocab = self._vocab
        return b"".join([vocab[i] for i in self._internal(ids)])

    def decode(self, ids):
        """The text of token ids; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    # Files.

    def save(self, path):
        """Write the tokenizer as JSON: its pattern, its merges (and its ids, if renumbered)."""
        data = {"format": FORMAT, "version": 1, "pattern": self.pattern,
                "merges": [list(p) for p in self.merges]}
        if self._out is not None:
            data["ids"] = self._out
        Path(path).write_text(json.dumps(data, separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path):
        """A tokenizer from a file written by save(); parsing only, no code runs."""
        path = Path(path)
        try:
            data = json.loads(path.read_bytes())
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise ValueError(f"{path.name} is not a tokenizer file written by "
                             f"BPETokenizer.save (not JSON: {type(err).__name__}); the file is "
                             f"corrupt or of another kind") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path.name} is JSON but not a {FORMAT} tokenizer (no "
                             f"\"format\": \"{FORMAT}\" field); write one with save()")
        if data.get("version") != 1:
            raise ValueError(f"{path.name} has version {data.get('version')!r}; this "
                             f"course_lib reads version 1")
        if not isinstance(data.get("merges"), list):
            raise ValueError(f"{path.name}: \"merges\" must be a list of [a, b] pairs")
        try:
            return cls(data["merges"], pattern=data.get("pattern"), ids=data.get("ids"))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path.name}: {err}") from None


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


# GPT-2's files: vocab.json {token string: id} and merges.txt ("a b" per line), in which
# every byte is written as a printable character (GPT-2's byte-to-unicode table).

def bytes_to_unicode():
    """GPT-2's table {byte: character}: printable bytes stand for themselves, others are shifted."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table, shift = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shift)
            shift += 1
    return table


def find_gpt2_files():
    """The folder holding GPT-2's vocab.json and merges.txt on this machine, or None.

    Looks in $COURSE_GPT2_DIR, then in the local Hugging Face cache (never the network).
    """
    folder = os.environ.get("COURSE_GPT2_DIR")
    if folder:
        folder = Path(folder).expanduser()
        if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
            return folder
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for repo in ("openai-community/gpt2", "gpt2"):
        vocab = try_to_load_from_cache(repo, "vocab.json")
        merges = try_to_load_from_cache(repo, "merges.txt")
        if isinstance(vocab, str) and isinstance(merges, str):
            if Path(vocab).parent == Path(merges).parent:
                return Path(vocab).parent
    return None


def load_gpt2(folder):
    """A BPETokenizer from a byte-level BPE's vocab.json and merges.txt (GPT-2's format).

    Its ids are the file's ids. GPT-2's <|endoftext|> is a special token, not a BPE one:
    it is left out, and text holding that string is encoded as ordinary text.
    """
    folder = Path(folder)
    to_byte = {c: b for b, c in bytes_to_unicode().items()}

    def as_bytes(token, where):
        try:
            return bytes(to_byte[c] for c in token)
        except KeyError as err:
            raise ValueError(f"{where}: {token!r} holds {err.args[0]!r}, which is not one of "
                             f"GPT-2's 256 byte characters: not a byte-level BPE file") from None

    try:
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        lines = (folder / "merges.txt").read_text(encoding="utf-8").splitlines()
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{folder}: vocab.json or merges.txt is not readable text or JSON "
                         f"({type(err).__name__})") from None
    if not isinstance(vocab, dict) or not all(_is_int(v) for v in vocab.values()):
        raise ValueError(f"{folder}/vocab.json must map token strings to integer ids")
    by_bytes = {}
    for token, i in vocab.items():
        by_bytes.setdefault(as_bytes(token, "vocab.json"), i)
    ours = {bytes([b]): b for b in range(256)}
    missing = [b for b in ours if b not in by_bytes]
    if missing:
        raise ValueError(f"{folder}/vocab.json lacks byte tokens {missing[:5]}...: a byte-level "
                         f"BPE has all 256")
    merges, ids = [], [by_bytes[bytes([b])] for b in range(256)]
    for n, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#version"):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise ValueError(f"{folder}/merges.txt line {n}: expected two tokens, got {line!r}")
        a, b = (as_bytes(p, f"merges.txt line {n}") for p in parts)
        if a not in ours or b not in ours:
            raise ValueError(f"{folder}/merges.txt line {n}: {line!r} merges a token that no "
                             f"earlier line made")
        merged = a + b
        if merged in ours or merged not in by_bytes:
            raise ValueError(f"{folder}/merges.txt line {n}: {line!r} makes a token that is "
                             f"{'made twice' if merged in ours else 'not in vocab.json'}")
        ours[merged] = 256 + len(merges)
        merges.append((ours[a], ours[b]))
        ids.append(by_bytes[merged])
    return BPETokenizer(merges, pattern="gpt2", ids=ids)
