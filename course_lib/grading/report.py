"""The class report, grades/report.html: who is behind, which exercise to go over in the next lab, and why.

Built from the gradebook rows alone (and grades/similarity.csv where it is there) with a jinja2
template, autoescaped: every learner's feedback is hostile text and shows as text.
Per exercise: the share of the class that passed, the distribution of points, and the most
common first failure (the first line of the check's feedback, with its numbers and quoted code
written as `#` and `…`, so that the same mistake on other inputs counts once) with how many
learners hit it. Per lesson: the CPU time grading took. One figure: each exercise's passed,
failed, not run and missing shares.

It opens with a table per learner: lessons handed in, missing and not attempted, exercises
passed, points, lessons handed in late. A hand-in is *not attempted* when every exercise of it
still raises the stub's NotImplementedError and no question is answered: it counts with the
missing, not among those who handed the exercise in. A learner is *behind* who has a lesson
missing or not attempted, or passed fewer than half the exercises handed in.
"""
import base64
import csv
import datetime
import io
import re
import statistics
from collections import Counter
from pathlib import Path

import jinja2

from course_lib.grading.questions import is_question
from course_lib.grading.verdicts import _points

# An exercise whose pass share (of those who handed it in) is below this is one to go over.
GO_OVER_BELOW = 0.8
GO_OVER_AT_MOST = 3
STATUSES = ("passed", "failed", "not run", "missing", "not answered")  # the last: a question's
NOT_ATTEMPTED = "not attempted"   # the report's word for a hand-in whose every exercise is the stub
BEHIND_BELOW = 0.5                # a learner who passed fewer than this share of exercises is behind
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
CODE = re.compile(r"`[^`]*`")


def failure_line(feedback):
    """The feedback's first line, normalised so the same mistake on other inputs reads the same."""
    line = next((l.strip() for l in (feedback or "").splitlines() if l.strip()), "(no feedback)")
    line = re.sub(r"^AssertionError:\s*", "", line)       # a check's usual way to fail
    line = re.sub(r"^(\w+: )?Exercise '[^']*':\s*", r"\1", line)  # the exercise is the table's row
    line = CODE.sub("`…`", line)
    line = NUMBER.sub("#", line)
    line = re.sub(r"\s+", " ", line)
    return line if len(line) <= 200 else line[:199] + "…"


def blank_hand_ins(rows):
    """{(learner, lesson)} of the hand-ins not attempted: every exercise the stub's NotImplementedError,
    no question answered."""
    notebooks = {}
    for r in rows:
        if r["exercise"] and r["status"] != "missing":
            notebooks.setdefault((r["learner"], r["lesson"]), []).append(r)
    return {key for key, mine in notebooks.items()
            if any(not is_question(r["exercise"]) for r in mine)
            and all(r["status"] == "not answered" if is_question(r["exercise"]) else
                    r["status"] == "failed" and (r["feedback"] or "").startswith("NotImplementedError")
                    for r in mine)}


def stopped_runs(rows):
    """[{learner, lesson, where}] of the hand-ins whose run stopped before its end, with where and
    why (the gradebook's `stopped`), by learner and lesson."""
    found = {}
    for r in rows:
        if r.get("stopped"):
            found.setdefault((r["learner"], r["lesson"]), r["stopped"])
    return [dict(learner=l, lesson=n, where=w if len(w) <= 300 else w[:299] + "…")
            for (l, n), w in sorted(found.items())]


def learner_stats(rows):
    """One dict per learner, those behind first: lessons handed in, missing, not attempted, late;
    exercises passed of those handed in; points."""
    blank = blank_hand_ins(rows)
    lessons = sorted({r["lesson"] for r in rows if r["lesson"]})
    found = []
    for learner in sorted({r["learner"] for r in rows if r["learner"]}):
        mine = [r for r in rows if r["learner"] == learner]
        missing = sorted({r["lesson"] for r in mine if r["status"] == "missing"})
        empty = sorted(lesson for (name, lesson) in blank if name == learner)
        handed = sorted({r["lesson"] for r in mine if r["status"] != "missing"} - set(empty))
        exercises = [r for r in mine if r["exercise"] and not is_question(r["exercise"])
                     and r["status"] != "missing" and (learner, r["lesson"]) not in blank]
        passed = sum(r["status"] == "passed" for r in exercises)
        late = sorted({r["lesson"] for r in mine if r.get("penalty") not in (None, "", "0%")})
        behind = bool(missing or empty) or (bool(exercises) and passed / len(exercises) < BEHIND_BELOW)
        found.append(dict(learner=learner, handed_in=handed, missing=missing, not_attempted=empty,
                          late=late, passed=passed, exercises=len(exercises), lessons=len(lessons),
                          points=_points(sum(float(r["points"] or 0) for r in mine)),
                          max_points=_points(sum(float(r["max_points"] or 0) for r in mine)),
                          behind=behind))
    return sorted(found, key=lambda s: (not s["behind"], s["learner"]))


def exercise_stats(rows):
    """One dict per exercise, in the lessons' order: counts, pass share, points, first failures.

    A hand-in not attempted (blank_hand_ins) counts as "not attempted", not as handed in.
    """
    blank = blank_hand_ins(rows)
    found = {}
    for r in rows:
        if not r["exercise"]:
            continue
        if (r["learner"], r["lesson"]) in blank:
            r = dict(r, status=NOT_ATTEMPTED)
        found.setdefault((r["lesson"], r["exercise"]), []).append(r)
    stats = []
    for (lesson, exercise), mine in found.items():
        counts = Counter(r["status"] for r in mine)
        handed_in = len(mine) - counts["missing"] - counts[NOT_ATTEMPTED]
        points = Counter(_points(float(r["points"] or 0)) for r in mine if r["status"] not in ("missing", NOT_ATTEMPTED))
        fails = [r for r in mine if r["status"] in ("failed", "not run")]
        lines = Counter(failure_line(r["feedback"]) for r in fails)
        example = {}
        for r in fails:
            example.setdefault(failure_line(r["feedback"]), next(
                (l.strip() for l in (r["feedback"] or "").splitlines() if l.strip()), ""))
        stats.append(dict(
            lesson=lesson, exercise=exercise, learners=len(mine), handed_in=handed_in,
            counts={s: counts[s] for s in (*STATUSES, NOT_ATTEMPTED)},
            share=counts["passed"] / handed_in if handed_in else None,
            max_points=max((_points(float(r["max_points"] or 0)) for r in mine), key=float),
            points=sorted(points.items(), key=lambda kv: float(kv[0])),
            failures=[dict(line=line, learners=n, example=example[line]) for line, n in lines.most_common(3)]))
    order = {lesson: i for i, lesson in enumerate(dict.fromkeys(r["lesson"] for r in rows))}
    return sorted(stats, key=lambda s: order[s["lesson"]])


def go_over(stats):
    """The exercises the class failed most: pass share below GO_OVER_BELOW, lowest first.

    Questions are not among them: a question is answered in the notebook, right or wrong at
    once, so its row shows what was handed in, not where the class got stuck.
    """
    weak = [s for s in stats if s["share"] is not None and s["share"] < GO_OVER_BELOW
            and not is_question(s["exercise"])]
    return sorted(weak, key=lambda s: (s["share"], -s["handed_in"]))[:GO_OVER_AT_MOST]


def lesson_times(rows):
    """Per lesson: notebooks graded, and the median, largest and total CPU seconds they took."""
    seconds = {}
    for r in rows:
        key = (r["lesson"], r["learner"])
        if r.get("cpu_seconds") not in (None, "") and key not in seconds:
            seconds[key] = float(r["cpu_seconds"])
    lessons = {}
    for (lesson, _), s in seconds.items():
        lessons.setdefault(lesson, []).append(s)
    return [dict(lesson=lesson, notebooks=len(s), median=statistics.median(s), largest=max(s),
                 total=sum(s)) for lesson, s in sorted(lessons.items())]


def figure(stats):
    """A PNG data URI: each exercise's shares of passed, failed, not run and missing, 930 px wide."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure   # no pyplot: no backend, no global state
    labels = [f"{s['lesson'][:2]} {s['exercise']}" for s in stats]
    # passed, failed, not run; missing grey; a question not answered light grey
    colours = [*colormaps["viridis"]([0.8, 0.15, 0.5]), "#d0d0d0", "#eeeeee", "#f4d7a8"]
    fig = Figure(figsize=(9.3, 0.9 + 0.3 * len(stats)), dpi=100)
    ax = fig.subplots()
    left = [0.0] * len(stats)
    for status, colour in zip((*STATUSES, NOT_ATTEMPTED), colours):
        share = [s["counts"][status] / s["learners"] for s in stats]
        ax.barh(labels, share, left=left, color=colour, label=status, height=0.7)
        left = [l + v for l, v in zip(left, share)]
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the class")
    ax.axvline(GO_OVER_BELOW, color="black", linewidth=0.8, linestyle=":")
    ax.legend(ncols=6, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _similar(out):
    path = Path(out) / "similarity.csv"
    if not path.exists():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f)]


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Class report</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 932px; margin: 1em auto; padding: 0 0.5em; color: #222; }
table { border-collapse: collapse; width: 100%; margin: 0.5em 0 1.5em; font-size: 0.92em; }
th, td { text-align: left; padding: 0.25em 0.5em; border-bottom: 1px solid #ddd; vertical-align: top; }
td.n { text-align: right; white-space: nowrap; }
.lab { background: #fff6d5; border: 1px solid #e0c050; padding: 0.5em 1em; }
.small { color: #555; font-size: 0.88em; }
code { white-space: pre-wrap; word-break: break-word; }
img { max-width: 100%; }
</style></head><body>
<h1>Class report</h1>
<p class="small">{{ learners }} learners, {{ stats|length }} exercises in {{ lessons|length }} lesson(s):
{{ lessons|join(", ") }}. Made {{ made }} from gradebook.csv.</p>

<h2>Each learner</h2>
<p class="small">{{ behind }} of {{ people|length }} learner(s) behind (a lesson missing or not attempted, or
under {{ "%.0f"|format(100 * behind_below) }}% of the exercises handed in passed), listed first. Not attempted:
handed in with every exercise still the stub.</p>
<table><tr><th>learner</th><th>handed in</th><th>missing</th><th>not attempted</th><th>late</th>
<th>exercises passed</th><th>points</th></tr>
{% for p in people %}<tr><td>{% if p.behind %}<b>{{ p.learner }}</b> (behind){% else %}{{ p.learner }}{% endif %}</td>
<td class="n">{{ p.handed_in|length }} of {{ p.lessons }}</td><td>{{ p.missing|join(", ") }}</td>
<td>{{ p.not_attempted|join(", ") }}</td><td>{{ p.late|join(", ") }}</td>
<td class="n">{{ p.passed }} of {{ p.exercises }}</td><td class="n">{{ p.points }} of {{ p.max_points }}</td></tr>
{% endfor %}</table>

{% if stopped %}<h2>Notebooks that stopped</h2>
<p class="small">A cell raised an error, or the run was stopped (a time limit, a kernel that died); each
exercise was checked with the functions that run had defined, and the rows hold those grades.</p>
<table><tr><th>learner</th><th>lesson</th><th>where and why</th></tr>
{% for s in stopped %}<tr><td>{{ s.learner }}</td><td>{{ s.lesson }}</td><td><code>{{ s.where }}</code></td></tr>
{% endfor %}</table>{% endif %}

<section class="lab"><h2>Go over these in the next lab</h2>
{% if weak %}<ol>{% for s in weak %}
<li><b>{{ s.exercise }}</b> ({{ s.lesson }}): {{ "%.0f"|format(100 * s.share) }}% of the
{{ s.handed_in }} who handed it in passed.{% if s.failures %} Most common first failure
({{ s.failures[0].learners }} learner{{ "s" if s.failures[0].learners != 1 }}):
<code>{{ s.failures[0].line }}</code>{% endif %}</li>{% endfor %}</ol>
{% else %}<p>Every exercise was passed by at least {{ "%.0f"|format(100 * threshold) }}% of
those who handed it in.</p>{% endif %}
</section>

<h2>Each exercise</h2>
{% if picture %}<img alt="the share of the class that passed, failed, did not run or did not hand in each exercise" src="{{ picture }}">{% endif %}
<p class="small">The dotted line is {{ "%.0f"|format(100 * threshold) }}%: an exercise passed by fewer of
those who handed it in is listed above.</p>
<table><tr><th>exercise</th><th>passed</th><th>failed</th><th>not run</th><th>missing</th><th>not attempted</th><th>not answered</th>
<th>points (learners)</th><th>most common first failures</th></tr>
{% for s in stats %}<tr><td>{{ s.lesson[:2] }} <b>{{ s.exercise }}</b></td>
<td class="n">{{ s.counts["passed"] }}{% if s.share is not none %} ({{ "%.0f"|format(100 * s.share) }}%){% endif %}</td>
<td class="n">{{ s.counts["failed"] }}</td><td class="n">{{ s.counts["not run"] }}</td>
<td class="n">{{ s.counts["missing"] }}</td><td class="n">{{ s.counts["not attempted"] or "" }}</td>
<td class="n">{{ s.counts["not answered"] or "" }}</td>
<td>{% for p, n in s.points %}{{ p }}/{{ s.max_points }}: {{ n }}{% if not loop.last %}<br>{% endif %}{% endfor %}</td>
<td>{% for f in s.failures %}<div>{{ f.learners }} × <code>{{ f.line }}</code>
<div class="small">e.g. {{ f.example }}</div></div>{% endfor %}</td></tr>
{% endfor %}</table>
<p class="small">A first failure is the first line of the check's feedback (the first thing that
failed), with its numbers written as # and its quoted code as `…`, so that one mistake met on
other inputs counts once.</p>

<h2>Time to grade</h2>
<table><tr><th>lesson</th><th>notebooks</th><th>median CPU s</th><th>largest CPU s</th><th>total CPU s</th></tr>
{% for t in times %}<tr><td>{{ t.lesson }}</td><td class="n">{{ t.notebooks }}</td>
<td class="n">{{ "%.1f"|format(t.median) }}</td><td class="n">{{ "%.1f"|format(t.largest) }}</td>
<td class="n">{{ "%.0f"|format(t.total) }}</td></tr>
{% else %}<tr><td colspan="5">no notebook's CPU time was measured</td></tr>{% endfor %}</table>
<p class="small">CPU seconds of pytest and the kernel together, per notebook (the gradebook's cpu_seconds).</p>

<h2>Similar submissions</h2>
{% if similar is none %}<p>similarity.csv was not made.</p>
{% else %}<p>Pairs whose exercise code is nearly the same once names, comments, spacing and order
are set aside, for you to look at, never a penalty. A pair is scored from its own code alone,
so no one else's hand-in changes it. Short exercises have few right answers: "shared by" says
how many of the class wrote each matching answer, and a match that many share is worth less
of your time. Code equal to the stub or close to the lesson's own answer, which
<code>solution()</code> shows, is not compared.</p>
{% set marked = similar|selectattr("look_at", "equalto", "yes")|list %}
{% if marked %}<table><tr><th>lesson</th><th>learners</th><th>score</th><th>matching exercises</th><th>shared by</th></tr>
{% for p in marked[:20] %}<tr><td>{{ p.lesson }}</td><td>{{ p.learner_a }} and {{ p.learner_b }}</td>
<td class="n">{{ p.score }}</td><td>{{ p.matching }}</td><td class="small">{{ p.shared_by }}</td></tr>{% endfor %}
</table>{% if marked|length > 20 %}<p>{{ marked|length - 20 }} more in similarity.csv.</p>{% endif %}
{% else %}<p>No pair stands out ({{ similar|length }} pair(s) share some code; see similarity.csv).</p>{% endif %}
{% endif %}
</body></html>
"""


def render(rows, similar=None, made=None):
    """The report's HTML from the gradebook rows (and similarity.csv's rows, or None)."""
    stats = exercise_stats(rows)
    people = learner_stats(rows)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(TEMPLATE).render(
        people=people, behind=sum(p["behind"] for p in people), behind_below=BEHIND_BELOW,
        stats=stats, weak=go_over(stats), stopped=stopped_runs(rows), times=lesson_times(rows), threshold=GO_OVER_BELOW,
        learners=len({r["learner"] for r in rows if r["learner"]}),
        lessons=list(dict.fromkeys(s["lesson"] for s in stats)), similar=similar,
        picture=figure(stats) if stats else "",
        made=made or datetime.datetime.now().isoformat(timespec="minutes"))


def write_report(rows, out):
    """Write out/report.html from the gradebook rows and out/similarity.csv; returns its path."""
    path = Path(out) / "report.html"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render(rows, _similar(out)), encoding="utf-8")
    tmp.replace(path)
    return path
