"""BPE training and encoding speed, course_lib.bpe against the `tokenizers` library's Rust BPE.

    OMP_NUM_THREADS=1 python bench/bpe.py [--mb 1] [--vocab-size 1256] [--repeats 3]

Both train on the first --mb megabytes of the corpus with GPT-2's pre-tokenization and
the same vocabulary size (256 byte tokens + merges, no special tokens), then encode the
same text. Printed: training time and encoding throughput of each, in CPU time of this
process (time.process_time: what a shared machine's other work disturbs least) and in wall
time (median of --repeats runs, taken in turns, so a busy spell slows both), the ratios, the
token counts of the encoded text (which must agree within 2%), how many of the merges
the two share, and the machine and its load average. RAYON_NUM_THREADS=1 keeps the
Rust trainer on one core, as ours is.
"""
import argparse
import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers starts its thread pool

import platform
import statistics
import time

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from course_lib.bpe import bytes_to_unicode, train_bpe
from course_lib.data import CORPUS_PATH


def train_reference(text, vocab_size):
    """`tokenizers`' byte-level BPE: GPT-2's regex and byte alphabet, no special tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text], trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def shared_merges(ours, theirs):
    """How many of the two merge lists' merged tokens (as byte strings) the other also has."""
    to_byte = {c: b for b, c in bytes_to_unicode().items()}
    their_tokens = {bytes(to_byte[c] for c in t) for t in theirs.get_vocab()}
    return sum(ours.token_bytes(256 + k) in their_tokens for k in range(len(ours.merges)))


def timed(fn):
    """(CPU seconds of this process, wall seconds, fn's result)."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0, help="megabytes of the corpus")
    parser.add_argument("--vocab-size", type=int, default=1256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    text = CORPUS_PATH.read_bytes()[: int(args.mb * 1_000_000)].decode("utf-8", "ignore")
    n_bytes = len(text.encode("utf-8"))
    load_before = os.getloadavg()
    names = ("course_lib.bpe", "tokenizers")
    train = {(name, clock): [] for name in names for clock in ("cpu", "wall")}
    encode = {key: [] for key in train}

    def record(table, name, cpu, wall):
        table[name, "cpu"].append(cpu)
        table[name, "wall"].append(wall)

    for _ in range(args.repeats):
        *t, ours = timed(lambda: train_bpe(text, args.vocab_size))
        record(train, "course_lib.bpe", *t)
        *t, theirs = timed(lambda: train_reference(text, args.vocab_size))
        record(train, "tokenizers", *t)
        ours._cache.clear()  # a cold cache: every distinct piece is encoded once
        *t, our_ids = timed(lambda: ours.encode(text))
        record(encode, "course_lib.bpe", *t)
        *t, their_ids = timed(lambda: theirs.encode(text).ids)
        record(encode, "tokenizers", *t)
    load_after = os.getloadavg()

    assert ours.decode(our_ids) == text and theirs.decode(their_ids) == text
    print(f"text: the first {n_bytes:,} bytes of {CORPUS_PATH.name}; vocab_size "
          f"{args.vocab_size:,} ({args.vocab_size - 256:,} merges); GPT-2's pre-tokenization; "
          f"median of {args.repeats} runs each, taken in turns")
    print(f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, {platform.system()} "
          f"{platform.release()}, Python {platform.python_version()}; load average "
          f"{load_before[0]:.1f} before, {load_after[0]:.1f} after")
    for clock in ("cpu", "wall"):
        rows = {}
        for name in names:
            t, e = (statistics.median(table[name, clock]) for table in (train, encode))
            rows[name] = (t, n_bytes / e / 1e6)
            runs = ", ".join(f"{x:.2f}" for x in train[name, clock])
            print(f"{clock:>4} time, {name:>14}: training {t:6.2f} s ({runs}); encoding "
                  f"{n_bytes / e / 1e6:6.2f} MB/s (cold cache)")
        (t_ours, e_ours), (t_theirs, e_theirs) = rows["course_lib.bpe"], rows["tokenizers"]
        print(f"{clock:>4} time, ours / tokenizers: training time {t_ours / t_theirs:.2f}x, "
              f"encoding speed {e_ours / e_theirs:.2f}x")
    diff = (len(our_ids) - len(their_ids)) / len(their_ids)
    print(f"tokens for the text: ours {len(our_ids):,}, tokenizers {len(their_ids):,} "
          f"({diff:+.2%}); {n_bytes / len(our_ids):.3f} and {n_bytes / len(their_ids):.3f} "
          f"bytes per token")
    print(f"merged tokens the two share: {shared_merges(ours, theirs):,} of {len(ours.merges):,}")
    if abs(diff) > 0.02:
        raise SystemExit("the token counts differ by more than 2%")


if __name__ == "__main__":
    main()
