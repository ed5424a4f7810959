"""Builds course_lib with a copy of the course's data inside it, so that a wheel finds it.

pyproject.toml holds the project's metadata; this file adds one step to the build: the files of
data/ that course_lib reads (course_lib.paths.BUNDLED_FILES: the model configs, the corpus and
the trained checkpoint, about 8 MB) are copied into the built package as course_lib/_data/.
An editable install (`make setup`) reads the repository's data/ instead and copies nothing.
"""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# The same list as course_lib.paths.BUNDLED_FILES (tests/test_packaging.py checks that the two
# agree), written out because a build must not import the package it builds.
BUNDLED_FILES = ("configs/*.json", "shakespeare.txt", "tinylm.pt")


class BuildWithData(build_py):
    """build_py, then data/'s files into the built course_lib/_data/ (not for an editable install)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        source = HERE / "data"
        target = Path(self.build_lib) / "course_lib" / "_data"
        for pattern in BUNDLED_FILES:
            files = sorted(source.glob(pattern))
            if not files:
                raise SystemExit(f"setup.py: data/{pattern} is missing; the wheel would not run the "
                                 f"lessons (data/README.md says how each file is made)")
            for path in files:
                out = target / path.relative_to(source)
                self.mkpath(str(out.parent))
                self.copy_file(str(path), str(out))


setup(cmdclass={"build_py": BuildWithData})
