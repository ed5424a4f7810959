"""The folder each learner of an LMS's download gets in the class folder: the roster's name for
them, else the LMS's, and never one that is another learner's or a file collect writes.

A learner of a download is one id of its LMS (Canvas's user id or anonymous id, Moodle's
participant id, nbgrader's student). Their folder is the roster's learner where the roster
names that id (`lms_id`, or `anonymous_id` for Canvas's anonymous grading; for nbgrader also the
learner's name; for Moodle, whose participant id is each assignment's own, also the roster's
`name` when one entry holds it and no one else in the download has it), else the name the LMS
gives them (Canvas's anonymous id where it hides the name). A folder name is compared as a
file system that ignores case would (NFC, case folded): one that is a roster learner's with
another id, an earlier collect's other learner's (collected.csv), another learner's of this
download, or a file collect writes itself, is not given; the learner gets `{name} ({LMS id})`
and a line says so, naming both by their LMS ids.
"""
import itertools
import unicodedata

COLLECTED = "collected.csv"   # the list collect writes in the class folder


def safe_name(text):
    """A folder name from a learner's LMS name: no slash, no leading dot, no control character."""
    text = unicodedata.normalize("NFC", text).strip()
    text = "".join("_" if ch in '/\\:' or unicodedata.category(ch).startswith("C") else ch for ch in text)
    return text.lstrip(".").strip() or "_"


def _folded(name):
    """A name as compared: NFC, case folded, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFC", name).casefold().split())


RESERVED = {COLLECTED}   # names (case folded) of what collect writes in the class folder itself


def _stable_id(lms, lms_id):
    """Whether an LMS keeps this id for one learner from one assignment to the next (Canvas's user
    id, nbgrader's student; not Moodle's participant id or Canvas's anonymous id)."""
    return lms == "nbgrader" or (lms == "canvas" and not lms_id.startswith("anon_"))


def _same_learner(row, lms, lms_id, lms_name):
    """Whether an earlier collect's row (of collected.csv) is the learner of this download named so."""
    if row["lms"] != lms:
        return False
    if _stable_id(lms, lms_id):
        return row["lms_id"] == lms_id
    return row["lms_id"] == lms_id or _folded(row["lms_name"]) == _folded(lms_name)


def folders(found, entries, earlier, log):
    """{(lms, lms_id): learner folder}, a folder of its own for each learner of the download, as
    the module says; found: the download's notebooks (collect.Found), entries: the roster's
    (roster.read_roster), earlier: collected.csv's rows; `log` gets a line for each learner
    whose folder is not the name they were given."""
    by_id = {e["lms_id"]: e["learner"] for e in entries if e["lms_id"]}
    by_id.update({f"anon_{e['anonymous_id'].removeprefix('anon_')}": e["learner"]
                  for e in entries if e.get("anonymous_id")})   # Canvas's anonymous grading
    names = {e["learner"] for e in entries}
    full = {}
    for e in entries:
        if e["name"]:
            full.setdefault(_folded(e["name"]), []).append(e["learner"])
    by_name = {name: learners[0] for name, learners in full.items() if len(learners) == 1}
    claimed = {_folded(e["learner"]): e for e in entries if e["lms_id"]}   # the roster's, by id
    before = {}
    for row in earlier:
        before.setdefault(_folded(row["learner"]), []).append(row)
    people = {}
    for f in found:
        people.setdefault((f.lms, f.lms_id), f)
    alike = {}   # Moodle's learners by name: a name two of them share maps neither to the roster
    for f in people.values():
        alike[_folded(f.lms_name)] = alike.get(_folded(f.lms_name), 0) + 1
    chosen, taken = {}, {}

    def mapped(f):
        return (by_id.get(f.lms_id) or (f.lms_id if f.lms == "nbgrader" and f.lms_id in names else None)
                or (by_name.get(_folded(f.lms_name)) if f.lms == "moodle" and alike[_folded(f.lms_name)] == 1
                    else None))

    def whose(name, f, on_roster):
        """Whom the folder `name` is already, for the learner `f`; None when it is free for them."""
        key = _folded(name)
        if key in RESERVED:
            return "the name of a file collect writes in the class folder"
        entry = claimed.get(key)
        if entry is not None and not on_roster and entry["lms_id"] != f.lms_id:
            return f"the roster's {entry['learner']} (LMS id {entry['lms_id']})"
        if key in taken:
            other = taken[key]
            return f"{other[0]} {other[1]}'s, in this download"
        rows = before.get(key, [])
        strangers = [r for r in rows if not _same_learner(r, f.lms, f.lms_id, f.lms_name)]
        # the roster's word stands against an earlier collect's, unless that one had a lasting id
        if strangers and (not on_roster or any(r["lms"] == f.lms and _stable_id(r["lms"], r["lms_id"])
                                               for r in strangers)):
            return f"{strangers[0]['lms']} {strangers[0]['lms_id']}'s, from an earlier collect"
        return None

    order = sorted(people.values(), key=lambda f: (mapped(f) is None, f.lms, f.lms_id.zfill(20)))
    for f in order:
        roster_name = mapped(f)
        base = roster_name or (f.lms_id if f.lms_id.startswith("anon_") else safe_name(f.lms_name))
        name, why = base, whose(base, f, roster_name is not None)
        if why is not None:
            tries = itertools.chain([f"{base} ({f.lms_id})"] if f.lms_id != base else [],
                                    (f"{base} ({n})" for n in itertools.count(2)))
            name = next(name for name in tries if whose(name, f, False) is None)
            log(f"{f.lms} {f.lms_id} is collected as {name!r}: the folder {base!r} is {why}")
        taken[_folded(name)] = (f.lms, f.lms_id)
        chosen[f.lms, f.lms_id] = name
    return chosen
