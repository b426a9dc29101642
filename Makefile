# Two commands do all the set-up on a fresh machine:
#   make run   - virtual environment, install, migrate, demo data, serve on http://127.0.0.1:8000
#   make test  - virtual environment, install, run the test suite
# The interpreter the virtual environment is made from: PYTHON when given; else the
# distribution's CPython 3.11 where it can make virtual environments (Debian builds it with
# profile-guided and link-time optimisation and links it statically: guardrail_ci runs 10 to
# 17% faster on it, a pure-Python loop 35%, than on a plain source build such as pyenv's
# default, which is neither); else python3. An existing .venv keeps its interpreter.
# (`=`: asked only when a recipe makes the environment)
ifeq ($(origin PYTHON),undefined)
PYTHON = $(firstword $(shell /usr/bin/python3.11 -c 'import ensurepip, venv' >/dev/null 2>&1 \
  && echo /usr/bin/python3.11) python3)
endif
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
# Test processes (pytest-xdist): each has its own test database, var/ folder and Celery queue.
TEST_WORKERS ?= 2

.PHONY: run test install lint bundles proofs

$(VENV)/.installed: pyproject.toml packages/guardrails/pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./packages/guardrails
	$(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip install --quiet -e ./clients/python
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) manage.py runconsole --check-address $(HOST):$(PORT)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo
	$(PY) manage.py runconsole $(HOST):$(PORT)

test: install
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) manage.py makemigrations --check --dry-run
	$(MAKE) bundles

# The committed browser bundles are what their sources build: rebuild them from the locked
# packages and fail when static/kindgi/dist changes (a file edited, added or left behind).
bundles:
	cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build
	git diff --exit-code --stat -- static/kindgi/dist
	@untracked="$$(git ls-files --others --exclude-standard -- static/kindgi/dist)"; \
	  if [ -n "$$untracked" ]; then echo "not committed in static/kindgi/dist: $$untracked"; exit 1; fi

# The console's own schemas compiled to Python ahead of time (guardrails/engine/schema_proofs.py):
# run after changing a schema, a built-in check's config schema or guardrails/engine/schema_code.py.
proofs: install
	$(PY) -c 'from guardrails.engine.proofs import write_proofs; write_proofs()'
