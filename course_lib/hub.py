"""The course on a JupyterHub: nbgitpuller links to the lessons, and the hub's limits.

Sizing: `python -m course_lib.hub sizing` prints the lessons' measured peak memory and CPU time
and the memory and CPU each learner's server needs (docs/hub.md holds its output).

Links: one per lesson, each opening the learner's working copy (exercises/NN_*.ipynb) in
JupyterLab after nbgitpuller has pulled the course into the learner's home:

    python -m course_lib.hub links --hub https://hub.example.org --repo https://github.com/ORG/COURSE

Limits: a hub's spawner tells a learner's server its limits in the environment (JupyterHub's
Spawner sets MEM_LIMIT in bytes and CPU_LIMIT in cores; TLJH's and Zero to JupyterHub's
spawners do). course_lib.device takes torch's threads from CPU_LIMIT, and says in a lesson's
first cell when the lesson's measured peak memory (lesson_peaks.json, written by
bench/lesson_peaks.py) is more than MEM_LIMIT, instead of a kernel stopped without a word.
"""
import argparse
import json
import math
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlencode

PEAKS = Path(__file__).resolve().parent / "lesson_peaks.json"


# ------------------------------------------------------------------ links

def repo_folder(repo):
    """The folder nbgitpuller pulls `repo` into by default: its last part, without .git."""
    name = repo.rstrip("/").rsplit("/", 1)[-1]
    return name[: -len(".git")] if name.endswith(".git") else name


def lesson_link(hub, repo, lesson, branch="main", folder=None):
    """The nbgitpuller link that pulls `repo` (at `branch`) into the learner's home as `folder`
    and opens `lesson`, the learner's working copy exercises/<lesson>, in JupyterLab."""
    if not re.match(r"https?://", hub):
        raise ValueError(f"--hub should be the hub's address, such as https://hub.example.org; got {hub!r}")
    if not lesson.endswith(".ipynb") or "/" in lesson:
        raise ValueError(f"a lesson is a notebook's file name, such as 00_start_here.ipynb; got {lesson!r}")
    folder = folder or repo_folder(repo)
    query = urlencode({"repo": repo, "branch": branch, "targetpath": folder,
                       "urlpath": f"lab/tree/{folder}/exercises/{lesson}"})
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def lessons(course):
    """The lessons' file names, in order: the notebooks in the course's exercises/ folder."""
    found = sorted(p.name for p in Path(course, "exercises").glob("[0-9][0-9]_*.ipynb"))
    if not found:
        raise FileNotFoundError(f"no lessons in {Path(course, 'exercises')}: run this from the course's "
                                f"folder, or name it with --course")
    return found


def links(hub, repo, branch="main", folder=None, course="."):
    """[(lesson, link)] for every lesson of the course in the folder `course`."""
    return [(lesson, lesson_link(hub, repo, lesson, branch, folder)) for lesson in lessons(course)]


# ------------------------------------------------------------------ limits

def cpu_limit():
    """The cores the hub lets this server use (CPU_LIMIT), or None where no limit is set."""
    value = os.environ.get("CPU_LIMIT", "").strip()
    if not value:
        return None
    try:
        cores = float(value)
    except ValueError:
        cores = math.nan
    if not math.isfinite(cores) or cores <= 0:
        raise ValueError(f"CPU_LIMIT={value!r} should be a number of cores above 0, as a hub's "
                         f"spawner sets it (e.g. 1 or 0.5); the hub's configuration needs mending, "
                         f"or set COURSE_THREADS=1 to choose the threads yourself")
    return cores


def mem_limit():
    """The bytes of memory the hub lets this server use (MEM_LIMIT), or None where none is set
    (or it is not a whole number of bytes, as JupyterHub's spawners write it)."""
    value = os.environ.get("MEM_LIMIT", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def lesson_of_session(session=None):
    """The lesson this kernel runs, as NN_topic.ipynb, from the notebook's path that Jupyter
    Server gives the kernel (JPY_SESSION_NAME); None where it is no lesson of the course."""
    session = os.environ.get("JPY_SESSION_NAME", "") if session is None else session
    found = re.match(r"(\d\d)_", Path(session).name)
    if not found or not Path(session).name.endswith(".ipynb"):
        return None
    for name in peaks().get("lessons", {}):
        if name.startswith(found.group(0)):
            return name
    return None


def peaks(path=PEAKS):
    """The lessons' measured peak memory and CPU time (bench/lesson_peaks.py); {} when absent."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def gib(n):
    return f"{n / 2**30:.1f} GiB"


def memory_warning(lesson=None, limit=None, measured=None):
    """The words a lesson's first cell prints when its measured peak memory is more than the
    hub's limit; None when it is not (or either is unknown)."""
    limit = limit if limit is not None else mem_limit()
    if limit is None:           # off a hub: not even the figures' file is read
        return None
    lesson = lesson or lesson_of_session()
    if lesson is None:
        return None
    measured = measured or peaks()
    peak = measured.get("lessons", {}).get(lesson, {}).get("peak_bytes")
    if peak is None or peak <= limit:
        return None
    return (f"Memory: this lesson needed up to {gib(peak)} when it was measured (the server and the "
            f"lesson's kernel), more than the {gib(limit)} this server may use (MEM_LIMIT). When it "
            f"reaches the limit, its kernel will be stopped without a message. Ask your instructor "
            f"for a memory limit of at least {gib(peak * 1.25)} (docs/hub.md in the course's "
            f"repository), or run the lesson on your own computer (`make lab`).")


def warn_when_short_of_memory():
    """Print memory_warning() once, when there is one (course_lib.device calls this when a
    lesson's first cell imports it)."""
    words = memory_warning()
    if words:
        print(words, file=sys.stderr)


# ------------------------------------------------------------------ sizing a hub

STEP = 2**28                # memory settings are rounded up to a quarter GiB
MARGIN = 1.25               # the limit's margin above the heaviest lesson's measured peak
CPU_LIMIT = 1               # one core: the lessons run one torch thread (course_lib.device)
CPU_GUARANTEE = 0.5         # half a core each when the whole class runs at once
LABS = (30, 60, 120)


def _quarters(n):
    return math.ceil(n / STEP) * STEP


def size(n):
    """A memory setting as a hub takes it: 1.25G."""
    return f"{n / 2**30:g}G"


def sizing(measured=None):
    """Per learner, from the lessons' measured figures: the heaviest lesson, and the memory and
    CPU to allow (limit) and to reserve (guarantee)."""
    lessons = (measured or peaks())["lessons"]
    heaviest = max(lessons, key=lambda name: lessons[name]["peak_bytes"])
    longest = max(lessons, key=lambda name: lessons[name]["cpu_seconds"])
    peak = lessons[heaviest]["peak_bytes"]
    return {"heaviest": heaviest, "peak": peak, "mem_guarantee": _quarters(peak),
            "mem_limit": _quarters(peak * MARGIN), "cpu_limit": CPU_LIMIT, "cpu_guarantee": CPU_GUARANTEE,
            "longest": longest, "cpu_seconds": lessons[longest]["cpu_seconds"]}


def sizing_report(measured=None):
    """The lessons' measured figures and what follows for a hub, as Markdown (docs/hub.md holds it)."""
    measured = measured or peaks()
    machine, lessons = measured["machine"], measured["lessons"]
    mib = lambda n: f"{n / 2**20:,.0f}"  # noqa: E731
    loads = [figures["load"] for figures in lessons.values()]
    rows = [f"Measured by `{measured['command']}` on {measured['date']}: {machine['cpu']}, "
            f"{machine['cores']} cores, Python {machine['python']}, torch {machine['torch']}, with other "
            f"work running (load average {min(loads):g} to {max(loads):g}). An idle JupyterLab server "
            f"took {mib(measured['server_bytes'])} MiB.", "",
            "| lesson | kernel's peak (MiB) | with the server (MiB) | CPU (s) | wall (s) | processes under the kernel |",
            "|---|---:|---:|---:|---:|---:|"]
    for name, f in lessons.items():
        rows.append(f"| `{name}` | {mib(f['kernel_peak_bytes'])} | {mib(f['peak_bytes'])} | "
                    f"{f['cpu_seconds']:g} | {f['wall_seconds']:g} | {f['children']} |")
    s = sizing(measured)
    rows += ["", f"Per learner: memory limit {size(s['mem_limit'])} (the heaviest lesson, "
             f"`{s['heaviest']}`, peaked at {mib(s['peak'])} MiB; {MARGIN:g} times that, rounded up to a "
             f"quarter GiB), memory guarantee {size(s['mem_guarantee'])} (that peak, rounded up); CPU "
             f"limit {s['cpu_limit']:g} core, CPU guarantee {s['cpu_guarantee']:g} (the longest lesson, "
             f"`{s['longest']}`, takes {s['cpu_seconds']:g} CPU seconds: about "
             f"{s['cpu_seconds'] / s['cpu_guarantee']:.0f} s of computing when the whole class runs it at once).",
             "", "| learners | memory guaranteed in all | cores guaranteed in all |", "|---:|---:|---:|"]
    for n in LABS:
        rows.append(f"| {n} | {n * s['mem_guarantee'] / 2**30:g} GiB | {n * s['cpu_guarantee']:g} |")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------ command line

def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_lib.hub", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("links", help="print each lesson's nbgitpuller link for a hub")
    made.add_argument("--hub", required=True, help="the hub's address, e.g. https://hub.example.org")
    made.add_argument("--repo", required=True, help="the course's git repository, as learners' servers reach it")
    made.add_argument("--branch", default="main", help="the branch to pull (default: main)")
    made.add_argument("--folder", help="the folder in each learner's home (default: the repository's name)")
    made.add_argument("--course", default=".", help="the course's folder, for its list of lessons (default: .)")
    commands.add_parser("sizing", help="print the lessons' measured peaks and the hub settings that follow")
    args = parser.parse_args(argv)
    if args.command == "sizing":
        print(sizing_report(), end="")
        return
    try:
        found = links(args.hub, args.repo, args.branch, args.folder, args.course)
    except (ValueError, FileNotFoundError) as err:
        parser.exit(2, f"{parser.prog} links: {err}\n")
    for lesson, link in found:
        print(f"{lesson}\t{link}")


if __name__ == "__main__":
    main()
