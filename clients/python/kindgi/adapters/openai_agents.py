"""The OpenAI Agents SDK's own guardrails, answered by the console (`openai-agents`).

    from agents import Agent
    from kindgi import AsyncKindgi
    from kindgi.adapters.openai_agents import KindgiGuardrails

    kindgi = KindgiGuardrails(AsyncKindgi(url, key), agent="support-bot", flow="refund")
    agent = kindgi.guard(Agent(name="support", tools=[issue_refund, ...]))
    result = await kindgi.run(agent, question)  # Runner.run, the turn under one trace id

`guard()` adds an input guardrail (before the model runs), an output guardrail (on the final
answer) and, on each function tool, a tool input guardrail (before the tool runs) and a tool
output guardrail (recording its result in the turn). A `halt` verdict trips the SDK's
tripwire: `InputGuardrailTripwireTriggered`, `OutputGuardrailTripwireTriggered`, and
`ToolInputGuardrailTripwireTriggered` before a forbidden tool runs (or, with
`tool_halt="reject"`, the model is told the call was refused and the turn goes on). The
console's `Verdict` is the guardrail's `output_info`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterator
from typing import Any, Literal

from agents import (
    Agent,
    FunctionTool,
    GuardrailFunctionOutput,
    InputGuardrail,
    OutputGuardrail,
    RunContextWrapper,
    Runner,
    RunResult,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
    TResponseInputItem,
)

from kindgi.adapters._turn import Console, Turn, arguments, verdict

__all__ = ["KindgiGuardrails"]

Citations = Callable[[str], list[dict[str, Any]] | None]


class KindgiGuardrails:
    """The console's guardrails as the SDK's, for the turns of one agent (and flow).

    A turn is what runs inside `turn()` (or `run()`): one trace id, checked at input, before
    each tool call and at output. `citations`, when given, turns the final answer into the
    turn's `citations` (else must-cite reads the `[source]` markers in the answer).
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
        self.console, self.agent, self.flow = console, agent, flow
        self.tool_halt = tool_halt
        self.citations = citations
        self._turn: contextvars.ContextVar[Turn | None] = contextvars.ContextVar(
            f"kindgi-turn-{id(self)}", default=None
        )
        self.input_guardrail: InputGuardrail[Any] = InputGuardrail(
            self._check_input, name="kindgi-input", run_in_parallel=False
        )
        self.output_guardrail: OutputGuardrail[Any] = OutputGuardrail(self._check_output, name="kindgi-output")
        self.tool_input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
            self._check_tool_call, name="kindgi-tool-call"
        )
        self.tool_output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            self._record_tool_result, name="kindgi-tool-result"
        )

    @contextlib.contextmanager
    def turn(self, trace_id: str | None = None) -> Iterator[Turn]:
        """The turn the guardrails check while inside: one trace, `trace_id` or a new one."""
        turn = Turn(self.agent, self.flow, trace_id)
        token = self._turn.set(turn)
        try:
            yield turn
        finally:
            self._turn.reset(token)

    def guard(self, agent: Agent[Any]) -> Agent[Any]:
        """Add the console's guardrails to `agent` and to each of its function tools; returns it."""
        if self.input_guardrail not in agent.input_guardrails:
            agent.input_guardrails.append(self.input_guardrail)
        if self.output_guardrail not in agent.output_guardrails:
            agent.output_guardrails.append(self.output_guardrail)
        for tool in agent.tools:
            if isinstance(tool, FunctionTool):
                tool.tool_input_guardrails = _with(tool.tool_input_guardrails, self.tool_input_guardrail)
                tool.tool_output_guardrails = _with(tool.tool_output_guardrails, self.tool_output_guardrail)
        return agent

    async def run(
        self, agent: Agent[Any], input: str | list[TResponseInputItem], *, trace_id: str | None = None, **kwargs: Any
    ) -> RunResult:
        """`Runner.run(agent, input, **kwargs)` as one turn (`turn(trace_id)`)."""
        with self.turn(trace_id):
            return await Runner.run(agent, input, **kwargs)

    def current(self) -> Turn:
        turn = self._turn.get()
        if turn is None:
            raise RuntimeError("no Kindgi turn: run the agent inside KindgiGuardrails.turn() or with .run()")
        return turn

    async def _check_input(
        self, context: RunContextWrapper[Any], agent: Agent[Any], input: str | list[TResponseInputItem]
    ) -> GuardrailFunctionOutput:
        turn = self.current()
        checked = await verdict(self.console, "check_input", turn.started(_input_text(input)))
        return GuardrailFunctionOutput(output_info=checked, tripwire_triggered=_halts(turn, checked))

    async def _check_tool_call(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        turn = self.current()
        tool = data.context
        call = {"id": tool.tool_call_id, "name": tool.tool_name, "arguments": arguments(tool.tool_arguments)}
        checked = await verdict(self.console, "check_tool_call", turn.proposed(call), call)
        if not _halts(turn, checked):
            return ToolGuardrailFunctionOutput.allow(output_info=checked)
        if self.tool_halt == "reject":
            turn.ran(tool.tool_call_id, error=f"refused by {checked.halted_by or checked.reason}")
            why = checked.halted_by or checked.reason or "a guardrail"
            return ToolGuardrailFunctionOutput.reject_content(
                f"The call to {tool.tool_name} was refused by the guardrail {why}: it did not run.", checked
            )
        return ToolGuardrailFunctionOutput.raise_exception(output_info=checked)

    def _record_tool_result(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        self.current().ran(data.context.tool_call_id, data.output)
        return ToolGuardrailFunctionOutput.allow()

    async def _check_output(
        self, context: RunContextWrapper[Any], agent: Agent[Any], output: Any
    ) -> GuardrailFunctionOutput:
        turn = self.current()
        text = output if isinstance(output, str) else _text_of(output)
        cited = self.citations(text) if self.citations is not None else None
        checked = await verdict(self.console, "check_output", turn.answered(text, cited))
        return GuardrailFunctionOutput(output_info=checked, tripwire_triggered=_halts(turn, checked))


def _halts(turn: Turn, checked: Any) -> bool:
    if checked.halted:
        turn.halted.append(checked)
    return bool(checked.halted)


def _with(guardrails: list[Any] | None, guardrail: Any) -> list[Any]:
    present = list(guardrails or ())
    return present if guardrail in present else [*present, guardrail]


def _input_text(input: str | list[TResponseInputItem]) -> str:
    """The user's text of the SDK's input: the string, or the user messages' text parts."""
    if isinstance(input, str):
        return input
    texts: list[str] = []
    for item in input:
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(part.get("text")) for part in content if isinstance(part, dict) and part.get("text"))
    return "\n".join(texts)


def _text_of(output: Any) -> str:
    dump = getattr(output, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    try:
        return json.dumps(output)
    except (TypeError, ValueError):
        return str(output)
