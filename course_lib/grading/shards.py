"""Shards: a class graded in parts, on as many machines, and the parts merged into one gradebook.

`--shard K/N` grades the learners whose name's SHA-256 falls in the K-th of N parts (K from 1
to N), so a learner's part never changes when others join the class. Each part's out folder
records its K/N, the lessons expected of everyone and the term's rules (shard.json,
term.json, overrides.csv, roster.csv); `merge` refuses parts that overlap, miss a K, or were graded
with other rules, and otherwise writes the gradebook, summary and feedback one run gives.
"""
import hashlib
import json
import shutil
from pathlib import Path

from course_lib.grading.book import read_rows, write_outputs
from course_lib.grading.report import write_report

SHARD = "shard.json"


def parse_shard(text):
    """(k, n) from 'K/N', 1 <= K <= N; ValueError saying what is wrong."""
    k, sep, n = text.partition("/")
    if not (sep and k.strip().isdigit() and n.strip().isdigit()) or int(n) < 1:
        raise ValueError(f"--shard: {text!r} should be K/N, e.g. 1/4 for the first of four parts")
    k, n = int(k), int(n)
    if not 1 <= k <= n:
        raise ValueError(f"--shard: {text}: K counts from 1 to N (for a 0-based index such as "
                         f"SLURM_ARRAY_TASK_ID=0 or JOB_COMPLETION_INDEX, give $((INDEX + 1))/{n})")
    return k, n


def shard_of(name, n):
    """The part (1 to n) that the learner `name` is graded in: a stable hash of the name."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big") % n + 1


def write_shard(out, shard, lessons):
    """Record in `out` which part it holds and the lessons expected of everyone (none: not a shard)."""
    path = Path(out) / SHARD
    if shard is None:
        path.unlink(missing_ok=True)
        return
    path.write_text(json.dumps({"shard": shard[0], "of": shard[1], "lessons": lessons}, indent=1) + "\n",
                    encoding="utf-8")


def _read(folder):
    folder = Path(folder)
    if not (folder / SHARD).is_file():
        raise ValueError(f"{folder} holds no shard (no {SHARD}): grade each part with "
                         f"--class FOLDER --shard K/N --out {folder}")
    info = json.loads((folder / SHARD).read_text(encoding="utf-8"))
    rows = read_rows(folder / "gradebook.csv")
    if rows is None:
        raise ValueError(f"{folder} has no gradebook.csv of this grader: was its grading stopped?")
    rules = {name: (folder / name).read_text(encoding="utf-8") if (folder / name).exists() else ""
             for name in ("term.json", "overrides.csv", "roster.csv")}
    return info, rows, rules


def merge(outs, out, log=print):
    """Join the shards' out folders into `out`: gradebook.csv, summary.csv, feedback/, grading.log.

    Returns the rows; ValueError when the parts overlap, one is missing, or their rules differ.
    """
    outs, out = [Path(o) for o in outs], Path(out)
    if any(o.resolve() == out.resolve() for o in outs):
        raise ValueError(f"--out {out} is one of the shards: merge into a folder of its own")
    parts = [(o, *_read(o)) for o in outs]
    first, info, _, rules = parts[0]
    n = info["of"]
    by_k = {}
    for folder, other, rows, theirs in parts:
        if other["of"] != n:
            raise ValueError(f"{folder} is shard {other['shard']}/{other['of']} but {first} is "
                             f"{info['shard']}/{n}: merge the parts of one grading")
        if other["shard"] in by_k:
            raise ValueError(f"{by_k[other['shard']]} and {folder} are both shard {other['shard']}/{n}")
        by_k[other["shard"]] = folder
        if other["lessons"] != info["lessons"] or theirs != rules:
            what = "lessons expected" if other["lessons"] != info["lessons"] else "term rules (term.json, overrides.csv, roster.csv)"
            raise ValueError(f"{folder} and {first} were graded with other {what}: grade them again "
                             f"with the same options")
    missing = sorted(set(range(1, n + 1)) - set(by_k))
    if missing:
        raise ValueError(f"shard {', '.join(f'{k}/{n}' for k in missing)} is missing: give all {n} "
                         f"parts' out folders")
    owner, rows = {}, []
    for folder, other, part_rows, _ in parts:
        for row in part_rows:
            learner = row["learner"]
            if learner and shard_of(learner, n) != other["shard"]:
                raise ValueError(f"{folder} (shard {other['shard']}/{n}) holds {learner}, who is in "
                                 f"shard {shard_of(learner, n)}/{n}: was it graded with another --shard?")
            if learner and owner.setdefault(learner, folder) != folder:
                raise ValueError(f"{learner} is in both {owner[learner]} and {folder}")
        rows += part_rows
    out.mkdir(parents=True, exist_ok=True)
    for name, text in rules.items():
        if text:
            (out / name).write_text(text, encoding="utf-8")
        else:
            (out / name).unlink(missing_ok=True)
    (out / SHARD).unlink(missing_ok=True)
    logs = []
    for folder, *_ in parts:
        if (folder / "feedback").is_dir():
            shutil.copytree(folder / "feedback", out / "feedback", dirs_exist_ok=True)
        if (folder / "grading.log").exists():
            logs.append((folder / "grading.log").read_text(encoding="utf-8"))
    if logs:
        (out / "grading.log").write_text("".join(logs), encoding="utf-8")
    rows = write_outputs(out, rows, info["lessons"])
    write_report(rows, out)  # no similarity.csv: the parts' notebooks are not read again
    log(f"merged {len(parts)} shards: {len(rows)} rows of {len(owner)} learners into {out / 'gradebook.csv'}")
    return rows
