"""The instructor's page: its HTML, its style and its script, served by course_lib.live.service.

The HTML carries no learner's data: the script asks for the room's state (JSON) every two
seconds and draws it with DOM text nodes only (`textContent`, never `innerHTML`), so any text
in an event shows as text. The page's Content-Security-Policy allows no inline script and no
other origin. It is laid out for a projector: large type, high contrast, and each state told by
a sign as well as a colour (✓ passed, ✗ failing, … the stub still there, blank not started).
"""
from tornado.template import Template

POLL_MS = 2000   # how often the page asks for the room's state

PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>The lab, live</title>
<link rel="stylesheet" href="{{ prefix }}live.css">
<script src="{{ prefix }}live.js" defer></script>
</head>
<body data-poll="{{ poll }}" data-state="{{ prefix }}state" data-csv="{{ prefix }}session.csv">
<header>
  <h1>The lab, live</h1>
  <p id="status" aria-live="polite">waiting for the room's state…</p>
  <nav>
    <a id="csv" href="{{ prefix }}session.csv">CSV of this session</a>
    <form method="post" action="{{ prefix }}sessions">
      <input type="hidden" name="_xsrf" value="{{ xsrf }}">
      <button type="submit">Start a new session</button>
    </form>
    <span class="who">{{ name }}</span>
  </nav>
</header>
<main>
  <section id="stuck-section">
    <h2>Where the room is stuck</h2>
    <ol id="stuck"></ol>
    <p id="no-stuck" hidden>No exercise is failing now.</p>
  </section>
  <section>
    <h2>Learners by exercise</h2>
    <p class="legend"><span class="passed">✓</span> passed
      <span class="failing">✗</span> failing
      <span class="stub">…</span> stub still there
      <span class="none">&nbsp;</span> not started
      <span class="tag">h2</span> hints shown
      <span class="tag">S</span> solution shown</p>
    <p id="roster-note" hidden></p>
    <div class="scroll"><table id="grid"><thead></thead><tbody></tbody></table></div>
  </section>
  <p id="sessions"></p>
</main>
</body>
</html>
""")

STYLE = """
:root { --ink: #111; --paper: #fff; --pass: #0b6b2b; --pass-bg: #d3f5dd; --fail: #a4000f;
        --fail-bg: #ffd9d6; --stub: #555; --stub-bg: #ececec; --line: #999; }
* { box-sizing: border-box; }
body { margin: 0; font: 20px/1.35 system-ui, "DejaVu Sans", sans-serif; color: var(--ink);
       background: var(--paper); }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.4em 1.5em;
         padding: 0.4em 1em; border-bottom: 3px solid var(--ink); }
h1 { font-size: 1.5em; margin: 0; }
h2 { font-size: 1.15em; margin: 0.6em 0 0.3em; }
#status { margin: 0; flex: 1; }
#status.stale { color: var(--fail); font-weight: bold; }
nav { display: flex; gap: 1em; align-items: center; }
nav form { margin: 0; }
button, nav a { font: inherit; font-size: 0.85em; }
.who { font-size: 0.8em; color: #444; }
main { padding: 0 1em 1em; }
#stuck { margin: 0; padding-left: 1.6em; }
#stuck li { margin: 0.15em 0 0.5em; }
#stuck .name { font-weight: bold; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
#stuck .count { color: var(--fail); font-weight: bold; }
#stuck ul { margin: 0.1em 0 0; padding-left: 1.2em; font-size: 0.9em; }
#sessions { font-size: 0.75em; }
.legend { font-size: 0.8em; margin: 0 0 0.4em; }
.legend span { display: inline-block; min-width: 1.6em; text-align: center; margin-left: 0.8em;
               border: 1px solid var(--line); }
.scroll { overflow: auto; max-height: 70vh; }
table { border-collapse: collapse; }
th, td { border: 1px solid var(--line); padding: 0.1em 0.35em; }
thead th { position: sticky; top: 0; background: var(--paper); font-size: 0.75em;
           font-family: ui-monospace, "DejaVu Sans Mono", monospace; white-space: nowrap; }
tbody th { text-align: left; font-weight: normal; white-space: nowrap; }
td { min-width: 2.6em; text-align: center; font-weight: bold; white-space: nowrap; }
.passed { color: var(--pass); background: var(--pass-bg); }
.failing { color: var(--fail); background: var(--fail-bg); }
.stub { color: var(--stub); background: var(--stub-bg); }
.tag { font-size: 0.65em; font-weight: normal; margin-left: 0.15em; }
"""

SCRIPT = """
"use strict";
(function () {
  const poll = Number(document.body.dataset.poll) || 2000;
  const status = document.getElementById("status");
  const xsrf = document.querySelector("input[name=_xsrf]").value;
  const SIGNS = {passed: "\\u2713", failing: "\\u2717", stub: "\\u2026"};
  let version = "", lastOk = Date.now();

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function clock(seconds) {
    return seconds ? new Date(seconds * 1000).toLocaleTimeString() : "";
  }
  function drawStuck(stuck) {
    const list = document.getElementById("stuck");
    list.replaceChildren();
    document.getElementById("no-stuck").hidden = stuck.length > 0;
    for (const item of stuck) {
      const li = el("li");
      li.append(el("span", item.lesson + " " + item.exercise, "name"), " ",
                el("span", item.failing + " failing now", "count"),
                ", " + item.passed + " passed");
      const reasons = el("ul");
      for (const [reason, n] of item.reasons) {
        reasons.append(el("li", n + " \\u00d7 " + reason));
      }
      li.append(reasons);
      list.append(li);
    }
  }
  function drawCell(cell) {
    if (!cell) return el("td", "");
    const td = el("td", SIGNS[cell.state] || "", cell.state);
    if (cell.hints) td.append(el("span", "h" + cell.hints, "tag"));
    if (cell.solution) td.append(el("span", "S", "tag"));
    const what = [cell.state === "stub" ? "the stub is still there" : cell.state];
    if (cell.reason && cell.state === "failing") what.push(cell.reason);
    what.push(cell.tries + (cell.tries === 1 ? " check" : " checks"));
    td.title = what.join(" \\u2014 ");
    return td;
  }
  function drawGrid(state) {
    const head = el("tr");
    head.append(el("th", "learner"));
    for (const c of state.columns) head.append(el("th", c.lesson + " " + c.exercise));
    const body = document.createDocumentFragment();
    for (const row of state.rows) {
      const tr = el("tr");
      tr.append(el("th", row.learner));
      for (const cell of row.cells) tr.append(drawCell(cell));
      body.append(tr);
    }
    const grid = document.getElementById("grid");
    grid.tHead.replaceChildren(head);
    grid.tBodies[0].replaceChildren(body);
    const note = document.getElementById("roster-note");
    note.hidden = !state.roster_note;
    note.textContent = state.roster_note || "";
  }
  function drawSessions(sessions, current) {
    const line = document.getElementById("sessions");
    line.replaceChildren();
    const earlier = sessions.filter(s => s.id !== current);
    if (earlier.length) line.append("Earlier sessions: ");
    earlier.forEach((s, i) => {
      const link = el("a", "session " + s.id + " (" + new Date(s.started * 1000).toLocaleString() +
                      ", " + s.events + " checks)");
      link.href = document.body.dataset.csv + "?session=" + Number(s.id);
      line.append(i ? ", " : "", link);
    });
  }
  function drawStatus(state) {
    if (state.session === null) {
      status.textContent = "no session yet: the first check of the lab starts one";
      status.className = "";
      return;
    }
    const parts = ["session " + state.session + " since " + clock(state.started),
                   state.learners + " learners, " + state.checked + " of them checked something"];
    if (state.last) parts.push("latest check " + clock(state.last));
    status.textContent = parts.join(" \\u00b7 ");
    status.className = "";
  }
  async function refresh() {
    try {
      const reply = await fetch(document.body.dataset.state + "?v=" + encodeURIComponent(version), {
        credentials: "same-origin", redirect: "manual", cache: "no-store",
        headers: {"X-XSRFToken": xsrf}});   // the hub asks it of a script's requests
      if (reply.type === "opaqueredirect" || reply.status === 403) {
        status.textContent = "signed out of the hub: reload the page to sign in again";
        status.className = "stale";
      } else if (reply.ok) {
        const state = await reply.json();
        lastOk = Date.now();
        if (!state.same) {
          version = state.version;
          drawStuck(state.stuck);
          drawGrid(state);
          drawStatus(state);
          drawSessions(state.sessions, state.session);
        }
      } else {
        throw new Error("the service answered " + reply.status);
      }
    } catch (e) {
      const ago = Math.round((Date.now() - lastOk) / 1000);
      status.textContent = "not updating for " + ago + " s (" + e.message + "); still trying";
      status.className = "stale";
    }
    setTimeout(refresh, poll);
  }
  refresh();
})();
"""
