"""Judge-model registrations, tenant policies and routing by judgeCapabilities."""

from decimal import Decimal

import pytest

from guardrails.engine.judge import (
    InvalidJudgeModel,
    JudgeModel,
    JudgePolicy,
    NoJudgeModel,
    Thinking,
    route,
    validate_judge_capabilities,
    validate_judge_model,
)


def registration(**fields):
    doc = {
        "id": "mini",
        "provider": "openai",
        "model": "gpt-4.1-mini",
        "baseUrl": "https://api.openai.com/v1/",
        "apiKeyEnv": "OPENAI_API_KEY",
        "pricing": {"inputUsdPerMTok": 0.4, "outputUsdPerMTok": "1.60"},
        "capabilities": ["json", "long-context"],
        "sampling": True,
    }
    doc.update(fields)
    return doc


def model(id, price_in, price_out, *capabilities):
    return JudgeModel(
        id=id,
        provider="openai",
        model=id,
        base_url="http://127.0.0.1:1/v1",
        input_usd_per_mtok=Decimal(price_in),
        output_usd_per_mtok=Decimal(price_out),
        capabilities=frozenset(capabilities),
    )


def test_it_reads_a_registration_with_exact_prices():
    judge = JudgeModel.from_dict(registration())
    assert judge.input_usd_per_mtok == Decimal("0.4")
    assert judge.output_usd_per_mtok == Decimal("1.60")
    assert judge.base_url == "https://api.openai.com/v1"
    assert judge.capabilities == {"json", "long-context"}
    assert judge.thinking is None


def test_it_round_trips_a_registration_with_prices_as_decimal_strings():
    doc = registration(provider="anthropic", thinking={"budgetTokens": 1024}, sampling=False)
    judge = JudgeModel.from_dict(doc)
    assert judge.thinking == Thinking(budget_tokens=1024)
    again = judge.to_dict()
    assert again["pricing"] == {"inputUsdPerMTok": "0.4", "outputUsdPerMTok": "1.60"}
    assert again["thinking"] == {"budgetTokens": 1024}
    assert JudgeModel.from_dict(again) == judge


def test_it_computes_cost_exactly():
    judge = model("m", "0.15", "0.60")
    assert judge.cost_usd(1234, 56) == Decimal("0.0002187")
    assert judge.cost_usd(0, 0) == Decimal(0)


def test_it_points_at_every_bad_field_of_a_registration():
    doc = registration(provider="mistral", pricing={"inputUsdPerMTok": -1}, colour="blue")
    issues = {(issue.path, issue.message) for issue in validate_judge_model(doc)}
    assert issues == {
        ("/colour", "unknown field 'colour'"),
        ("/provider", "must be one of: openai, anthropic"),
        ("/pricing/inputUsdPerMTok", "must be at least 0"),
        ("/pricing/outputUsdPerMTok", "'outputUsdPerMTok' is required"),
    }
    with pytest.raises(InvalidJudgeModel) as raised:
        JudgeModel.from_dict(doc)
    assert "/provider" in str(raised.value)


def test_it_wants_the_thinking_form_of_the_provider():
    anthropic = registration(provider="anthropic", thinking={"effort": "low"})
    assert [i.path for i in validate_judge_model(anthropic)] == ["/thinking/budgetTokens"]
    openai = registration(thinking={"effort": "minimal"})
    assert validate_judge_model(openai) == []
    too_much = registration(provider="anthropic", thinking={"budgetTokens": 4096})
    assert [i.path for i in validate_judge_model(too_much)] == ["/thinking/budgetTokens"]


def test_it_never_accepts_a_key_in_a_registration():
    issues = validate_judge_model(registration(apiKey="sk-secret"))
    assert [(issue.path, issue.message) for issue in issues] == [("/apiKey", "unknown field 'apiKey'")]
    assert validate_judge_model(registration(pricing={"inputUsdPerMTok": "1e3", "outputUsdPerMTok": 1}))


def test_it_routes_to_the_cheapest_model_with_the_required_capabilities():
    models = [
        model("big", "2", "8", "json", "reasoning"),
        model("small", "0.1", "0.4", "json"),
        model("think", "1", "4", "json", "reasoning"),
    ]
    assert route(models, None).id == "small"
    assert route(models, {"required": ["reasoning"]}).id == "think"


def test_it_routes_under_the_tenant_policy():
    models = [model("small", "0.1", "0.4", "json"), model("big", "2", "8", "json")]
    policy = JudgePolicy.allowing(["big"], tenant="acme")
    assert route(models, {"required": ["json"]}, policy).id == "big"


def test_it_says_why_no_model_fits():
    models = [model("small", "0.1", "0.4", "json"), model("think", "1", "4", "json", "reasoning")]
    policy = JudgePolicy.allowing(["small"], tenant="acme")
    with pytest.raises(NoJudgeModel) as raised:
        route(models, {"required": ["json", "reasoning"]}, policy)
    assert str(raised.value) == (
        "no registered judge model has capabilities json, reasoning and is allowed for tenant acme"
    )
    with pytest.raises(NoJudgeModel, match="no judge model is registered"):
        route([], None)
    with pytest.raises(NoJudgeModel, match="no registered judge model is allowed for tenant acme"):
        route(models, None, JudgePolicy.allowing([], tenant="acme"))


def test_it_uses_the_pinned_model_or_none():
    models = [model("small", "0.1", "0.4", "json"), model("big", "2", "8", "json")]
    assert route(models, {"model": "big"}).id == "big"
    with pytest.raises(NoJudgeModel, match=r"'gone' named by judgeCapabilities\.model is not"):
        route(models, {"model": "gone"})
    with pytest.raises(NoJudgeModel, match="'big' is not allowed for tenant acme"):
        route(models, {"model": "big"}, JudgePolicy.allowing(["small"], tenant="acme"))
    with pytest.raises(NoJudgeModel, match="'big' lacks the required capabilities reasoning"):
        route(models, {"model": "big", "required": ["reasoning"]})


def test_preferred_capabilities_only_break_price_ties():
    models = [model("a", "1", "1", "json"), model("b", "1", "1", "json", "long-context"), model("c", "0.5", "0.5")]
    assert route(models, {"prefer": ["long-context"]}).id == "c"
    assert route(models, {"required": ["json"], "prefer": ["long-context"]}).id == "b"
    assert route(models, {"required": ["json"]}).id == "a"


def test_it_refuses_unknown_or_malformed_judge_capabilities():
    assert validate_judge_capabilities({"required": ["json"], "model": "m"}) == []
    issues = validate_judge_capabilities({"requierd": ["json"], "required": "json"})
    assert {issue.path for issue in issues} == {"/judgeCapabilities/requierd", "/judgeCapabilities/required"}


def test_a_policy_round_trips():
    policy = JudgePolicy.from_dict({"allowedModels": ["b", "a"]}, tenant="acme")
    assert policy.allows("a") and not policy.allows("c")
    assert policy.to_dict() == {"allowedModels": ["a", "b"]}
    assert JudgePolicy.from_dict({}).allows("anything")
