"""A stored RunTrace as the steps of a timeline, for the trace page.

Everything here is untrusted model and tool output: it is turned into plain strings
(JSON pretty-printed as text) that the template escapes; nothing is marked safe. A
citation's source becomes a link only when it is an absolute http(s) URL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

#: Characters browsers strip from a URL before reading its scheme ("java\tscript:").
_URL_NOISE = {chr(code) for code in range(0x21)} | {"\x7f"}


def http_url(source: object) -> str | None:
    """`source` if it is an absolute http or https URL with a host, else None."""
    if not isinstance(source, str) or any(char in _URL_NOISE for char in source):
        return None
    try:
        parts = urlsplit(source)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return source


def pretty(value: Any) -> str:
    """A JSON value as indented text; a string stays as it is."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else pretty(value)


@dataclass
class Step:
    """One step of the turn: a message, a tool call, or the final response."""

    kind: str  # input, message, toolcall, output, withheld
    role: str = ""
    content: str = ""
    empty: bool = False
    name: str = ""
    call_id: str = ""
    arguments: str = ""
    result: str = ""
    has_result: bool = False
    error: str = ""
    withheld: bool = False
    started_at: str = ""
    ended_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def marker(self) -> str:
        return {"toolcall": "T", "output": "A", "withheld": "!", "input": "U"}.get(
            self.kind, (self.role or "?")[:1].upper()
        )

    @property
    def css(self) -> str:
        return {"toolcall": "tool", "output": "assistant", "withheld": "system", "input": "user"}.get(
            self.kind, self.role if self.role in ("user", "assistant", "system", "tool") else "system"
        )


def tool_step(call: dict[str, Any]) -> Step:
    return Step(
        kind="toolcall",
        name=str(call.get("name") or ""),
        call_id=str(call.get("id") or ""),
        arguments=pretty(call.get("arguments")) if "arguments" in call else "",
        result=pretty(call.get("result")) if "result" in call else "",
        has_result="result" in call,
        error=text(call.get("error")),
        started_at=str(call.get("startedAt") or ""),
        ended_at=str(call.get("endedAt") or ""),
    )


def message_step(message: dict[str, Any]) -> Step:
    content = message.get("content")
    return Step(
        kind="message",
        role=str(message.get("role") or ""),
        content=text(content),
        empty=content is None or content == "",
        name=str(message.get("name") or ""),
        call_id=str(message.get("toolCallId") or ""),
    )


def steps(document: dict[str, Any], *, withheld: bool) -> list[Step]:
    """The turn in order: the input (when no message carries it), the messages with each
    tool call placed before the tool message that answers it (the others before the last
    assistant message), then the final response or the mark that it was withheld."""
    messages = [m for m in document.get("messages") or [] if isinstance(m, dict)]
    calls = [c for c in document.get("toolCalls") or [] if isinstance(c, dict)]
    answered = {str(m.get("toolCallId")) for m in messages if m.get("toolCallId")}
    by_id = {str(c["id"]): c for c in calls if c.get("id") and str(c["id"]) in answered}
    loose = [c for c in calls if c not in by_id.values()]

    timeline: list[Step] = []
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    if document.get("input") is not None and (first_user is None or first_user.get("content") != document.get("input")):
        timeline.append(Step(kind="input", role="user", content=text(document.get("input"))))
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    for index, message in enumerate(messages):
        if index == last_assistant:
            timeline.extend(tool_step(c) for c in loose)
            loose = []
        call = by_id.pop(str(message.get("toolCallId")), None) if message.get("toolCallId") else None
        if call is not None:
            timeline.append(tool_step(call))
        step = message_step(message)
        # The response a halt guardrail withheld may still be in the conversation record.
        step.withheld = withheld and index == len(messages) - 1 and index == last_assistant
        timeline.append(step)
    timeline.extend(tool_step(c) for c in [*loose, *by_id.values()])
    if withheld:
        # "messages": the withheld response is still in the conversation record shown above.
        kept = "messages" if any(step.withheld for step in timeline) else ""
        timeline.append(Step(kind="withheld", role="system", content=kept))
    elif document.get("output") is not None:
        output = text(document.get("output"))
        if (
            not messages
            or messages[-1].get("role") != "assistant"
            or (messages[-1].get("content") != document.get("output"))
        ):
            timeline.append(Step(kind="output", role="assistant", content=output))
    return timeline


@dataclass
class Citation:
    source: str
    url: str | None
    title: str
    quote: str


def citations(document: dict[str, Any]) -> list[Citation]:
    found = []
    for item in document.get("citations") or []:
        if isinstance(item, dict):
            source = text(item.get("source"))
            found.append(Citation(source, http_url(source), text(item.get("title")), text(item.get("quote"))))
    return found
