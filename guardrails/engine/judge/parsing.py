"""Reading a judge's answer: strict about meaning, tolerant about form.

Accepted forms, after surrounding whitespace is removed:

- a JSON object, ``{"verdict": "PASS"|"FAIL", "reason": "..."}`` or
  ``{"score": 0.8, "reason": "..."}``, alone or inside a Markdown code fence (```json ... ```);
- the verdict word PASS or FAIL at the start (any case), the rest being the reason
  (``FAIL: the agent promised a refund``);
- a score at the start (``0.8 - mostly grounded``, ``score: 0.8``).

Anything else is an AnswerError, never a pass: an answer without the verdict the scale asks
for, a verdict other than PASS or FAIL, a score that is not a number or lies outside 0..1
(nothing is clamped), a reason that is not text.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from .prompt import Scale

Verdict = Literal["PASS", "FAIL"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)\s*```", re.DOTALL)
_WORD = re.compile(r"(PASS|FAIL)\b[\s:.,;!\-\u2013\u2014]*(.*)", re.DOTALL | re.IGNORECASE)
_SCORE = re.compile(
    r"(?:score\s*[:=]?\s*)?([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?![\d.])[\s:.,;\-\u2013\u2014/]*(.*)",
    re.DOTALL | re.IGNORECASE,
)
_MAX_REASON = 2000


class AnswerError(ValueError):
    """A judge answer that gives no verdict the scale can use."""


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """What a judge said: a verdict (pass-fail scale) or a score (score scale), and why."""

    verdict: Verdict | None = None
    score: float | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "score": self.score, "reason": self.reason}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> JudgeOutcome:
        return cls(verdict=doc.get("verdict"), score=doc.get("score"), reason=doc.get("reason"))


def parse_answer(text: str | None, scale: Scale) -> JudgeOutcome:
    """The outcome in a judge's answer `text`, for `scale`; raises AnswerError."""
    stripped = (text or "").strip()
    if not stripped:
        raise AnswerError("the judge gave an empty answer")
    fenced = _FENCE.search(stripped)
    body = fenced.group(1).strip() if fenced else stripped
    if body.startswith(("{", "[")):
        return _from_json(body, scale)
    return _from_words(body, scale)


def _from_json(body: str, scale: Scale) -> JudgeOutcome:
    try:
        # raw_decode: a judge that adds a remark after its JSON object still answered.
        doc, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as error:
        raise AnswerError(f"the judge's JSON answer does not parse: {error.msg}") from error
    if not isinstance(doc, dict):
        raise AnswerError("the judge's JSON answer is not an object")
    reason = doc.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise AnswerError("the judge's reason is not text")
    if scale == "score":
        if "score" not in doc:
            raise AnswerError('the judge\'s answer has no "score"')
        return JudgeOutcome(score=_score(doc["score"]), reason=_trim(reason))
    if "verdict" not in doc:
        raise AnswerError('the judge\'s answer has no "verdict"')
    return JudgeOutcome(verdict=_verdict(doc["verdict"]), reason=_trim(reason))


def _from_words(body: str, scale: Scale) -> JudgeOutcome:
    if scale == "pass-fail":
        word = _WORD.match(body)
        if word is None:
            raise AnswerError(f"the judge's answer is neither JSON nor PASS/FAIL: {_quote(body)}")
        return JudgeOutcome(verdict=_verdict(word.group(1)), reason=_trim(word.group(2)))
    number = _SCORE.match(body)
    if number is None:
        raise AnswerError(f"the judge's answer is neither JSON nor a score: {_quote(body)}")
    return JudgeOutcome(score=_score(float(number.group(1))), reason=_trim(number.group(2)))


def _verdict(value: object) -> Verdict:
    word = value.strip().upper() if isinstance(value, str) else None
    if word == "PASS":
        return "PASS"
    if word == "FAIL":
        return "FAIL"
    raise AnswerError(f"the judge's verdict {value!r} is neither PASS nor FAIL")


def _score(value: object) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError as error:
            raise AnswerError(f"the judge's score {value!r} is not a number") from error
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AnswerError(f"the judge's score {value!r} is not a number")
    score = float(value)
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        raise AnswerError(f"the judge's score {value} is outside 0..1")
    return score


def _trim(reason: str | None) -> str | None:
    text = (reason or "").strip()
    return text[:_MAX_REASON] or None


def _quote(body: str) -> str:
    return repr(body if len(body) <= 80 else body[:77] + "...")
