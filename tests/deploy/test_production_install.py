"""The production install (`make install-production`): the console's dependencies from the lock
file with their hashes checked, no dev tools, and a console that starts with a deployment's
settings. The lock is what pyproject.toml asks for (`make lock-check` in CI regenerates it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "production.txt"
#: The production environment's bound (measured: docs/benchmarks.md, "Production install").
MAX_MEGABYTES = 250
# The install (a minute of pip) is a module fixture: the module runs in one process
# (tests/conftest.py, SHARED_MODULES), so it is made once.
#: The guardrail engine's distribution: installed from this checkout, not from the lock.
LOCAL = "kindgi-guardrails"
DEV_ONLY = ("pytest", "playwright", "mypy", "schemathesis", "hypothesis", "ruff", "importlinter", "piptools")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, str]:
    """Every requirement of the lock, by normalized name: its version."""
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", LOCK.read_text(), re.M)
    return {normalized(name): version for name, version in pins}


def test_the_lock_pins_what_pyproject_pins_and_every_requirement_has_a_hash() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for requirement in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==(\S+)", requirement)
        assert match, f"pyproject.toml pins every dependency (==): {requirement}"
        if normalized(match.group(1)) != LOCAL:
            pins[normalized(match.group(1))] = match.group(2)
    lock = locked()
    assert {name: lock.get(name) for name in pins} == pins, "run make lock"
    # Hashes under every requirement, and nothing of the dev extras.
    blocks = [block for block in re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text()) if not block.startswith("#")]
    assert len(blocks) == len(lock) and all("--hash=sha256:" in block for block in blocks)
    # What the lock holds comes from the console's dependencies alone (requirements/production.in):
    # a dev tool is in it only when a dependency needs it too (cryptography, for single sign-on).
    assert LOCAL not in lock


@pytest.fixture(scope="module")
def production(tmp_path_factory: Any) -> Path:
    """A fresh virtual environment made by `make install-production`, as the README says."""
    venv = tmp_path_factory.mktemp("production") / "venv"
    python = getattr(sys, "_base_executable", sys.executable)
    done = subprocess.run(
        ["make", "--no-print-directory", "install-production", f"PROD_VENV={venv}", f"PYTHON={python}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv


def test_the_production_install_is_the_lock_and_no_dev_tool(production: Path) -> None:
    listed = subprocess.run(
        [production / "bin" / "python", "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {normalized(item["name"]): item["version"] for item in json.loads(listed.stdout)}
    lock = locked()
    assert {name: installed.get(name) for name in lock} == lock
    extra = set(installed) - set(lock) - {"kindgi-console", LOCAL, "pip", "setuptools", "wheel"}
    assert not extra, f"installed beside the lock: {sorted(extra)}"
    for module in DEV_ONLY:
        absent = subprocess.run([production / "bin" / "python", "-c", f"import {module}"], capture_output=True)
        assert absent.returncode != 0, f"{module} is importable in the production install"
    size = sum(path.stat().st_size for path in production.rglob("*") if path.is_file() and not path.is_symlink())
    print(f"production install: {size / 2**20:.0f} MB, {len(installed)} packages")
    assert size < MAX_MEGABYTES * 2**20


def test_the_production_install_passes_the_deployment_checks(production: Path, tmp_path: Path) -> None:
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "KINDGI_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "production-install-test-" + "k" * 40,
        "DJANGO_ALLOWED_HOSTS": "console.example.com",
        "DJANGO_CSRF_TRUSTED_ORIGINS": "https://console.example.com",
    }
    checked = subprocess.run(
        [production / "bin" / "python", "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for command in (["gunicorn", "--version"], ["celery", "--version"]):
        ran = subprocess.run([production / "bin" / command[0], *command[1:]], capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
