"""Grade exercise notebooks: each runs under nbval in a sandbox, and the grader probes its definitions.

    python -m course_lib.grading exercises/01_attention_by_hand.ipynb        # one notebook
    python -m course_lib.grading --class submissions/ --out grades/ [--roster roster.csv] [--export canvas]
    python -m course_lib.grading merge grades-1/ grades-2/ --out grades/   # parts of --shard K/N

The modules follow a notebook's way through grading:

- `lessons`: the lesson's exercises, checkers, points and stored pass lines;
- `submissions`: find and read submissions, and tell which lesson a notebook is;
- `graded_copy`: the learner's cells with the lesson's checks restored (for the learner to
  read: no seed, no record), laid out in a folder;
- `sandbox` and `run`: pytest with nbval on that copy, in a bubblewrap sandbox under limits
  (`plugin` is the part that runs inside, beside nbval, and records each cell); that run
  shows the learner their outputs and decides nothing;
- `definitions` and `probe`: the notebook's def, class, import and constants, read as syntax
  trees, loaded in a fresh sandboxed process of the grader's that then gets the seed, runs each
  checker in record mode and sends the records back on a pipe;
- `replay`: the records replayed with the grader's own checkers, in a worker process of the
  grader's: an exercise passes only on the lesson's exact pass line;
- `verdicts`: one result per exercise from the replays and the cells' records, with the reason in words
  (`borrowed`: no credit for an exercise answered by course_lib's own implementation);
- `calls`, `questions` and `help_taken`: read from the notebook's source, never run, the
  answers to the lesson's questions (graded with points) and the hints and solutions asked for;
- `collect`: an LMS's download (Canvas, Moodle, nbgrader) laid out as the class folder, and
  `roster`: the one reader of the class's roster;
- `gradebook`, `book` and `feedback`: a class's gradebook.csv, summary.csv, grading.log and
  pages (`book`: the gradebook's columns and its safe CSV files); `returns`: the pages handed
  back, as each LMS takes them;
- `term`: the term, kept in the out folder and handed down as one object: the roster and the
  rules on top of the checks, row by row: `partial` (credit for the share of a
  check's cases passed), `lateness` (due times, submission times, the penalty rule) and
  `overrides` (points set by hand, with a reason); `shards` grades a class in parts and merges them;
- `report`, `similarity` and `export`: what leaves the grader for the instructor: report.html,
  similarity.csv and the LMS imports (canvas.csv, moodle.csv), from the gradebook's rows;
- `cli`: the command (`__main__` runs it).

`--keep DIR` leaves the graded copy in DIR; then `python -m pytest DIR/notebooks/<lesson>.ipynb`
runs exactly what the grader ran.
"""
import sys

# nbformat imports jsonschema, which compiles the grammar of an optional URL format checker
# (rfc3987_syntax) at import: about 2 s of CPU in every grader process, for a format that no
# notebook schema uses. The grader's processes do without it (the graded kernel, the sandbox's
# pytest and the replay worker do the same in their start-up code).
sys.modules.setdefault("rfc3987_syntax", None)
