"""Grade exercise notebooks: each runs under nbval in a sandbox, and the grader's checks call its functions.

    python -m course_lib.grading exercises/01_attention_by_hand.ipynb        # one notebook
    python -m course_lib.grading --class submissions/ --out grades/ [--roster roster.csv] [--export canvas]
    python -m course_lib.grading merge grades-1/ grades-2/ --out grades/   # parts of --shard K/N

A notebook's way through grading, one module per stage:

1. `submissions`: find and read it (never through a link), tell which lesson it is;
   `lessons`: that lesson's exercises, checkers, points and stored pass lines;
2. `graded_copy`: the copy that runs: the learner's cells (less their own checks), then the
   grader's one cell, laid out in a folder with a read-only course_lib;
3. `sandbox`, then `session` and `forked` (a job's sandbox whose zygote imported the libraries
   once) or `run` (a sandbox of its own): pytest with nbval runs the copy (`plugin`: records each
   cell, signed). Its kernel is the graded kernel (`kernel`): protected before its first cell (a
   seccomp filter, an audit hook nothing can remove), it forks at the grader's cell a server with
   the notebook's namespace, one filter more than the kernel (the mark);
4. the trusted side (the zygote, or `run._verify`) kills every process of the notebook but the
   marked one; `remote`: the grader runs each exercise's checker in its own process, with inputs
   from a seed the notebook never sees, calling the learner's function in a server forked for that
   exercise, with data only (`wire`), while a watch there reports the course's answer used;
5. `verdicts`: one result per exercise (a pass is the lesson's pass line printed in the grader,
   nothing flagged), with the reason in words, and where the notebook stopped;
   `calls`, `questions` and `help_taken`: read from the notebook's source, never run, the answers
   to the lesson's questions and the hints and solutions asked for;
6. `collect` (an LMS's download laid out as the class folder; `learner_folders` names them, one
   per learner, never overwritten), `roster`, and `term` with
   `partial`, `lateness` and `overrides` (the term's rules, row by row); `shards` (a class in parts);
7. `gradebook`, `book` and `feedback` (gradebook.csv, summary.csv, grading.log, pages, styled by
   `pagestyle`, their formulas drawn by `maths`); `returns`;
   `report`, `similarity` and `export` (report.html, similarity.csv, the LMS imports);
8. `cli`: the command (`__main__` runs it); `gradescope`: the same grading in an autograder.

`--keep DIR` leaves the graded copy in DIR; `python -m pytest DIR/notebooks/<lesson>.ipynb` then
runs the cells the grader ran (its last cell serves nothing without the grader).
"""
import sys

# nbformat imports jsonschema, which compiles the grammar of an optional URL format checker
# (rfc3987_syntax) at import: about 2 s of CPU in every grader process, for a format that no
# notebook schema uses. The grader's processes do without it (the graded kernel, the sandbox's
# pytest and the zygote do the same in their start-up code).
sys.modules.setdefault("rfc3987_syntax", None)
