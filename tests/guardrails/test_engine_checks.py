"""The seven built-in zero-llm checks: configs and semantics (evaluation.md)."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.engine.registry import builtin_checks, default_registry
from guardrails.engine.types import Issue

REGISTRY = default_registry()


def run(check_id: str, config: dict[str, Any], trace: dict[str, Any]) -> tuple[bool, str | None]:
    """Evaluate a built-in check both ways (prepared and plain) and insist they agree."""
    check = REGISTRY.get(check_id)
    assert check is not None and check.prepare is not None and check.evaluate is not None
    assert check.validate_config(config) == []
    prepared = check.prepare(config)(trace)
    plain = check.evaluate(config, trace)
    assert prepared == plain
    return prepared.passed, prepared.reason


def calls(*names: str) -> list[dict[str, str]]:
    return [{"name": name} for name in names]


def test_there_are_the_seven_builtins() -> None:
    ids = {check.id for check in builtin_checks()}
    assert ids == {
        "must-cite",
        "never-call-tool",
        "max-tool-calls",
        "output-matches",
        "tool-order",
        "required-substring",
        "forbidden-substring",
    }
    assert all(check.kind == "zero-llm" and check.builtin for check in builtin_checks())
    assert all(
        check.config_schema is not None and check.config_schema["additionalProperties"] is False
        for check in builtin_checks()
    )


CASES = [
    # must-cite: citations when present (even empty), else markers in output
    ("must-cite", {}, {"output": "Yes [policy-refunds]."}, True, None),
    ("must-cite", {}, {"output": "Yes."}, False, "0 citation(s), at least 1 required"),
    ("must-cite", {}, {"output": None}, False, "0 citation(s), at least 1 required"),
    ("must-cite", {}, {}, False, "0 citation(s), at least 1 required"),
    ("must-cite", {}, {"output": "a [] b"}, False, "0 citation(s), at least 1 required"),
    (
        "must-cite",
        {},
        {"output": "Yes [policy-refunds].", "citations": []},
        False,
        "0 citation(s), at least 1 required",
    ),
    ("must-cite", {}, {"output": "no markers", "citations": [{"source": "doc-1"}]}, True, None),
    ("must-cite", {"min": 2}, {"output": "[a] and [b c]"}, True, None),
    ("must-cite", {"min": 3}, {"output": "[a] and [b]"}, False, "2 citation(s), at least 3 required"),
    ("must-cite", {"allowedSources": ["a", "b c"]}, {"output": "[a] and [b c]"}, True, None),
    (
        "must-cite",
        {"allowedSources": ["a"]},
        {"output": "[a] [wiki] [x]"},
        False,
        "citation source 'wiki' is not an allowed source",
    ),
    (
        "must-cite",
        {"allowedSources": ["a"]},
        {"citations": [{"source": "a"}, {"source": "b"}]},
        False,
        "citation source 'b' is not an allowed source",
    ),
    # never-call-tool
    ("never-call-tool", {"tools": ["delete_account"]}, {"toolCalls": calls("a", "b")}, True, None),
    ("never-call-tool", {"tools": ["delete_account"]}, {}, True, None),
    (
        "never-call-tool",
        {"tools": ["delete_account", "grant_admin"]},
        {"toolCalls": calls("a", "grant_admin", "delete_account")},
        False,
        "called forbidden tool 'grant_admin' (tool call 2)",
    ),
    # max-tool-calls
    ("max-tool-calls", {"max": 2}, {"toolCalls": calls("a", "b")}, True, None),
    ("max-tool-calls", {"max": 0}, {}, True, None),
    ("max-tool-calls", {"max": 1}, {"toolCalls": calls("a", "b")}, False, "2 tool calls, more than the maximum of 1"),
    ("max-tool-calls", {"max": 1, "tool": "r"}, {"toolCalls": calls("a", "r", "b")}, True, None),
    (
        "max-tool-calls",
        {"max": 1, "tool": "r"},
        {"toolCalls": calls("r", "a", "r")},
        False,
        "2 calls of 'r', more than the maximum of 1",
    ),
    # output-matches: RE2, flags, fullMatch, no output
    ("output-matches", {"pattern": r"order \d+"}, {"output": "About order 1234."}, True, None),
    (
        "output-matches",
        {"pattern": r"order \d+"},
        {"output": "About ORDER 1234."},
        False,
        r"pattern 'order \d+' does not occur in the output",
    ),
    ("output-matches", {"pattern": r"order \d+", "flags": "i"}, {"output": "ORDER 12"}, True, None),
    ("output-matches", {"pattern": "^b$", "flags": "m"}, {"output": "a\nb\nc"}, True, None),
    ("output-matches", {"pattern": "^b$"}, {"output": "a\nb\nc"}, False, "pattern '^b$' does not occur in the output"),
    ("output-matches", {"pattern": "a.c", "flags": "s"}, {"output": "a\nc"}, True, None),
    ("output-matches", {"pattern": "a.c"}, {"output": "a\nc"}, False, "pattern 'a.c' does not occur in the output"),
    ("output-matches", {"pattern": "yes", "fullMatch": True}, {"output": "yes"}, True, None),
    (
        "output-matches",
        {"pattern": "yes", "fullMatch": True},
        {"output": "yes sir"},
        False,
        "pattern 'yes' does not match all of the output",
    ),
    ("output-matches", {"pattern": "x*"}, {"output": None}, False, "there is no output"),
    ("output-matches", {"pattern": "x*"}, {}, False, "there is no output"),
    ("output-matches", {"pattern": "x*"}, {"output": ""}, True, None),
    # tool-order: pairs, prerequisites never called, tools outside the order ignored
    ("tool-order", {"order": ["lookup", "refund"]}, {"toolCalls": calls("lookup", "x", "refund")}, True, None),
    ("tool-order", {"order": ["lookup", "refund"]}, {"toolCalls": calls("x", "y")}, True, None),
    ("tool-order", {"order": ["lookup", "refund"]}, {}, True, None),
    ("tool-order", {"order": ["lookup", "refund"]}, {"toolCalls": calls("lookup")}, True, None),
    (
        "tool-order",
        {"order": ["lookup", "refund"]},
        {"toolCalls": calls("refund", "lookup", "refund")},
        False,
        "'refund' was called before 'lookup'",
    ),
    (
        "tool-order",
        {"order": ["lookup", "check", "refund"]},
        {"toolCalls": calls("lookup", "refund")},
        False,
        "'refund' was called but 'check', which must come first, never was",
    ),
    (
        "tool-order",
        {"order": ["lookup", "check", "refund"]},
        {"toolCalls": calls("check", "refund")},
        False,
        "'check' was called but 'lookup', which must come first, never was",
    ),
    ("tool-order", {"order": ["a", "b", "c"]}, {"toolCalls": calls("a", "c", "b")}, False, "'c' was called before 'b'"),
    # required-substring: case folding, no output
    ("required-substring", {"values": ["5 business days"]}, {"output": "in 5 business days"}, True, None),
    (
        "required-substring",
        {"values": ["refund", "5 business days"]},
        {"output": "refund in 5 Business Days"},
        False,
        "output does not contain '5 business days'",
    ),
    (
        "required-substring",
        {"values": ["5 business days"], "caseSensitive": False},
        {"output": "in 5 BUSINESS Days"},
        True,
        None,
    ),
    ("required-substring", {"values": ["straße"], "caseSensitive": False}, {"output": "STRASSE 1"}, True, None),
    ("required-substring", {"values": ["a"]}, {"output": None}, False, "there is no output"),
    ("required-substring", {"values": ["a"]}, {}, False, "there is no output"),
    # forbidden-substring: case folding, no output passes
    ("forbidden-substring", {"values": ["sk-live-"]}, {"output": "all good"}, True, None),
    (
        "forbidden-substring",
        {"values": ["internal", "sk-live-"]},
        {"output": "key sk-live-1 (internal)"},
        False,
        "output contains forbidden 'internal'",
    ),
    ("forbidden-substring", {"values": ["Internal Use"]}, {"output": "internal use only"}, True, None),
    (
        "forbidden-substring",
        {"values": ["Internal Use"], "caseSensitive": False},
        {"output": "INTERNAL USE only"},
        False,
        "output contains forbidden 'Internal Use'",
    ),
    (
        "forbidden-substring",
        {"values": ["MASSE"], "caseSensitive": False},
        {"output": "Maße"},
        False,
        "output contains forbidden 'MASSE'",
    ),
    ("forbidden-substring", {"values": ["x"]}, {"output": None}, True, None),
    ("forbidden-substring", {"values": ["x"]}, {}, True, None),
]


@pytest.mark.parametrize(("check_id", "config", "trace", "passed", "reason"), CASES)
def test_each_builtin_check(
    check_id: str, config: dict[str, Any], trace: dict[str, Any], passed: bool, reason: str | None
) -> None:
    assert run(check_id, config, {"id": "t", **trace}) == (passed, reason)


BAD_CONFIGS = [
    ("must-cite", {"min": 0}, Issue("/min", "must be at least 1")),
    ("must-cite", {"min": "1"}, Issue("/min", "must be an integer")),
    ("must-cite", {"allowedSources": []}, Issue("/allowedSources", "must have at least 1 item")),
    ("must-cite", {"allowedSources": [""]}, Issue("/allowedSources/0", "must not be empty")),
    ("must-cite", {"minimum": 1}, Issue("/minimum", "unknown field 'minimum'")),
    ("never-call-tool", {}, Issue("/tools", "'tools' is required")),
    ("never-call-tool", {"tools": []}, Issue("/tools", "must have at least 1 item")),
    ("never-call-tool", {"tools": ["a", "a"]}, Issue("/tools", "must not contain the same item twice")),
    ("max-tool-calls", {}, Issue("/max", "'max' is required")),
    ("max-tool-calls", {"max": -1}, Issue("/max", "must be at least 0")),
    ("max-tool-calls", {"max": 1, "tool": ""}, Issue("/tool", "must not be empty")),
    ("output-matches", {}, Issue("/pattern", "'pattern' is required")),
    ("output-matches", {"pattern": "a", "flags": "x"}, Issue("/flags", "must match the pattern ^[ims]*$")),
    ("output-matches", {"pattern": "a", "fullMatch": "yes"}, Issue("/fullMatch", "must be true or false")),
    (
        "output-matches",
        {"pattern": "(a)\\1"},
        Issue(
            "/pattern",
            "is not a valid RE2 regular expression: invalid escape sequence: \\1 "
            "(RE2 has no backreferences or lookaround)",
        ),
    ),
    (
        "output-matches",
        {"pattern": "(?=a)b"},
        Issue(
            "/pattern",
            "is not a valid RE2 regular expression: invalid perl operator: (?= "
            "(RE2 has no backreferences or lookaround)",
        ),
    ),
    (
        "output-matches",
        {"pattern": "(?<!a)b"},
        Issue(
            "/pattern",
            "is not a valid RE2 regular expression: invalid perl operator: (?<! "
            "(RE2 has no backreferences or lookaround)",
        ),
    ),
    ("output-matches", {"pattern": "[a"}, Issue("/pattern", "is not a valid RE2 regular expression: missing ]: [a")),
    ("tool-order", {"order": ["a"]}, Issue("/order", "must have at least 2 items")),
    ("tool-order", {"order": ["a", "a"]}, Issue("/order", "must not contain the same item twice")),
    ("required-substring", {"values": []}, Issue("/values", "must have at least 1 item")),
    ("required-substring", {"values": ["a"], "caseSensitive": 1}, Issue("/caseSensitive", "must be true or false")),
    ("forbidden-substring", {"values": "a"}, Issue("/values", "must be an array")),
]


@pytest.mark.parametrize(("check_id", "config", "expected"), BAD_CONFIGS)
def test_each_builtin_refuses_a_bad_config(check_id: str, config: dict[str, Any], expected: Issue) -> None:
    check = REGISTRY.get(check_id)
    assert check is not None
    assert check.validate_config(config) == [expected]
