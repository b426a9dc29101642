"""The demo's in-process judge: answers like its registered judge models, calls none."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from guardrails.engine.judge.parsing import JudgeOutcome
from guardrails.engine.types import CheckOutcome, Context
from guardrails.engine.types import Guardrail as EngineGuardrail
from guardrails.models import JudgeModelRegistration
from traces.judge.services import outcome_text


@dataclass
class DemoJudge:
    """A bring-your-own judge that answers like the demo's registered judge models and keeps
    its calls as ledger fields (a cache hit as the console records one: free, unbilled)."""

    models: dict[str, JudgeModelRegistration]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def route(self, guardrail: EngineGuardrail, trace: dict[str, Any]) -> JudgeModelRegistration:
        """The long-context model for research, otherwise a per-tenant small one."""
        if guardrail.id.startswith("research"):
            return self.models["demo-judge-large"]
        return self.models["demo-judge-small" if trace.get("tenant") == "acme" else "demo-judge-fast"]

    def judge(self, guardrail: EngineGuardrail, check: Any, trace: dict[str, Any], context: Context) -> CheckOutcome:
        seed = int(hashlib.sha256(f"{guardrail.id}|{trace['id']}".encode()).hexdigest()[:12], 16)
        rng = random.Random(seed)
        registration = self.route(guardrail, trace)
        model = registration.model_id
        cached = rng.random() < 0.08
        tokens_in = 0 if cached else len(orjson.dumps(trace)) // 4 + 420
        tokens_out = 0 if cached else rng.randint(40, 220)
        cost = (registration.input_usd_per_mtok * tokens_in + registration.output_usd_per_mtok * tokens_out) / Decimal(
            1_000_000
        )
        latency = 0 if cached else int(rng.lognormvariate(7.2, 0.5))
        budget = guardrail.document.get("budget") or {}
        hostile = any(marker in json.dumps(trace) for marker in ("<script", "onerror", "javascript:"))
        config = guardrail.config
        if config.get("scale") == "score":
            score = round(rng.betavariate(6, 1.6) if not hostile else 0.2, 2)
            passed = score >= float(config.get("threshold", 0.5))
            reason = "every claim is supported" if passed else "two claims cite no source"
            said = JudgeOutcome(score=score, reason=reason)
        else:
            passed = not hostile and rng.random() > 0.12
            reason = (
                "courteous and within policy"
                if passed
                else rng.choice(
                    [
                        "promises a refund the policy does not allow",
                        "the answer blames the customer for the delay",
                        "the answer contains markup instead of a reply",
                    ]
                )
            )
            said = JudgeOutcome(verdict="PASS" if passed else "FAIL", reason=reason)
        self.calls.append(
            {
                "trace": trace["id"],
                "guardrail": guardrail.id,
                "model_id": model,
                "provider": registration.provider,
                "model_name": registration.model,
                "input_tokens": None if cached else tokens_in,
                "output_tokens": None if cached else tokens_out,
                "cost_usd": cost,
                "latency_ms": latency,
                "outcome": "cached" if cached else outcome_text(said),
                "verdict": "" if cached else said.verdict or "",
                "score": None if cached else said.score,
                "reason": "" if cached else reason,
                "billed": not cached,
                "attempts": 0 if cached else 1,
                "cache_hit": cached,
                "over_budget_cost": cost > Decimal(str(budget.get("maxCostUsd", "1e9"))),
                "over_budget_latency": latency > int(budget.get("maxLatencyMs", 10**9)),
            }
        )
        details = {
            "model": model,
            "cached": cached,
            "costUsd": str(cost.quantize(Decimal("0.00000001"))),
            "inputTokens": tokens_in,
            "outputTokens": tokens_out,
            "latencyMs": latency,
            "judgeReason": reason,
        }
        return CheckOutcome(passed=passed, reason=None if passed else reason, details=details)
