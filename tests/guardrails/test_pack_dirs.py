"""Filesystem code artifacts load only from the folders the operator lists (KINDGI_PACK_DIRS).

With DEBUG on (the `make run` default), `POST guardrails/validate` with a `filesystem`
codeArtifactRef imported and ran any Python file a request named, for a read-only key or
a reviewer, and its error told whether a path exists.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from tests.conftest import make_guardrail

URL = "/api/v1/guardrails/validate"
CHECK = """
    from pathlib import Path

    from guardrails.engine.registry import define_check
    from guardrails.engine.types import PASSED

    Path({marker!r}).write_text("ran")
    CHECKS = [define_check("words", "zero-llm", lambda config, trace: PASSED,
                           config_schema={{"type": "object"}}, description="d")]
"""


def artifact_guardrail(path: str) -> dict[str, Any]:
    return make_guardrail(
        "fs",
        check="words",
        config={},
        action={"on-violation": "log-only"},
        codeArtifactRef={"kind": "filesystem", "modulePath": path},
    )


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    listed, elsewhere = tmp_path / "listed", tmp_path / "elsewhere"
    listed.mkdir()
    elsewhere.mkdir()
    return listed, elsewhere


def write_check(folder: Path, marker: Path) -> str:
    path = folder / "words.py"
    path.write_text(textwrap.dedent(CHECK.format(marker=str(marker))))
    return str(path)


@pytest.mark.parametrize("listed_dirs", [[], ["listed"]])
def test_a_request_cannot_make_the_server_run_a_file_outside_the_listed_folders(
    api: Any, bob: Any, folders: tuple[Path, Path], tmp_path: Path, listed_dirs: list[str]
) -> None:
    _, elsewhere = folders
    marker = tmp_path / "ran.txt"
    path = write_check(elsewhere, marker)
    dirs = [str(tmp_path / name) for name in listed_dirs]
    with override_settings(DEBUG=True, KINDGI_PRODUCTION=False, KINDGI_PACK_DIRS=dirs):
        body = api(bob).post(URL, data=artifact_guardrail(path), format="json").json()
    assert not body["valid"] and not marker.exists()
    assert body["errors"][0]["path"] == "/codeArtifactRef/modulePath"
    assert "KINDGI_PACK_DIRS" in body["errors"][0]["message"]


def test_errors_do_not_tell_what_exists_outside_the_folders(
    api: Any, bob: Any, folders: tuple[Path, Path], tmp_path: Path
) -> None:
    listed, elsewhere = folders
    existing = write_check(elsewhere, tmp_path / "ran.txt")
    answers = []
    with override_settings(DEBUG=True, KINDGI_PRODUCTION=False, KINDGI_PACK_DIRS=[str(listed)]):
        for path in (
            existing,
            str(elsewhere / "missing.py"),
            "/etc/passwd",
            str(listed / ".." / "elsewhere" / "words.py"),
        ):
            answers.append(api(bob).post(URL, data=artifact_guardrail(path), format="json").json())
    assert all(answer == answers[0] for answer in answers)


def test_a_file_in_a_listed_folder_loads(api: Any, bob: Any, folders: tuple[Path, Path], tmp_path: Path) -> None:
    listed, _ = folders
    marker = tmp_path / "ran.txt"
    path = write_check(listed, marker)
    with override_settings(KINDGI_PRODUCTION=False, KINDGI_PACK_DIRS=[str(listed)]):
        body = api(bob).post(URL, data=artifact_guardrail(path), format="json").json()
    assert body["valid"], body
    assert marker.exists()
