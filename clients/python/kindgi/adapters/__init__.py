"""The agent frameworks' own guardrail hooks, calling the console at each stage of a turn.

- `kindgi.adapters.openai_agents`: the OpenAI Agents SDK's input, output and tool guardrails
  (`pip install "./clients/python[openai-agents]"`).
- `kindgi.adapters.langchain`: a LangChain 1.x agent middleware, `KindgiMiddleware`, and for
  graphs of one's own a callback handler, `KindgiCallbackHandler`
  (`pip install "./clients/python[langchain]"`).

Each sends the whole turn as one trace (`Turn`): checked at input, before each tool call and
with its answer, under one id, with the agent and flow ids the team sets.
"""

from kindgi.adapters._turn import Turn

__all__ = ["Turn"]
