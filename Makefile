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

.PHONY: run test install lint bundles proofs lock lock-check install-production

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
	$(MAKE) lock-check

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

# The production install: the console's dependencies from a lock file with hashes, no dev
# tools (requirements/production.txt, made by pip-compile from requirements/production.in:
# pyproject.toml's dependencies but the guardrail engine, which is in this checkout), then
# the engine and the console without dependencies, as paths to this checkout (the code that
# runs is the checkout's: an upgrade is a `git pull` and `make install-production`).
PROD_VENV ?= .venv
LOCK := requirements/production.txt
LOCK_IN := requirements/production.in
PIP_COMPILE = $(VENV)/bin/pip-compile --quiet --generate-hashes --strip-extras --allow-unsafe \
  --no-emit-index-url --no-emit-find-links --no-emit-trusted-host

install-production:
	test -x $(PROD_VENV)/bin/python || $(PYTHON) -m venv $(PROD_VENV)
	$(PROD_VENV)/bin/python -m pip install --quiet --require-hashes --no-deps -r $(LOCK)
	$(PROD_VENV)/bin/python -m pip install --quiet --no-deps -e ./packages/guardrails
	$(PROD_VENV)/bin/python -m pip install --quiet --no-deps -e .

# The lock's input: the console's dependencies, the engine's own distribution left out.
define LOCK_INPUT
import tomllib
dependencies = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print("# made by make lock from pyproject.toml's dependencies (the engine installs from packages/guardrails)")
print("\n".join(d for d in dependencies if not d.startswith("kindgi-guardrails")))
endef
export LOCK_INPUT

# After changing [project] dependencies in pyproject.toml: the lock keeps every pin it has
# and pins what is new (`make lock UPGRADE=1` moves every pin to the newest allowed).
lock: install
	$(PY) -c "$$LOCK_INPUT" > $(LOCK_IN)
	$(PIP_COMPILE) $(if $(UPGRADE),--upgrade) --output-file $(LOCK) $(LOCK_IN)

# CI: the lock is what pip-compile makes of pyproject.toml today, keeping its pins.
lock-check: install
	@tmp="$$(mktemp -d)"; cp $(LOCK) "$$tmp/production.txt"; \
	  $(PY) -c "$$LOCK_INPUT" > "$$tmp/production.in"; \
	  if ! diff -u $(LOCK_IN) "$$tmp/production.in"; then \
	    echo "$(LOCK_IN) is not what pyproject.toml asks for: run make lock"; rm -rf "$$tmp"; exit 1; fi; \
	  $(PIP_COMPILE) --output-file "$$tmp/production.txt" $(LOCK_IN); \
	  if ! diff -u -I '^#' $(LOCK) "$$tmp/production.txt"; then \
	    echo "$(LOCK) is not what pyproject.toml asks for: run make lock"; rm -rf "$$tmp"; exit 1; fi; \
	  rm -rf "$$tmp"

