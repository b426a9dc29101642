"""The frameworks' own guardrail hooks (`kindgi.adapters`) with the real packages, against a
live console, the agent's model served by the suite's OpenAI-protocol server (tests.fakeproviders).
"""

from __future__ import annotations

import socket
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
from kindgi import FAIL_CLOSED, AsyncKindgi, GuardrailViolation, Kindgi
from kindgi.adapters.langchain import KindgiCallbackHandler, KindgiMiddleware
from kindgi.adapters.openai_agents import KindgiGuardrails
from langchain.agents import create_agent
from langchain_core.tools import tool as lc_tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from openai import AsyncOpenAI
from pydantic import SecretStr

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


# --- LangChain (langchain 1.x agent middleware, ChatOpenAI on the local OpenAI-protocol server) ---

CITED = "Your order 1234 was delivered [orders-db]."


class LangChainTools:
    """The LangChain agent's tools, counting their calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

        @lc_tool
        def lookup_order(order: str) -> str:
            """Look an order up."""
            self.calls.append("lookup_order")
            return "delivered"

        @lc_tool
        def issue_refund(order: str) -> str:
            """Refund an order."""
            self.calls.append("issue_refund")
            return "refunded"

        self.tools = [lookup_order, issue_refund]


def langchain_agent(provider: FakeProvider, tools: LangChainTools, middleware: KindgiMiddleware) -> Any:
    model = ChatOpenAI(
        model="fake-agent", base_url=provider.openai_base_url, api_key=SecretStr("sk-fake"), max_retries=0
    )
    return create_agent(
        model, tools=list(tools.tools), system_prompt="Answer support questions.", middleware=[middleware]
    )


def run_langchain(console: str, key: str, provider: FakeProvider, tools: LangChainTools, trace_id: str, **options: Any):
    """One sync turn (agent.invoke) with a Kindgi client; the agent's final state."""
    timeout, fail_mode = options.pop("timeout", 10), options.pop("fail_mode", "open")
    with Kindgi(console, key, timeout=timeout, fail_mode=fail_mode) as client:
        kindgi = KindgiMiddleware(client, agent="support-bot", flow="refund", **options)
        return kindgi.invoke(langchain_agent(provider, tools, kindgi), QUESTION, trace_id=trace_id)


def test_langchain_a_refund_call_forbidden_by_never_call_tool_is_halted_before_it_runs(
    console, acme_key, guardrails, model, api
):
    model.script(Answer(None, tool_calls=(("issue_refund", {"order": "1234"}),)), Answer("unused"))
    tools = LangChainTools()
    with pytest.raises(GuardrailViolation) as raised:
        run_langchain(console, acme_key, model, tools, "lc-refund")
    assert tools.calls == []  # the tool never ran
    assert (raised.value.verdict.stage, raised.value.verdict.halted_by) == ("tool-call", "no-refunds")
    assert str(raised.value) == "halted at tool-call: no-refunds"
    assert len(model.requests) == 1  # the model was not asked again
    assert model.requests[0].body["model"] == "fake-agent"
    assert stages("lc-refund") == {("tool-call", "no-refunds"): "fail"}
    document = api(acme_key).get("/api/v1/traces/lc-refund").json()["document"]
    assert (document["agent"], document["flow"], document["input"]) == ("support-bot", "refund", QUESTION)
    assert [(call["name"], call["arguments"]) for call in document["toolCalls"]] == [
        ("issue_refund", {"order": "1234"})
    ]
    assert "result" not in document["toolCalls"][0]


def test_langchain_an_uncited_answer_is_halted_at_output_and_the_turn_is_one_trace(
    console, acme_key, guardrails, model, api
):
    model.script(Answer(None, tool_calls=(("lookup_order", {"order": "1234"}),)), Answer(UNCITED))
    tools = LangChainTools()
    with pytest.raises(GuardrailViolation) as raised:
        run_langchain(console, acme_key, model, tools, "lc-uncited")
    assert tools.calls == ["lookup_order"]
    assert (raised.value.verdict.stage, raised.value.verdict.halted_by) == ("output", "cites")
    assert RunTrace.objects.filter(trace_id="lc-uncited").count() == 1
    assert stages("lc-uncited") == {
        ("tool-call", "no-refunds"): "pass",
        ("output", "no-refunds"): "pass",
        ("output", "cites"): "fail",
    }
    body = api(acme_key).get("/api/v1/traces/lc-uncited").json()
    assert body["withheld"] and "output" not in body["document"]  # a halted answer is withheld
    assert body["document"]["toolCalls"] == [
        {"id": "call_1", "name": "lookup_order", "arguments": {"order": "1234"}, "result": "delivered"}
    ]
    assert {(r["guardrail"], r["status"]) for r in body["results"]} >= {("no-refunds", "pass"), ("cites", "fail")}


@pytest.mark.parametrize("run", ["invoke", "stream"])
def test_langchain_a_cited_answer_passes_every_stage_as_one_trace(run, console, acme_key, guardrails, model, api):
    """Two tool calls at once (LangGraph runs them side by side), each checked before it runs,
    then a cited answer: every stage passes, one trace; through kindgi.invoke() or a stream
    inside kindgi.turn()."""
    lookups = (("lookup_order", {"order": "1234"}), ("lookup_order", {"order": "5678"}))
    model.script(Answer(None, tool_calls=lookups), Answer(CITED))
    tools, trace_id = LangChainTools(), f"lc-pass-{run}"
    if run == "invoke":
        final = run_langchain(console, acme_key, model, tools, trace_id)
    else:
        with Kindgi(console, acme_key, timeout=10) as client:
            kindgi = KindgiMiddleware(client, agent="support-bot", flow="refund")
            agent = langchain_agent(model, tools, kindgi)
            with kindgi.turn(trace_id):
                states = list(agent.stream({"messages": [{"role": "user", "content": QUESTION}]}, stream_mode="values"))
        final = states[-1]
    assert final["messages"][-1].content == CITED
    assert tools.calls == ["lookup_order", "lookup_order"]
    assert stages(trace_id) == {
        ("tool-call", "no-refunds"): "pass",
        ("output", "no-refunds"): "pass",
        ("output", "cites"): "pass",
    }
    trace = RunTrace.objects.get(trace_id=trace_id)
    assert (trace.document["output"], trace.document["flow"]) == (CITED, "refund")
    assert [m["role"] for m in trace.document["messages"]] == ["user", "assistant"]
    assert sorted((c["id"], c["arguments"]["order"], c["result"]) for c in trace.document["toolCalls"]) == [
        ("call_1", "1234", "delivered"),
        ("call_2", "5678", "delivered"),
    ]
    assert not trace.withheld


def test_langchain_async_a_rejected_refund_call_is_told_to_the_model_and_the_turn_is_one_trace(
    console, acme_key, guardrails, model
):
    """ainvoke with an AsyncKindgi and tool_halt="reject": the model reads the refusal in the
    call's ToolMessage and answers; the refused call stays in the turn, so never-call-tool
    also fails the answer at output: one trace, no conflict."""
    model.script(Answer(None, tool_calls=(("issue_refund", {"order": "1234"}),)), Answer(CITED))
    tools = LangChainTools()

    async def turn() -> Any:
        async with AsyncKindgi(console, acme_key, timeout=10) as client:
            kindgi = KindgiMiddleware(client, agent="support-bot", flow="refund", tool_halt="reject")
            return await kindgi.ainvoke(langchain_agent(model, tools, kindgi), QUESTION, trace_id="lc-reject")

    with pytest.raises(GuardrailViolation) as raised:
        run_on_a_thread(turn())
    assert tools.calls == []
    assert (raised.value.verdict.stage, raised.value.verdict.halted_by) == ("output", "no-refunds")
    told = [m for m in model.requests[1].body["messages"] if m["role"] == "tool"]
    assert told[0]["content"] == "The call to issue_refund was refused by the guardrail no-refunds: it did not run."
    trace = RunTrace.objects.get(trace_id="lc-reject")
    assert trace.document["toolCalls"][0]["error"] == "refused by no-refunds"
    assert stages("lc-reject") == {
        ("tool-call", "no-refunds"): "fail",
        ("output", "no-refunds"): "fail",
        ("output", "cites"): "pass",
    }


def test_langchain_an_unreachable_console_follows_the_clients_fail_mode(model):
    """Nothing listens: fail_mode="closed" halts at input before the model runs (the verdict
    says why); fail_mode="open" lets the whole turn run."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{free.getsockname()[1]}"
    tools = LangChainTools()
    with pytest.raises(GuardrailViolation) as raised:
        run_langchain(nowhere, "kg_unused", model, tools, "lc-closed", fail_mode="closed", timeout=0.5)
    assert raised.value.verdict.stage == "input" and raised.value.verdict.reason == FAIL_CLOSED
    assert "fail closed" in (raised.value.verdict.error or "")
    assert model.requests == [] and tools.calls == []
    model.script(Answer(None, tool_calls=(("issue_refund", {"order": "1234"}),)), Answer(UNCITED))
    state = run_langchain(nowhere, "kg_unused", model, tools, "lc-open", fail_mode="open", timeout=0.5)
    assert state["messages"][-1].content == UNCITED and tools.calls == ["issue_refund"]


# --- LangGraph of one's own (StateGraph + ToolNode), checked by KindgiCallbackHandler ---


def langgraph_graph(provider: FakeProvider, tools: LangChainTools) -> Any:
    model = ChatOpenAI(
        model="fake-agent", base_url=provider.openai_base_url, api_key=SecretStr("sk-fake"), max_retries=0
    ).bind_tools(tools.tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools.tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def run_graph(console: str, key: str, provider: FakeProvider, tools: LangChainTools, trace_id: str) -> Any:
    with Kindgi(console, key, timeout=10) as client:
        handler = KindgiCallbackHandler(client, agent="support-bot", flow="refund", trace_id=trace_id)
        state = {"messages": [{"role": "user", "content": QUESTION}]}
        return langgraph_graph(provider, tools).invoke(state, config={"callbacks": [handler]})


def test_langgraph_callbacks_halt_a_refund_call_before_it_runs(console, acme_key, guardrails, model):
    model.script(Answer(None, tool_calls=(("issue_refund", {"order": "1234"}),)), Answer("unused"))
    tools = LangChainTools()
    with pytest.raises(GuardrailViolation) as raised:
        run_graph(console, acme_key, model, tools, "lg-refund")
    assert tools.calls == [] and len(model.requests) == 1
    assert (raised.value.verdict.stage, raised.value.verdict.halted_by) == ("tool-call", "no-refunds")
    assert stages("lg-refund") == {("tool-call", "no-refunds"): "fail"}
    document = RunTrace.objects.get(trace_id="lg-refund").document
    assert (document["agent"], document["flow"], document["input"]) == ("support-bot", "refund", QUESTION)
    assert [(c["id"], c["name"], c["arguments"]) for c in document["toolCalls"]] == [
        ("call_1", "issue_refund", {"order": "1234"})
    ]


def test_langgraph_callbacks_halt_an_uncited_answer_and_pass_a_cited_one(console, acme_key, guardrails, model):
    model.script(Answer(None, tool_calls=(("lookup_order", {"order": "1234"}),)), Answer(UNCITED))
    tools = LangChainTools()
    with pytest.raises(GuardrailViolation) as raised:
        run_graph(console, acme_key, model, tools, "lg-uncited")
    assert (raised.value.verdict.stage, raised.value.verdict.halted_by) == ("output", "cites")
    assert stages("lg-uncited") == {
        ("tool-call", "no-refunds"): "pass",
        ("output", "no-refunds"): "pass",
        ("output", "cites"): "fail",
    }
    assert RunTrace.objects.get(trace_id="lg-uncited").document["toolCalls"][0]["result"] == "delivered"

    model.script(Answer(None, tool_calls=(("lookup_order", {"order": "1234"}),)), Answer(CITED))
    state = run_graph(console, acme_key, model, tools, "lg-pass")
    assert state["messages"][-1].content == CITED
    assert set(stages("lg-pass").values()) == {"pass"}
    trace = RunTrace.objects.get(trace_id="lg-pass")
    assert trace.document["output"] == CITED and not trace.withheld
    assert RunTrace.objects.filter(trace_id__startswith="lg-").count() == 2
