"""A lesson's exercise variants run two ways: one kernel for all (as the tests run them), and a
fresh kernel for each (as they ran before); the first errors, and the CPU each way took.

    OMP_NUM_THREADS=1 python bench/exercise_variants.py 00_start_here.ipynb [more lessons]

For each lesson's notebook in exercises/: the blank notebook, the notebook with the reference
answers (tests/answers_NN.py), and one with each injected wrong answer. One way is
tests/notebook_tools.run_exercise_variants (one kernel, one pass over the cells); the other is
notebook_tools.first_error on each filled-in copy (one kernel per variant). It prints, per
lesson, whether every variant's first error (cell, exception, message) is the same both ways,
and the CPU seconds of this process's children (the kernels) and the wall time of each way.
"""
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from answers import REFERENCE, WRONG  # noqa: E402
from course_lib.exercises import exercises  # noqa: E402
from notebook_tools import fill, first_error, read, run_exercise_variants  # noqa: E402


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(name):
    nb = read(ROOT / "exercises" / name)
    names = [e for e, _, _ in exercises(nb)]
    wrong = {(w.exercise, w.name): w.body for w in WRONG if w.inject and w.exercise in names}
    cpu, wall = children_cpu(), time.perf_counter()
    shared = run_exercise_variants(nb, REFERENCE, wrong)
    one = dict(cpu_s=round(children_cpu() - cpu, 1), wall_s=round(time.perf_counter() - wall))
    cpu, wall = children_cpu(), time.perf_counter()
    separate = {"blank": first_error(nb), "reference": first_error(fill(nb, REFERENCE))}
    for (exercise, wrong_name), body in wrong.items():
        separate[(exercise, wrong_name)] = first_error(fill(nb, {**REFERENCE, exercise: body}))
    each = dict(cpu_s=round(children_cpu() - cpu, 1), wall_s=round(time.perf_counter() - wall))
    differ = [str(key) for key in separate if shared[key] != separate[key]]
    return dict(lesson=name, variants=len(separate), same_first_errors=not differ,
                differ=differ, one_kernel=one, a_kernel_each=each)


def main(argv=None):
    names = (argv if argv is not None else sys.argv[1:]) or ["00_start_here.ipynb"]
    load = os.getloadavg()
    results = [measure(name) for name in names]
    print(json.dumps(dict(load_average_before=[round(x, 2) for x in load],
                          load_average_after=[round(x, 2) for x in os.getloadavg()],
                          lessons=results), indent=2))
    return 0 if all(r["same_first_errors"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
