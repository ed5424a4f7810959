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
# limits), and the extra process computes meanwhile (docs/maintainers.md, "How the suite runs"). Each file's tests on one process (loadfile:
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
pytest_with = OMP_NUM_THREADS=1 COURSE_DEVICE=cpu $(1) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder --nbval --nbval-current-env \
	--nbval-kernel-startup-timeout=300
PYTEST := $(call pytest_with,$(PYTHON))

.PHONY: setup lab test test-load test-browser exercises notebooks grade lock test-latest

# Installs once per environment: the stamp file in it is newer than requirements-lock.txt,
# requirements.txt and pyproject.toml until one changes (delete it to install again).
# requirements.txt says what the course needs, as ranges (what a JupyterHub image or Binder
# installs); requirements-lock.txt pins every package in those ranges, for Linux and macOS, at
# the version the tests last passed with (`make lock` writes it). Setup installs requirements.txt
# with the lock as constraints: a pin applies only to a package that something needs, so the CUDA
# packages of PyPI's torch stay out where a CPU build of torch is installed. A torch already
# installed at another version is kept (README: a CPU build first); where the locked versions
# cannot be installed (a Python older than the lock's, an Intel Mac), setup says so and installs
# the newest versions requirements.txt allows, which no test has run. uv (pinned by the lock, into
# the same environment) installs, in about a quarter of pip's time (docs/maintainers.md); where
# uv cannot be installed, pip does it.
STAMP := $(or $(VIRTUAL_ENV),$(CONDA_PREFIX),.venv)/.course-installed
setup: $(STAMP)

$(STAMP): requirements-lock.txt requirements.txt pyproject.toml
	@test -x $(PYTHON) || command -v $(PYTHON) >/dev/null || python3 -m venv .venv
	@if $(PYTHON) -m pip install --quiet -c requirements-lock.txt uv; then \
		install="$(PYTHON) -m uv pip install --quiet --python $(PYTHON) --compile-bytecode"; \
	else \
		echo "setup: uv could not be installed; pip installs instead (slower)"; \
		$(PYTHON) -m pip install --quiet --upgrade pip; \
		install="$(PYTHON) -m pip install --quiet"; \
	fi; \
	pins=requirements-lock.txt; \
	torch=$$($(PYTHON) -c "import importlib.metadata as m; print(m.version('torch').split('+')[0])" 2>/dev/null); \
	locked=$$(sed -n 's/^torch==\([^ ;]*\).*/\1/p' requirements-lock.txt); \
	if [ -n "$$torch" ] && [ "$$torch" != "$$locked" ]; then \
		echo "setup: keeping the torch $$torch installed here (the tests ran with torch $$locked)"; \
		pins=$(dir $(STAMP)).course-lock-without-torch.txt; grep -v '^torch==' requirements-lock.txt >$$pins; \
	fi; \
	set -x; \
	{ $$install -r requirements.txt -c $$pins || { set +x; \
		echo "setup: the locked versions ($$pins) do not install here (why: above); installing the newest"; \
		echo "setup: versions requirements.txt allows instead, a set no test has run"; set -x; \
		$$install -r requirements.txt; }; } && $$install --no-deps -e .
	@touch $@

# Maintainers: pin requirements-lock.txt at the versions installed in an environment whose tests
# passed (this one; LOCK_FROM=.venv-latest after `make test-latest` passed), resolved for Linux
# and macOS (and Windows) and every Python from LOCK_PYTHON_MIN up (the oldest that those
# versions support). The CUDA packages of PyPI's torch are pinned as torch itself pins them. uv
# and the browser test's playwright are pinned too: setup installs uv, .ci/run playwright.
LOCK_FROM ?= $(or $(VIRTUAL_ENV),$(CONDA_PREFIX),.venv)
LOCK_PYTHON_MIN ?= 3.11.5
lock:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(LOCK_FROM)/bin/python -m uv pip freeze --python $(LOCK_FROM)/bin/python --exclude-editable \
		| sed -E 's/\+[^ ;]+$$//' | grep -v -E '^(pip)==' >$$tmp/tested.txt && \
	printf 'uv\nplaywright\n' >$$tmp/tools.in && \
	$(LOCK_FROM)/bin/python -m uv pip compile --quiet --universal --python-version $(LOCK_PYTHON_MIN) --no-annotate \
		--custom-compile-command "make lock" -c $$tmp/tested.txt \
		-o requirements-lock.txt requirements.txt $$tmp/tools.in
	@echo "lock: requirements-lock.txt pins $$(grep -c '==' requirements-lock.txt) packages"

# Maintainers: the tests on the newest versions that requirements.txt allows, in an environment of
# their own made anew (.venv-latest), so that a release that breaks the course shows here before a
# learner installs it; it prints where those versions differ from the lock. Not part of CI's run.
# torch is installed first, by pip, so that a CPU build pip's configuration offers is used
# (TORCH_INDEX=https://download.pytorch.org/whl/cpu asks PyTorch's CPU builds; on Linux, PyPI's
# torch brings several GB of CUDA libraries); LATEST_TORCH=torch==2.13.0 holds torch back,
# LATEST_TESTS=tests/test_attention.py runs fewer tests. After it passes, `make lock
# LOCK_FROM=.venv-latest` moves the lock to these versions.
LATEST := .venv-latest
LATEST_TORCH ?= $(shell sed -n 's/^\(torch[^ #]*\).*/\1/p' requirements.txt)
LATEST_TESTS ?= tests notebooks
test-latest:
	rm -rf $(LATEST) && python3 -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade uv "$(LATEST_TORCH)" \
		$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	$(LATEST)/bin/python -m uv pip install --quiet --python $(LATEST)/bin/python -r requirements.txt
	$(LATEST)/bin/python -m uv pip install --quiet --python $(LATEST)/bin/python --no-deps -e .
	@echo "test-latest: where these versions differ from requirements-lock.txt (- the newest, + the lock's):"
	@$(LATEST)/bin/python -m uv pip install --dry-run --python $(LATEST)/bin/python \
		-r requirements.txt -c requirements-lock.txt 2>&1 | grep -E '^ [-+] ' || echo "  (none)"
	COURSE_LATEST=1 $(call pytest_with,$(LATEST)/bin/python) $(LATEST_TESTS)

# Jupyter refuses to run as root unless told; containers often are root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

# The solved lessons in notebooks/ open read-only (course_lib/lab.py), so that running one,
# or its autosave, never changes it; the learner works in exercises/.
lab: setup
	$(PYTHON) -m jupyterlab $(ALLOW_ROOT) --ServerApp.root_dir=. \
		--ServerApp.contents_manager_class=course_lib.lab.CourseContents \
		--LabApp.default_url=/lab/tree/exercises/00_start_here.ipynb

test: setup
	$(PYTEST) tests notebooks

# The same tests while busy loops occupy every core (twice as many loops as cores), to check
# that the suite passes on a machine that is not quiet.
test-load: setup
	bash .ci/under-load env $(PYTEST) tests notebooks

# Every lesson opened and run in JupyterLab in headless Chromium (Debian's chromium package,
# driven by Playwright, installed within requirements-lock.txt), and a learner's feedback page
# opened offline with every request to another host blocked (`make test` skips that one where
# Playwright or Chromium is not there yet, as in CI). Screenshots go to tests/artefacts/browser/;
# -rP prints each lesson's time in JupyterLab beside the time it states. Two lessons at a
# time, longest first, each process with its own JupyterLab and Chromium: a lesson keeps
# PyTorch to one thread, so two share a 2-core machine as two learners' laptops would not,
# but each has a core (BROWSER_JOBS=1 runs them one at a time).
# With them, a classroom lab on a real JupyterHub (docs/hub.md, section 7): tests/test_hub.py,
# and tests/test_live_hub.py, which opens the live view in Chromium; they share one hub and its
# learners' work, so they run on one worker, as one group (conftest.py, ONE_PROCESS), beside the
# lessons on the other. They need root and `bash .ci/hub-setup`.
BROWSER_JOBS ?= 2
HUB_TESTS := tests/test_hub.py tests/test_live_hub.py
test-browser: setup
	COURSE_BROWSER_TEST=1 $(PYTHON) -m pytest -p no:cacheprovider -v -rP -n $(BROWSER_JOBS) \
		--dist loadgroup --no-loadscope-reorder $(HUB_TESTS) tests/test_browser.py \
		tests/test_feedback_page.py::test_the_page_opened_offline_in_chromium

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
# It prints each check's result and writes your feedback page beside the notebook, in
# feedback/ (exercises/feedback/01_attention_by_hand.html), and prints its path. It succeeds
# whenever the notebook was graded, whatever the score; it fails only when it could not grade.
grade: setup
	@test -n "$(NB)" || { echo "usage: make grade NB=exercises/00_start_here.ipynb"; exit 2; }
	$(PYTHON) -m course_lib.grading "$(NB)"
