"""The frameworks' own guardrail hooks (`kindgi.adapters`) with the real packages, against a
live console, the agent's model served by the suite's OpenAI-protocol server (tests.fakeproviders).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    ToolInputGuardrailTripwireTriggered,
    function_tool,
)
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from kindgi import AsyncKindgi
from kindgi.adapters.openai_agents import KindgiGuardrails
from openai import AsyncOpenAI

from guardrails.services import Author, save_guardrail
from tests.clients.loops import run as run_on_a_thread
from tests.conftest import make_guardrail
from tests.fakeproviders import Answer, FakeProvider
from traces.models import EvaluationResult, RunTrace

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Can I get a refund for order 1234?"
UNCITED = "Your order 1234 has been refunded."


@pytest.fixture
def console(live_server: Any) -> str:
    return str(live_server.url)


@pytest.fixture
def guardrails(db: Any) -> list[Any]:
    """never-call-tool issue_refund (tool-call and output) and a halting must-cite (output)."""
    author = Author(user=None, label="fixture")
    return [
        save_guardrail(make_guardrail(), author),
        save_guardrail(make_guardrail("cites", check="must-cite", config={"min": 1}), author),
    ]


@pytest.fixture
def model() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


class Tools:
    """The agent's tools, counting their calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

        @function_tool
        def lookup_order(order: str) -> str:
            """Look an order up."""
            self.calls.append("lookup_order")
            return "delivered"

        @function_tool
        def issue_refund(order: str) -> str:
            """Refund an order."""
            self.calls.append("issue_refund")
            return "refunded"

        self.tools = [lookup_order, issue_refund]


def sdk_agent(provider: FakeProvider, tools: Tools) -> Agent[Any]:
    client = AsyncOpenAI(base_url=provider.openai_base_url, api_key="sk-fake", max_retries=0)
    return Agent(
        name="support",
        instructions="Answer support questions.",
        model=OpenAIChatCompletionsModel(model="fake-agent", openai_client=client),
        tools=list(tools.tools),
    )


def run_sdk(console: str, key: str, agent: Agent[Any], trace_id: str, **options: Any) -> Any:
    async def turn() -> Any:
        async with AsyncKindgi(console, key, timeout=10) as client:
            kindgi = KindgiGuardrails(client, agent="support-bot", flow="refund", **options)
            return await kindgi.run(
                kindgi.guard(agent), QUESTION, trace_id=trace_id, run_config=RunConfig(tracing_disabled=True)
            )

    return run_on_a_thread(turn())


def stages(trace_id: str) -> dict[tuple[str, str], str]:
    return {
        (r.stage, r.guardrail.guardrail_id): r.status
        for r in EvaluationResult.objects.filter(trace__trace_id=trace_id).select_related("guardrail")
    }


def test_agents_sdk_a_refund_call_forbidden_by_never_call_tool_is_halted_before_it_runs(
    console, acme_key, guardrails, model, api
):
    model.script(Answer(None, tool_calls=(("issue_refund", {"order": "1234"}),)), Answer("unused"))
    tools = Tools()
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as raised:
        run_sdk(console, acme_key, sdk_agent(model, tools), "sdk-refund")
    assert tools.calls == []  # the tool never ran
    assert raised.value.output.output_info.halted_by == "no-refunds"
    assert len(model.requests) == 1  # the model was not asked again
    assert stages("sdk-refund") == {("tool-call", "no-refunds"): "fail"}  # skipped results are not stored
    read = api(acme_key).get("/api/v1/traces/sdk-refund")
    assert read.status_code == 200
    document = read.json()["document"]
    assert (document["agent"], document["flow"], document["input"]) == ("support-bot", "refund", QUESTION)
    assert [call["name"] for call in document["toolCalls"]] == ["issue_refund"]
    assert "result" not in document["toolCalls"][0]


def test_agents_sdk_an_uncited_answer_is_halted_at_output_and_the_turn_is_one_trace(
    console, acme_key, guardrails, model, api
):
    model.script(Answer(None, tool_calls=(("lookup_order", {"order": "1234"}),)), Answer(UNCITED))
    tools = Tools()
    with pytest.raises(OutputGuardrailTripwireTriggered) as raised:
        run_sdk(console, acme_key, sdk_agent(model, tools), "sdk-uncited")
    assert tools.calls == ["lookup_order"]
    assert raised.value.guardrail_result.output.output_info.halted_by == "cites"
    assert RunTrace.objects.filter(trace_id="sdk-uncited").count() == 1
    assert stages("sdk-uncited") == {
        ("tool-call", "no-refunds"): "pass",
        ("output", "no-refunds"): "pass",
        ("output", "cites"): "fail",
    }
    body = api(acme_key).get("/api/v1/traces/sdk-uncited").json()
    assert body["withheld"] and "output" not in body["document"]  # a halted answer is withheld
    assert body["document"]["toolCalls"] == [
        {"id": "call_1", "name": "lookup_order", "arguments": {"order": "1234"}, "result": "delivered"}
    ]
    assert {(r["guardrail"], r["status"]) for r in body["results"]} >= {("no-refunds", "pass"), ("cites", "fail")}


def test_agents_sdk_a_rejected_refund_call_and_an_uncited_answer_are_one_trace(console, acme_key, guardrails, model):
    """With tool_halt="reject" the model is told the call was refused and answers: the turn's
    stages (the refused call, then the uncited answer) are one trace, no conflict."""
    model.script(Answer(None, tool_calls=(("issue_refund", {"order": "1234"}),)), Answer(UNCITED))
    tools = Tools()
    with pytest.raises(OutputGuardrailTripwireTriggered):
        run_sdk(console, acme_key, sdk_agent(model, tools), "sdk-turn", tool_halt="reject")
    assert tools.calls == []
    told = [m for m in model.requests[1].body["messages"] if m["role"] == "tool"]
    assert "refused by the guardrail no-refunds" in told[0]["content"]
    trace = RunTrace.objects.get(trace_id="sdk-turn")
    assert trace.document["toolCalls"][0]["error"] == "refused by no-refunds"
    assert stages("sdk-turn")[("tool-call", "no-refunds")] == "fail"
    assert stages("sdk-turn")[("output", "cites")] == "fail"


def test_agents_sdk_an_input_halt_stops_the_turn_before_the_model_runs(console, acme_key, model):
    guardrail = save_guardrail(
        make_guardrail("no-refund-talk", check="forbidden-substring", config={"values": ["refund"]}),
        Author(user=None, label="fixture"),
    )
    guardrail.stages = ["input"]
    guardrail.save(update_fields=["stages"])
    tools = Tools()
    with pytest.raises(InputGuardrailTripwireTriggered):
        run_sdk(console, acme_key, sdk_agent(model, tools), "sdk-input")
    assert model.requests == [] and tools.calls == []
    assert stages("sdk-input") == {("input", "no-refund-talk"): "fail"}
