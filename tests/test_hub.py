"""The course on a real JupyterHub, as a classroom lab runs it: tests/hub_classroom.py sets up the
hub and its learners' work, which tests/test_live_hub.py looks at too.

Four learners, each a Unix user, log in through the hub's form and start their servers. Three
of them follow the nbgitpuller link that `python -m course_lib.hub links` prints for lesson 00:
it pulls the course from its git repository into their home and opens their working copy,
exercises/00_start_here.ipynb, in JupyterLab. Each runs that notebook in a kernel of their server
with every exercise answered rightly, then one wrong answer and its check again, all over the
kernel's websocket as JupyterLab does. The fourth stays idle, and the idle culler stops its
server while the others work. A learner cannot open another's server. One learner's server has
the limits a hub's spawner passes (MEM_LIMIT below lesson 00's measured peak, CPU_LIMIT 2).

`make test-browser` runs it, with tests/test_live_hub.py in the same process (one hub for both);
`make test` skips it in one line.
"""
import re

import pytest
import requests

from course_lib import hub as course_hub
from course_lib.exercises import exercises
from hub_classroom import FOLDER, IDLE, LESSON, LIMITED, WORKERS, hub_test, text

hub_test("the hub test")


def errors(outputs):
    return [o for o in outputs if o["output_type"] == "error"]


@pytest.mark.parametrize("name", WORKERS)
def test_the_link_pulls_the_course_and_opens_the_working_copy(classroom, name):
    session = classroom["sessions"][name]
    phases = [event.get("phase") for event in session["events"]]
    assert phases[-1] == "finished", f"nbgitpuller's pull did not finish: {session['events']}"
    assert session["opened"].status_code == 200
    assert session["opened"].url.endswith(f"/lab/tree/{FOLDER}/exercises/{LESSON}")
    # The working copy, stubs and all: never the solved lesson.
    stubs = [cell.source for cell in session["working_copy"].cells if "raise NotImplementedError" in cell.source]
    assert len(stubs) == len(list(exercises(session["working_copy"]))) > 0


@pytest.mark.parametrize("name", WORKERS)
def test_the_lesson_runs_and_its_checks_pass_the_right_answers(classroom, name):
    session = classroom["sessions"][name]
    failed = [(i, errors(outputs)) for i, outputs in enumerate(session["ran"]) if errors(outputs)]
    assert not failed, f"{name}'s lesson 00 stopped: {failed[:1]}"
    printed = "".join(text(outputs) for outputs in session["ran"])
    for exercise, _, _ in exercises(session["working_copy"]):
        assert re.search(rf"^{exercise}: \d+ checks passed$", printed, re.MULTILINE), exercise
    # The data every lesson reads, found by the installed course_lib: GPT-2's width from
    # data/configs/gpt2.json and the corpus.
    assert re.search(r"GPT-2 small\s+width C =\s+768", printed)
    assert re.search(r"^[\d,]+ characters, [\d,]+ bytes$", printed, re.MULTILINE)


@pytest.mark.parametrize("name", WORKERS)
def test_a_wrong_answer_fails_its_check_with_the_hint(classroom, name):
    session = classroom["sessions"][name]
    defined, checked = session["wrong"]
    assert not errors(defined)
    [error] = errors(checked)
    assert error["ename"] == "AssertionError"
    assert "Exercise 'text_to_ids'" in error["evalue"] and session["wrong_answer"].hint in error["evalue"]


@pytest.mark.parametrize("name", WORKERS)
def test_the_course_lib_is_the_images_wheel_not_the_pulled_copy(classroom, hub, name):
    module, data, _ = classroom["sessions"][name]["where"]
    image = hub.python.rsplit("/bin/", 1)[0]
    assert module.startswith(image) and "/site-packages/course_lib/" in module, module
    assert data.startswith(image) and data.endswith("course_lib/_data"), data


def test_the_limits_a_spawner_sets_reach_the_lesson(classroom):
    ada, cy = classroom["sessions"]["ada"], classroom["sessions"]["cy"]
    first_ada, first_cy = ada["ran"][0], cy["ran"][0]
    assert ada["where"][2] == "1" and cy["where"][2] == str(LIMITED["cpu_limit"]), text(first_cy)
    assert f"torch uses {LIMITED['cpu_limit']} CPU thread(s)" in text(first_cy)
    # The memory limit below lesson 00's measured peak: said in the first cell, and only there.
    peak = course_hub.peaks()["lessons"][LESSON]["peak_bytes"]
    assert LIMITED["mem_limit"] < peak
    assert "Memory: this lesson needed up to" in text(first_cy, "stderr")
    assert "(MEM_LIMIT)" in text(first_cy, "stderr")
    assert "Memory:" not in text(first_ada) and not any("Memory:" in text(o) for o in cy["ran"][1:])


def test_a_learner_cannot_open_another_learners_server(classroom, hub):
    ada = classroom["sessions"]["ada"]["browser"]
    bob = hub.learner("bob").name
    page = ada.get(f"{hub.url}/user/{bob}/lab")
    assert page.status_code == 403, (page.status_code, page.url)
    contents = ada.session.get(f"{hub.url}/user/{bob}/api/contents/{FOLDER}", timeout=60)
    assert contents.status_code in (403, 401) or "content" not in contents.text
    assert contents.status_code != 200
    # With ada's own server's XSRF token and cookies, bob's kernels stay out of reach too.
    started = ada.session.post(f"{hub.url}/user/{bob}/api/kernels", timeout=60,
                               headers={"X-XSRFToken": ada.xsrf()})
    assert started.status_code in (401, 403), started.status_code
    # A token of ada's own opens her server's API, and not bob's.
    token = {"Authorization": f"token {hub.token_for(hub.learner('ada'))}"}
    ada_name = hub.learner("ada").name
    assert requests.get(f"{hub.url}/user/{ada_name}/api/contents/{FOLDER}", headers=token, timeout=60).status_code == 200
    assert requests.get(f"{hub.url}/user/{bob}/api/contents/{FOLDER}", headers=token, timeout=60).status_code == 403


def test_the_idle_culler_stops_the_idle_server_only(classroom, hub):
    assert classroom["idle_stopped"], f"the idle server was not culled; the hub's log:\n{hub.log()[-4000:]}"
    assert all(classroom["workers_running"].values()), \
        f"a working learner's server was culled: {classroom['workers_running']}"
    assert re.search(rf"Culling server {hub.learner(IDLE).name}\b", hub.log())
