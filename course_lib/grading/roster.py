"""The roster: who is in the class, and each learner's identity in the LMS. One reader for the grader.

A roster is either one name a line (the learners' folder names), or a CSV with a header row:

    learner,lms_id,email
    ada,4821,ada@example.edu
    "García, José",4822,jose@example.edu

It is read with the csv module, as a spreadsheet writes it: a name with a comma in quotes, a
byte-order mark at the start, CRLF line ends and columns the grader does not use (a phone
number, a first name) are all read for what they are, so a quoted name never becomes two
learners. Columns are matched by name in any case, with spaces, '-' or '_' as one likes
(`LMS id` is `lms_id`; `name` or `full name` is the learner's name as the LMS shows it, which
`collect` matches a Moodle download by; `anonymous id` is Canvas's id of the learner in an
assignment graded anonymously, which `collect` matches its `anon_` entries by); `#` starts a
comment line. A malformed roster (no learner column in a
CSV, a row with more fields than the header, a learner or an LMS id twice) is a ValueError that
names the line.
"""
import csv
import io
from pathlib import Path

# The columns the grader reads, by their key (the name lowercased, letters and digits only).
COLUMNS = {"learner": "learner", "lmsid": "lms_id", "email": "email", "name": "name", "fullname": "name",
           "sisuserid": "sis_user_id", "sisloginid": "sis_login_id", "section": "section",
           "anonymousid": "anonymous_id"}


def _key(name):
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _rows(path):
    """[(line number, fields)] of a roster file's non-blank, non-comment rows."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")   # -sig: a spreadsheet's byte-order mark goes
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"the roster {path} could not be read ({e}): it should be a UTF-8 text file") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    found = []
    try:
        for fields in reader:
            if any(f.strip() for f in fields) and not fields[0].lstrip().startswith("#"):
                found.append((reader.line_num, fields))
    except csv.Error as e:
        raise ValueError(f"the roster {path}, line {reader.line_num}: {e}; check its quotes") from None
    return found


def read_roster(path):
    """[{learner, lms_id, email, name, sis_user_id, sis_login_id, section, anonymous_id}] from a roster
    file, in its order.

    A roster with no header row gives learners with no ids (and must have one field a row).
    ValueError, with the line, for a malformed roster.
    """
    rows = _rows(path)
    if not rows:
        return []
    (first_line, first), blank = rows[0], dict.fromkeys(COLUMNS.values(), "")
    if "learner" not in {_key(h) for h in first}:
        wide = next(((n, f) for n, f in rows if len(f) > 1), None)
        if wide is not None:
            raise ValueError(f"the roster {path}, line {wide[0]}: {len(wide[1])} fields but no header row: "
                             f"start it with a line `learner,lms_id,email`, or give one name a line "
                             f"(quote a name that holds a comma)")
        entries = [dict(blank, learner=f[0].strip()) for _, f in rows]
        return _checked(path, [(n, e) for (n, _), e in zip(rows, entries)])
    columns = {i: COLUMNS[_key(h)] for i, h in enumerate(first) if _key(h) in COLUMNS}
    if len(set(columns.values())) != len(columns):
        raise ValueError(f"the roster {path}, line {first_line}: a column is named twice")
    entries = []
    for n, fields in rows[1:]:
        if len(fields) > len(first):
            raise ValueError(f"the roster {path}, line {n}: {len(fields)} fields, but the header "
                             f"names {len(first)} ({', '.join(first)}); quote a field that holds a comma")
        entry = dict(blank)
        entry.update({columns[i]: v.strip() for i, v in enumerate(fields) if i in columns})
        entries.append((n, entry))
    return _checked(path, entries)


def _checked(path, entries):
    """The entries, once each has a learner and no learner or LMS id is given twice."""
    seen, ids = {}, {}
    for n, entry in entries:
        if not entry["learner"]:
            raise ValueError(f"the roster {path}, line {n}: no learner name")
        if any(ch in entry["learner"] for ch in "\n\r\t/\\\0"):
            raise ValueError(f"the roster {path}, line {n}: the name {entry['learner']!r} holds a line "
                             f"break, a tab or a slash, which no learner folder can: check its quotes")
        if entry["learner"] in seen:
            raise ValueError(f"the roster {path}, line {n}: {entry['learner']} is on line "
                             f"{seen[entry['learner']]} too")
        if entry["lms_id"] and entry["lms_id"] in ids:
            raise ValueError(f"the roster {path}, line {n}: the LMS id {entry['lms_id']} is "
                             f"{ids[entry['lms_id']]}'s too")
        seen[entry["learner"]] = n
        ids[entry["lms_id"]] = entry["learner"]
    return [entry for _, entry in entries]


def roster_names(path):
    """The learners' names on a roster, in its order."""
    return [e["learner"] for e in read_roster(path)]
