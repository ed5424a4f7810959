"""The guide's Slurm recipe (docs/slurm/grade-class.sh), run on a real one-node Slurm.

The test starts munge, slurmctld and slurmd in a temporary folder (Debian's slurm-wlm and
munge; a slurm.conf made here for this machine: its CPUs and memory as `slurmd -C` reports
them, one partition, no cgroups), runs the guide's own script on a class of three learners
and one on the roster who handed in nothing (so a shard has a missing learner), in two
shards, waits for the merge and export job, and checks that the merged gradebook, summary
and Canvas file are those that one machine's `--class` run gives on the same class.
"""
import csv
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import nbformat
import pytest

from course_lib.grading import sandbox
from course_lib.grading.shards import shard_of

from answers import REFERENCE, WRONG
from notebook_tools import ROOT, fill, read

SCRIPT = ROOT / "docs" / "slurm" / "grade-class.sh"
SBIN = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin"
NEEDED = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "scancel")
SHARDS = 2
# grading options the recipe passes to every shard and to its last step, as the one-machine run gets them
OPTIONS = ["--roster", "roster.csv", "--lessons", "00", "--export", "canvas"]
WAIT = 600  # seconds for the whole array and the merge, at most; about 30 on 2 idle cores


def _which(name):
    return shutil.which(name, path=SBIN)


def test_the_script_refuses_a_bad_number_of_shards(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "submissions/", "grades/", "two"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "usage:" in done.stderr and "SHARDS" in done.stderr


def test_the_guide_shows_the_scripts_own_lines():
    """docs/instructors.md shows the lines of the script that submit the jobs (its ```sh block in
    section 9): each must be a line of the script as it is, so the guide cannot drift from it."""
    guide = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    section = guide[guide.index("## 9. Classes larger than a machine"):]
    section = section[:section.index("\n## ", 1)]
    (block,) = re.findall(r"^```sh\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    script = {line.strip() for line in SCRIPT.read_text(encoding="utf-8").splitlines()}
    shown = [line.strip() for line in block.splitlines() if line.strip()]
    assert len(shown) >= 8 and any("--dependency=afterany" in line for line in shown)
    assert [line for line in shown if line not in script] == []
    assert "docs/slurm/grade-class.sh" in section and "CPUS_PER_SHARD" in section
    # the test's own cluster is one of a configuration of its own: sbatch finds it by SLURM_CONF,
    # which the guide and the script say to export
    assert "export SLURM_CONF=" in section and "SLURM_CONF" in SCRIPT.read_text(encoding="utf-8")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(slurmd):
    """This machine as `slurmd -C` describes it: {'NodeName': 'vm', 'CPUs': '2', ...}."""
    line = subprocess.run([slurmd, "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    return dict(part.split("=", 1) for part in line.split())


def _slurm_conf(folder, node):
    """A slurm.conf for this one node, every file of the cluster under `folder`."""
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    name = node["NodeName"]
    return "\n".join([
        "ClusterName=course", f"SlurmctldHost={name}(127.0.0.1)", "SlurmUser=root", "SlurmdUser=root",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
        "AuthType=auth/munge", f"AuthInfo=socket={folder}/munge/munge.socket", "CredType=cred/munge",
        f"StateSaveLocation={folder}/state", f"SlurmdSpoolDir={folder}/spool",
        f"SlurmctldPidFile={folder}/slurmctld.pid", f"SlurmdPidFile={folder}/slurmd.pid",
        f"SlurmctldLogFile={folder}/slurmctld.log", f"SlurmdLogFile={folder}/slurmd.log",
        f"PlugStackConfig={folder}/plugstack.conf",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory", "SchedulerType=sched/builtin",
        "MpiDefault=none", "ReturnToService=2",
        f"NodeName={name} NodeAddr=127.0.0.1 " + " ".join(f"{k}={node[k]}" for k in keys if k in node)
        + " State=UNKNOWN",
        f"PartitionName=grading Nodes={name} Default=YES MaxTime=INFINITE State=UP", ""])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running one-node Slurm (munged, slurmctld, slurmd in the foreground, children of this
    test); yields the environment its commands need, and stops the three afterwards."""
    missing = [name for name in NEEDED if _which(name) is None]
    if missing:
        pytest.skip(f"Slurm is not installed here ({', '.join(missing)} missing): apt-get install "
                    f"slurm-wlm munge (.ci/run does)")
    if os.geteuid() != 0:
        pytest.skip("slurmd must run as root to start jobs, and this test is not root")
    folder = tmp_path_factory.mktemp("slurm")
    for sub in ("munge", "state", "spool"):
        (folder / sub).mkdir()
    (folder / "munge").chmod(0o755)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    (folder / "plugstack.conf").write_text("")
    conf = folder / "slurm.conf"
    conf.write_text(_slurm_conf(folder, _node(_which("slurmd"))))
    env = dict(os.environ, SLURM_CONF=str(conf), PATH=SBIN)
    started = []
    try:
        munge = folder / "munge"
        started.append(subprocess.Popen(
            [_which("munged"), "--foreground", "--force", f"--key-file={key}",
             f"--socket={munge / 'munge.socket'}", f"--pid-file={munge / 'munged.pid'}",
             f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait_for(lambda: (munge / "munge.socket").exists(), 30, "munged to make its socket", folder)
        for daemon in ("slurmctld", "slurmd"):
            started.append(subprocess.Popen([_which(daemon), "-D", "-f", str(conf)], env=env,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait_for(lambda: "idle" in subprocess.run([_which("sinfo"), "-h", "-o", "%T"], env=env,
                                                   capture_output=True, text=True).stdout,
                  60, "the node to be idle", folder)
        yield env
    finally:
        if len(started) == 3:  # no job of this cluster outlives it (a failed test's shards, say)
            subprocess.run([_which("scancel"), "--quiet", "--user", "root"], env=env, timeout=30)
        for proc in reversed(started):
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _logs(folder):
    return "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-3000:]}"
                     for p in sorted(folder.rglob("*.log")))


def _wait_for(ready, seconds, what, folder):
    end = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > end:
            raise AssertionError(f"waited {seconds} s for {what}; the logs:\n{_logs(folder)}")
        time.sleep(0.25)


def _learners():
    """Names for a right, a wrong and a blank notebook, the first two in shards 1 and 2, and one
    on the roster who handed in nothing."""
    names = [f"{first}{n}" for n in range(50) for first in ("ana", "ben", "chi", "dev")]
    right = next(n for n in names if shard_of(n, SHARDS) == 1)
    wrong = next(n for n in names if shard_of(n, SHARDS) == 2)
    blank, absent = [n for n in names if n not in (right, wrong)][:2]
    return right, wrong, blank, absent


def _class(folder):
    blank = read(ROOT / "exercises" / "00_start_here.ipynb")
    mistake = next(w for w in WRONG if w.exercise == "next_token_targets" and w.inject)
    right, wrong, empty, absent = _learners()
    for name, nb in {right: fill(blank, REFERENCE), wrong: fill(blank, {**REFERENCE, mistake.exercise: mistake.body}),
                     empty: blank}.items():
        (folder / "submissions" / name).mkdir(parents=True)
        nbformat.write(nb, folder / "submissions" / name / "00_start_here.ipynb")
    rows = [f"{name},{4800 + i},{name}@example.edu" for i, name in enumerate((right, wrong, empty, absent))]
    (folder / "roster.csv").write_text("learner,lms_id,email\n" + "\n".join(rows) + "\n")
    return right, wrong, empty, absent


def _job_state(job, env):
    out = subprocess.run([_which("scontrol"), "show", "job", "-o", job], env=env, capture_output=True,
                         text=True).stdout
    return re.findall(r"JobState=(\S+)", out), re.findall(r"ExitCode=(\S+)", out)


def _table(path, drop=("cpu_seconds", "seed")):
    """A CSV file's rows, less the columns that measure the machine (CPU seconds) or are drawn
    afresh by each grading (the seed of the checks' inputs)."""
    with open(path, newline="", encoding="utf-8") as f:
        return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(f)]


def test_the_guides_slurm_recipe_merges_to_one_machines_gradebook(cluster, tmp_path):
    right, wrong, empty, absent = _class(tmp_path)
    options = OPTIONS + (["--no-sandbox"] if sandbox.unavailable() is not None else [])
    env = dict(cluster, PYTHON=sys.executable, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    began = time.monotonic()
    submitted = subprocess.run(["bash", str(SCRIPT), "submissions/", "grades/", str(SHARDS), *options],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    array, merge = re.search(r"job (\d+) \(array 1-2\); merge and export: job (\d+)", submitted.stdout).groups()
    # one machine grades the same class meanwhile, one notebook at a time (the shards have the CPUs)
    one = subprocess.run([sys.executable, "-m", "course_lib.grading", "--class", "submissions/", "--out", "one/",
                          "--jobs", "1", *options], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=WAIT)
    assert os.path.exists(tmp_path / "one" / "gradebook.csv"), one.stdout + one.stderr
    _wait_for(lambda: _job_state(merge, cluster)[0] and _job_state(merge, cluster)[0][0]
              not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"), WAIT, f"the merge job {merge}", tmp_path)
    took = time.monotonic() - began
    states, codes = _job_state(merge, cluster)
    # the merge ran, and its last step (the whole class's command) ended as one machine's run did
    assert "merged 2 shards" in (tmp_path / "grades-slurm" / "merge.log").read_text(), _logs(tmp_path)
    assert (states, codes) == (["COMPLETED" if one.returncode == 0 else "FAILED"],
                               [f"{one.returncode}:0"]), _logs(tmp_path)
    shard_states = _job_state(array, cluster)[0]
    assert len(shard_states) == SHARDS and "PENDING" not in shard_states, shard_states
    merged = _table(tmp_path / "grades" / "gradebook.csv")
    assert merged == _table(tmp_path / "one" / "gradebook.csv")
    assert _table(tmp_path / "grades" / "summary.csv") == _table(tmp_path / "one" / "summary.csv")
    assert _table(tmp_path / "grades" / "canvas.csv") == _table(tmp_path / "one" / "canvas.csv")
    # what the gradebooks agree on is the class's grading, not an empty file
    status = {(r["learner"], r["exercise"]): r["status"] for r in merged}
    assert status[right, "next_token_targets"] == "passed" and status[wrong, "next_token_targets"] == "failed"
    assert status[empty, "text_to_ids"] == "failed" and status[absent, "text_to_ids"] == "missing"
    assert {r["learner"] for r in merged} == {right, wrong, empty, absent}
    print(f"\nslurm: {SHARDS} shards, merged and exported {took:.0f} s after submission")
