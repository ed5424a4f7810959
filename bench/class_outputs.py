"""What grade_class's last step costs: similarity.csv, report.html and the LMS exports of a class.

    OMP_NUM_THREADS=1 .venv/bin/python bench/class_outputs.py                 # 30 learners x every lesson
    OMP_NUM_THREADS=1 .venv/bin/python bench/class_outputs.py --learners 60

Nothing is graded: the class folder is bench/grading.py's generated class (a third each
correct, wrong and blank), and the gradebook rows are made up to match it (passed for the
correct third, failed otherwise). The script times each writer on it, once each, and prints
the seconds with the machine and its load.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from course_lib.exercises import exercises  # noqa: E402
from course_lib.grading.export import write_export  # noqa: E402
from course_lib.grading.report import write_report  # noqa: E402
from course_lib.grading.similarity import write_similarity  # noqa: E402

from grading import machine, make_class  # noqa: E402


def rows_for(learners, lessons):
    """Gradebook rows for make_class's class: learner i passes when i % 3 == 0."""
    rows = []
    for i in range(learners):
        for lesson in lessons:
            for name, _, _ in exercises(nbformat.read(lesson, as_version=4)):
                passed = i % 3 == 0
                rows.append(dict(learner=f"learner_{i:02d}", lesson=lesson.stem, exercise=name,
                                 points="1" if passed else "0", max_points="1",
                                 status="passed" if passed else "failed",
                                 feedback="" if passed else f"AssertionError: Exercise '{name}': wrong",
                                 sha256="", sandbox="bubblewrap", cpu_seconds="4.5"))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=30)
    args = parser.parse_args(argv)
    lessons = sorted((ROOT / "notebooks").glob("*.ipynb"))
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp) / "class", Path(tmp) / "grades"
        make_class(folder, args.learners, lessons)
        out.mkdir()
        rows = rows_for(args.learners, lessons)
        roster = Path(tmp) / "roster.csv"
        roster.write_text("learner,lms_id,email\n" + "".join(
            f"learner_{i:02d},{1000 + i},l{i}@example.edu\n" for i in range(args.learners)))
        steps = [("similarity.csv", lambda: write_similarity(rows, out, folder)),
                 ("report.html", lambda: write_report(rows, out)),
                 ("canvas.csv", lambda: write_export(rows, out, "canvas", roster)),
                 ("moodle.csv", lambda: write_export(rows, out, "moodle", roster))]
        print(f"class: {args.learners} learners x {len(lessons)} lessons "
              f"({args.learners * len(lessons)} notebooks, {len(rows)} gradebook rows)")
        for name, step in steps:
            start = time.perf_counter()
            step()
            print(f"{name}: {time.perf_counter() - start:.2f} s")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
