#!/usr/bin/env bash
# Grade a class on a Slurm cluster: a job array of shards, then one job that merges them and
# exports, started once every shard has ended, whether it passed or not.
#
#   docs/slurm/grade-class.sh CLASS OUT SHARDS [grading options...]
#   docs/slurm/grade-class.sh submissions/ grades/ 8 --roster roster.csv --export canvas
#
# Run it from the course's folder on a login node; CLASS and OUT must be on a file system that
# every node sees. sbatch reads the cluster's slurm.conf (/etc/slurm/slurm.conf), or the one
# SLURM_CONF names: with a configuration of your own, `export SLURM_CONF=/path/to/slurm.conf`
# first (the jobs inherit it). Shard K (1 to SHARDS) grades its part of CLASS into OUT-K/; the last job
# merges the parts into OUT/, then runs the whole class's command there once more, which grades
# nothing already graded and writes what merge leaves out: similarity.csv and the --export files.
# The grading options (--roster, --lessons, --due, --late-penalty, --export, ...) go to every
# shard and to that last command. Each job's output is in OUT-slurm/.
#
# Resources, from the environment (the defaults, 1 CPU and 3 GB a shard, run two shards at once
# on a node of 2 CPUs and 6 GB, one at a time on a node of 2 CPUs and 4 GB):
#   CPUS_PER_SHARD=1     CPUs of each shard, and the notebooks it grades at once (--jobs)
#   MEM_PER_SHARD=3G     memory of each shard (default: 3G per CPU): a shard's log that says a
#                        kernel died, or Slurm's OUT_OF_MEMORY, asks for more
#   TIME_PER_SHARD=01:00:00
#   SBATCH_OPTIONS=      more sbatch options for every job, e.g. "--partition=short --account=cs101"
#   PYTHON=              the course's Python (default: .venv/bin/python of the course's folder)
# Prints the array's and the merge's job ids; `squeue -j ID` follows them.
set -euo pipefail
if [ $# -lt 3 ] || ! [[ $3 =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 CLASS OUT SHARDS [grading options...] (SHARDS: a number of 1 or more)" >&2
    exit 2
fi
class=$1 out=${2%/} shards=$3
shift 3
course=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-$course/.venv/bin/python}
if ! [ -x "$python" ]; then
    echo "error: no Python at $python: run make setup in $course, or set PYTHON" >&2
    exit 2
fi
[ -d "$class" ] || { echo "error: there is no class folder $class" >&2; exit 2; }
cpus=${CPUS_PER_SHARD:-1} time=${TIME_PER_SHARD:-01:00:00}
if ! [[ $cpus =~ ^[1-9][0-9]*$ ]]; then
    echo "error: CPUS_PER_SHARD=$cpus should be a number of CPUs, 1 or more" >&2
    exit 2
fi
mem=${MEM_PER_SHARD:-$((3 * cpus))G}
mkdir -p "$out-slurm"
options=$(printf ' %q' "$@")
grade="$(printf %q "$python") -m course_lib.grading --class $(printf %q "$class")$options"
# SLURM_ARRAY_TASK_ID is expanded in the job, not here: shard K of SHARDS
array=$(sbatch --parsable --job-name=grade-class --array=1-"$shards" --cpus-per-task="$cpus" \
    --mem="$mem" --time="$time" --chdir="$PWD" --output="$out-slurm/shard-%a.log" \
    ${SBATCH_OPTIONS:-} \
    --wrap "$grade --out $(printf %q "$out")-\$SLURM_ARRAY_TASK_ID --shard \$SLURM_ARRAY_TASK_ID/$shards --jobs $cpus")
array=${array%%;*}
parts=$(for k in $(seq 1 "$shards"); do printf ' %q' "$out-$k"; done)
# afterany, not afterok: a shard that exits non-zero (a learner it could not grade) must not
# keep the merge from running; merge itself refuses a part that is missing or incomplete
merged=$(sbatch --parsable --job-name=grade-class-merge --dependency=afterany:"$array" \
    --kill-on-invalid-dep=yes --cpus-per-task="$cpus" --mem="$mem" --time="$time" --chdir="$PWD" \
    --output="$out-slurm/merge.log" ${SBATCH_OPTIONS:-} \
    --wrap "$(printf %q "$python") -m course_lib.grading merge$parts --out $(printf %q "$out") && $grade --out $(printf %q "$out") --jobs $cpus")
echo "shards: job $array (array 1-$shards); merge and export: job ${merged%%;*}; output in $out-slurm/"
