"""Schemas compiled to Python code (guardrails/engine/schema_code.py): what it proves valid,
jsonschema_rs finds valid too, on the console's schemas and on many broken documents; the CI
command runs on it without loading jsonschema_rs, and still names every error."""

from __future__ import annotations

import copy
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson
import pytest

from guardrails.engine import checks, schema_code, schema_proofs
from guardrails.engine.proofs import PROOFS_PATH, own_schemas
from guardrails.engine.schema import (
    CONSOLE_LIMITS_SCHEMA,
    GUARDRAIL_SCHEMA,
    RUNTRACE_SCHEMA,
    bracket_count,
    runtrace_line_validator,
    validate_guardrail_document,
    validate_runtrace,
    validate_runtrace_line,
)
from guardrails.engine.types import Issue

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_GUARDRAILS = sorted((ROOT / "examples" / "guardrails").glob("*.json"))
CHECK_SCHEMAS = [getattr(checks, name) for name in dir(checks) if name.endswith("_SCHEMA")]

TRACE: dict[str, Any] = {
    "id": "run-1",
    "tenant": "acme",
    "agent": "support-bot",
    "flow": "refund",
    "startedAt": "2026-11-29T10:00:00Z",
    "endedAt": "2026-11-29T10:00:04Z",
    "input": "Can I get a refund for order 1234?",
    "output": "Yes [policy-refunds].",
    "messages": [
        {"role": "user", "content": "Can I get a refund?"},
        {"role": "assistant", "content": None, "name": "bot", "toolCallId": "c1"},
    ],
    "toolCalls": [
        {
            "id": "c1",
            "name": "lookup_order",
            "arguments": {"order": "1234", "nested": [1, 2.5, None, True]},
            "result": {"ok": True},
            "error": None,
            "startedAt": "2026-11-29T10:00:01Z",
            "endedAt": "2026-11-29T10:00:02.250+01:00",
        }
    ],
    "citations": [{"source": "policy-refunds", "title": "Refunds", "quote": "30 days"}],
    "usage": {"inputTokens": 100, "outputTokens": 20, "costUsd": 0.001, "model": "m"},
    "metadata": {"release": "1", "anything": [{"deep": {"er": 1}}]},
}

# What a broken document may hold in place of a value: every JSON type, edge numbers,
# strings of every length and date-times RFC 3339 allows or refuses.
REPLACEMENTS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    1.0,
    2.5,
    -0.5,
    (1 << 64) - 1,
    -(1 << 63),
    "",
    "x",
    "x" * 201,
    [],
    ["x"],
    [1, 1],
    ["a", "a"],
    {},
    {"x": 1},
    "system",
    "allowlist",
    "oci",
    "2026-11-29T10:00:00Z",
    "2026-02-29T10:00:00Z",
    "2024-02-29T10:00:00Z",
    "2026-04-31T10:00:00Z",
    "2026-12-31T23:59:60Z",
    "2026-11-29t10:00:00z",
    "2026-11-29T10:00:00",
    "2026-11-29 10:00:00Z",
    "0000-01-01T00:00:00Z",
    "2026-11-29T10:00:00.123456789-05:30",
    "2026-11-29T10:00:00Z\n2026-11-29T10:00:00Z",
    "\uff12\uff10\uff12\uff16-11-29T10:00:00Z",  # full-width digits
]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _paths(value, (*prefix, index))


def _mutants(doc: dict[str, Any], seed: int, count: int) -> Iterator[Any]:
    """`count` copies of `doc`, each broken (or not) in one to three random places."""
    rng = random.Random(seed)
    for _ in range(count):
        mutant = copy.deepcopy(doc)
        for _ in range(rng.randint(1, 3)):
            paths = list(_paths(mutant))
            path = rng.choice(paths)
            if not path:
                continue
            parent = mutant
            for part in path[:-1]:
                parent = parent[part]
            last, choice = path[-1], rng.random()
            if choice < 0.15 and isinstance(parent, dict):
                del parent[last]
            elif choice < 0.25 and isinstance(parent, dict):
                parent[rng.choice(["extra", "kind", "name", "id", "when"])] = rng.choice(REPLACEMENTS)
            else:
                parent[last] = copy.deepcopy(rng.choice(REPLACEMENTS))
        yield mutant


def _proof_and_truth(schema: dict[str, Any]) -> tuple[Callable[[object], bool], Any]:
    return schema_code.generate(schema, json_values=True), jsonschema_rs.validator_for(schema, validate_formats=True)


@pytest.mark.parametrize(
    ("name", "schema", "valid"),
    [
        ("runtrace", RUNTRACE_SCHEMA, TRACE),
        ("guardrail", GUARDRAIL_SCHEMA, orjson.loads(EXAMPLE_GUARDRAILS[0].read_bytes())),
        ("console-limits", CONSOLE_LIMITS_SCHEMA, orjson.loads(EXAMPLE_GUARDRAILS[0].read_bytes())),
    ],
)
@pytest.mark.parametrize("ahead", [True, False], ids=["written-ahead", "generated-now"])
def test_what_the_code_proves_valid_jsonschema_rs_finds_valid(
    name: str, schema: Any, valid: Any, ahead: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not ahead:
        monkeypatch.setattr(schema_proofs, "PROOFS", {})
    proof, truth = _proof_and_truth(schema)
    assert (proof.__module__ == schema_proofs.__name__) is ahead
    assert proof(valid) and truth.is_valid(valid)
    proven = refused = 0
    for mutant in _mutants(valid, seed=len(name), count=3000):
        doc = orjson.loads(orjson.dumps(mutant))  # as the CI command has it: parsed by orjson
        if proof(doc):
            proven += 1
            assert truth.is_valid(doc), (name, doc)
        elif not truth.is_valid(doc):
            refused += 1
    # The mutants are of both kinds, and most valid ones are proven by the code itself.
    assert proven > 100 and refused > 1000


def test_every_example_guardrail_and_check_config_is_proven_valid() -> None:
    guardrail, _ = _proof_and_truth(GUARDRAIL_SCHEMA)
    for path in EXAMPLE_GUARDRAILS:
        document = orjson.loads(path.read_bytes())
        assert guardrail(document), path
        config_schema = getattr(checks, document["check"].upper().replace("-", "_") + "_SCHEMA")
        config, truth = _proof_and_truth(config_schema)
        assert config(document["config"]) and truth.is_valid(document["config"])
        for mutant in _mutants(document["config"], seed=7, count=300):
            assert not config(mutant) or truth.is_valid(mutant), mutant


@pytest.mark.parametrize("text", [value for value in REPLACEMENTS if isinstance(value, str)])
def test_date_times_are_proven_only_where_rfc_3339_allows_them(text: str) -> None:
    proof, truth = _proof_and_truth(RUNTRACE_SCHEMA)
    for doc in ({"id": "a", "startedAt": text}, {"id": "a", "toolCalls": [{"name": "t", "endedAt": text}] * 3}):
        if proof(doc):
            assert truth.is_valid(doc)
    common = {"id": "a", "startedAt": "2024-02-29T23:59:59Z", "endedAt": "2026-12-31T00:00:00.5+05:30"}
    assert proof(common)


def test_a_date_time_that_is_no_utf_8_is_not_proven_and_raises_nothing() -> None:
    proof = schema_code.generate(RUNTRACE_SCHEMA, json_values=True)
    assert not proof({"id": "a", "startedAt": "2026-11-29T10:00:00\udc80"})
    assert not proof({"id": "a", "endedAt": "2026-11-29T10:00:00Z", "startedAt": "\ud800"})


def test_a_oneof_branch_that_cannot_decide_does_not_prove_the_document() -> None:
    # 1.0 is an integer to jsonschema_rs, not to the code: the code must not count the
    # branch as failed (which would make exactly one branch match).
    schema = {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}
    proof, truth = _proof_and_truth(schema)
    assert not truth.is_valid(1.0) and not proof(1.0)
    assert truth.is_valid(2.5) and proof(2.5)
    assert not truth.is_valid(-2.5) and not proof(-2.5)
    assert not proof(2) and not truth.is_valid(2)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": "email"},
        {"type": "string", "pattern": "^(a|b)+$"},
        {"$ref": "https://example.com/other.json"},
        {"properties": {"a": {"type": "string"}}},  # object keywords without type object
        {"type": "object", "unknownKeyword": 1},
        {"enum": [1, 2]},
        {"type": "array", "prefixItems": [{"type": "string"}]},
        {"type": "object", "$defs": {"a": {}}, "properties": {"b": {"$ref": "#/$defs/a"}}, "$schema": "draft-07"},
    ],
)
def test_a_schema_beyond_the_generated_code_is_left_to_jsonschema_rs(schema: dict[str, Any]) -> None:
    with pytest.raises(schema_code.Unsupported):
        schema_code.generate(schema)


def test_documents_of_other_python_types_are_not_proven() -> None:
    proof = schema_code.generate(RUNTRACE_SCHEMA)  # no json_values: anything may come
    assert proof(TRACE)
    assert not proof({**TRACE, "metadata": {"when": (1, 2)}})
    assert not proof({**TRACE, "metadata": {1: "non-string key"}})
    assert not proof({**TRACE, "usage": {"costUsd": float("nan")}})
    assert not proof({**TRACE, "toolCalls": ({"name": "t"},)})


def test_the_answers_and_messages_are_the_same_with_generated_code() -> None:
    broken: list[Any] = [
        {"id": "a", "toolcalls": []},
        {"id": "", "startedAt": "yesterday"},
        {"id": "a", "messages": [{"role": "robot", "content": 1}]},
        {"id": "a", "startedAt": "2026-11-29T10:00:05Z", "endedAt": "2026-11-29T10:00:04Z"},
        {"id": "a", "usage": {"inputTokens": -1, "costUsd": 1.5}},
        TRACE,
    ]
    guardrails = [orjson.loads(path.read_bytes()) for path in EXAMPLE_GUARDRAILS]
    guardrails += [{**guardrails[0], "severity": "fatal"}, {**guardrails[1], "scope": {"when": "sometimes"}}]

    def answers(json_values: bool) -> list[list[Issue]]:
        found = [validate_runtrace(doc, json_values=json_values) for doc in broken]
        found += [validate_runtrace_line(orjson.dumps(doc), doc, json_values=json_values) for doc in broken]
        return found + [validate_guardrail_document(doc, json_values=json_values) for doc in guardrails]

    before = answers(json_values=False)
    after = answers(json_values=True)
    assert after == before
    assert any(issues for issues in before) and [] in before


def test_schema_proofs_py_is_what_the_generator_writes_today() -> None:
    written = Path(PROOFS_PATH).read_text(encoding="utf-8")
    assert written == schema_code.module_source(own_schemas()), "run `make proofs` and commit schema_proofs.py"
    assert len(schema_proofs.PROOFS) >= 9  # the RunTrace, the guardrail, the limits, the checks' configs


def test_a_schema_unlike_the_console_s_own_is_generated_now_with_its_own_answers() -> None:
    shorter = copy.deepcopy(RUNTRACE_SCHEMA)
    shorter["properties"]["id"]["maxLength"] = 10
    proof = schema_code.generate(shorter, json_values=True)
    assert proof.__module__ != schema_proofs.__name__
    assert not proof({**TRACE, "id": "x" * 11}) and proof({**TRACE, "id": "x" * 10})
    assert schema_code.generate(RUNTRACE_SCHEMA, json_values=True)({**TRACE, "id": "x" * 11})
    # Without json_values, the code walks values of any type: never the one written ahead.
    assert schema_code.generate(RUNTRACE_SCHEMA).__module__ != schema_proofs.__name__
    # A schema that is not JSON is looked up by nothing, and judged as before.
    odd = {"type": "object", "properties": {"a": {"enum": {"x", "y"}}}}  # a set: orjson cannot write it
    with pytest.raises(schema_code.Unsupported):
        schema_code.generate(odd, json_values=True)


@pytest.mark.parametrize("generated", [True, False])
def test_the_line_validator_answers_as_validate_runtrace_line(generated: bool) -> None:
    deep: Any = "x"
    for _ in range(70):
        deep = [deep]
    docs: list[Any] = [
        TRACE,
        {**TRACE, "endedAt": "2026-11-29T09:59:59Z"},  # before startedAt, same layout
        {**TRACE, "endedAt": "2026-11-29T10:00:03.5+01:00"},  # before, another layout
        {**TRACE, "endedAt": "2026-11-29T10:00:00.000Z"},
        {**TRACE, "startedAt": None},
        {**TRACE, "endedAt": "2026-11-29T25:00:00Z"},
        {**TRACE, "metadata": {"deep": deep}},
        {**TRACE, "output": "a\x00b"},  # a NUL, which JSON writes as \\u0000
        {**TRACE, "output": "\\u0000 is written, not a NUL"},
        {"id": "a", "toolcalls": []},
        [TRACE],
        "run-1",
    ]
    validate = runtrace_line_validator(json_values=generated)
    for doc in docs:
        raw = orjson.dumps(doc)
        assert validate(raw, doc, bracket_count(raw)) == validate_runtrace_line(raw, doc), doc
    assert validate_runtrace_line(orjson.dumps(docs[1]), docs[1])[0].path == "/endedAt"
    assert validate_runtrace_line(orjson.dumps(docs[6]), docs[6])


def test_bracket_count_counts_the_opening_brackets() -> None:
    for text in [b"", b"{}", b'{"a":[1,{"b":"[{"}]}', b"[[[[", b"]]}}"]:
        assert bracket_count(text) == text.count(b"[") + text.count(b"{")


def _run_ci(tmp_path: Path, *traces: object) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"".join(orjson.dumps(trace) + b"\n" for trace in traces))
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['manage.py'] + sys.argv[1:]\n"
        "def report():\n"
        "    print('jsonschema_rs' in sys.modules, file=sys.stderr, flush=True)\n"
        "try:\n    runpy.run_path('manage.py', run_name='__main__')\n"
        "finally:\n"
        "    report()\n"
    )
    command = [sys.executable, "-c", probe, "guardrail_ci", "--guardrails", *map(str, EXAMPLE_GUARDRAILS)]
    return subprocess.run(
        [*command, "--traces", str(path), "--format", "json"], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_a_ci_run_over_valid_traces_never_loads_jsonschema_rs(tmp_path: Path) -> None:
    done = _run_ci(tmp_path, TRACE, {**TRACE, "id": "run-2", "flow": "faq"})
    assert done.returncode in (0, 1), done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False"
    assert orjson.loads(done.stdout)["summary"]["pass"] > 0


def test_an_invalid_trace_still_gives_2_with_file_line_and_pointer(tmp_path: Path) -> None:
    done = _run_ci(tmp_path, TRACE, {**TRACE, "id": "run-2", "endedAt": "2026-11-29T25:00:00Z"})
    assert done.returncode == 2
    path = tmp_path / "traces.jsonl"
    assert f"{path}:2: /endedAt: must be an RFC 3339 date-time" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "True"  # loaded to decide and explain
