# The two commands the README starts with:
#   make up     run gemmwatch here (SQLite, server-less broker, a real Celery worker per GPU)
#   make test   run the test suite (starts Redis and PostgreSQL where they are not running)
# Both create the virtualenv and install the project first.

VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
PYTEST_ARGS ?=
# pytest-xdist workers: the suite waits on processes (Celery workers, servers, a browser) more
# than it computes, so more workers than cores keeps the cores busy (docs/BENCHMARKS.md).
TEST_WORKERS ?= 6

.PHONY: install up test services lint

# --no-compile: bytecode is made on first import, for the modules used only (a third faster),
# where Python may write it (see `test`).
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch's CPU build first (a file on this machine's disk: `torch==2.13.0` takes it), so that the
	# `helion` extra that `.[test]` names finds torch in place instead of pulling a CUDA build of gigabytes.
	$(PY) -m pip install -q --no-compile 'torch==2.13.0'
	$(PY) -m pip install -q --no-compile -e '.[test]'
	# Bytecode for what the confined compile process imports: it runs with -B, and would compile torch's,
	# Helion's and Triton's modules from source at every start (11 s against 7 s a Helion kernel here).
	# torch's tests of Python 3.12 syntax are left out (they do not compile on 3.11, and nothing imports them).
	$(PY) -m compileall -q -j 0 -x 'torch/testing/_internal/py312' $$($(PY) -c 'import helion, torch, triton, sympy, os; 		print(" ".join(os.path.dirname(m.__file__) for m in (helion, torch, triton, sympy)))') > /dev/null
	# CUTLASS's headers (pyproject.toml's `cutlass` extra), without the wheel's Python dependencies,
	# which gemmwatch does not use (worker/compile/header_libraries.py).
	$(PY) -m pip install -q --no-compile --no-deps 'nvidia-cutlass>=4.2'
	touch $@

install: $(VENV)/.installed

up: install
	$(VENV)/bin/gemmwatch up --port $(PORT)

services:
	bash scripts/services.sh

# In parallel: no test's figures depend on the machine's load, since the CPU double's event times
# come from a seeded model (tests/fake_gpu.py).
# PYTHONDONTWRITEBYTECODE unset: the suite starts a few hundred Python processes (workers, their
# GPU processes, servers, the CLI), and where the environment forbids bytecode each one compiled
# every module it imports from source again, about 0.6 s of CPU per process (docs/BENCHMARKS.md).
# ruff over the product's code, mypy over core/ (pyproject.toml: [tool.ruff], [tool.mypy]).
lint: install
	$(VENV)/bin/ruff check --no-cache api core worker dashboard cli migrations scripts kernels
	$(VENV)/bin/mypy --no-incremental --cache-dir /dev/null

test: install services lint
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --instafail $(PYTEST_ARGS)
