"""The environment is declared once (kindgi_console/env.py, with the CI command's variables in
guardrails/engine/environment.py): settings read through it, docs/settings.md is generated
from it, and every variable the code reads is in it."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guardrails.engine import environment
from guardrails.engine.environment import ENGINE, BadValue
from kindgi_console import settings_doc
from kindgi_console.env import DECLARATION

DECLARED = DECLARATION.by_name

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    "kindgi_console",
    "guardrails",
    "traces",
    "alerts",
    "tests/conftest.py",
    "tests/processes.py",
    "tests/browser/conftest.py",
]
READS = [
    r'\b(?:text|flag|whole|items)\(\s*"([A-Z][A-Z0-9_]+)"',  # settings, through the declaration
    r'environ\.get\(\s*"([A-Z][A-Z0-9_]+)"',  # the CLI and the test suite
    r'_env_[a-z_]+\(\s*"([A-Z][A-Z0-9_]+)"',  # the CLI's readers
    r'\benv="([A-Z][A-Z0-9_]+)"',  # dj-database-url
]


def _python_files() -> list[Path]:
    files: list[Path] = []
    for source in SOURCES:
        path = ROOT / source
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def names_read_by_the_code() -> set[str]:
    names: set[str] = set()
    for path in _python_files():
        text = path.read_text()
        for pattern in READS:
            names.update(re.findall(pattern, text))
    return names


def test_the_committed_settings_doc_is_the_declaration() -> None:
    assert settings_doc.PATH.read_text(encoding="utf-8") == settings_doc.render(), (
        "docs/settings.md differs from kindgi_console/env.py: run `.venv/bin/python manage.py settings_doc`"
    )


def test_the_engine_reads_only_what_it_declares() -> None:
    engine = sorted((ROOT / "guardrails" / "engine").rglob("*.py"))
    read = {name for path in engine for pattern in READS for name in re.findall(pattern, path.read_text())}
    assert read == set(ENGINE.by_name)


def test_the_console_takes_the_engines_variables_as_the_engine_declares_them() -> None:
    for variable in ENGINE.variables:
        assert DECLARED[variable.name] is variable


def test_it_declares_every_variable_the_code_reads() -> None:
    undeclared = names_read_by_the_code() - set(DECLARED)
    assert not undeclared, f"declare these in kindgi_console/env.py: {sorted(undeclared)}"


def test_every_declared_variable_is_read_somewhere() -> None:
    unread = set(DECLARED) - names_read_by_the_code()
    assert not unread, f"declared but read nowhere: {sorted(unread)}"


def test_the_doc_has_a_row_per_variable_including_the_ones_once_missing() -> None:
    table = settings_doc.render()
    for name in (
        "KINDGI_LOG_LEVEL",
        "KINDGI_VAR_DIR",
        "CELERY_TASK_TIME_LIMIT",
        "DATABASE_CONN_MAX_AGE",
        "KINDGI_CHUNK_MAX_ATTEMPTS",
        "KINDGI_BROKER_POLL_MS",
        "DJANGO_HSTS_SECONDS",
        "DJANGO_SECURE_SSL_REDIRECT",
        "KINDGI_EVALUATE_TIME_LIMIT_S",
        "KINDGI_PACK_ENV",
    ):
        assert f"| `{name}` |" in table
    assert table.count("\n| `") == len(DECLARED)


def test_the_engines_declaration_imports_no_django() -> None:
    tree = ast.parse(Path(environment.__file__).read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.startswith(("django", "kindgi_console"))]


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("EMAIL_PORT", "abc", "EMAIL_PORT='abc' is not an integer"),
        ("KINDGI_MAX_DEPTH", "1", "KINDGI_MAX_DEPTH=1 must be at least 2"),
        ("DJANGO_DEBUG", "maybe", "DJANGO_DEBUG='maybe' is not a boolean (use true or false)"),
    ],
)
def test_a_bad_value_names_the_variable(name: str, raw: str, message: str) -> None:
    with pytest.raises(BadValue, match=re.escape(message)):
        {"int": DECLARATION.whole, "bool": DECLARATION.flag}[DECLARED[name].kind](name, environ={name: raw})


def _settings_in_a_fresh_process(environ: dict[str, str], names: list[str]) -> subprocess.CompletedProcess[str]:
    script = (
        "import json, django; from django.conf import settings; django.setup(); "
        f"print(json.dumps({{n: getattr(settings, n) for n in {names!r} if hasattr(settings, n)}}, default=str))"
    )
    clean = {key: value for key, value in os.environ.items() if key not in DECLARED}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "DJANGO_SETTINGS_MODULE": "kindgi_console.settings", **environ},
    )


def test_settings_start_with_the_declared_defaults() -> None:
    same_name = sorted(
        name
        for name in DECLARED
        if name.startswith("KINDGI_")
        and DECLARED[name].shown is None
        and name not in ("KINDGI_API_KEY", "KINDGI_REQUIRE_SERVICES", "KINDGI_CHROMIUM")
    )
    result = _settings_in_a_fresh_process({}, same_name)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert len(values) >= 30  # the few read under another name are checked by their own tests
    for name in values:
        default = DECLARED[name].default
        assert values[name] == (list(default) if isinstance(default, tuple) else default), name


def test_a_bad_value_stops_start_up_naming_the_variable() -> None:
    result = _settings_in_a_fresh_process({"KINDGI_CHUNK_MAX_ATTEMPTS": "0"}, ["KINDGI_CHUNK_MAX_ATTEMPTS"])
    assert result.returncode != 0
    assert "ImproperlyConfigured: KINDGI_CHUNK_MAX_ATTEMPTS=0 must be at least 1" in result.stderr


def test_production_settings_come_from_their_variables() -> None:
    result = _settings_in_a_fresh_process(
        {
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": "x" * 50,
            "DJANGO_HSTS_SECONDS": "60",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
        },
        [
            "SECURE_HSTS_SECONDS",
            "SECURE_SSL_REDIRECT",
            "SECURE_PROXY_SSL_HEADER",
            "KINDGI_PRODUCTION",
            "KINDGI_ALERT_PRIVATE_URLS",
        ],
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "SECURE_HSTS_SECONDS": 60,
        "SECURE_SSL_REDIRECT": False,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "KINDGI_PRODUCTION": True,
        "KINDGI_ALERT_PRIVATE_URLS": False,
    }


def test_the_settings_doc_command_writes_the_doc_and_checks_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    from kindgi_console.management.commands import settings_doc as command

    path = tmp_path / "settings.md"
    monkeypatch.setattr(command, "PATH", path)
    with pytest.raises(CommandError, match="differs from the declaration"):
        call_command("settings_doc", "--check")
    out = StringIO()
    call_command("settings_doc", stdout=out)
    assert path.read_text(encoding="utf-8") == settings_doc.render()
    assert out.getvalue() == f"settings.md: {len(DECLARED)} settings\n"
    call_command("settings_doc", "--check")


def test_every_declared_default_is_a_value_the_variable_may_take() -> None:
    for variable in DECLARED.values():
        if variable.kind == "int":
            assert isinstance(variable.default, int) and not isinstance(variable.default, bool), variable.name
            assert variable.minimum is None or variable.default >= variable.minimum, variable.name
        expected = {"text": str, "bool": bool, "list": tuple}.get(variable.kind)
        assert expected is None or isinstance(variable.default, expected), variable.name
