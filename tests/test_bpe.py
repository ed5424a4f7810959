"""Byte-level BPE: training, round trips, files, and agreement with `tokenizers` and GPT-2."""
import json
import os
import random

import pytest

from course_lib import bpe
from course_lib.bpe import BPETokenizer, load_gpt2, split_pieces, train_bpe
from course_lib.data import CORPUS_PATH

CORPUS = CORPUS_PATH.read_bytes()[:200_000].decode("utf-8")
UNLIKE = ["Adieu, Ophélie — à demain", "東京都の天気は晴れ", "naïve 💡🚀 emoji",
          "Ünïcödé\tand\r\nline ends  ", "x = 3.14159 * 2**10  # 1024", " leading", ""]


@pytest.fixture(scope="module")
def tok():
    return train_bpe(CORPUS, 256 + 300)


def test_hand_computed_merges_on_a_small_text():
    # pieces: "aaab" x1 and " aab" x2 ... counted by hand below
    text = "aaab aab aab"
    # pieces (GPT-2 split): "aaab", " aab", " aab"
    # pairs: aaab -> aa x2, ab x1; " aab" x2 -> " a" 2, aa 2, ab 2. Totals: aa 4, ab 3, " a" 2
    t = train_bpe(text, 256 + 3)
    a, b, sp = ord("a"), ord("b"), ord(" ")
    # 1st: (a, a) with 4 -> 256. aaab -> [256, a, b]; " aab" -> [" ", 256, b]
    # now: (256, a) 1, (a, b) 1, (" ", 256) 2, (256, b) 2 -> tie at 2: smallest pair (32, 256)
    # 2nd: (32, 256) -> 257. " aab" -> [257, b]: (257, b) 2, (256, b) 0
    # 3rd: (257, b) with 2 -> 258
    assert t.merges == [(a, a), (sp, 256), (257, b)]
    assert [t.token_bytes(i) for i in (256, 257, 258)] == [b"aa", b" aa", b" aab"]
    assert t.encode(text) == [256, a, b, 258, 258]


def _naive_merges(text, n_merges):
    """BPE the slow way: recount every pair of every piece before each merge."""
    words = [list(p.encode()) for p in split_pieces(text)]
    merges = []
    for k in range(n_merges):
        counts = {}
        for w in words:
            for pair in zip(w, w[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        words = [bpe.merge_pair(w, best, 256 + k) for w in words]
    return merges


def test_incremental_counts_give_the_merges_of_a_full_recount():
    text = CORPUS[:8_000]
    assert train_bpe(text, 256 + 100).merges == _naive_merges(text, 100)


def test_ties_go_to_the_smallest_pair():
    # every pair occurs once: the merges are taken in order of (a, b), smallest first
    t = train_bpe("dcba", 256 + 2, pattern=None)
    assert t.merges == [(ord("b"), ord("a")), (ord("c"), 256)]


def test_pairs_never_cross_pieces():
    t = train_bpe("ab ab ab ab", 256 + 10)
    assert all(not (t.token_bytes(i).endswith(b"b ") or b"b a" in t.token_bytes(i))
               for i in range(256, t.vocab_size))
    assert split_pieces("ab ab", "gpt2") == ["ab", " ab"]
    assert split_pieces("ab ab", None) == ["ab ab"]


def test_merge_is_left_to_right_and_non_overlapping():
    t = BPETokenizer([(97, 97)], pattern=None)
    assert t.encode("aaa") == [256, 97]
    assert t.encode("aaaa") == [256, 256]


def test_long_and_short_encoders_agree(tok):
    rng = random.Random(0)
    alphabet = list(" etaoinshr")
    for _ in range(200):
        ids = list("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 150))).encode())
        assert bpe._encode_short(list(ids), tok._ranks) == bpe._encode_long(list(ids), tok._ranks)


@pytest.mark.parametrize("pattern", ["gpt2", None])
def test_text_unlike_the_corpus_round_trips(tok, pattern):
    t = tok if pattern == "gpt2" else BPETokenizer(tok.merges, pattern=None)
    for text in UNLIKE + [CORPUS[:2000]]:
        ids = t.encode(text)
        assert all(isinstance(i, int) and 0 <= i < t.vocab_size for i in ids)
        assert t.decode(ids) == text
        assert t.encode_bytes(text.encode()) == ids


def test_random_bytes_round_trip_exactly(tok):
    rng = random.Random(1)
    for n in (0, 1, 7, 100, 3000):
        data = bytes(rng.randrange(256) for _ in range(n))
        ids = tok.encode_bytes(data)
        assert tok.decode_bytes(ids) == data
        assert tok.decode(ids) == data.decode("utf-8", errors="replace")


def test_invalid_utf8_is_kept_as_bytes(tok):
    data = b"caf\xc3\xa9 \xff\xfe half \xe2\x82"
    assert tok.decode_bytes(tok.encode_bytes(data)) == data
    assert tok.decode(tok.encode_bytes(data)) == "café \ufffd\ufffd half \ufffd"


def test_compresses_the_corpus(tok):
    held_out = CORPUS_PATH.read_bytes()[-50_000:].decode()
    assert len(held_out.encode()) / len(tok.encode(held_out)) > 1.8


def test_save_and_load_give_the_same_ids(tok, tmp_path):
    path = tmp_path / "tok.json"
    tok.save(path)
    again = BPETokenizer.load(path)
    assert again.merges == tok.merges and again.pattern == tok.pattern
    for text in UNLIKE + [CORPUS[:5000]]:
        assert again.encode(text) == tok.encode(text)
    data = json.loads(path.read_text())
    assert data["format"] == "course_lib.bpe" and len(data["merges"]) == 300


@pytest.mark.parametrize("content, words", [
    (b"\x80\x81 not text", "not JSON"),
    (b"{\"format\": \"course_lib.bpe\", \"version\": 1, \"merges\": [[1, 2, 3]]}", "merge 0"),
    (b"{\"format\": \"course_lib.bpe\", \"version\": 1, \"merges\": [[300, 2]]}", "below 256"),
    (b"{\"format\": \"course_lib.bpe\", \"version\": 1, \"merges\": [[1, 2], [1, 2]]}", "repeats"),
    (b"{\"format\": \"course_lib.bpe\", \"version\": 1, \"pattern\": \"(a+)+$\", \"merges\": []}",
     "pattern must be"),
    (b"{\"format\": \"course_lib.bpe\", \"version\": 2, \"merges\": []}", "version 2"),
    (b"[\"__import__('os').system('echo hi')\"]", "not a course_lib.bpe tokenizer"),
    (b"[" * 100_000, "not JSON"),
    (b"{\"format\": \"course_lib.bpe\", \"version\": 1, \"merges\": [[true, 2]]}", "merge 0"),
])
def test_a_corrupt_or_hostile_file_is_refused(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=words):
        BPETokenizer.load(path)


def test_bad_input_gets_clear_errors(tok):
    with pytest.raises(ValueError, match="below the 256 byte tokens"):
        train_bpe("some text", 255)
    with pytest.raises(ValueError, match="training text is empty"):
        train_bpe("", 300)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        train_bpe("text", 300.0)
    with pytest.raises(ValueError, match="pattern must be 'gpt2'"):
        train_bpe("text", 300, pattern="gpt4")
    with pytest.raises(ValueError, match=r"id 556 at position 1 is not a token .*ids 0 to 555"):
        tok.decode([65, 556])
    with pytest.raises(ValueError, match="id -1 at position 0"):
        tok.decode_bytes([-1])
    with pytest.raises(TypeError, match="encode needs a str"):
        tok.encode(b"bytes")
    with pytest.raises(ValueError, match="lone surrogate"):
        tok.encode("a\ud800b")


def test_stops_early_when_nothing_is_left_to_merge():
    t = train_bpe("ab", 1000)
    assert t.merges == [(97, 98)] and t.vocab_size == 257


def test_ids_from_a_tensor_decode():
    torch = pytest.importorskip("torch")
    t = BPETokenizer([(104, 105)])
    assert t.decode(torch.tensor(t.encode("hi hi"))) == "hi hi"


def _reference(text, vocab_size):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers
    ref = tokenizers.Tokenizer(models.BPE())
    ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    ref.train_from_iterator([text], trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return ref


def test_token_counts_within_two_percent_of_tokenizers(tok):
    ref = _reference(CORPUS, tok.vocab_size)
    assert ref.get_vocab_size() == tok.vocab_size
    held_out = CORPUS_PATH.read_bytes()[-100_000:].decode()
    for text in (CORPUS, held_out):
        ours, theirs = len(tok.encode(text)), len(ref.encode(text).ids)
        assert abs(ours - theirs) / theirs < 0.02, (ours, theirs)


def test_gpt2_format_files_give_the_files_ids(tok, tmp_path):
    """A byte-level BPE saved by `tokenizers` in GPT-2's format (vocab.json, merges.txt):
    our encoder loaded from those files gives `tokenizers`' ids on any text."""
    ref = _reference(CORPUS[:50_000], 256 + 200)
    ref.model.save(str(tmp_path))
    ours = load_gpt2(tmp_path)
    assert ours.vocab_size == ref.get_vocab_size()
    for text in UNLIKE + [CORPUS[-3000:]]:
        assert ours.encode(text) == ref.encode(text).ids, text
        assert ours.decode(ours.encode(text)) == text


def test_gpt2_loader_refuses_what_is_not_byte_level(tmp_path):
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n")
    with pytest.raises(ValueError, match="lacks byte tokens"):
        load_gpt2(tmp_path)


def test_gpt2s_own_ids():
    folder = bpe.find_gpt2_files()
    if folder is None:
        pytest.skip("GPT-2's vocab.json and merges.txt are not on this machine (neither in "
                    "$COURSE_GPT2_DIR nor in the Hugging Face cache); nothing is downloaded")
    from tokenizers import Tokenizer, models, pre_tokenizers
    ref = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    ours = load_gpt2(folder)
    assert ours.vocab_size == 50256 and ours.encode("Hello world") == [15496, 995]
    for text in UNLIKE + [CORPUS[:20_000]]:
        assert ours.encode(text) == ref.encode(text).ids


def test_finds_gpt2_files_in_course_gpt2_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_GPT2_DIR", str(tmp_path))
    assert bpe.find_gpt2_files() != tmp_path
    (tmp_path / "vocab.json").write_text("{}")
    (tmp_path / "merges.txt").write_text("")
    assert bpe.find_gpt2_files() == tmp_path


def test_trains_on_bytes_that_are_not_utf8():
    t = train_bpe(b"\xff\xfe \xff\xfe", 257)
    assert t.merges == [(255, 254)]
    assert t.encode_bytes(b"\xff\xfe") == [256]
