"""Answers to the exercises, for testing the graders: a call of the reference, and known-wrong ones.

Each answer is the body that replaces an exercise's solution region in its lesson, so it
runs against the lesson's own function signature. A wrong answer names the mistake and a
phrase the checker's feedback must contain: failing is not enough, it must fail with the
right hint. Those marked `inject` are also run inside the exercise notebook.

The answers live one file per lesson, tests/answers_NN.py, each with REFERENCE, WRONG and
ALTERNATIVES; this module merges them.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Wrong:
    exercise: str
    name: str
    body: str
    hint: str            # must appear in the checker's feedback
    inject: bool = False


REFERENCE = {}
WRONG = []

ALTERNATIVES = []   # right answers written differently from the reference: each must pass


def _add_lessons():
    """Merge the answers of every lesson, kept one file per lesson: tests/answers_NN.py."""
    import importlib
    from pathlib import Path
    for path in sorted(Path(__file__).parent.glob("answers_[0-9][0-9].py")):
        module = importlib.import_module(path.stem)
        REFERENCE.update(module.REFERENCE)
        WRONG.extend(module.WRONG)
        ALTERNATIVES.extend(getattr(module, "ALTERNATIVES", []))


_add_lessons()
