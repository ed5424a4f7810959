"""`python -m course_lib.grading`: the grader's command (course_lib.grading.cli)."""
import sys

from course_lib.grading.cli import main

if __name__ == "__main__":   # importing the module (a wheel's import test does) runs nothing
    sys.exit(main())
