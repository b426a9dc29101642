"""The environment is declared once (guardrails/engine/environment.py): settings read through it,
the README's table is rendered from it, and every variable the code reads is in it."""

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
from guardrails.engine.environment import DECLARED, BadValue, settings_table

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
    r'\benv(?:str|bool|int|list)\(\s*"([A-Z][A-Z0-9_]+)"',  # settings written before the declaration
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


def readme_table() -> str:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- settings-table:start -->\n(.*?)<!-- settings-table:end -->", readme, re.S)
    assert match, "README.md has lost its settings-table markers"
    return match.group(1)


def test_the_readme_table_is_the_declaration() -> None:
    assert readme_table() == settings_table(), (
        "README.md's settings table differs from guardrails/engine/environment.py: "
        "paste the output of `.venv/bin/python manage.py settings_table` between its markers"
    )


def test_it_declares_every_variable_the_code_reads() -> None:
    undeclared = names_read_by_the_code() - set(DECLARED)
    assert not undeclared, f"declare these in guardrails/engine/environment.py: {sorted(undeclared)}"


def test_every_declared_variable_is_read_somewhere() -> None:
    unread = set(DECLARED) - names_read_by_the_code()
    assert not unread, f"declared but read nowhere: {sorted(unread)}"


def test_the_table_has_a_row_per_variable_including_the_ones_once_missing() -> None:
    table = settings_table()
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
    assert table.count("\n") == len(DECLARED) + 2


def test_the_declaration_imports_no_django() -> None:
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
        {"int": environment.whole, "bool": environment.flag}[DECLARED[name].kind](name, environ={name: raw})


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


def test_the_settings_table_command_prints_the_declaration() -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("settings_table", stdout=out)
    assert out.getvalue() == settings_table()


def test_the_readers_of_before_the_declaration_behave_as_they_did(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from kindgi_console.env import envbool, envint, envlist, envstr

    monkeypatch.setenv("KINDGI_SOMETHING_NEW", "3")
    assert envint("KINDGI_SOMETHING_NEW", 5, minimum=1) == 3
    assert envint("KINDGI_NOT_SET_AT_ALL", 5, minimum=1) == 5
    assert envstr("KINDGI_SOMETHING_NEW", "x") == "3"
    assert envlist("KINDGI_NOT_SET_AT_ALL", ["a"]) == ["a"]
    assert envbool("KINDGI_NOT_SET_AT_ALL", True) is True
    with pytest.raises(ImproperlyConfigured, match="KINDGI_SOMETHING_NEW=3 must be at least 4"):
        envint("KINDGI_SOMETHING_NEW", 5, minimum=4)


def test_every_declared_default_is_a_value_the_variable_may_take() -> None:
    for variable in DECLARED.values():
        if variable.kind == "int":
            assert isinstance(variable.default, int) and not isinstance(variable.default, bool), variable.name
            assert variable.minimum is None or variable.default >= variable.minimum, variable.name
        expected = {"text": str, "bool": bool, "list": tuple}.get(variable.kind)
        assert expected is None or isinstance(variable.default, expected), variable.name
