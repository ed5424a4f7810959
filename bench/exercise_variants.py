"""A lesson's exercise variants folded into one run of the lesson (as make test runs them), against
a fresh kernel for each; the first errors, the lesson's outputs, and the CPU each way took.

    OMP_NUM_THREADS=1 python bench/exercise_variants.py 00_start_here.ipynb [more lessons]

For each lesson: the blank exercise notebook, the one with the reference answers
(tests/answers_NN.py), and one with each injected wrong answer. One way is
tests/notebook_tools.run_folded: the solved lesson notebooks/NN run once, top to bottom, with
the variants of its learner's copy exercises/NN folded in (what tests/nbval_fold.py does inside
nbval's run in make test). The other is notebook_tools.first_error on each filled-in copy of
exercises/NN (one fresh kernel per variant), and the lesson run alone. It prints, per lesson,
whether every variant's first error (cell, exception, message) is the same both ways, whether
the lesson's cells printed the same with and without the variants folded in (cells tagged
nbval-ignore-output left out: they print timings), and the CPU seconds of this process's
children (the kernels) and the wall time of each way, with the load average.
"""
import copy
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from answers import REFERENCE  # noqa: E402
from notebook_tools import (NotebookClient, fill, first_error, injected_wrong,  # noqa: E402
                            printed_text, read, run_folded)


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(thunk):
    """thunk()'s value, and the CPU seconds of the kernels it started and its wall time."""
    cpu, wall = children_cpu(), time.perf_counter()
    value = thunk()
    return value, dict(cpu_s=round(children_cpu() - cpu, 1),
                       wall_s=round(time.perf_counter() - wall, 1))


def plain_run(lesson):
    """What the lesson's code cells print, run alone in a fresh kernel (as nbval runs it)."""
    nb = copy.deepcopy(lesson)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    return printed_text(nb)


def compared(lesson, outputs):
    """`outputs` less the cells whose outputs nbval does not compare."""
    code = [c for c in lesson.cells if c.cell_type == "code"]
    return [o for c, o in zip(code, outputs)
            if "nbval-ignore-output" not in c.get("metadata", {}).get("tags", [])]


def measure(name):
    lesson, learner = read(ROOT / "notebooks" / name), read(ROOT / "exercises" / name)
    wrong = injected_wrong(learner)
    folded, one = timed(lambda: run_folded(lesson, learner, REFERENCE, wrong))
    alone, plain = timed(lambda: plain_run(lesson))

    def each_variant():
        found = {"blank": first_error(learner), "reference": first_error(fill(learner, REFERENCE))}
        for (exercise, wrong_name), body in wrong.items():
            found[(exercise, wrong_name)] = first_error(fill(learner, {**REFERENCE, exercise: body}))
        return found
    separate, each = timed(each_variant)
    differ = [str(key) for key in separate if folded.get(key) != separate[key]]
    same_outputs = compared(lesson, folded["outputs"]) == compared(lesson, alone)
    return dict(lesson=name, variants=len(separate), same_first_errors=not differ,
                differ=differ, lesson_error=folded["lesson"], same_lesson_outputs=same_outputs,
                folded_run=one, lesson_alone=plain, a_kernel_per_variant=each)


def main(argv=None):
    names = (argv if argv is not None else sys.argv[1:]) or ["00_start_here.ipynb"]
    load = os.getloadavg()
    results = [measure(name) for name in names]
    print(json.dumps(dict(load_average_before=[round(x, 2) for x in load],
                          load_average_after=[round(x, 2) for x in os.getloadavg()],
                          lessons=results), indent=2))
    return 0 if all(r["same_first_errors"] and r["same_lesson_outputs"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
