"""Mapping rules of docs/otlp.md that the SDK-recorded turn does not exercise: the older gen_ai
attributes and events, OpenInference's attributes, nested agents and the turn's grouping."""

from __future__ import annotations

import json
from typing import Any

from traces.ingest.otlp.mapping import document_of, tool_call
from traces.ingest.otlp.spans import Span
from traces.ingest.otlp.turns import incomplete_turns, split

TRACE = "0af7651916cd43dd8448eb211c80319c"


def span(span_id: str, parent: str = "", name: str = "chat m", start: int = 1, **attributes: Any) -> Span:
    return Span(
        trace_id=TRACE,
        span_id=span_id,
        parent_id=parent,
        name=name,
        start_ns=start * 1000,
        end_ns=start * 1000 + 500,
        attributes={k.replace("__", "."): v for k, v in attributes.items()},
    )


def test_it_reads_the_older_gen_ai_prompt_and_completion_attributes_indexed():
    chat = span(
        "a" * 16,
        gen_ai__prompt__0__role="user",
        gen_ai__prompt__0__content="Hi?",
        gen_ai__completion__0__role="assistant",
        gen_ai__completion__0__content="Hello.",
    )

    document = document_of("t", [chat], chat)

    assert document["messages"] == [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello."}]
    assert (document["input"], document["output"]) == ("Hi?", "Hello.")


def test_it_reads_the_older_gen_ai_prompt_attribute_as_json_or_text():
    chat = span("a" * 16, gen_ai__prompt=json.dumps([{"role": "user", "content": "Hi?"}]), gen_ai__completion="Hello.")

    assert document_of("t", [chat], chat)["messages"] == [
        {"role": "user", "content": "Hi?"},
        {"role": "assistant", "content": "Hello."},
    ]


def test_it_reads_the_older_content_events():
    chat = span("a" * 16)
    chat.events = [
        {"name": "gen_ai.content.prompt", "time": 1, "attributes": {"gen_ai.prompt": "Hi?"}},
        {"name": "gen_ai.content.completion", "time": 2, "attributes": {"gen_ai.completion": "Hello."}},
    ]

    assert document_of("t", [chat], chat)["messages"] == [
        {"role": "user", "content": "Hi?"},
        {"role": "assistant", "content": "Hello."},
    ]


def test_it_reads_role_and_choice_events():
    chat = span("a" * 16)
    chat.events = [
        {"name": "gen_ai.system.message", "time": 1, "attributes": {"content": "Be brief."}},
        {"name": "gen_ai.user.message", "time": 2, "attributes": {"content": "Hi?"}},
        {"name": "gen_ai.choice", "time": 3, "attributes": {"message": '{"role": "assistant", "content": "Yo."}'}},
    ]

    document = document_of("t", [chat], chat)

    assert document["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi?"},
        {"role": "assistant", "content": "Yo."},
    ]
    assert document["output"] == "Yo."


def test_it_reads_openinference_messages_and_text_output_value():
    agent = span(
        "a" * 16, name="agent", openinference__span__kind="AGENT", input__value="Refund?", output__value="Done."
    )
    llm = span(
        "b" * 16,
        "a" * 16,
        name="ChatCompletion",
        start=2,
        openinference__span__kind="LLM",
        llm__input_messages__0__message__role="user",
        llm__input_messages__0__message__content="Refund?",
        llm__token_count__prompt=5,
        llm__token_count__completion=2,
        llm__model_name="m1",
    )
    tool = span(
        "c" * 16,
        "a" * 16,
        name="lookup",
        start=3,
        openinference__span__kind="TOOL",
        tool__name="lookup_order",
        input__value='{"order": "1"}',
        output__value="delivered",
    )

    turns, leftover = split([llm, tool, agent])

    assert leftover == [] and len(turns) == 1
    document = document_of(turns[0].turn_id, turns[0].spans, turns[0].head)
    assert document["input"] == "Refund?"
    assert document["output"] == "Done."
    assert document["toolCalls"] == [
        {
            "name": "lookup_order",
            "arguments": {"order": "1"},
            "result": "delivered",
            "startedAt": "1970-01-01T00:00:00.000003Z",
            "endedAt": "1970-01-01T00:00:00.000003Z",
        }
    ]
    assert document["usage"] == {"inputTokens": 5, "outputTokens": 2, "model": "m1"}


def test_a_span_belongs_to_its_nearest_agent_and_nested_agents_are_turns_of_their_own():
    outer = span("a" * 16, name="invoke_agent planner")
    step = span("b" * 16, "a" * 16, name="workflow step", start=2)
    inner = span("c" * 16, "b" * 16, name="invoke_agent researcher", start=3)
    tool = span("d" * 16, "c" * 16, name="execute_tool search", start=4)
    chat = span("e" * 16, "b" * 16, start=5)

    turns, leftover = split([outer, step, inner, tool, chat])

    members = {turn.head.span_id[0]: sorted(s.span_id[0] for s in turn.spans) for turn in turns if turn.head}
    assert members == {"a": ["a", "b", "e"], "c": ["c", "d"]}
    assert leftover == []


def test_spans_under_no_agent_wait_until_the_root_arrives_then_are_dropped():
    agent = span("a" * 16, "f" * 16, name="invoke_agent bot", start=2)
    orphan = span("b" * 16, "9" * 16, start=3)  # its parent has not arrived yet

    turns, leftover = split([agent, orphan])
    assert [turn.head for turn in turns] == [agent] and leftover == [orphan]

    root = span("f" * 16, name="POST /chat")
    turns, leftover = split([root, orphan])
    assert leftover == []


def test_timed_out_spans_are_grouped_under_the_span_they_wait_for():
    chat = span("b" * 16, "a" * 16)
    tool = span("c" * 16, "a" * 16, name="execute_tool t", start=2)
    other = span("d" * 16, "e" * 16, start=3)

    turns = incomplete_turns([chat, tool, other])

    assert {turn.turn_id: len(turn.spans) for turn in turns} == {f"{TRACE}-{'a' * 16}": 2, f"{TRACE}-{'e' * 16}": 1}


def test_a_tool_error_without_message_takes_the_error_type():
    failed = span("a" * 16, name="execute_tool fetch", error__type="TimeoutError")
    failed.error = ""

    assert tool_call(failed)["error"] == "TimeoutError"
    assert tool_call(failed)["name"] == "fetch"


def test_an_end_before_the_start_is_left_out_not_refused():
    skewed = span("a" * 16, name="execute_tool t", start=5)
    skewed.end_ns = 1000

    document = document_of("t", [skewed], skewed)

    assert "endedAt" not in document and "endedAt" not in document["toolCalls"][0]
    assert document["startedAt"] == "1970-01-01T00:00:00.000005Z"
