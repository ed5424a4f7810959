"""The lab, live: a JupyterHub service that shows instructors which check the room is stuck on.

During a lab each check a learner runs on the hub sends one small event
(course_lib.checks.report); this service keeps them in one SQLite file and shows the
instructors, live, a grid of learners by exercises and the exercises most of the room fails,
with the checks' reasons. `python -m course_lib.live` runs it, started by the hub
(docs/hub.md, section 6, says how to turn it on, what it keeps and for how long, and how to switch
it off).

- `store`: the SQLite file of sessions and events;
- `room`: what a session's events say (the grid, where the room is stuck, the CSV);
- `limits`: the rate limit per learner;
- `page`: the instructors' page (HTML, style, script);
- `service`: the hub service itself: its handlers and the command.
"""
