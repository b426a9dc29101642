"""define_check, define_guardrail, scope and modes, statuses and actions."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.engine.evaluate import Engine, evaluate_all, evaluate_guardrail, selects
from guardrails.engine.registration import RegistrationPolicy, define_guardrail
from guardrails.engine.registry import (
    CheckRegistry,
    DuplicateCheck,
    InvalidCheckDefinition,
    default_registry,
    define_check,
)
from guardrails.engine.strategies import default_strategies
from guardrails.engine.types import (
    PASSED,
    Check,
    CheckOutcome,
    Config,
    Context,
    Guardrail,
    Issue,
    Result,
    Trace,
    failed,
)


def blocks_ci(results: list[Result]) -> bool:
    """Whether these results block a build, as the CI command's exit status says: any fail or error."""
    return any(result.status in ("fail", "error") for result in results)


def guardrail(**fields: Any) -> Guardrail:
    doc = {
        "id": "g",
        "kind": "zero-llm",
        "check": "forbidden-substring",
        "config": {"values": ["secret"]},
        "action": {"on-violation": "log-only"},
    }
    doc.update(fields)
    return Guardrail(document=doc, revision=3)


def max_citations(config: Config, trace: Trace) -> CheckOutcome:
    count = (trace.get("output") or "").count("[")
    if count <= config["max"]:
        return PASSED
    return failed(f"too many citations ({count} > {config['max']})")


MAX_CITATIONS_SCHEMA = {
    "type": "object",
    "properties": {"max": {"type": "integer", "minimum": 1}},
    "required": ["max"],
    "additionalProperties": False,
}


# --- define_check ------------------------------------------------------------------------


def test_define_check_derives_config_validation_from_the_schema() -> None:
    check = define_check("demo.max-citations", "zero-llm", max_citations, config_schema=MAX_CITATIONS_SCHEMA)
    assert check.validate_config({"max": 2}) == []
    assert check.validate_config({"max": 0}) == [Issue("/max", "must be at least 1")]
    assert check.module == __name__ and check.function == "max_citations"
    assert not check.builtin or check.pack is None


def test_define_check_takes_a_hand_written_validator() -> None:
    def validate(config: Config) -> list[Issue]:
        return [] if config.get("ok") else [Issue("/ok", "must be set")]

    check = define_check("demo.hand", "zero-llm", max_citations, validate_config=validate)
    assert check.validate_config({}) == [Issue("/ok", "must be set")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"config_schema": {"type": "nonsense"}}, "config schema does not compile"),
        ({"config_schema": {"$ref": "#/$defs/missing"}}, "config schema does not compile"),
        ({}, "give a config_schema or a validate_config function"),
        ({"id": "", "config_schema": {}}, "check id ''"),
        ({"id": "has space", "config_schema": {}}, "check id 'has space'"),
        ({"kind": "", "config_schema": {}}, "kind must be a non-empty string"),
        ({"evaluate": None, "config_schema": {}}, "a zero-llm check needs an evaluate function"),
    ],
)
def test_define_check_refuses_an_invalid_definition(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"id": "demo.x", "kind": "zero-llm", "evaluate": max_citations}
    arguments.update(kwargs)
    with pytest.raises(InvalidCheckDefinition, match=message.replace("(", r"\(")):
        define_check(arguments.pop("id"), arguments.pop("kind"), arguments.pop("evaluate"), **arguments)


def test_an_llm_judge_check_needs_no_evaluate_function() -> None:
    check = define_check("demo.judge", "llm-judge", config_schema={"type": "object"})
    assert check.evaluate is None


def test_the_registry_refuses_duplicates_and_keeps_builtins() -> None:
    registry = default_registry()
    custom = define_check("demo.x", "zero-llm", max_citations, config_schema={}, pack="acme")
    registry.register(custom)
    with pytest.raises(DuplicateCheck, match="already registered"):
        registry.register(custom)
    registry.register(custom, replace=True)
    shadow = define_check("must-cite", "zero-llm", max_citations, config_schema={}, pack="acme")
    with pytest.raises(DuplicateCheck, match="built-in"):
        registry.register(shadow, replace=True)
    assert registry.get("must-cite") is not shadow
    assert "demo.x" in registry and len(registry.copy()) == len(registry) == len(default_registry()) + 1


# --- define_guardrail ------------------------------------------------------------------------


def document(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": "g",
        "kind": "zero-llm",
        "check": "output-matches",
        "config": {"pattern": "order \\d+"},
        "action": {"on-violation": "halt"},
    }
    doc.update(fields)
    return doc


def pack_registry() -> CheckRegistry:
    registry = default_registry()
    registry.register(define_check("acme.cite", "zero-llm", max_citations, config_schema={}, pack="acme"))
    return registry


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"check": "nope"}, [Issue("/check", "no check 'nope' is registered")]),
        ({"kind": "llm-judge"}, [Issue("/kind", "check 'output-matches' is of kind 'zero-llm', not 'llm-judge'")]),
        ({"config": {"pattern": ""}}, [Issue("/config/pattern", "must not be empty")]),
        ({"config": {"pattern": "a", "x": 1}}, [Issue("/config/x", "unknown field 'x'")]),
        (
            {"config": {"pattern": "(?=a)"}},
            [
                Issue(
                    "/config/pattern",
                    "is not a valid RE2 regular expression: invalid perl operator: (?= "
                    "(RE2 has no backreferences or lookaround)",
                )
            ],
        ),
        ({"config": {}}, [Issue("/config/pattern", "'pattern' is required")]),
        ({"id": ""}, [Issue("/id", "must not be empty")]),
        ({"action": {}}, [Issue("/action/on-violation", "'on-violation' is required")]),
    ],
)
def test_define_guardrail_refuses(fields: dict[str, Any], errors: list[Issue]) -> None:
    registration = define_guardrail(document(**fields), registry=default_registry())
    assert not registration.valid
    assert registration.guardrail is None
    assert registration.errors == errors


def test_define_guardrail_gives_the_guardrail() -> None:
    registration = define_guardrail(document(), registry=default_registry(), revision=4)
    assert registration.valid and registration.warnings == []
    assert registration.guardrail is not None
    assert registration.guardrail.revision == 4
    assert registration.guardrail.document == document()


FILESYSTEM = {"kind": "filesystem", "modulePath": "/home/dev/checks/cite.py"}


def test_a_filesystem_artifact_is_refused_in_production_only() -> None:
    doc = document(codeArtifactRef=FILESYSTEM, checkBuiltIn=True)
    production = RegistrationPolicy(production=True)
    refused = define_guardrail(doc, registry=default_registry(), policy=production)
    assert refused.errors == [
        Issue(
            "/codeArtifactRef/kind",
            "a filesystem code artifact is refused in production: package the check as a "
            "pack (KINDGI_CHECK_PACKS) and reference it with an oci artifact",
        )
    ]
    assert define_guardrail(doc, registry=default_registry()).valid


def test_a_builtin_named_with_an_artifact_and_no_marker_gives_a_warning() -> None:
    registration = define_guardrail(document(codeArtifactRef=FILESYSTEM), registry=default_registry())
    assert registration.valid
    assert [issue.path for issue in registration.warnings] == ["/checkBuiltIn"]
    marked = define_guardrail(document(codeArtifactRef=FILESYSTEM, checkBuiltIn=True), registry=default_registry())
    assert marked.warnings == []


def test_a_pack_config_schema_is_kept_and_applied_to_every_guardrail_naming_the_check() -> None:
    registry = pack_registry()
    first = define_guardrail(
        document(check="acme.cite", config={"max": 2}, configSchema=MAX_CITATIONS_SCHEMA), registry=registry
    )
    assert first.valid
    second = define_guardrail(document(id="g2", check="acme.cite", config={"max": 0}), registry=registry)
    assert second.errors == [Issue("/config/max", "must be at least 1")]


def test_a_config_schema_that_does_not_compile_is_an_error() -> None:
    registration = define_guardrail(
        document(check="acme.cite", config={}, configSchema={"type": 12}), registry=pack_registry()
    )
    assert [issue.path for issue in registration.errors] == ["/configSchema"]


def test_needs_the_deployment_cannot_meet_are_errors() -> None:
    policy = RegistrationPolicy(available_env=frozenset({"HOME"}), bindings=frozenset())
    doc = document(needsSpec={"env": {"HOME": {}, "POLICY_URL": {}}, "bindings": ["db"]})
    registration = define_guardrail(doc, registry=default_registry(), policy=policy)
    assert registration.errors == [
        Issue("/needsSpec/env/POLICY_URL", "environment variable 'POLICY_URL' is not available"),
        Issue("/needsSpec/bindings/0", "binding 'db' is not available"),
    ]


def test_a_kind_without_strategy_is_a_warning_at_registration() -> None:
    registry = default_registry()
    registry.register(define_check("acme.ext", "acme-kind", max_citations, config_schema={}, pack="a"))
    registration = define_guardrail(
        document(kind="acme-kind", check="acme.ext", config={}), registry=registry, strategies=default_strategies()
    )
    assert registration.valid
    assert registration.warnings[0].path == "/kind"


# --- scope and modes -----------------------------------------------------------------------

SCOPE_MATRIX: list[tuple[Any, str, bool]] = [
    (None, "ci", True),
    (None, "runtime", True),
    ({}, "runtime", True),
    ({"when": "always"}, "ci", True),
    ({"when": "always"}, "runtime", True),
    ({"when": "ci-only"}, "ci", True),
    ({"when": "ci-only"}, "runtime", False),
    ({"when": "runtime-only"}, "ci", False),
    ({"when": "runtime-only"}, "runtime", True),
    ({"agents": []}, "ci", True),
    ({"agents": ["support-bot"]}, "ci", True),
    ({"agents": ["faq-bot"]}, "ci", False),
    ({"flows": ["refund", "returns"]}, "runtime", True),
    ({"flows": ["returns"]}, "runtime", False),
    ({"tenants": ["acme"]}, "ci", True),
    ({"tenants": ["globex"]}, "ci", False),
    ({"when": "ci-only", "agents": ["support-bot"], "flows": ["refund"]}, "ci", True),
    ({"when": "ci-only", "agents": ["support-bot"], "flows": ["x"]}, "ci", False),
]


@pytest.mark.parametrize(("scope", "mode", "selected"), SCOPE_MATRIX)
def test_scope_selects(scope: dict[str, Any] | None, mode: str, selected: bool) -> None:
    g = guardrail() if scope is None else guardrail(scope=scope)
    context = Context(mode=mode, tenant="acme", agent="support-bot", flow="refund")  # type: ignore[arg-type]
    assert selects(g, context) is selected
    result = evaluate_guardrail(g, {"id": "t", "output": "fine"}, context)
    assert result.status == ("pass" if selected else "skipped")


def test_a_trace_without_the_value_is_not_selected_by_a_list() -> None:
    g = guardrail(scope={"agents": ["support-bot"]})
    assert not selects(g, Context(mode="ci"))
    assert selects(guardrail(scope={"agents": []}), Context(mode="ci"))


# --- statuses, actions and the turn ----------------------------------------------------------

TRACE = {"id": "t", "output": "the secret is out"}


def test_a_result_carries_what_evaluation_md_says() -> None:
    g = guardrail(severity="critical")
    result = evaluate_guardrail(g, TRACE, Context(mode="ci"))
    assert (result.guardrail, result.revision, result.status) == ("g", 3, "fail")
    assert (result.action, result.severity) == ("log-only", "critical")
    assert result.reason == "output contains forbidden 'secret'"
    assert result.duration_ms >= 0 and result.is_violation


@pytest.mark.parametrize(
    ("action", "turn", "reason"),
    [
        ("halt", "failed", "guardrail-violation"),
        ("log-only", "completed", None),
        ("retry", "completed", None),
        ("escalate", "completed", None),
        ("compensate", "completed", None),
        ("page-the-on-call", "completed", None),
    ],
)
def test_each_action_at_runtime(action: str, turn: str, reason: str | None) -> None:
    g = guardrail(action={"on-violation": action})
    verdict = evaluate_all([g], TRACE, Context(mode="runtime"))
    assert (verdict.turn, verdict.reason) == (turn, reason)
    assert verdict.withheld is (turn == "failed")
    assert verdict.results[0].status == "fail"  # every fail is a violation, whatever the action


def test_halt_passing_or_in_ci_does_not_fail_the_turn() -> None:
    g = guardrail(action={"on-violation": "halt"})
    assert evaluate_all([g], {"id": "t", "output": "ok"}, Context(mode="runtime")).turn == "completed"
    ci = evaluate_all([g], TRACE, Context(mode="ci"))
    assert ci.turn == "completed" and blocks_ci(ci.results)


def raising_check(config: Config, trace: Trace) -> CheckOutcome:
    raise RuntimeError("the check broke")


def engine_with(*checks: Check) -> Engine:
    registry = default_registry()
    for check in checks:
        registry.register(check)
    return Engine(registry, default_strategies())


def test_a_raising_check_gives_error_never_a_crash() -> None:
    engine = engine_with(define_check("acme.raise", "zero-llm", raising_check, config_schema={}, pack="a"))
    g = guardrail(check="acme.raise", action={"on-violation": "halt"})
    verdict = evaluate_all([g], TRACE, Context(mode="runtime"), engine=engine)
    assert verdict.results[0].status == "error"
    assert verdict.results[0].reason == "check 'acme.raise' raised RuntimeError: the check broke"
    assert verdict.turn == "completed"  # an error does not fail the turn
    assert blocks_ci(verdict.results)  # but it blocks CI


def test_a_check_returning_something_else_gives_error() -> None:
    def odd(config: Config, trace: Trace) -> CheckOutcome:
        return True  # type: ignore[return-value]

    engine = engine_with(define_check("acme.odd", "zero-llm", odd, config_schema={}, pack="a"))
    result = evaluate_guardrail(guardrail(check="acme.odd"), TRACE, Context(mode="ci"), engine=engine)
    assert (result.status, result.reason) == ("error", "check 'acme.odd' returned bool")


def test_external_gives_error() -> None:
    engine = engine_with(define_check("acme.ext", "external", config_schema={}, pack="a"))
    result = evaluate_guardrail(guardrail(kind="external", check="acme.ext"), TRACE, Context(mode="ci"), engine=engine)
    assert result.status == "error"
    assert "evaluated outside the engine" in (result.reason or "")


def test_llm_judge_without_a_judge_gives_error_and_with_one_asks_it() -> None:
    engine = engine_with(define_check("acme.judge", "llm-judge", config_schema={}, pack="a"))
    g = guardrail(kind="llm-judge", check="acme.judge")
    result = evaluate_guardrail(g, TRACE, Context(mode="ci"), engine=engine)
    assert result.status == "error"
    assert (result.reason or "").startswith("no judge model is bound")

    class Strict:
        def judge(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome:
            return failed("the judge says no", score=0.2)

    judged = evaluate_guardrail(g, TRACE, Context(mode="ci", services={"judge": Strict()}), engine=engine)
    assert (judged.status, judged.reason, dict(judged.details)) == ("fail", "the judge says no", {"score": 0.2})


def test_missing_check_and_missing_strategy_give_error() -> None:
    engine = engine_with(define_check("acme.k", "acme-kind", max_citations, config_schema={}, pack="a"))
    missing_check = evaluate_guardrail(guardrail(check="gone"), TRACE, Context(mode="ci"), engine=engine)
    assert (missing_check.status, missing_check.reason) == ("error", "check 'gone' is not registered")
    no_strategy = evaluate_guardrail(
        guardrail(kind="acme-kind", check="acme.k", config={"max": 1}), TRACE, Context(mode="ci"), engine=engine
    )
    assert (no_strategy.status, no_strategy.reason) == ("error", "no strategy is registered for kind 'acme-kind'")


def test_adapters_register_strategies_for_their_kinds() -> None:
    class Always:
        def evaluate(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome:
            return PASSED

    engine = engine_with(define_check("acme.k", "acme-kind", max_citations, config_schema={}, pack="a"))
    engine.strategies.register("acme-kind", Always())
    result = evaluate_guardrail(guardrail(kind="acme-kind", check="acme.k"), TRACE, Context(mode="ci"), engine=engine)
    assert result.status == "pass"
    assert "acme-kind" in engine.strategies.kinds()


def test_a_prepared_config_is_reused_for_the_same_guardrail_only() -> None:
    engine = Engine.default()
    first = guardrail(check="output-matches", config={"pattern": "secret"})
    second = guardrail(check="output-matches", config={"pattern": "public"})
    assert evaluate_guardrail(first, TRACE, Context(mode="ci"), engine=engine).status == "pass"
    assert evaluate_guardrail(second, TRACE, Context(mode="ci"), engine=engine).status == "fail"
    assert evaluate_guardrail(first, TRACE, Context(mode="ci"), engine=engine).status == "pass"


@pytest.mark.parametrize(
    ("scope", "mode", "part", "sentence"),
    [
        ({"when": "runtime-only"}, "ci", "runtime-only", "the guardrail is runtime-only and this is a ci evaluation"),
        ({"when": "ci-only"}, "runtime", "ci-only", "the guardrail is ci-only and this is a runtime evaluation"),
        ({"agents": ["faq-bot"]}, "ci", "agents", "scope.agents does not list this trace's agent (support-bot)"),
        ({"flows": ["returns"]}, "ci", "flows", "scope.flows does not list this trace's flow (refund)"),
        ({"tenants": ["globex"]}, "ci", "tenants", "scope.tenants does not list this trace's tenant (acme)"),
        (
            {"agents": ["support-bot"], "flows": ["x"]},
            "ci",
            "flows",
            "scope.flows does not list this trace's flow (refund)",
        ),
    ],
)
def test_a_skipped_result_says_which_part_of_the_scope_did_not_select(
    scope: dict[str, Any], mode: str, part: str, sentence: str
) -> None:
    context = Context(mode=mode, tenant="acme", agent="support-bot", flow="refund")  # type: ignore[arg-type]
    result = evaluate_guardrail(guardrail(scope=scope), {"id": "t", "output": "fine"}, context)
    assert (result.status, result.reason, dict(result.details)) == ("skipped", sentence, {"skip": part})


def test_a_trace_without_an_agent_is_skipped_naming_none() -> None:
    result = evaluate_guardrail(guardrail(scope={"agents": ["a"]}), {"id": "t"}, Context(mode="ci"))
    assert result.reason == "scope.agents does not list this trace's agent (none)"
