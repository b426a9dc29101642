"""`define_guardrail`: schema validation, then registration against the check registry."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from guardrails.engine.packs import check_needs, code_artifact_issues, resolve_filesystem_artifact
from guardrails.engine.registry import CheckRegistry
from guardrails.engine.schema import (
    CompiledSchema,
    SchemaCompileError,
    compile_schema,
    validate_against,
    validate_guardrail_document,
)
from guardrails.engine.strategies import StrategyRegistry
from guardrails.engine.types import Check, Guardrail, Issue


@dataclass(frozen=True)
class RegistrationPolicy:
    """What the deployment allows and provides.

    `production` refuses `filesystem` code artifacts; elsewhere `artifact_dirs`, when not
    None, are the only folders they load from (the console's KINDGI_PACK_DIRS: never a
    path a request chooses; None, for the CI command, loads any). The `available_*` sets and
    `capabilities` / `bindings` are what the deployment provides for a guardrail's
    `needsSpec`; None (the default) means the deployment does not check that need.
    """

    production: bool = False
    artifact_dirs: tuple[str, ...] | None = None
    available_env: frozenset[str] | None = None
    available_secrets: frozenset[str] | None = None
    capabilities: frozenset[str] | None = None
    bindings: frozenset[str] | None = None


@dataclass
class Registration:
    """The outcome of defining a guardrail: the guardrail when valid, errors, warnings."""

    guardrail: Guardrail | None
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.guardrail is not None and not self.errors


def define_guardrail(
    doc: object,
    *,
    registry: CheckRegistry,
    strategies: StrategyRegistry | None = None,
    policy: RegistrationPolicy | None = None,
    revision: int | None = None,
    json_values: bool = False,
) -> Registration:
    """Validate `doc` against schema 1.1.0 and register it against `registry`.

    Outside production a `filesystem` code artifact is loaded into `registry` first (its
    check replaces a pack check of the same id), so that an author can try a check before
    packaging it; in production such a guardrail is refused. `json_values`: the document is
    made of JSON's own types, as orjson parses it (guardrails.engine.schema).
    """
    errors = validate_guardrail_document(doc, json_values=json_values)
    if errors or not isinstance(doc, Mapping):
        return Registration(None, errors or [Issue("", "must be an object")], [])
    policy = policy or RegistrationPolicy()
    errors, warnings = _artifact_issues(doc, registry, policy)
    if not doc["id"]:
        errors.append(Issue("/id", "must not be empty"))
    check = registry.get(doc["check"])
    if errors and _is_filesystem(doc):
        check = None  # the artifact's own error says why its check is missing
    elif check is None:
        errors.append(Issue("/check", f"no check '{doc['check']}' is registered"))
    elif check.kind != doc["kind"]:
        errors.append(Issue("/kind", f"check '{check.id}' is of kind '{check.kind}', not '{doc['kind']}'"))
    else:
        errors += _config_issues(doc, check, registry, warnings, json_values)
        warnings += code_artifact_issues(doc, registry)
    if strategies is not None and doc["kind"] not in strategies:
        warnings.append(Issue("/kind", f"no strategy is registered for kind '{doc['kind']}': it gives error"))
    errors += _judge_issues(doc)
    errors += _needs_issues(doc, policy)
    if errors:
        return Registration(None, errors, warnings)
    if check is not None and not check.builtin and isinstance(doc.get("configSchema"), Mapping):
        registry.keep_config_schema(check.id, doc["configSchema"])
    return Registration(Guardrail(document=doc, revision=revision), [], warnings)


def _config_issues(
    doc: Mapping[str, Any], check: Check, registry: CheckRegistry, warnings: list[Issue], json_values: bool
) -> list[Issue]:
    """The config against the check's own validation and any declared pack config schema."""
    config = doc.get("config") or {}
    issues = _prefixed(check.validate_config(config, json_values=json_values), "/config")
    declared = doc.get("configSchema")
    if declared is not None and check.builtin:
        warnings.append(Issue("/configSchema", f"ignored: '{check.id}' is a built-in check with its own schema"))
    elif declared is not None:
        compiled = _compile_declared(declared, issues)
        if compiled is not None:
            issues += compiled.issues(config, base_path="/config", json_values=json_values)
    kept = registry.declared_config_schema(check.id)
    if kept is not None and kept is not declared and not check.builtin:
        issues += validate_against(kept, config, base_path="/config", json_values=json_values)
    return list(dict.fromkeys(issues))


def _compile_declared(declared: Mapping[str, Any], issues: list[Issue]) -> CompiledSchema | None:
    try:
        return compile_schema(declared)
    except SchemaCompileError as exc:
        issues.append(Issue("/configSchema", f"is not a valid JSON Schema: {exc}"))
        return None


def _prefixed(issues: list[Issue], prefix: str) -> list[Issue]:
    return [Issue(prefix + issue.path, issue.message) for issue in issues]


def _judge_issues(doc: Mapping[str, Any]) -> list[Issue]:
    """An llm-judge guardrail's judgeCapabilities against the keys routing defines."""
    if doc["kind"] != "llm-judge" or "judgeCapabilities" not in doc:
        return []
    from guardrails.engine.judge import validate_judge_capabilities  # only llm-judge needs it

    return validate_judge_capabilities(doc["judgeCapabilities"], base_path="/judgeCapabilities")


def _is_filesystem(doc: Mapping[str, Any]) -> bool:
    artifact = doc.get("codeArtifactRef")
    return isinstance(artifact, Mapping) and artifact.get("kind") == "filesystem"


def _artifact_issues(
    doc: Mapping[str, Any], registry: CheckRegistry, policy: RegistrationPolicy
) -> tuple[list[Issue], list[Issue]]:
    """A `filesystem` artifact: refused in production, else its check loaded: (errors, warnings)."""
    if not _is_filesystem(doc):
        return [], []
    if policy.production:
        return [
            Issue(
                "/codeArtifactRef/kind",
                "a filesystem code artifact is refused in production: package the check as a "
                "pack (KINDGI_CHECK_PACKS) and reference it with an oci artifact",
            )
        ], []
    outside = artifact_outside_dirs(doc, policy.artifact_dirs)
    if outside is not None:
        return [outside], []
    return resolve_filesystem_artifact(doc, registry)


def artifact_outside_dirs(doc: Mapping[str, Any], dirs: tuple[str, ...] | None) -> Issue | None:
    """Why a `filesystem` artifact may not load from where it points, or None.

    Decided on the path alone (symbolic links and `..` resolved), before anything looks
    at the file: the answer says nothing of what exists outside the folders.
    """
    if dirs is None:
        return None
    artifact = doc.get("codeArtifactRef")
    path = artifact.get("modulePath") if isinstance(artifact, Mapping) else None
    if isinstance(path, str) and any(_within(path, folder) for folder in dirs):
        return None
    listed = "" if dirs else " (none is listed here)"
    return Issue(
        "/codeArtifactRef/modulePath",
        f"a filesystem code artifact loads only from the folders the operator lists in KINDGI_PACK_DIRS{listed}",
    )


def _within(path: str, folder: str) -> bool:
    try:
        if not os.path.isabs(path) or not os.path.isabs(folder):
            return False
        real, base = os.path.realpath(path), os.path.realpath(folder)
        return real != base and os.path.commonpath([real, base]) == base
    except ValueError:  # a NUL character, or paths on different drives
        return False


def _needs_issues(doc: Mapping[str, Any], policy: RegistrationPolicy) -> list[Issue]:
    """Needs the deployment says it cannot meet."""
    return check_needs(
        doc.get("needsSpec"), policy.available_env, policy.available_secrets, policy.capabilities, policy.bindings
    )
