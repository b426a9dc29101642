"""Security qualities: the Content-Security-Policy on every page, a clean `check --deploy`."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    "/",
    "/guardrails/",
    "/guardrails/new/",
    "/guardrails/import/",
    "/guardrails/no-refunds/",
    "/guardrails/no-refunds/edit/",
    "/guardrails/no-refunds/diff/?from=1&to=1",
]


@pytest.mark.parametrize("url", PAGES)
def test_every_page_forbids_inline_script(client: Any, alice: Any, acme_guardrail: Any, url: str) -> None:
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    directives = {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}
    assert directives["script-src"] == ["'self'"]
    # A nonce, on the editor pages only, admits the <style> elements the JSON editor injects.
    assert directives["style-src"][0] == "'self'"
    assert all(source.startswith("'nonce-") for source in directives["style-src"][1:])
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    body = response.content.decode()
    # No inline script: every <script> either loads a file or holds JSON data (json_script).
    for chunk in body.split("<script")[1:]:
        tag = chunk.split(">", 1)[0]
        assert "src=" in tag or 'type="application/json"' in tag, tag
    assert " style=" not in body and "<style" not in body


def test_the_editor_hands_its_style_nonce_to_the_json_view(client: Any, alice: Any, acme_guardrail: Any) -> None:
    client.force_login(alice)
    for url in ("/guardrails/new/", "/guardrails/no-refunds/edit/"):
        response = client.get(url)
        style_src = response["Content-Security-Policy"].split("style-src ", 1)[1].split(";")[0].split()
        nonces = [source[len("'nonce-") : -1] for source in style_src if source.startswith("'nonce-")]
        assert len(nonces) == 1 and f'data-csp-nonce="{nonces[0]}"' in response.content.decode(), style_src
    # Each response has its own nonce.
    assert client.get("/guardrails/new/")["Content-Security-Policy"] != response["Content-Security-Policy"]


def test_the_sign_in_page_has_the_policy_too(client: Any, db: Any) -> None:
    assert "script-src 'self'" in client.get("/login/")["Content-Security-Policy"]


def test_check_deploy_is_clean_with_production_settings() -> None:
    # The browser tests' DJANGO_ALLOW_ASYNC_UNSAFE is for them only, never a deployment's.
    inherited = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {
        **inherited,
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
        "DJANGO_ALLOWED_HOSTS": "console.example.org",
        "DJANGO_SETTINGS_MODULE": "kindgi_console.settings",
    }
    completed = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # Clean: nothing but the sandbox's INFO lines saying which postures this host enforces.
    output = completed.stdout + completed.stderr
    assert "WARNINGS:" not in output and "ERRORS:" not in output
    assert "(guardrails.I002) sandbox posture strict: bubblewrap" in output


def test_production_refuses_to_start_without_a_secret_key() -> None:
    env = {**os.environ, "DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": ""}
    completed = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode != 0 and "DJANGO_SECRET_KEY" in completed.stderr


# ---------------------------------------------------------------------------- caches


def stored_by_no_cache(response: Any) -> bool:
    return "no-store" in response.get("Cache-Control", "")


@pytest.mark.parametrize("url", [*PAGES, "/traces/", "/manage/api-keys/", "/manage/audit/"])
def test_a_signed_in_persons_pages_are_stored_by_no_cache(
    client: Any, dana: Any, acme_guardrail: Any, url: str
) -> None:
    client.force_login(dana)  # acme's admin: every page is theirs to see
    response = client.get(url)
    assert response.status_code == 200 and stored_by_no_cache(response), response.get("Cache-Control")


def test_api_answers_are_stored_by_no_cache_and_vary_on_the_cookie(api: Any, alice: Any, acme_key: str) -> None:
    by_session = api(alice).get("/api/v1/traces")
    by_key = api(acme_key).get("/api/v1/traces")
    refused = api().get("/api/v1/traces")
    for response in (by_session, by_key, refused):
        assert stored_by_no_cache(response), response.get("Cache-Control")
    assert by_session.status_code == 200 and "Cookie" in by_session["Vary"]
    assert "Cookie" in refused["Vary"]  # the answer would differ with a session's cookie


def test_the_sign_in_page_is_not_stored_either(client: Any, db: Any) -> None:
    assert stored_by_no_cache(client.get("/login/"))


# ---------------------------------------------------------------------------- NUL in a page's address

NUL_URLS = [
    "/guardrails/no-refunds%00/",
    "/guardrails/no-refunds%00/edit/",
    "/guardrails/no-refunds%00/diff/?from=1&to=1",
    "/guardrails/no-refunds/diff/?from=1%00&to=1",
    "/guardrails/export.json?guardrail=no%00refunds",
    "/guardrails/previews/new/?guardrail=no%00refunds",
    "/traces/picker.json?q=%00",
]


@pytest.mark.parametrize("url", NUL_URLS)
def test_a_nul_in_a_pages_address_is_a_400_naming_where(client: Any, alice: Any, acme_guardrail: Any, url: str) -> None:
    from django.db import connection

    assert connection.vendor == "postgresql" or os.environ.get("KINDGI_REQUIRE_SERVICES") != "1"
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 400, url
    name = url.partition("?")[2].partition("%00")[0].rpartition("&")[2].partition("=")[0]
    if url.partition("?")[0].endswith(".json"):
        assert response.json()["errors"] == [{"path": f"/{name}", "message": "the NUL character is not allowed"}]
    else:
        reason = f"The query parameter {name!r}" if "%00" in url.partition("?")[2] else "The address"
        assert f"{reason} holds the NUL character".replace("'", "&#x27;") in response.content.decode()


def test_a_nul_in_a_form_page_s_query_is_refused_before_any_view(client: Any, alice: Any) -> None:
    client.force_login(alice)
    assert client.get("/traces/?q=%00").status_code == 400
    assert client.get("/traces/?q=refund").status_code == 200


def test_api_answers_carry_the_pages_policy_built_once(api: Any, client: Any, acme_key: str, settings: Any) -> None:
    from tests.conftest import make_trace

    def verdict() -> Any:
        return api(acme_key).post("/api/v1/evaluate?store=false", data=make_trace("csp"), format="json")

    page_policy = client.get("/login/")["Content-Security-Policy"]
    assert verdict()["Content-Security-Policy"] == page_policy
    changed = {**settings.CONTENT_SECURITY_POLICY, "DIRECTIVES": {"default-src": ["'none'"]}}
    settings.CONTENT_SECURITY_POLICY = changed  # the header built once is built again
    assert verdict()["Content-Security-Policy"] == "default-src 'none'"


ACCEPTS = [(None, 200), ("*/*", 200), ("application/json", 200), ("text/html", 406)]


@pytest.mark.parametrize(("accept", "status"), ACCEPTS)
def test_the_api_answers_json_to_whoever_accepts_it_and_406_otherwise(
    api: Any, acme_key: str, accept: str | None, status: int
) -> None:
    from tests.conftest import make_trace

    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    answer = api(acme_key).post("/api/v1/evaluate?store=false", data=make_trace("a"), format="json", **headers)
    assert answer.status_code == status
    if status == 200:
        assert answer["Content-Type"] == "application/json"
