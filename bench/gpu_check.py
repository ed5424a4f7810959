"""The GPU check: the course's training against nanoGPT's on one GPU, every lesson, the CUDA tests.

    python bench/gpu_check.py --nanogpt PATH/TO/nanoGPT --out DIR   # about 5 minutes on an H200
    python bench/gpu_check.py --nanogpt PATH --skip lessons tests   # the comparison alone
    python bench/gpu_check.py --nanogpt PATH --also sync_every=1 --also autocast=bf16
    python bench/gpu_check.py --dry-run                             # what it would run (any machine)

On a machine with an NVIDIA GPU it runs, in this order, printing each figure with the GPU's name:

1. **The comparison** (alone on the GPU). nanoGPT's own recipe for tiny Shakespeare, as its
   README runs it (`python train.py config/train_shakespeare_char.py`: 6 layers of width 384,
   64 x 256 tokens a step, dropout 0.2, torch.compile, bf16), from the nanoGPT checkout that
   --nanogpt names; and the course's `python -m course_lib.train --preset gpu` on the same
   text (nanoGPT's data/shakespeare_char/input.txt, or --data) with the same 90/10 split.
   Nothing is downloaded: without input.txt the check stops and says where to put it; where
   nanoGPT's train.bin, val.bin and meta.pkl are missing, its own prepare.py makes them from
   input.txt. Each run is a fresh process, timed from its launch to the moment each of its
   evaluation lines arrives, so starting Python, importing torch, compiling and evaluating
   count for both. nanoGPT's time is that of its first evaluation at or below --target
   (1.4697, the best validation loss its README gives for this recipe); it is stopped there.
   The preset's is that of its first evaluation at or below --target + --margin (0.02); it
   runs all its steps. Each --also runs the preset again with `--set` changes (its levers:
   any field of TrainConfig or ModelConfig, e.g. sync_every=1, autocast=bf16, tf32=false,
   compile=true, dropout=0.1, steps=1500).
2. **Lesson 06 alone**, then **every other lesson** (--jobs at a time, the CUDA tests beside
   them), each executed top to bottom with nbclient in a fresh kernel, on the GPU
   (pick_device picks it: COURSE_DEVICE is unset for them), into --out/notebooks/ with
   their outputs, cells that fail included (allow_errors), so that each sentence can be
   read beside the GPU's figures. Each lesson's line gives its time and its first error.
3. **The CUDA tests**: the test files that touch the device, the training loop and decoding,
   with CUDA visible.

It prints a JSON summary at the end (and writes it to --out/gpu_check.json) and exits 0 only
when every lesson ran without an error, the tests passed, and the preset reached nanoGPT's
quality in less time than nanoGPT. Without a CUDA GPU it says so and exits 2 (--dry-run
prints the plan anywhere).
"""
import argparse
import concurrent.futures
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FIRST = "06_training.ipynb"  # alone, so that its training run's time is the GPU's own
CUDA_TESTS = ["tests/test_device.py", "tests/test_fast_paths.py", "tests/test_kv_cache.py",
              "tests/test_training_generation.py", "tests/test_training_loop.py",
              "tests/test_training_speed_options.py", "tests/test_gpu_check.py"]
NANOGPT_BEST = 1.4697  # nanoGPT's README: the best validation loss of train_shakespeare_char
NANOGPT_EVAL = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)")
COURSE_EVAL = re.compile(r"^step (\d+): validation loss ([\d.]+)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python bench/gpu_check.py",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout (train.py, config/, data/)")
    p.add_argument("--data", type=Path,
                   help="the text both train on (default: NANOGPT/data/shakespeare_char/input.txt)")
    p.add_argument("--out", type=Path, help="where the executed lessons, logs and JSON go "
                                            "(default: a new temporary folder)")
    p.add_argument("--skip", nargs="+", default=[], choices=("compare", "lessons", "tests"),
                   help="parts to leave out")
    p.add_argument("--lessons", nargs="+", metavar="NN",
                   help="only these lessons, by number (default: all)")
    p.add_argument("--jobs", type=int, default=4, help="lessons run at once (default 4)")
    p.add_argument("--also", action="append", default=[], metavar="NAME=VALUE[,NAME=VALUE]",
                   help="one more run of the preset with these --set changes (repeatable)")
    p.add_argument("--target", type=float, default=NANOGPT_BEST,
                   help=f"nanoGPT's quality, validation loss (default {NANOGPT_BEST})")
    p.add_argument("--margin", type=float, default=0.02,
                   help="how far above --target the preset may end (default 0.02)")
    p.add_argument("--nanogpt-seconds", type=float, default=240,
                   help="stop nanoGPT after this long if it has not reached --target (240)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs must be at least 1, got {args.jobs}")
    if "compare" not in args.skip and args.nanogpt is None and not args.dry_run:
        p.error("the comparison needs --nanogpt PATH, a nanoGPT checkout (the check never "
                "downloads it); or leave it out with --skip compare")
    if args.lessons:
        known = {p.name[:2]: p for p in LESSONS}
        unknown = [n for n in args.lessons if n not in known]
        if unknown:
            p.error(f"--lessons: no lesson numbered {', '.join(unknown)} (there are "
                    f"{', '.join(sorted(known))})")
    for also in args.also:
        if not all("=" in part for part in also.split(",")):
            p.error(f"--also {also!r}: expected NAME=VALUE[,NAME=VALUE...]")
    return args


def gpu_name():
    """The GPU's name, or None where torch sees no CUDA GPU."""
    import torch
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def no_gpu_message():
    import torch
    return (f"gpu_check: no CUDA GPU here (torch.cuda.is_available() is False; torch "
            f"{torch.__version__}, built for CUDA {torch.version.cuda or 'no CUDA: a CPU build'}). "
            f"It runs on a machine with an NVIDIA GPU; --dry-run prints its plan anywhere.")


# ---------------------------------------------------------------------------
# 1. The comparison: a training process, timed line by line
# ---------------------------------------------------------------------------

def timed_run(command, cwd, pattern, log, stop=None, limit=None, env=None):
    """Run `command`, and return [(seconds since launch, *pattern's groups)] for each line of
    its output that matches, with its return code (None when stopped) and its last lines.
    stop(groups) -> True ends it there; so does `limit` seconds. Its Python writes each line
    as it prints it (PYTHONUNBUFFERED), so a line's time is its own. The whole output goes
    to `log`."""
    env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    hits, tail = [], []
    with open(log, "w") as keep:
        proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
        stopped = False
        for line in proc.stdout:
            now = time.perf_counter() - start
            keep.write(f"[{now:8.2f} s] {line}")
            tail = (tail + [line.rstrip()])[-15:]
            found = pattern.match(line.strip())
            if found:
                hits.append((round(now, 2), *found.groups()))
                if stop is not None and stop(found.groups()):
                    stopped = True
                    break
            if limit is not None and now > limit:
                stopped = True
                break
        if stopped:
            proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return hits, (None if stopped else proc.returncode), tail


def first_at_or_below(evals, target):
    """(seconds, step, loss) of the first evaluation at or below target, or None."""
    return next(((t, s, v) for t, s, v in evals if v <= target), None)


def prepare_nanogpt(nanogpt, data):
    """nanoGPT's checkout checked, and its tiny Shakespeare data made from input.txt where
    missing (by its own prepare.py; nothing is downloaded). Returns the text's path."""
    for needed in ("train.py", "config/train_shakespeare_char.py", "model.py"):
        if not (nanogpt / needed).is_file():
            raise SystemExit(f"gpu_check: {nanogpt / needed} is missing: --nanogpt must name a "
                             f"nanoGPT checkout")
    folder = nanogpt / "data" / "shakespeare_char"
    text = folder / "input.txt"
    if not text.is_file():
        raise SystemExit(f"gpu_check: {text} is missing. The check downloads nothing: put "
                         f"tiny Shakespeare (1,115,394 bytes, char-rnn's input.txt) there")
    if data is not None and data.resolve() != text.resolve():
        raise SystemExit(f"gpu_check: --data {data} differs from nanoGPT's {text}: both runs "
                         f"must train on the same text")
    if not all((folder / f).is_file() for f in ("train.bin", "val.bin", "meta.pkl")):
        subprocess.run([sys.executable, "prepare.py"], cwd=folder, check=True)
    return text


def run_nanogpt(nanogpt, out, target, limit):
    """nanoGPT's train_shakespeare_char recipe, stopped at its first evaluation <= target."""
    command = [sys.executable, "train.py", "config/train_shakespeare_char.py",
               f"--out_dir={out / 'nanogpt-run'}"]
    hits, code, tail = timed_run(command, nanogpt, NANOGPT_EVAL, out / "nanogpt.log",
                                 stop=lambda g: float(g[2]) <= target, limit=limit)
    evals = [(t, int(s), float(v)) for t, s, _, v in hits]
    return dict(command=" ".join(command), evaluations=evals, return_code=code, last_lines=tail,
                reached=first_at_or_below(evals, target))


def run_course(text, out, target, settings=(), name="preset"):
    """python -m course_lib.train --preset gpu on `text`, with `settings` (--set NAME=VALUE)."""
    command = [sys.executable, "-m", "course_lib.train", "--data", str(text), "--preset", "gpu",
               "--out", str(out / f"{name}-run"), "--no-progress"]
    for setting in settings:
        command += ["--set", setting]
    env = dict(os.environ)
    env.pop("COURSE_DEVICE", None)
    hits, code, tail = timed_run(command, ROOT, COURSE_EVAL, out / f"{name}.log", env=env)
    evals = [(t, int(s), float(v)) for t, s, v in hits]
    return dict(command=" ".join(command), settings=list(settings), evaluations=evals,
                return_code=code, last_lines=tail, reached=first_at_or_below(evals, target))


def compare(args, out, gpu):
    text = prepare_nanogpt(args.nanogpt, args.data)
    goal = args.target + args.margin
    runs = {"preset": run_course(text, out, goal)}
    say_run(gpu, "the gpu preset", runs["preset"], goal)
    nano = run_nanogpt(args.nanogpt, out, args.target, args.nanogpt_seconds)
    say_run(gpu, "nanoGPT's recipe", nano, args.target)
    for i, also in enumerate(args.also, 1):
        runs[f"also-{i}"] = run_course(text, out, goal, also.split(","), name=f"also-{i}")
        say_run(gpu, f"the preset with {also}", runs[f"also-{i}"], goal)
    ours, theirs = runs["preset"]["reached"], nano["reached"]
    ahead = bool(ours and (theirs is None or ours[0] < theirs[0]))
    if ours and theirs:
        print(f"[{gpu}] the preset reached {goal:.4f} in {ours[0]:.1f} s, nanoGPT {args.target} "
              f"in {theirs[0]:.1f} s: {ours[0] / theirs[0]:.2f} of nanoGPT's time", flush=True)
    return dict(text=str(text), target=args.target, margin=args.margin, nanogpt=nano,
                course=runs, preset_ahead_of_nanogpt=ahead)


def say_run(gpu, what, run, goal):
    evals = run["evaluations"]
    best = min(evals, key=lambda e: e[2]) if evals else None
    reached = run["reached"]
    line = f"[{gpu}] {what}: "
    if reached:
        line += f"{reached[2]:.4f} <= {goal:.4f} at step {reached[1]}, {reached[0]:.1f} s after launch"
    else:
        line += f"never reached {goal:.4f}"
    if best:
        line += f"; best {best[2]:.4f} at step {best[1]} ({best[0]:.1f} s)"
    if run["return_code"] not in (0, None):
        line += f"; FAILED with status {run['return_code']}: {run['last_lines'][-1:]}"
    print(line, flush=True)


# ---------------------------------------------------------------------------
# 2. The lessons, and 3. the tests
# ---------------------------------------------------------------------------

def execute_lesson(path, out_dir, timeout=600, env=None):
    """Execute one lesson in a fresh process and kernel into out_dir/<name>, errors kept in
    its outputs; return its name, seconds, whether it ran clean, and its first error."""
    out_path = Path(out_dir) / Path(path).name
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--execute-one",
                           str(path), str(out_path), str(timeout)],
                          capture_output=True, text=True, env=env)
    seconds = round(time.perf_counter() - start, 1)
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        result = dict(errors=[dict(cell=None, error=f"the lesson did not run: "
                                                    f"{proc.stderr.strip()[-500:]}")])
    return dict(lesson=Path(path).name, seconds=seconds, ok=not result["errors"],
                errors=result["errors"], saved=str(out_path))


def _execute_one(path, out_path, timeout):
    """In its own process: run the notebook with nbclient, keep going past errors, save it,
    and print {"errors": [{"cell", "error"}, ...]} as JSON."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(Path(path).parent)}})
    errors = []
    try:
        client.execute()
    except Exception as err:  # a kernel that died or a cell past its time: the run stops here
        errors.append(dict(cell=None, error=f"{type(err).__name__}: {str(err)[-300:]}"))
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                errors.append(dict(cell=index, error=f"{output['ename']}: {output['evalue']}"))
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_path)
    print(json.dumps(dict(errors=errors)))


def lesson_env():
    """The lessons' environment: the device left to pick_device, course_lib importable."""
    env = dict(os.environ)
    env.pop("COURSE_DEVICE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def say_lesson(gpu, result):
    if result["ok"]:
        print(f"[{gpu}] lesson {result['lesson']}: ran in {result['seconds']:.0f} s", flush=True)
    else:
        first = result["errors"][0]
        print(f"[{gpu}] lesson {result['lesson']}: FAILED in {result['seconds']:.0f} s, cell "
              f"{first['cell']}: {first['error']} ({len(result['errors'])} error(s))", flush=True)


def run_tests(out):
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "4",
               "-rs", *CUDA_TESTS]
    env = dict(os.environ)
    env.pop("COURSE_DEVICE", None)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    (out / "tests.log").write_text(proc.stdout + proc.stderr)
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    return dict(command=" ".join(command), return_code=proc.returncode,
                seconds=round(time.perf_counter() - start, 1),
                summary=lines[-1] if lines else proc.stderr.strip()[-300:])


def plan(args, out):
    lessons = selected_lessons(args)
    said = [f"gpu_check plan (results to {out}):"]
    if "compare" not in args.skip:
        said.append(f"  1. the gpu preset (python -m course_lib.train --preset gpu) to "
                    f"{args.target + args.margin:.4f}, then nanoGPT's train_shakespeare_char "
                    f"from {args.nanogpt or 'NANOGPT (--nanogpt)'} to {args.target}, on its "
                    f"input.txt" + "".join(f"; the preset with {a}" for a in args.also))
    if "lessons" not in args.skip:
        said.append(f"  2. lessons on the GPU: {', '.join(p.name for p in lessons)} "
                    f"({FIRST} alone first, then {args.jobs} at a time)")
    if "tests" not in args.skip:
        said.append(f"  3. the CUDA tests: {' '.join(CUDA_TESTS)}")
    return "\n".join(said)


def selected_lessons(args):
    if not args.lessons:
        return LESSONS
    return [p for p in LESSONS if p.name[:2] in args.lessons]


def main(argv=None):
    if argv is None and len(sys.argv) == 5 and sys.argv[1] == "--execute-one":
        _execute_one(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    args = parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu_check-"))
    if args.dry_run:
        print(plan(args, out))
        return 0
    gpu = gpu_name()
    if gpu is None:
        print(no_gpu_message(), file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    import torch
    started = time.perf_counter()
    summary = dict(gpu=gpu, torch=torch.__version__, cuda=torch.version.cuda,
                   cpu=platform.processor() or platform.machine(), logical_cpus=os.cpu_count(),
                   date=time.strftime("%Y-%m-%d"), out=str(out))
    print(f"[{gpu}] torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{os.cpu_count()} logical CPUs; results in {out}", flush=True)
    print(plan(args, out), flush=True)
    if "compare" not in args.skip:
        summary["compare"] = compare(args, out, gpu)
    lessons = selected_lessons(args) if "lessons" not in args.skip else []
    notebooks = out / "notebooks"
    results = []
    first = [p for p in lessons if p.name == FIRST]
    for path in first:
        results.append(execute_lesson(path, notebooks, env=lesson_env()))
        say_lesson(gpu, results[-1])
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs + 1) as pool:
        tests = pool.submit(run_tests, out) if "tests" not in args.skip else None
        rest = [pool.submit(execute_lesson, p, notebooks, 600, lesson_env())
                for p in lessons if p.name != FIRST]
        for done in concurrent.futures.as_completed(rest):
            results.append(done.result())
            say_lesson(gpu, results[-1])
        if tests is not None:
            summary["tests"] = tests.result()
            print(f"[{gpu}] CUDA tests: {summary['tests']['summary']} "
                  f"({summary['tests']['seconds']:.0f} s)", flush=True)
    summary["lessons"] = sorted(results, key=lambda r: r["lesson"])
    summary["seconds"] = round(time.perf_counter() - started, 1)
    passed = (all(r["ok"] for r in results)
              and summary.get("tests", {}).get("return_code", 0) == 0
              and summary.get("compare", {}).get("preset_ahead_of_nanogpt", True))
    summary["passed"] = passed
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    print(f"[{gpu}] gpu_check {'passed' if passed else 'FAILED'} in {summary['seconds']:.0f} s")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
