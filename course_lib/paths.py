"""Where course_lib finds the course's data: the model configs, the corpus and the checkpoint.

Three ways to have course_lib, one answer each:

    from the repository (`make setup`'s editable install, or the repository on the import path)
        the repository's own data/ beside course_lib/
    installed without -e (a wheel: `pip install .`, a JupyterHub or Binder image)
        course_lib/_data/ inside the installed package, a copy of data/ that the wheel carries
        (setup.py puts it there)
    a copy of the course pulled into a learner's home (nbgitpuller), course_lib from the image
        the image's course_lib and its own data: a kernel started in exercises/ imports the
        installed course_lib (the copy's course_lib/ is not on the import path), and code and
        data always come from the same place

A lesson names a file as the repository lays it out (`data/configs/gpt2.json`);
`course_file` finds it wherever course_lib's data is.
"""
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
BUNDLED = PACKAGE / "_data"         # the copy of data/ in a wheel-installed course_lib
SOURCE = PACKAGE.parent / "data"    # data/ in the repository, beside course_lib/

# What a wheel carries from data/ (setup.py copies it): what course_lib and the lessons read.
BUNDLED_FILES = ("configs/*.json", "shakespeare.txt", "tinylm.pt")


def data_dir():
    """The folder holding configs/, shakespeare.txt and tinylm.pt for this course_lib.

    The installed package's own copy when it has one (a wheel), else the repository's data/.
    """
    return BUNDLED if (BUNDLED / "configs").is_dir() else SOURCE


DATA_DIR = data_dir()


def course_file(path):
    """`path` as given when it exists from the working directory; else, a relative path that
    starts with data/ (as lessons write it) inside DATA_DIR; else `path` unchanged.
    """
    path = Path(path)
    if path.exists() or path.is_absolute() or not path.parts or path.parts[0] != "data":
        return path
    found = DATA_DIR.joinpath(*path.parts[1:])
    return found if found.exists() else path
