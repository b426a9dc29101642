"""Done when (issue 7), as the author lives it, through the console's REST API.

An author writes a Python check, points a guardrail at it with a `filesystem` reference in
development, watches it run under `strict` limits with a clear `error` when it overreaches,
then packages it as a pack (KINDGI_CHECK_PACKS) for production, where the filesystem
reference is refused and the packaged check runs under the same limits. docs/packs.md
tells the same story.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from tests.conftest import make_guardrail, make_trace

#: The author's check: a naive search for a repeated phrase, which keeps every substring of
#: the answer. Fine on a short answer; on a long one it wants far more memory than allowed.
CHECK = """
from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED, failed


def no_repeated_phrase(config, trace):
    output = trace.get("output") or ""
    seen = set()
    for start in range(len(output)):
        for end in range(start + config["minLength"], len(output) + 1):
            phrase = output[start:end]
            if phrase in seen:
                return failed(f"the answer repeats {phrase!r}")
            seen.add(phrase)
    return PASSED


CHECKS = [
    define_check(
        "no-repeated-phrase",
        "zero-llm",
        no_repeated_phrase,
        config_schema={
            "type": "object",
            "properties": {"minLength": {"type": "integer", "minimum": 1}},
            "required": ["minLength"],
        },
        description="The answer never repeats a phrase of minLength characters or more.",
    )
]
"""
PACK = "kindgi_walkthrough_checks"
URL = "/api/v1/guardrails"


@pytest.fixture
def working_copy(tmp_path: Path) -> str:
    """Where the author writes the check while trying it."""
    path = tmp_path / "work" / "no_repeated_phrase.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(CHECK))
    return str(path)


@pytest.fixture
def installed_pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The same check packaged: an importable module with a version, installed on the path."""
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / f"{PACK}.py").write_text('__version__ = "1.0.0"\n' + textwrap.dedent(CHECK))
    monkeypatch.syspath_prepend(str(site))
    return PACK


def guardrail(artifact: dict[str, Any]) -> dict[str, Any]:
    return make_guardrail(
        "no-repeats",
        check="no-repeated-phrase",
        config={"minLength": 12},
        sandbox="strict",
        limits={"memMB": 64, "cpuMs": 2000},
        network={"kind": "none"},
        action={"on-violation": "log-only"},
        codeArtifactRef=artifact,
    )


SHORT = make_trace(output="Orders can be refunded within 30 days.")
LONG = make_trace("run-0002", output="".join(f"{n:05d} " for n in range(1000)))


def verdict(api: Any, key: str, trace: dict[str, Any]) -> tuple[str, str | None]:
    body = api(key).post("/api/v1/evaluate?store=false", data=trace, format="json").json()
    [result] = body["results"]
    return result["status"], result["reason"]


def test_an_author_tries_a_check_then_ships_it_as_a_pack(
    api: Any, alice: Any, acme_key: str, working_copy: str, installed_pack: str, deployment_pool: Any
) -> None:
    # Development: the guardrail points at the working copy.
    filesystem = {"kind": "filesystem", "modulePath": working_copy}
    folder = str(Path(working_copy).parent)  # the operator lists the author's folder
    with override_settings(KINDGI_PRODUCTION=False, KINDGI_PACK_DIRS=[folder]):
        created = api(alice).post(URL, data=guardrail(filesystem), format="json")
        assert created.status_code == 201, created.json()
        assert verdict(api, acme_key, SHORT) == ("pass", None)
        assert verdict(api, acme_key, LONG) == ("error", "memory limit 64 MB exceeded")

    # Production: the packaged check; the filesystem reference is refused.
    with override_settings(KINDGI_PRODUCTION=True, KINDGI_CHECK_PACKS=[installed_pack]):
        refused = api(alice).put(f"{URL}/no-repeats", data=guardrail(filesystem), format="json")
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["path"] == "/codeArtifactRef/kind"
        oci = {
            "kind": "oci",
            "imageRef": "registry.example/acme/checks",
            "modulePath": PACK,
            "artifactVersion": "1.0.0",
        }
        shipped = api(alice).put(f"{URL}/no-repeats", data=guardrail(oci), format="json")
        assert shipped.status_code == 200, shipped.json()
        [check] = [c for c in api(alice).get("/api/v1/checks").json() if c["id"] == "no-repeated-phrase"]
        assert (check["pack"], check["packVersion"], check["builtin"]) == (PACK, "1.0.0", False)
        assert verdict(api, acme_key, SHORT) == ("pass", None)
        assert verdict(api, acme_key, LONG) == ("error", "memory limit 64 MB exceeded")
