"""The guardrail contract 1.1.0 and the RunTrace schema: what they accept and refuse."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from guardrails.engine.schema import (
    GUARDRAIL_SCHEMA,
    RUNTRACE_SCHEMA,
    check_json_limits,
    validate_against,
    validate_guardrail_document,
    validate_runtrace,
)
from guardrails.engine.types import Issue

EVERY_FIELD = {
    "id": "refund-cites-policy",
    "name": "Refund answers cite a policy",
    "description": "Every refund answer cites a policy.",
    "kind": "zero-llm",
    "check": "must-cite",
    "config": {"min": 1, "allowedSources": ["policy-refunds"]},
    "configSchema": {"type": "object"},
    "action": {
        "on-violation": "retry",
        "retry": {"maxAttempts": 3},
        "escalateTo": "support-leads",
        "compensateWith": "undo_refund",
    },
    "severity": "error",
    "scope": {"when": "always", "agents": ["support-bot"], "flows": ["refund"], "tenants": ["acme"]},
    "budget": {"maxCostUsd": 0.01, "maxLatencyMs": 2000},
    "sandbox": "strict",
    "limits": {"memMB": 256, "cpuMs": 500},
    "network": {"kind": "allowlist", "hosts": ["policies.acme.test"]},
    "needsSpec": {
        "env": {"POLICY_URL": {"description": "where policies live"}},
        "secrets": {"POLICY_TOKEN": {}},
        "config": {"region": {"default": "eu"}},
        "capabilities": ["http"],
        "bindings": ["policies"],
    },
    "codeArtifactRef": {
        "kind": "oci",
        "imageRef": "registry.acme.test/checks:1.2.0",
        "modulePath": "acme_checks/cite.py",
        "artifactVersion": "1.2.0",
    },
    "checkBuiltIn": True,
    "judgeCapabilities": {"reasoning": "low", "anything": [1, 2]},
}


def changed(base: dict[str, object], path: str, value: object) -> dict[str, object]:
    """A deep copy of `base` with the field at `path` replaced (DELETE removes it)."""
    doc = copy.deepcopy(base)
    *parents, last = path.strip("/").split("/")
    target: Any = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key: Any = int(last) if isinstance(target, list) else last
    if value is DELETE:
        del target[key]
    else:
        target[key] = value
    return doc


def with_change(path: str, value: object) -> dict[str, object]:
    return changed(EVERY_FIELD, path, value)


DELETE = object()


def test_it_accepts_a_document_using_every_field_of_the_seed() -> None:
    assert validate_guardrail_document(EVERY_FIELD) == []


def test_it_accepts_the_smallest_document() -> None:
    doc = {"id": "g", "kind": "zero-llm", "check": "must-cite", "action": {"on-violation": "x"}}
    assert validate_guardrail_document(doc) == []


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("/id", DELETE, Issue("/id", "'id' is required")),
        ("/kind", DELETE, Issue("/kind", "'kind' is required")),
        ("/check", DELETE, Issue("/check", "'check' is required")),
        ("/action", DELETE, Issue("/action", "'action' is required")),
        ("/action/on-violation", DELETE, Issue("/action/on-violation", "'on-violation' is required")),
        ("/kind", "", Issue("/kind", "must not be empty")),
        ("/action/on-violation", "", Issue("/action/on-violation", "must not be empty")),
        ("/kind", 3, Issue("/kind", "must be a string")),
        ("/toolcalls", [], Issue("/toolcalls", "unknown field 'toolcalls'")),
        ("/action/retryy", {}, Issue("/action/retryy", "unknown field 'retryy'")),
        ("/severity", "fatal", Issue("/severity", "must be one of: info, warn, error, critical")),
        ("/scope/when", "never", Issue("/scope/when", "must be one of: always, ci-only, runtime-only")),
        ("/sandbox", "loose", Issue("/sandbox", "must be one of: none, context-isolated, strict")),
        ("/scope/agents", "support-bot", Issue("/scope/agents", "must be an array")),
        ("/scope/flows/0", 7, Issue("/scope/flows/0", "must be a string")),
        ("/action/retry", {}, Issue("/action/retry/maxAttempts", "'maxAttempts' is required")),
        ("/action/retry/maxAttempts", 1.5, Issue("/action/retry/maxAttempts", "must be an integer")),
        ("/limits", {"memMB": 1}, Issue("/limits/cpuMs", "'cpuMs' is required")),
        ("/limits/memMB", "1", Issue("/limits/memMB", "must be an integer")),
        ("/budget/maxLatencyMs", 0.5, Issue("/budget/maxLatencyMs", "must be an integer")),
        ("/budget/maxCostUsd", "1", Issue("/budget/maxCostUsd", "must be a number")),
        ("/network", {"kind": "allowlist"}, Issue("/network/hosts", "'hosts' is required")),
        ("/network", {}, Issue("/network/kind", "'kind' is required")),
        ("/network", {"kind": "some"}, Issue("/network/kind", "must be one of: none, unrestricted, allowlist")),
        ("/network", {"kind": "none", "hosts": []}, Issue("/network/hosts", "unknown field 'hosts'")),
        (
            "/codeArtifactRef",
            {"kind": "oci", "imageRef": "i", "modulePath": "m"},
            Issue("/codeArtifactRef/artifactVersion", "'artifactVersion' is required"),
        ),
        ("/codeArtifactRef", {"kind": "filesystem"}, Issue("/codeArtifactRef/modulePath", "'modulePath' is required")),
        (
            "/codeArtifactRef",
            {"kind": "git", "modulePath": "m"},
            Issue("/codeArtifactRef/kind", "must be one of: oci, filesystem"),
        ),
        ("/checkBuiltIn", False, Issue("/checkBuiltIn", "must be true")),
        ("/config", [], Issue("/config", "must be an object")),
        ("/judgeCapabilities", "x", Issue("/judgeCapabilities", "must be an object")),
        ("/needsSpec/env/HOME", "x", Issue("/needsSpec/env/HOME", "must be an object")),
        ("/needsSpec/other", [], Issue("/needsSpec/other", "unknown field 'other'")),
    ],
)
def test_it_refuses_each_violation_with_its_pointer(path: str, value: object, expected: Issue) -> None:
    assert validate_guardrail_document(with_change(path, value)) == [expected]


def test_it_reports_every_error_at_once() -> None:
    doc = {"id": "g", "kind": "", "action": {}, "severity": "x"}
    paths = {issue.path for issue in validate_guardrail_document(doc)}
    assert paths == {"/kind", "/check", "/action/on-violation", "/severity"}


def test_open_maps_take_any_field() -> None:
    doc = with_change("/config", {"anything": {"nested": [1]}})
    assert validate_guardrail_document(doc) == []


def test_the_schema_documents_itself() -> None:
    assert GUARDRAIL_SCHEMA["$id"].endswith("guardrail.schema.json")
    assert GUARDRAIL_SCHEMA["title"] == "Guardrail"
    assert set(GUARDRAIL_SCHEMA["$defs"]) == {"Action", "Scope"}
    for name, prop in GUARDRAIL_SCHEMA["properties"].items():
        if "$ref" not in prop:
            assert prop.get("description"), name


def test_a_document_that_is_not_an_object_is_refused() -> None:
    assert validate_guardrail_document([]) == [Issue("", "must be an object")]


TRACE: dict[str, object] = {
    "id": "run-1",
    "tenant": "acme",
    "agent": "support-bot",
    "flow": "refund",
    "startedAt": "2026-11-29T10:00:00Z",
    "endedAt": "2026-11-29T10:00:04Z",
    "input": "Refund?",
    "output": "Yes [policy-refunds].",
    "messages": [{"role": "user", "content": "Refund?", "name": "u", "toolCallId": "c1"}],
    "toolCalls": [
        {
            "id": "c1",
            "name": "lookup_order",
            "arguments": {"any": {"thing": 1}},
            "result": [1, "two"],
            "error": None,
            "startedAt": "2026-11-29T10:00:01Z",
            "endedAt": "2026-11-29T10:00:02Z",
        }
    ],
    "citations": [{"source": "policy-refunds", "title": "Refunds", "quote": "30 days"}],
    "usage": {"inputTokens": 1, "outputTokens": 2, "costUsd": 0.1, "model": "m"},
    "metadata": {"free": {"form": True}},
}


def trace_with(path: str, value: object) -> dict[str, object]:
    return changed(TRACE, path, value)


def test_it_accepts_a_trace_using_every_field() -> None:
    assert validate_runtrace(TRACE) == []


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("/id", DELETE, Issue("/id", "'id' is required")),
        ("/id", "", Issue("/id", "must not be empty")),
        ("/id", "x" * 201, Issue("/id", "must be at most 200 characters long")),
        ("/tenant", "t" * 101, Issue("/tenant", "must be at most 100 characters long")),
        ("/toolcalls", [], Issue("/toolcalls", "unknown field 'toolcalls'")),
        ("/toolCalls/0/nme", "x", Issue("/toolCalls/0/nme", "unknown field 'nme'")),
        ("/toolCalls/0/name", DELETE, Issue("/toolCalls/0/name", "'name' is required")),
        ("/messages/0/role", "bot", Issue("/messages/0/role", "must be one of: system, user, assistant, tool")),
        ("/messages/0/content", DELETE, Issue("/messages/0/content", "'content' is required")),
        ("/citations/0/source", DELETE, Issue("/citations/0/source", "'source' is required")),
        ("/usage/inputTokens", -1, Issue("/usage/inputTokens", "must be at least 0")),
        ("/usage/extra", 1, Issue("/usage/extra", "unknown field 'extra'")),
        ("/output", 3, Issue("/output", "must be a string or null")),
        (
            "/startedAt",
            "2026-11-29 10:00",
            Issue("/startedAt", "must be an RFC 3339 date-time (such as 2026-11-29T10:00:00Z)"),
        ),
        ("/endedAt", "2026-11-29T09:59:59Z", Issue("/endedAt", "must not be before startedAt")),
        ("/output", "a\x00b", Issue("/output", "must not contain the NUL character (U+0000)")),
    ],
)
def test_it_refuses_each_trace_violation(path: str, value: object, expected: Issue) -> None:
    assert validate_runtrace(trace_with(path, value)) == [expected]


def test_free_form_fields_take_anything() -> None:
    doc = trace_with("/metadata", {"any": ["thing", {"deep": None}]})
    doc = {**doc, "toolCalls": [{"name": "t", "arguments": "text", "result": 3}]}
    assert validate_runtrace(doc) == []


def test_nesting_beyond_the_limit_is_refused_with_its_pointer() -> None:
    deep: dict[str, object] = {}
    inner = deep
    for _ in range(5):
        inner["a"] = {}
        inner = inner["a"]  # type: ignore[assignment]
    assert check_json_limits({"m": deep}, max_depth=4) == [Issue("/m/a/a/a", "is nested deeper than 4 levels")]


def test_validate_against_takes_any_schema_with_formats_on() -> None:
    schema = {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}
    assert validate_against(schema, {"at": "yesterday"}, base_path="/config") == [
        Issue("/config/at", "must be an RFC 3339 date-time (such as 2026-11-29T10:00:00Z)")
    ]


def test_the_runtrace_schema_is_published_with_its_id() -> None:
    assert RUNTRACE_SCHEMA["$id"].endswith("runtrace.schema.json")


@pytest.mark.parametrize(
    ("started", "ended", "in_order"),
    [
        ("2026-11-29T10:00:00Z", "2026-11-29T10:00:04Z", True),
        ("2026-11-29T10:00:05Z", "2026-11-29T10:00:04Z", False),
        ("2026-11-29T10:00:00.50Z", "2026-11-29T10:00:00.49Z", False),  # compared as text
        ("2026-11-29T10:00:00.5Z", "2026-11-29T10:00:00Z", False),  # parsed: lengths differ
        ("2026-11-29T11:00:00+01:00", "2026-11-29T10:30:00Z", True),  # parsed: offsets
        ("2026-11-29t10:00:01z", "2026-11-29T10:00:00Z", False),  # parsed: lower case
    ],
)
def test_ended_at_is_compared_with_started_at_in_time(started: str, ended: str, in_order: bool) -> None:
    issues = validate_runtrace({"id": "t", "startedAt": started, "endedAt": ended})
    assert (Issue("/endedAt", "must not be before startedAt") not in issues) is in_order
