"""A turn as the console's RunTrace document, grown stage by stage under one trace id.

Each document sent extends the one before (messages and tool calls appended, the proposed
call given its result, the output added), so the console stores one trace, not a conflict.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kindgi.aio import AsyncKindgi
from kindgi.client import Kindgi
from kindgi.verdict import Verdict

Console = Kindgi | AsyncKindgi


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class Turn:
    """The document of one turn: `document` is what the console is sent at each stage."""

    def __init__(self, agent: str, flow: str | None = None, trace_id: str | None = None) -> None:
        self.id = trace_id or f"turn-{uuid.uuid4().hex}"
        self.document: dict[str, Any] = {"id": self.id, "agent": agent, "startedAt": now()}
        if flow is not None:
            self.document["flow"] = flow
        self.halted: list[Verdict] = []

    def started(self, text: str) -> dict[str, Any]:
        """The turn at its input (set once: a later input would rewrite the stored trace)."""
        if "input" not in self.document:
            self.document["input"] = text
            self.document["messages"] = [{"role": "user", "content": text}]
        return self.document

    def proposed(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """Record a call about to run (without its result); the turn before it, to check."""
        calls = self.document.get("toolCalls", ())
        # A snapshot: the calls already running (side by side) get their results in place
        # while this one's check is sent.
        before = {**self.document, "toolCalls": [dict(each) for each in calls]} if calls else dict(self.document)
        self.document["toolCalls"] = [*calls, dict(call)]
        return before

    def ran(self, call_id: str | None, result: Any = None, error: str | None = None) -> None:
        """Give the proposed call `call_id` its result (or its error)."""
        for call in reversed(self.document.get("toolCalls", ())):
            if call.get("id") == call_id:
                if error is not None:
                    call["error"] = error
                else:
                    call["result"] = jsonable(result)
                return

    def answered(self, output: str, citations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The whole turn with its answer."""
        self.document["output"] = output
        self.document["messages"] = [*self.document.get("messages", ()), {"role": "assistant", "content": output}]
        if citations is not None:
            self.document["citations"] = citations
        self.document["endedAt"] = now()
        return self.document


def jsonable(value: Any) -> Any:
    """`value` as JSON can carry it (what is not JSON becomes its text)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def arguments(raw: str | None) -> Any:
    """A tool call's arguments: its JSON decoded, else the text as it came."""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


async def verdict(console: Console, method: str, *args: Any) -> Verdict:
    """Call `console.<method>(*args)`, awaited for an `AsyncKindgi`, in a thread for a `Kindgi`."""
    call: Callable[..., Verdict | Awaitable[Verdict]] = getattr(console, method)
    if isinstance(console, AsyncKindgi):
        answer = call(*args)
        assert inspect.isawaitable(answer)
        return await answer
    return await asyncio.to_thread(call, *args)  # type: ignore[arg-type]
