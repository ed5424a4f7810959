"""Byte-level text data: turn text into token ids and cut it into training batches.

The tokenizer is the simplest possible one: every UTF-8 byte is a token, so the
vocabulary is the 256 byte values and nothing has to be learned or stored.
A language model trained on these ids predicts the next byte.

Typical use::

    text = load_corpus()
    ids = encode(text)                                  # (N,)
    train_ids, val_ids = train_val_split(ids)
    batch = get_batch(train_ids, batch_size=32, block_size=128)   # (32, 129)
    inputs, targets = split_inputs_targets(batch)       # (32, 128) each
"""

from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np
import torch

from course_lib.paths import DATA_DIR

__all__ = [
    "VOCAB_SIZE",
    "CORPUS_PATH",
    "encode",
    "decode",
    "load_corpus",
    "train_val_split",
    "get_batch",
    "split_inputs_targets",
]

VOCAB_SIZE = 256
"""Number of distinct token ids: one per byte value 0..255."""

CORPUS_PATH = DATA_DIR / "shakespeare.txt"
"""The course corpus, built by ``python data/make_corpus.py``; the trained checkpoint
tinylm.pt lies beside it (``CORPUS_PATH.parent``). Where: course_lib.paths."""


# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------


def encode(text: str) -> torch.Tensor:
    """Encode text as its UTF-8 bytes, one token id per byte.

    Characters outside ASCII take 2 to 4 bytes, so T can exceed ``len(text)``.

    Shapes:
        text: str of any length
        returns: (T,) int64, T = number of UTF-8 bytes, values in [0, 256)
    """
    if not isinstance(text, str):
        raise TypeError(
            f"encode expects a str, got {type(text).__name__}. "
            "For bytes, decode them to str first (b.decode('utf-8'))."
        )
    raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)  # (T,) uint8
    return torch.from_numpy(raw.astype(np.int64))  # (T,) int64, owns its memory


def _ids_to_list(ids) -> list[int]:
    """Turn a 1-D tensor, numpy array or list of ints into a list of Python ints."""
    if isinstance(ids, (torch.Tensor, np.ndarray)):
        if ids.ndim == 2:
            raise ValueError(
                f"decode expects 1-D ids, got a 2-D array of shape {tuple(ids.shape)}. "
                "Decode one row at a time: [decode(row) for row in ids]."
            )
        if ids.ndim != 1:
            raise ValueError(
                f"decode expects 1-D ids, got {ids.ndim}-D with shape {tuple(ids.shape)}. "
                "Flatten or index it down to a single sequence first."
            )
        if isinstance(ids, torch.Tensor):
            dt = ids.dtype
            is_int = not (dt.is_floating_point or dt.is_complex or dt == torch.bool)
        else:
            is_int = ids.dtype.kind in "iu"
        if not is_int:
            raise TypeError(
                f"decode expects integer ids, got dtype {ids.dtype}. "
                "Convert with ids.long() (tensor) or ids.astype(int) (numpy)."
            )
        if isinstance(ids, torch.Tensor):
            ids = ids.detach().cpu()
        return ids.tolist()
    if isinstance(ids, (list, tuple)):
        out = []
        for pos, value in enumerate(ids):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(
                    f"decode expects a list of ints, but position {pos} holds "
                    f"{value!r} ({type(value).__name__}). Decode one sequence at a time."
                )
            out.append(int(value))
        return out
    raise TypeError(
        f"decode expects a 1-D tensor, numpy array or list of ints, got {type(ids).__name__}."
    )


def decode(ids) -> str:
    """Decode byte ids back to text.

    Invalid UTF-8 (common in sampled sequences, e.g. a multi-byte character cut
    in half) becomes the replacement character U+FFFD instead of an error.

    Shapes:
        ids: (T,) tensor or numpy array of integers, or a list of T ints,
             each in [0, 256)
        returns: str
    """
    values = _ids_to_list(ids)
    for pos, value in enumerate(values):
        if not 0 <= value < VOCAB_SIZE:
            raise ValueError(
                f"id {value} at position {pos} is not a byte: ids must be in "
                f"[0, {VOCAB_SIZE}). Check that the model's vocabulary size is "
                f"{VOCAB_SIZE} and that ids were not shifted or padded with -1."
            )
    return bytes(values).decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------


def load_corpus(path: str | Path = CORPUS_PATH) -> str:
    """Read the training corpus as one UTF-8 string."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"corpus file not found: {path}. Build it from the repository root "
            "with `python data/make_corpus.py` (needs pip to reach PyPI once)."
        )
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise ValueError(
            f"corpus file {path} is empty or only whitespace ({len(text)} characters). "
            "Rebuild it with `python data/make_corpus.py`."
        )
    return text


def _check_ids(ids, name: str = "ids") -> None:
    """Raise unless ``ids`` is a 1-D tensor."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(ids).__name__}. "
            "Use encode(text) or torch.as_tensor(...) to make one."
        )
    if ids.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (one long sequence of ids), got shape {tuple(ids.shape)}. "
            "Flatten it or pass a single sequence."
        )


def _check_positive_int(value, name: str) -> None:
    """Raise unless ``value`` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__}).")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}.")


def train_val_split(
    ids: torch.Tensor, val_fraction: float = 0.1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ids into a training part (the start) and a validation part (the end).

    The split is contiguous, not shuffled: validation text is a stretch the
    model never sees during training. Both parts are views of ``ids``.

    Shapes:
        ids: (N,)
        returns: ((N - V,), (V,)) with V = floor(N * val_fraction)
    """
    _check_ids(ids)
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, numbers.Real):
        raise TypeError(f"val_fraction must be a number, got {type(val_fraction).__name__}.")
    if not 0 < val_fraction < 1:
        raise ValueError(
            f"val_fraction must be strictly between 0 and 1, got {val_fraction}. "
            "A typical value is 0.1."
        )
    n = ids.shape[0]
    n_val = int(n * val_fraction)
    n_train = n - n_val
    if n_val == 0 or n_train == 0:
        raise ValueError(
            f"splitting {n} ids with val_fraction={val_fraction} gives "
            f"{n_train} train and {n_val} validation ids; both must be non-empty. "
            "Use a longer corpus or a different val_fraction."
        )
    return ids[:n_train], ids[n_train:]  # (N - V,), (V,)


# ---------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------


def get_batch(
    ids: torch.Tensor,
    batch_size: int,
    block_size: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Sample ``batch_size`` random windows of ``block_size + 1`` consecutive ids.

    Each row is ``ids[s : s + block_size + 1]`` for a start ``s`` drawn
    uniformly with ``torch.randint``; pass a seeded ``torch.Generator`` to get
    the same batch every time. The extra id lets ``split_inputs_targets`` make
    inputs and next-id targets from one window.

    Shapes:
        ids: (N,) with N >= block_size + 1
        returns: (B, T + 1), B = batch_size, T = block_size,
                 same dtype and device as ids
    """
    _check_ids(ids)
    _check_positive_int(batch_size, "batch_size")
    _check_positive_int(block_size, "block_size")
    n = ids.shape[0]
    window = block_size + 1
    if n < window:
        raise ValueError(
            f"corpus has {n} ids, a window needs block_size + 1 = {window}; "
            "use a smaller block_size or a longer corpus."
        )
    # Draw starts where the generator lives (CPU unless it is a device generator),
    # so a CPU generator also works for ids on a GPU.
    rng_device = generator.device if generator is not None else torch.device("cpu")
    starts = torch.randint(
        0, n - window + 1, (batch_size,), generator=generator, device=rng_device
    )  # (B,)
    offsets = torch.arange(window, device=rng_device)  # (T + 1,)
    index = starts[:, None] + offsets[None, :]  # (B, T + 1)
    return ids[index.to(ids.device)]  # (B, T + 1)


def split_inputs_targets(batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split windows into model inputs and next-id targets.

    ``targets[:, t]`` is the id that follows ``inputs[:, t]``, i.e.
    ``inputs = batch[:, :-1]`` and ``targets = batch[:, 1:]``.

    Shapes:
        batch: (B, T + 1) with T + 1 >= 2
        returns: inputs (B, T), targets (B, T)
    """
    if not isinstance(batch, torch.Tensor):
        raise TypeError(f"batch must be a torch.Tensor, got {type(batch).__name__}.")
    if batch.ndim != 2:
        raise ValueError(
            f"batch must be 2-D (B, T + 1), got shape {tuple(batch.shape)}. "
            "Use the output of get_batch, or add a batch dimension with batch[None]."
        )
    if batch.shape[1] < 2:
        raise ValueError(
            f"batch windows have length {batch.shape[1]}, need at least 2 "
            "(one input and one target). Use block_size >= 1 in get_batch."
        )
    inputs = batch[:, :-1]  # (B, T)
    targets = batch[:, 1:]  # (B, T)
    return inputs, targets
