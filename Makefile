# The course's commands. `make lab` opens the course; `make test` runs every test.
# Both install what is missing first: into the active virtual environment (or conda
# environment) if there is one, otherwise into .venv here, created on first use.

ifneq ($(VIRTUAL_ENV)$(CONDA_PREFIX),)
PYTHON := python
else
PYTHON := .venv/bin/python
endif

# One torch thread per process, and one process per core plus one: processes whose threads
# outnumber the cores slow each other down many times over, but about a fifth of the suite's
# time is spent waiting (graders' sandboxes starting, learners' notebooks running into their time
# limits), and the extra process computes meanwhile (docs/run-times.md, "Fifth pass"). Each file's tests on one process (loadfile:
# a notebook's cells share one kernel, and each lesson's exercise variants run inside nbval's
# run of it, their tests in its file after its last cell: tests/nbval_fold.py), the longest
# files first (conftest.py orders them; --no-loadscope-reorder keeps that order). A kernel gets
# 5 minutes to start on a busy machine (nbval's default is 60 s); conftest.py makes nbval wait
# as patiently for a cell's outputs. Each process forks its kernels from one that imported torch,
# matplotlib and ipykernel once (tests/kernel_zygote.py; COURSE_FRESH_KERNELS=1 starts each anew).
# The lessons run on the CPU (COURSE_DEVICE=cpu): nbval compares them with outputs saved from a
# CPU run, which a GPU's need not match digit for digit (docs/benchmarks.md, "The GPU").
CORES := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
WORKERS ?= $(shell echo $$(( $(CORES) + 1 )))
PYTEST := OMP_NUM_THREADS=1 COURSE_DEVICE=cpu $(PYTHON) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder --nbval --nbval-current-env \
	--nbval-kernel-startup-timeout=300

.PHONY: setup lab test test-load test-browser exercises notebooks grade

# Installs once per environment: the stamp file in it is newer than requirements.txt and
# pyproject.toml until either changes (delete it to install again). uv (from PyPI, into the
# same environment) installs what requirements.txt lists: the same versions pip picks, in about
# a quarter of pip's time (docs/run-times.md, "Sixth pass"); where uv cannot be installed, pip
# does it. Either keeps a torch that is already installed and satisfies requirements.txt.
STAMP := $(or $(VIRTUAL_ENV),$(CONDA_PREFIX),.venv)/.course-installed
setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PYTHON) || command -v $(PYTHON) >/dev/null || python3 -m venv .venv
	@if $(PYTHON) -m pip install --quiet uv; then \
		install="$(PYTHON) -m uv pip install --quiet --python $(PYTHON) --compile-bytecode"; \
	else \
		echo "setup: uv could not be installed; pip installs instead (slower)"; \
		$(PYTHON) -m pip install --quiet --upgrade pip; \
		install="$(PYTHON) -m pip install --quiet"; \
	fi; \
	set -x; $$install -r requirements.txt && $$install --no-deps -e .
	@touch $@

# Jupyter refuses to run as root unless told; containers often are root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: setup
	$(PYTHON) -m jupyterlab $(ALLOW_ROOT) --ServerApp.root_dir=. \
		--LabApp.default_url=/lab/tree/exercises/00_start_here.ipynb

test: setup
	$(PYTEST) tests notebooks

# The same tests while busy loops occupy every core (twice as many loops as cores), to check
# that the suite passes on a machine that is not quiet.
test-load: setup
	bash .ci/under-load env $(PYTEST) tests notebooks

# Every lesson opened and run in JupyterLab in headless Chromium (Debian's chromium package,
# driven by Playwright: pip install playwright). Screenshots go to tests/artefacts/browser/;
# -rP prints each lesson's time in JupyterLab beside the time it states. Two lessons at a
# time, longest first, each process with its own JupyterLab and Chromium: a lesson keeps
# PyTorch to one thread, so two share a 2-core machine as two learners' laptops would not,
# but each has a core (BROWSER_JOBS=1 runs them one at a time).
BROWSER_JOBS ?= 2
test-browser: setup
	COURSE_BROWSER_TEST=1 $(PYTHON) -m pytest -p no:cacheprovider -v -rP -n $(BROWSER_JOBS) \
		--dist loadgroup --no-loadscope-reorder tests/test_browser.py

# Maintainers: regenerate exercises/ after editing a lesson in notebooks/.
exercises: setup
	$(PYTHON) -m course_lib.exercises

# Maintainers: rerun every lesson top to bottom in a fresh kernel and save its outputs (waiting
# up to 60 s for a busy kernel's outputs, where nbclient's default 4 s could drop some).
notebooks: setup
	$(PYTHON) -m jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=600 --ExecutePreprocessor.iopub_timeout=60 notebooks/*.ipynb
	$(PYTHON) -m course_lib.exercises

# Learners: grade one notebook as the instructor will, e.g.
# `make grade NB=exercises/01_attention_by_hand.ipynb` (nbval runs a graded copy in a temporary folder,
# in a bubblewrap sandbox where this machine can make one; see docs/instructors.md, "The sandbox").
grade: setup
	@test -n "$(NB)" || { echo "usage: make grade NB=exercises/00_start_here.ipynb"; exit 2; }
	$(PYTHON) -m course_lib.grading "$(NB)"
