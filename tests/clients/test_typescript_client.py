"""The TypeScript client (clients/typescript): its types are the console's API, and it works
against a live console over real sockets.

Both tests install the package from its lock file (`npm ci`) and run its own npm scripts:
`generate` for the types, `build` for the package as published, `test` (tsc, then node's test
runner) for the behaviour, which reads the live console's address and key from the environment,
and the address of the suite's OpenAI-protocol server (tests.fakeproviders) that serves the
Vercel AI SDK adapter's model.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import RUNTIME_SCOPES, make_guardrail
from tests.fakeproviders import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"


def npm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`npm args` in the package, its output kept for the failure message."""
    assert shutil.which("npm"), "npm is needed (Node 20): .ci/run installs it"
    return subprocess.run(
        ["npm", *args], cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def succeeded(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode == 0


@pytest.fixture(scope="module")
def installed() -> None:
    """The package's dependencies from package-lock.json, as CI installs them."""
    done = npm("ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
    assert succeeded(done), done.stdout + done.stderr


def test_the_committed_types_are_the_consoles_api(installed: None, tmp_path: Path) -> None:
    exported = tmp_path / "openapi.json"
    call_command("spectacular", format="openapi-json", file=str(exported))
    committed = PACKAGE / "openapi.json"
    assert exported.read_text() == committed.read_text(), (
        "clients/typescript/openapi.json is not the console's API: run `npm run export-schema` "
        "and `npm run generate` in clients/typescript"
    )
    generated = tmp_path / "schema.d.ts"
    done = npm("run", "--silent", "generate", "--", str(exported), str(generated))
    assert succeeded(done), done.stdout + done.stderr
    assert generated.read_text() == (PACKAGE / "src" / "schema.d.ts").read_text(), (
        "clients/typescript/src/schema.d.ts is not what openapi.json generates: run `npm run generate`"
    )
    done = npm("run", "--silent", "typecheck")
    assert succeeded(done), done.stdout + done.stderr


def test_the_package_builds_as_published(installed: None) -> None:
    """`npm run build`: dist/ has each entry point package.json exports, with its types."""
    done = npm("run", "--silent", "build")
    assert succeeded(done), done.stdout + done.stderr
    for entry in ("index", "ai-sdk"):
        for suffix in (".js", ".d.ts"):
            assert (PACKAGE / "dist" / f"{entry}{suffix}").is_file(), f"dist/{entry}{suffix} was not built"


@pytest.mark.django_db(transaction=True)
def test_the_client_passes_halts_and_fails_as_told_against_a_live_console(installed: None, live_server: Any) -> None:
    acme = Tenant.objects.create(slug="acme", name="Acme")
    author = Author(user=None, label="fixture")
    save_guardrail(make_guardrail(), author, owner=acme)
    cite = make_guardrail("cite", name="Answers cite a source", check="must-cite", config={"min": 1})
    save_guardrail(cite, author, owner=acme)
    # At input only, for the agent the AI SDK tests send to be halted there.
    talk = make_guardrail(
        "no-refund-talk", check="forbidden-substring", config={"values": ["refund"]}, scope={"agents": ["front-desk"]}
    )
    guardrail = save_guardrail(talk, author, owner=acme)
    guardrail.stages = ["input"]
    guardrail.save(update_fields=["stages"])
    key = ApiKey.issue(scopes=RUNTIME_SCOPES, tenant=acme, name="acme runtime")[1]

    with FakeProvider() as model:
        env = {
            **os.environ,
            "KINDGI_BASE_URL": live_server.url,
            "KINDGI_API_KEY": key,
            "KINDGI_MODEL_BASE_URL": model.openai_base_url,
        }
        done = npm("test", env=env)

    assert succeeded(done), done.stdout[-20000:] + done.stderr[-5000:]
