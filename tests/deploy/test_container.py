"""deploy/Dockerfile and deploy/compose.yaml run what README.md's walkthrough runs: the same
processes and flags, the production install, a user without privileges, health checks on
/healthz and /readyz, and volumes for the database and the var folder.

Containers cannot run on the machine the suite runs on (its sandbox refuses the runtime's
setrlimit), so the image is not built here; the production install it makes is tested in
test_production_install.py, and the processes in test_deploy_walkthrough.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.test_deploy_walkthrough import commands, fenced_block

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text()
CONSOLE_SERVICES = ["migrate", "web", "worker-runtime", "worker-runs", "worker-periodic", "worker-deliveries", "beat"]


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", re.sub(r"^\s*#.*\n", "", DOCKERFILE, flags=re.M))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def walkthrough_processes() -> list[list[str]]:
    return [
        [word.removeprefix(".venv/bin/") for word in argv]
        for argv in commands(fenced_block("walkthrough:setup"))
        if argv[0].endswith(("gunicorn", "celery"))
    ]


def without_bind(argv: list[str]) -> list[str]:
    """The command without its address: the container listens on all of its interfaces."""
    words = list(argv)
    if "--bind" in words:
        at = words.index("--bind")
        del words[at : at + 2]
    return words


def service(name: str) -> dict[str, Any]:
    found: dict[str, Any] = COMPOSE["services"][name]
    return found


def test_the_compose_services_run_the_walkthroughs_processes() -> None:
    ran = [without_bind(service(name)["command"]) for name in CONSOLE_SERVICES if name != "migrate"]
    assert ran == [without_bind(argv) for argv in walkthrough_processes()]
    assert service("migrate")["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert service("web")["command"][service("web")["command"].index("--bind") + 1] == "0.0.0.0:8000"


def test_the_image_is_the_production_install_run_by_a_user_without_privileges() -> None:
    steps = instructions()
    users = [value for kind, value in steps if kind == "USER"]
    assert users and users[-1] not in ("root", "0")
    runs = [value for kind, value in steps if kind == "RUN"]
    assert any("make install-production" in run for run in runs)
    assert not any(re.search(r"make (install|run|test)\b(?!-)", run) for run in runs), "the image has dev tools"
    # The install runs as that user, after the user is made: nothing of the console is root's.
    kinds = [kind for kind, _ in steps]
    install = next(i for i, (kind, value) in enumerate(steps) if kind == "RUN" and "install-production" in value)
    assert kinds.index("USER") < install
    command = json.loads(next(value for kind, value in steps if kind == "CMD"))
    assert command == service("web")["command"]
    assert any(kind == "HEALTHCHECK" and "/healthz" in value for kind, value in steps)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "var"} <= set(ignored), "the build context would carry the checkout's state"


def test_every_console_service_shares_the_environment_the_var_folder_and_waits_for_migrate() -> None:
    environments = [service(name)["environment"] for name in CONSOLE_SERVICES]
    shared = {key: value for key, value in environments[0].items()}
    for name, environment in zip(CONSOLE_SERVICES, environments, strict=True):
        assert {key: environment[key] for key in shared} == shared, name
        assert service(name)["volumes"] == ["var:/var/lib/kindgi"], name
        if name != "migrate":
            assert service(name)["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert service("migrate")["depends_on"]["db"] == {"condition": "service_healthy"}
    for required in ("DATABASE_URL", "CELERY_BROKER_URL", "KINDGI_CACHE_URL", "KINDGI_VAR_DIR", "DJANGO_SECRET_KEY"):
        assert required in shared
    assert shared["DJANGO_DEBUG"] == "false" and shared["KINDGI_CACHE_URL"] != shared["CELERY_BROKER_URL"]
    assert set(COMPOSE["volumes"]) == {"db", "var"}
    assert service("db")["volumes"] == ["db:/var/lib/postgresql/data"]


def test_the_health_checks_ask_the_consoles_own_endpoints() -> None:
    assert "/readyz" in " ".join(service("web")["healthcheck"]["test"])
    for name in ("worker-runtime", "worker-runs", "worker-periodic", "worker-deliveries"):
        check = " ".join(service(name)["healthcheck"]["test"])
        queue = service(name)["environment"]["QUEUE"]
        assert "inspect ping" in check and f"-n {queue}@%h" in " ".join(service(name)["command"]), name
    assert service("db")["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
