"""The demo's judge provider: an OpenAI Chat Completions endpoint served by the console itself.

`load_demo` registers the demo's judge models at ``{console}/demo-judge/v1`` and `runconsole`
points them at the address it serves, so that Try it, Preview, shadow, calibration, runs with
judges and the ledger show real judge calls in the demo with nothing else installed. It is
served only while ``KINDGI_DEMO_JUDGE`` is on (by default, while debug is); otherwise the path
is a 404.

The judge reads what a real one would: the criteria from the system text, the scale from the
answer format it asks for, and the recorded turn between the prompt's markers. Its verdict is
a heuristic over that turn (markup in the answer, a promise beyond policy, blaming the
customer, an answer with nothing cited for a grounding rubric), with a stable share of fails
drawn from the turn's digest so that every rubric finds something; the same prompt always gets
the same answer. Usage is counted at about four characters a token, as the provider would bill.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

#: The path under the console's address where the demo's judge models are served.
PATH = "demo-judge/v1"
#: The largest request body the demo judge reads (a judge prompt holds one trace).
MAX_BODY_BYTES = 2 * 1024 * 1024

_TRACE = re.compile(r"<<<TRACE-[0-9a-f]{16} BEGIN>>>\n(.*)\n<<<TRACE-[0-9a-f]{16} END>>>", re.DOTALL)
_CRITERIA = re.compile(r"Criteria:\n(.*?)\n\nThe user message", re.DOTALL)
_MARKUP = ("<script", "onerror", "javascript:", "<svg", "onload=")
_PROMISES = ("guarantee", "full refund today", "double refund", "refund you twice", "always refund")
_BLAME = ("your fault", "you should have", "you failed to", "not our problem")


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": {"message": message, "type": "invalid_request_error"}}, status=status)


@csrf_exempt
@require_POST
def chat_completions(request: HttpRequest) -> JsonResponse:
    """``POST /demo-judge/v1/chat/completions``: a verdict in the judge's JSON answer format."""
    if not settings.KINDGI_DEMO_JUDGE:
        raise Http404("the demo judge is off (KINDGI_DEMO_JUDGE)")
    if len(request.body) > MAX_BODY_BYTES:
        return _error(413, f"the request is larger than {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return _error(400, "the request body is not JSON")
    prompt = _prompt(body)
    if isinstance(prompt, str):
        return _error(400, prompt)
    system, user = prompt
    answer = judge(system, user)
    text = json.dumps(answer)
    return JsonResponse(
        {
            "id": "demo-" + hashlib.sha256((system + user).encode()).hexdigest()[:24],
            "object": "chat.completion",
            "model": str(body.get("model", "demo-judge")),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": _tokens(system) + _tokens(user) + 8,
                "completion_tokens": _tokens(text),
                "total_tokens": _tokens(system) + _tokens(user) + 8 + _tokens(text),
            },
        }
    )


def _prompt(body: object) -> tuple[str, str] | str:
    """(system, user) texts of a Chat Completions request, or why there are none."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        return "/messages: a list of messages is required"
    texts: dict[str, str] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            return f"/messages/{index}/content: text is required"
        texts.setdefault(str(message.get("role")), message["content"])
    return texts.get("system", ""), texts.get("user", "")


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def judge(system: str, user: str) -> dict[str, Any]:
    """The demo judge's answer to a judge prompt: a verdict or a score, and a reason."""
    criteria_match = _CRITERIA.search(system)
    criteria = criteria_match.group(1).lower() if criteria_match else ""
    trace_match = _TRACE.search(user)
    turn = trace_match.group(1) if trace_match else user
    reason = _finding(criteria, turn)
    if '"score"' in system.split("Criteria:")[-1] and "<number from 0 to 1>" in system:
        score = _score(criteria, turn, reason)
        return {"score": score, "reason": reason or "every claim is supported by a cited source"}
    return {"verdict": "FAIL" if reason else "PASS", "reason": reason or "meets the criteria"}


def _finding(criteria: str, turn: str) -> str | None:
    """What a careful judge would object to in `turn`, or None."""
    lowered = turn.lower()
    if any(marker in lowered for marker in _MARKUP):
        return "the answer contains markup instead of a reply"
    if "promise" in criteria and any(phrase in lowered for phrase in _PROMISES):
        return "promises a refund the policy does not allow"
    if "blame" in criteria and any(phrase in lowered for phrase in _BLAME):
        return "the answer blames the customer"
    if _digest(turn) % 100 < 9:
        clause = criteria.split(",")[0].strip().rstrip(".")[:120]
        return f'the answer falls short of "{clause}"' if clause else "the answer falls short of the rubric"
    return None


def _score(criteria: str, turn: str, finding: str | None) -> float:
    """A grounding score: lower when the turn has a finding, slightly varied by its digest."""
    spread = (_digest(turn) % 21) / 100  # 0.00 .. 0.20
    if finding is not None:
        return round(0.35 + spread, 2)
    return round(0.78 + spread, 2)


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
