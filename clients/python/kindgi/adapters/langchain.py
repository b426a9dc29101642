"""LangChain's own guardrail hooks, answered by the console: agent middleware (`langchain` 1.x)
and, for graphs and chains the middleware does not reach, a callback handler (`langchain-core`).

    from langchain.agents import create_agent
    from kindgi import Kindgi
    from kindgi.adapters.langchain import KindgiMiddleware

    kindgi = KindgiMiddleware(Kindgi(url, key), agent="support-bot", flow="refund")
    agent = create_agent(model, tools=[issue_refund, ...], middleware=[kindgi])
    state = kindgi.invoke(agent, question)  # agent.invoke, the turn under one trace id

The middleware checks the user's input once before the agent starts (`before_agent`, stage
`input`), each tool call before it runs (`wrap_tool_call`, stage `tool-call`; its result is
recorded in the turn) and the final answer (`after_model` on the model's reply that asks for
no tool, stage `output`). A `halt` verdict raises `GuardrailViolation` (its `verdict` says the
stage and the guardrail): a forbidden tool does not run and the agent stops. With
`tool_halt="reject"` the model is told instead, in the call's `ToolMessage` (status "error"),
that the call was refused, and the turn goes on. The client's `fail_mode` decides when the
console gives no verdict (`Verdict.error` says why).

A sync agent (`invoke`, `stream`) needs a `Kindgi`; an async one (`ainvoke`, `astream`) takes
either (a `Kindgi` is called on a worker thread). LangGraph runs each node in a copy of the
caller's context, so the turn opened by `turn()` (or `invoke()`/`ainvoke()`) around the run is
the one every hook of that run extends.

`KindgiCallbackHandler` is one turn: pass a new one in each run's config
(`graph.invoke(state, config={"callbacks": [handler]})`); it checks the same three stages from
LangChain's callbacks, raising from them (`raise_error`) to halt.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import LLMResult
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from kindgi.adapters._turn import Console, Turn, arguments, jsonable, verdict
from kindgi.client import Kindgi
from kindgi.verdict import GuardrailViolation, Verdict

__all__ = ["KindgiCallbackHandler", "KindgiMiddleware"]

Citations = Callable[[str], list[dict[str, Any]] | None]
ToolResult = ToolMessage | Command[Any]


@dataclass
class _Open:
    """The turn being run, and the locks that keep its tool-call checks in order."""

    turn: Turn
    thread_lock: threading.Lock = field(default_factory=threading.Lock)
    task_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class KindgiMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """The console's guardrails as a LangChain agent's middleware, for one agent (and flow).

    A turn is what runs inside `turn()` (or `invoke()`/`ainvoke()`): one trace id, checked at
    input, before each tool call and at output. `citations`, when given, turns the final
    answer into the turn's `citations` (else must-cite reads the `[source]` markers in it).
    """

    def __init__(
        self,
        console: Console,
        *,
        agent: str,
        flow: str | None = None,
        tool_halt: Literal["raise", "reject"] = "raise",
        citations: Citations | None = None,
    ) -> None:
        super().__init__()
        if tool_halt not in ("raise", "reject"):
            raise ValueError('tool_halt is "raise" or "reject"')
        self.console, self.agent, self.flow = console, agent, flow
        self.tool_halt = tool_halt
        self.citations = citations
        self._open: contextvars.ContextVar[_Open | None] = contextvars.ContextVar(
            f"kindgi-langchain-turn-{id(self)}", default=None
        )

    @property
    def name(self) -> str:
        return "KindgiMiddleware"

    # -- the turn ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def turn(self, trace_id: str | None = None) -> Iterator[Turn]:
        """The turn the middleware checks while inside: one trace, `trace_id` or a new one."""
        opened = _Open(Turn(self.agent, self.flow, trace_id))
        token = self._open.set(opened)
        try:
            yield opened.turn
        finally:
            self._open.reset(token)

    def invoke(self, agent: Any, input: str | dict[str, Any], *, trace_id: str | None = None, **kwargs: Any) -> Any:
        """`agent.invoke(input, **kwargs)` as one turn; a string is the user's message."""
        with self.turn(trace_id):
            return agent.invoke(_state(input), **kwargs)

    async def ainvoke(
        self, agent: Any, input: str | dict[str, Any], *, trace_id: str | None = None, **kwargs: Any
    ) -> Any:
        """`await agent.ainvoke(input, **kwargs)` as one turn; a string is the user's message."""
        with self.turn(trace_id):
            return await agent.ainvoke(_state(input), **kwargs)

    def current(self) -> Turn:
        return self._current().turn

    def _current(self) -> _Open:
        opened = self._open.get()
        if opened is None:
            raise RuntimeError("no Kindgi turn: run the agent inside KindgiMiddleware.turn() or with .invoke()")
        return opened

    # -- stage input ------------------------------------------------------------------------

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        turn = self.current()
        _halt_on(turn, self._sync("check_input", turn.started(_input_text(state))))
        return None

    async def abefore_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        turn = self.current()
        _halt_on(turn, await verdict(self.console, "check_input", turn.started(_input_text(state))))
        return None

    # -- stage tool-call --------------------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        opened = self._current()
        call = _call(request)
        with opened.thread_lock:
            checked = self._sync("check_tool_call", opened.turn.proposed(call), call)
        refused = self._refused(opened.turn, request, checked)
        if refused is not None:
            return refused
        try:
            result = handler(request)
        except Exception as error:
            opened.turn.ran(call["id"], error=f"{type(error).__name__}: {error}")
            raise
        return _ran(opened.turn, call["id"], result)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        opened = self._current()
        call = _call(request)
        async with opened.task_lock:
            checked = await verdict(self.console, "check_tool_call", opened.turn.proposed(call), call)
        refused = self._refused(opened.turn, request, checked)
        if refused is not None:
            return refused
        try:
            result = await handler(request)
        except Exception as error:
            opened.turn.ran(call["id"], error=f"{type(error).__name__}: {error}")
            raise
        return _ran(opened.turn, call["id"], result)

    def _refused(self, turn: Turn, request: ToolCallRequest, checked: Verdict) -> ToolMessage | None:
        """None when the call may run; else the refusal told to the model (or the raise)."""
        if not checked.halted:
            return None
        turn.halted.append(checked)
        call_id = request.tool_call["id"]
        why = checked.halted_by or checked.reason or "a guardrail"
        if self.tool_halt == "raise":
            raise GuardrailViolation(checked)
        turn.ran(call_id, error=f"refused by {why}")
        name = request.tool_call["name"]
        return ToolMessage(
            content=f"The call to {name} was refused by the guardrail {why}: it did not run.",
            tool_call_id=call_id or "",
            name=name,
            status="error",
        )

    # -- stage output -----------------------------------------------------------------------

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        answer = _final_answer(state)
        if answer is not None:
            turn = self.current()
            _halt_on(turn, self._sync("check_output", turn.answered(answer, self._cited(answer))))
        return None

    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        answer = _final_answer(state)
        if answer is not None:
            turn = self.current()
            _halt_on(turn, await verdict(self.console, "check_output", turn.answered(answer, self._cited(answer))))
        return None

    def _cited(self, answer: str) -> list[dict[str, Any]] | None:
        return self.citations(answer) if self.citations is not None else None

    def _sync(self, method: str, *args: Any) -> Verdict:
        """A verdict from a sync hook: only a `Kindgi` answers in the caller's thread."""
        if not isinstance(self.console, Kindgi):
            raise TypeError(
                "a sync agent run (invoke, stream) needs a kindgi.Kindgi; with an AsyncKindgi use ainvoke or astream"
            )
        answer: Verdict = getattr(self.console, method)(*args)
        return answer


def _halt_on(turn: Turn, checked: Verdict) -> None:
    if checked.halted:
        turn.halted.append(checked)
        raise GuardrailViolation(checked)


def _state(input: str | dict[str, Any]) -> dict[str, Any]:
    return {"messages": [HumanMessage(input)]} if isinstance(input, str) else input


def _messages(state: AgentState[Any]) -> list[BaseMessage]:
    return list(state.get("messages") or ())


def _input_text(state: AgentState[Any]) -> str:
    """The user's text of this turn: the last human message (earlier ones are history)."""
    for message in reversed(_messages(state)):
        if isinstance(message, HumanMessage):
            return message.text
    return ""


def _final_answer(state: AgentState[Any]) -> str | None:
    """The model's reply when it asks for no tool (the agent ends with it), else None."""
    messages = _messages(state)
    if not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls:
        return None
    return messages[-1].text


def _call(request: ToolCallRequest) -> dict[str, Any]:
    tool_call = request.tool_call
    return {"id": tool_call["id"], "name": tool_call["name"], "arguments": jsonable(tool_call["args"])}


def _ran(turn: Turn, call_id: str | None, result: ToolResult) -> ToolResult:
    """Record the call's result (its ToolMessage's content; an error status as its error)."""
    if isinstance(result, ToolMessage):
        if result.status == "error":
            turn.ran(call_id, error=str(result.content))
        else:
            turn.ran(call_id, result.content)
    else:
        turn.ran(call_id, "(command)")
    return result


class KindgiCallbackHandler(BaseCallbackHandler):
    """The console's guardrails as a callback handler: one handler, one turn (langchain-core).

    For runnables the middleware does not reach (a LangGraph `StateGraph` of your own with a
    `ToolNode`, a chain that calls tools): pass it in the run's config,
    `graph.invoke(state, config={"callbacks": [KindgiCallbackHandler(console, agent=...)]})`.
    It checks the input before the first chat model call, each tool before it runs
    (`on_tool_start`; LangChain runs the tool only after its callbacks) and the first reply that
    asks for no tool (`on_llm_end`). With `raise_error` set, a `halt` raises
    `GuardrailViolation` out of the run: the model is not called, the tool does not run, the
    answer is not returned. Model calls and tools nested inside a tool are not the agent's turn
    and are not checked. It takes a `Kindgi` (LangChain runs a sync handler's errors through to
    the caller in sync and async runs alike; an async handler's are swallowed in sync runs).
    """

    raise_error = True
    run_inline = True

    def __init__(
        self,
        console: Kindgi,
        *,
        agent: str,
        flow: str | None = None,
        trace_id: str | None = None,
        citations: Citations | None = None,
    ) -> None:
        if not isinstance(console, Kindgi):
            raise TypeError("KindgiCallbackHandler takes a kindgi.Kindgi (its callbacks are sync)")
        self.console = console
        self.turn = Turn(agent, flow, trace_id)
        self.citations = citations
        self._lock = threading.Lock()
        self._parents: dict[UUID, UUID | None] = {}
        self._tools: dict[UUID, str | None] = {}  # tool run -> the call's id (None: nested, unchecked)
        self._started = self._answered = False

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id
        with self._lock:
            if self._started or self._in_tool(parent_run_id):
                return
            self._started = True
            text = next((m.text for m in reversed(messages[0] if messages else []) if isinstance(m, HumanMessage)), "")
            _halt_on(self.turn, self.console.check_input(self.turn.started(text)))

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._parents[run_id] = parent_run_id
        if self._in_tool(parent_run_id):
            self._tools[run_id] = None
            return
        call_id = kwargs.get("tool_call_id") or str(run_id)
        name = kwargs.get("name") or serialized.get("name")
        call = {
            "id": call_id,
            "name": name,
            "arguments": jsonable(inputs) if inputs is not None else arguments(input_str),
        }
        self._tools[run_id] = call_id
        with self._lock:
            _halt_on(self.turn, self.console.check_tool_call(self.turn.proposed(call), call))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        call_id = self._tools.get(run_id)
        if call_id is None:
            return
        with self._lock:
            if isinstance(output, ToolMessage):
                _ran(self.turn, call_id, output)
            else:
                self.turn.ran(call_id, output)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call_id = self._tools.get(run_id)
        if call_id is not None:
            with self._lock:
                self.turn.ran(call_id, error=f"{type(error).__name__}: {error}")

    def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        generations = response.generations[0] if response.generations else []
        message = getattr(generations[0], "message", None) if generations else None
        if not isinstance(message, AIMessage) or message.tool_calls:
            return
        with self._lock:
            if self._answered or self._in_tool(parent_run_id):
                return
            self._answered = True
            answer = message.text
            cited = self.citations(answer) if self.citations is not None else None
            _halt_on(self.turn, self.console.check_output(self.turn.answered(answer, cited)))

    def _in_tool(self, run_id: UUID | None) -> bool:
        """Whether `run_id` is a tool's run or runs inside one."""
        seen = 0
        while run_id is not None and seen < 10_000:
            if run_id in self._tools:
                return True
            run_id, seen = self._parents.get(run_id), seen + 1
        return False
