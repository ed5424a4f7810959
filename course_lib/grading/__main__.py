import sys

from course_lib.grading.cli import main

sys.exit(main())
