"""Tests for course_lib.data: byte tokenizer, corpus loading, splits and batches."""

import numpy as np
import pytest
import torch

from course_lib.data import (
    CORPUS_PATH,
    VOCAB_SIZE,
    decode,
    encode,
    get_batch,
    load_corpus,
    split_inputs_targets,
    train_val_split,
)


@pytest.fixture(scope="module")
def corpus_text():
    return load_corpus()


@pytest.fixture(scope="module")
def corpus_ids(corpus_text):
    return encode(corpus_text)


# --- encode / decode --------------------------------------------------------


def test_vocab_size():
    assert VOCAB_SIZE == 256


@pytest.mark.parametrize(
    "text",
    ["", "To be, or not to be", "café naïve", "🎭 all the world's a stage", "莎士比亚", "é🎭中\n\t"],
)
def test_round_trip(text):
    ids = encode(text)
    assert ids.dtype == torch.int64
    assert ids.ndim == 1
    assert ids.shape[0] == len(text.encode("utf-8"))
    assert decode(ids) == text


def test_encode_gives_utf8_bytes():
    assert encode("A").tolist() == [65]
    assert encode("é").tolist() == [0xC3, 0xA9]  # two bytes, not one code point
    assert encode("🎭").shape == (4,)


def test_encode_rejects_non_str():
    with pytest.raises(TypeError, match="str"):
        encode(b"bytes")
    with pytest.raises(TypeError, match="str"):
        encode(123)


def test_decode_accepts_list_and_numpy():
    assert decode([72, 105]) == "Hi"
    assert decode(np.array([72, 105], dtype=np.int64)) == "Hi"
    assert decode(np.array([72, 105], dtype=np.uint8)) == "Hi"
    assert decode(torch.tensor([72, 105], dtype=torch.uint8)) == "Hi"


def test_decode_invalid_utf8_gives_replacement_char():
    # 0xC3 starts a 2-byte sequence; cut after it, or followed by ASCII, it is invalid.
    assert decode([0xC3]) == "\ufffd"
    assert decode([72, 0xC3, 105]) == "H\ufffdi"
    assert decode(torch.tensor([0xFF, 0xFE])) == "\ufffd\ufffd"


@pytest.mark.parametrize("bad", [256, -1])
def test_decode_rejects_out_of_range(bad):
    with pytest.raises(ValueError, match=rf"id {bad} at position 2"):
        decode([65, 66, bad, 67])
    with pytest.raises(ValueError, match=rf"id {bad} at position 1"):
        decode(torch.tensor([65, bad]))


def test_decode_rejects_2d():
    with pytest.raises(ValueError, match="one row at a time"):
        decode(torch.zeros(2, 3, dtype=torch.long))


def test_decode_rejects_float():
    with pytest.raises(TypeError, match="integer"):
        decode(torch.tensor([65.0, 66.0]))


# --- corpus -----------------------------------------------------------------


def test_real_corpus(corpus_text):
    assert CORPUS_PATH.name == "shakespeare.txt"
    assert len(corpus_text.encode("utf-8")) > 1_000_000
    assert "ROMEO" in corpus_text
    assert "HAMLET" in corpus_text
    assert "gutenberg" not in corpus_text.lower()
    assert "\r" not in corpus_text


def test_load_corpus_missing_file(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match="make_corpus.py") as info:
        load_corpus(missing)
    assert str(missing) in str(info.value)


@pytest.mark.parametrize("content", ["", "  \n\n\t "])
def test_load_corpus_empty_file(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        load_corpus(path)


def test_load_corpus_reads_utf8(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text("héllo 🎭\n", encoding="utf-8")
    assert load_corpus(path) == "héllo 🎭\n"
    assert load_corpus(str(path)) == "héllo 🎭\n"


# --- train / validation split -----------------------------------------------


def test_train_val_split_sizes_and_contiguity():
    ids = torch.arange(1000)
    train, val = train_val_split(ids, val_fraction=0.1)
    assert train.shape == (900,)
    assert val.shape == (100,)
    assert torch.equal(torch.cat([train, val]), ids)  # train first, then val, no gaps
    assert torch.equal(train, torch.arange(900))


def test_train_val_split_default_on_corpus(corpus_ids):
    train, val = train_val_split(corpus_ids)
    assert train.numel() + val.numel() == corpus_ids.numel()
    assert val.numel() == int(corpus_ids.numel() * 0.1)
    assert torch.equal(val, corpus_ids[-val.numel():])


@pytest.mark.parametrize("fraction", [0, 1, -0.1, 1.5])
def test_train_val_split_bad_fraction(fraction):
    with pytest.raises(ValueError, match="between 0 and 1"):
        train_val_split(torch.arange(100), val_fraction=fraction)


def test_train_val_split_empty_part():
    with pytest.raises(ValueError, match="non-empty"):
        train_val_split(torch.arange(5), val_fraction=0.1)  # 0 validation ids


# --- batches ----------------------------------------------------------------


def _appears_at(row, ids, start):
    return torch.equal(row, ids[start:start + row.numel()])


def test_get_batch_shape_and_dtype(corpus_ids):
    batch = get_batch(corpus_ids, batch_size=4, block_size=16)
    assert batch.shape == (4, 17)
    assert batch.dtype == torch.int64
    assert batch.device == corpus_ids.device


def test_get_batch_rows_are_consecutive_slices():
    # Strictly increasing ids: each value fixes its own position, so a row is a
    # real slice exactly when it is ids[row[0] : row[0] + T + 1].
    ids = torch.arange(500) * 3 + 7
    batch = get_batch(ids, batch_size=32, block_size=10, generator=torch.Generator().manual_seed(0))
    for row in batch:
        start = (row[0].item() - 7) // 3
        assert _appears_at(row, ids, start)


def test_get_batch_windows_found_in_corpus(corpus_text):
    ids = encode(corpus_text[:20_000])
    haystack = bytes(ids.tolist())
    batch = get_batch(ids, batch_size=8, block_size=64, generator=torch.Generator().manual_seed(1))
    for row in batch:
        assert bytes(row.tolist()) in haystack


def test_get_batch_can_reach_both_ends():
    ids = torch.arange(6)
    batch = get_batch(ids, batch_size=200, block_size=4, generator=torch.Generator().manual_seed(0))
    starts = set(batch[:, 0].tolist())
    assert starts == {0, 1}  # the last full window starts at N - (T + 1) = 1


def test_get_batch_reproducible_with_generator(corpus_ids):
    a = get_batch(corpus_ids, 8, 32, generator=torch.Generator().manual_seed(123))
    b = get_batch(corpus_ids, 8, 32, generator=torch.Generator().manual_seed(123))
    c = get_batch(corpus_ids, 8, 32, generator=torch.Generator().manual_seed(124))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_get_batch_exact_length_corpus():
    ids = torch.arange(11)
    batch = get_batch(ids, batch_size=3, block_size=10)
    assert torch.equal(batch, ids.expand(3, 11))


def test_get_batch_too_short_corpus():
    with pytest.raises(ValueError, match=r"corpus has 10 ids, a window needs block_size \+ 1 = 11"):
        get_batch(torch.arange(10), batch_size=2, block_size=10)


@pytest.mark.parametrize("kwargs", [dict(batch_size=0, block_size=4), dict(batch_size=2, block_size=0)])
def test_get_batch_rejects_non_positive_sizes(kwargs):
    with pytest.raises(ValueError, match="at least 1"):
        get_batch(torch.arange(100), **kwargs)


def test_get_batch_rejects_2d_ids():
    with pytest.raises(ValueError, match="1-D"):
        get_batch(torch.zeros(4, 50, dtype=torch.long), batch_size=2, block_size=4)


# --- inputs / targets ---------------------------------------------------------


def test_split_inputs_targets_shift():
    batch = torch.tensor([[1, 2, 3, 4], [10, 20, 30, 40]])
    inputs, targets = split_inputs_targets(batch)
    assert torch.equal(inputs, torch.tensor([[1, 2, 3], [10, 20, 30]]))
    assert torch.equal(targets, torch.tensor([[2, 3, 4], [20, 30, 40]]))


def test_split_inputs_targets_on_batch(corpus_ids):
    batch = get_batch(corpus_ids, 4, 16, generator=torch.Generator().manual_seed(0))
    inputs, targets = split_inputs_targets(batch)
    assert inputs.shape == targets.shape == (4, 16)
    assert torch.equal(targets[:, :-1], inputs[:, 1:])  # targets are inputs shifted by one
    assert torch.equal(inputs[:, 0], batch[:, 0])
    assert torch.equal(targets[:, -1], batch[:, -1])


def test_split_inputs_targets_errors():
    with pytest.raises(ValueError, match="2-D"):
        split_inputs_targets(torch.arange(5))
    with pytest.raises(ValueError, match="at least 2"):
        split_inputs_targets(torch.zeros(3, 1, dtype=torch.long))
