"""`python -m course_lib.live`: the live view, as the hub starts it (course_lib.live.service)."""
from course_lib.live.service import main

main()
