"""The environment variables the engine's CI command reads, and the parser of every variable.

The CI command (guardrails/engine/cli/) shares these variables with the console (packs, the
registration policy, limits, the sandbox, the judge): they are declared here once, and the
console's declaration (kindgi_console/env.py) takes them from here beside its own, so that
both read them with the same parser and defaults. A bad value raises `BadValue`, whose
message names the variable (the settings turn it into ImproperlyConfigured, the CLI into a
usage error). No Django import.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Kind = Literal["text", "bool", "int", "list"]
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
MIB = 1024 * 1024


class BadValue(ValueError):
    """A variable's value cannot be read; the message names the variable."""


@dataclass(frozen=True)
class Variable:
    """One environment variable. `shown` is the default as docs/settings.md says it, for a
    default computed from other settings or one that reads better in words."""

    name: str
    kind: Kind
    default: str | bool | int | tuple[str, ...]
    meaning: str
    minimum: int | None = None
    shown: str | None = None


class Declaration:
    """A set of declared variables and their typed readers: a variable read that is not
    declared, or read as another kind, is a programming error (KeyError, TypeError)."""

    def __init__(self, variables: Iterable[Variable]) -> None:
        self.variables = tuple(variables)
        self.by_name = {variable.name: variable for variable in self.variables}

    def variable(self, name: str, kind: Kind | None = None) -> Variable:
        variable = self.by_name.get(name)
        if variable is None:
            raise KeyError(f"{name} is not declared")
        if kind is not None and variable.kind != kind:
            raise TypeError(f"{name} is declared as {variable.kind}, read as {kind}")
        return variable

    def text(self, name: str, default: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
        """The variable's text, or its default (`default` for one computed by the caller)."""
        return read_text(self.variable(name, "text"), default, environ)

    def flag(self, name: str, default: bool | None = None, environ: Mapping[str, str] = os.environ) -> bool:
        """A boolean: 1/true/yes/on or 0/false/no/off (any case)."""
        return read_flag(self.variable(name, "bool"), default, environ)

    def whole(self, name: str, default: int | None = None, environ: Mapping[str, str] = os.environ) -> int:
        """An integer, at least the declared minimum."""
        return read_whole(self.variable(name, "int"), default, environ)

    def items(self, name: str, environ: Mapping[str, str] = os.environ) -> list[str]:
        """A comma-separated list; blank items are dropped."""
        return read_items(self.variable(name, "list"), environ)


V = Variable
#: What the CI command reads (the console reads them too).
ENGINE = Declaration(
    (
        V("DJANGO_DEBUG", "bool", True, "`false` in production: secure cookies, HSTS, the redirect to HTTPS"),
        V("KINDGI_MAX_TRACE_BYTES", "int", MIB, "largest trace", minimum=1024, shown="1 MiB"),
        V("KINDGI_MAX_DEPTH", "int", 64, "deepest JSON nesting of a trace", minimum=2),
        V(
            "KINDGI_UPLOAD_MAX_BLANK_LINES",
            "int",
            10_000,
            "more blank lines in a row fail an upload with the reason",
            minimum=1,
        ),
        V(
            "KINDGI_PRODUCTION",
            "bool",
            False,
            "refuse `filesystem` code artifacts at registration",
            shown="`true` when debug is off",
        ),
        V("KINDGI_CHECK_PACKS", "list", (), "Python modules of check packs, loaded at start-up"),
        V("KINDGI_SANDBOX_MEM_MB", "int", 256, "sandbox memory for a pack check that declares none", minimum=16),
        V("KINDGI_SANDBOX_CPU_MS", "int", 1000, "sandbox CPU time for a pack check that declares none", minimum=10),
        V("KINDGI_SANDBOX_POOL_SIZE", "int", 2, "warm sandbox workers per posture", minimum=1),
        V("KINDGI_CAPABILITIES", "list", (), "capabilities a check's `needsSpec` may ask for"),
        V("KINDGI_BINDINGS", "list", (), "bindings a check's `needsSpec` may ask for"),
        V("KINDGI_SECRETS", "list", (), "names of variables holding secrets a check's `needsSpec` may ask for"),
        V(
            "KINDGI_PACK_ENV",
            "list",
            (),
            "the plain variables a check's `needsSpec.env` may name (never the console's)",
        ),
        V("KINDGI_JUDGE_CALL_LIMIT_S", "int", 60, "seconds one judge call may take, retries included", minimum=1),
        V("KINDGI_API_KEY", "text", "", "the key `guardrail_ci --console` reads the console's export with"),
    )
)


def read_text(variable: Variable, default: str | None, environ: Mapping[str, str]) -> str:
    return environ.get(variable.name, str(variable.default) if default is None else default)


def read_flag(variable: Variable, default: bool | None, environ: Mapping[str, str]) -> bool:
    raw = environ.get(variable.name)
    if raw is None:
        return bool(variable.default) if default is None else default
    value = raw.strip().lower()
    if value in _TRUE | _FALSE:
        return value in _TRUE
    raise BadValue(f"{variable.name}={raw!r} is not a boolean (use true or false)")


def read_whole(variable: Variable, default: int | None, environ: Mapping[str, str]) -> int:
    raw = environ.get(variable.name)
    if raw is None:
        if default is not None:
            return default
        assert isinstance(variable.default, int), variable.name
        return variable.default
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadValue(f"{variable.name}={raw!r} is not an integer") from None
    if variable.minimum is not None and value < variable.minimum:
        raise BadValue(f"{variable.name}={value} must be at least {variable.minimum}")
    return value


def read_items(variable: Variable, environ: Mapping[str, str]) -> list[str]:
    raw = environ.get(variable.name)
    if raw is None:
        return list(variable.default) if isinstance(variable.default, tuple) else []
    return [item.strip() for item in raw.split(",") if item.strip()]
