"""`manage.py validate_guardrail`: guardrail files against contract 1.1.0 and the registry.

Exit statuses follow interfaces.md: 0 all valid, 1 any invalid, 2 a file unreadable or not
JSON (or an invalid check pack).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from guardrails.engine.cli.environment import load_deployment, write_pack_warnings
from guardrails.engine.cli.files import BadInput, load_json_file
from guardrails.engine.cli.writer import Writer
from guardrails.engine.evaluate import Engine
from guardrails.engine.registration import Registration, RegistrationPolicy, define_guardrail
from guardrails.engine.types import Issue


@dataclass
class LoadedGuardrail:
    """A guardrail document from a file, with where it came from and its registration."""

    source: str
    index: int | None
    document: object
    registration: Registration

    @property
    def id(self) -> str | None:
        doc = self.document
        return str(doc["id"]) if isinstance(doc, Mapping) and "id" in doc else None

    @property
    def label(self) -> str:
        where = self.source if self.index is None else f"{self.source}[{self.index}]"
        return f"{where} ({self.id})" if self.id is not None else where


def _documents(doc: object) -> list[tuple[int | None, object]]:
    if isinstance(doc, list):
        return list(enumerate(doc))
    return [(None, doc)]


def register_all(
    sources: Sequence[tuple[str, object]], engine: Engine, policy: RegistrationPolicy | None = None
) -> list[LoadedGuardrail]:
    """Define every guardrail of every source (documents parsed by orjson); a second
    guardrail with an id is an error."""
    loaded: list[LoadedGuardrail] = []
    seen: dict[str, str] = {}
    for source, doc in sources:
        for index, item in _documents(doc):
            registration = define_guardrail(
                item, registry=engine.registry, strategies=engine.strategies, policy=policy, json_values=True
            )
            entry = LoadedGuardrail(source, index, item, registration)
            if registration.valid and entry.id is not None:
                if entry.id in seen:
                    registration.errors.append(
                        Issue("/id", f"guardrail '{entry.id}' is also defined in {seen[entry.id]}")
                    )
                    registration.guardrail = None
                seen.setdefault(entry.id, entry.label)
            loaded.append(entry)
    return loaded


def validate_guardrail(args: argparse.Namespace, stdout: Writer, stderr: Writer) -> int:
    try:
        deployment = load_deployment(args.pack)
    except BadInput as exc:
        stderr.write(f"{exc}\n")
        return 2
    write_pack_warnings(deployment, stderr)
    sources: list[tuple[str, object]] = []
    unreadable: list[str] = []
    for path in args.paths:
        try:
            sources.append((path, load_json_file(path)))
        except BadInput as exc:
            unreadable.append(str(exc))
    loaded = register_all(sources, deployment.engine, deployment.policy)
    valid = not unreadable and all(entry.registration.valid for entry in loaded)
    if args.format == "json":
        stdout.write(_validation_json(loaded, unreadable, valid) + "\n")
    else:
        _validation_text(loaded, unreadable, stdout, stderr)
    if unreadable:
        return 2
    return 0 if valid else 1


def _validation_json(loaded: list[LoadedGuardrail], unreadable: list[str], valid: bool) -> str:
    report: dict[str, Any] = {
        "valid": valid,
        "guardrails": [
            {
                "file": entry.source,
                "index": entry.index,
                "id": entry.id,
                "valid": entry.registration.valid,
                "errors": [issue.as_dict() for issue in entry.registration.errors],
                "warnings": [issue.as_dict() for issue in entry.registration.warnings],
            }
            for entry in loaded
        ],
    }
    if unreadable:
        report["files"] = [{"message": message} for message in unreadable]
    return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()


def _validation_text(loaded: list[LoadedGuardrail], unreadable: list[str], stdout: Writer, stderr: Writer) -> None:
    for message in unreadable:
        stderr.write(f"{message}\n")
    for entry in loaded:
        registration = entry.registration
        stdout.write(f"{entry.label}: {'ok' if registration.valid else 'invalid'}\n")
        for issue in registration.errors:
            stdout.write(f"  {issue.path or '/'}: {issue.message}\n")
        for issue in registration.warnings:
            stdout.write(f"  warning {issue.path or '/'}: {issue.message}\n")
