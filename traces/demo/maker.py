"""Realistic turns of the demo's three agents, from a seeded generator."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from traces.demo.catalogue import DAYS, DELETE_SQL, HOSTILE, SELECT_SQL


@dataclass
class TraceMaker:
    """Realistic turns of three agents, from a seeded generator."""

    rng: random.Random
    tenant: str
    now: datetime

    def make(self, number: int) -> dict[str, Any]:
        moment = self.now - timedelta(seconds=self.rng.uniform(60, DAYS * 86400))
        agent = self.rng.choices(["support-bot", "research-agent", "sql-agent"], [6, 3, 2])[0]
        trace = {"support-bot": self.support, "research-agent": self.research, "sql-agent": self.sql}[agent]()
        duration = self.rng.uniform(1.2, 14.0)
        trace.update(
            id=f"demo-{self.tenant}-{number:05d}",
            tenant=self.tenant,
            agent=agent,
            startedAt=_rfc3339(moment),
            endedAt=_rfc3339(moment + timedelta(seconds=duration)),
        )
        model = self.rng.choice(["gpt-4.1-mini", "gpt-4.1", "claude-sonnet-4-5"])
        tokens_in, tokens_out = self.rng.randint(400, 6000), self.rng.randint(30, 700)
        trace["usage"] = {
            "inputTokens": tokens_in,
            "outputTokens": tokens_out,
            "model": model,
            "costUsd": round(tokens_in * 4e-7 + tokens_out * 1.6e-6, 6),
        }
        trace["metadata"] = {
            "runtime": "kindgi-sdk/1.4",
            "region": self.rng.choice(["eu-west-1", "us-east-1"]),
            "session": f"s-{self.rng.randrange(16**8):08x}",
        }
        if self.rng.random() < 0.03:
            self.poison(trace)
        return trace

    def hostile(self) -> str:
        return self.rng.choice(HOSTILE)

    def poison(self, trace: dict[str, Any]) -> None:
        """Model output that tries markup: the pages must show it as text."""
        payload = self.hostile()
        trace["output"] = f"{trace.get('output') or ''} {payload}"
        if trace.get("messages"):
            trace["messages"][-1]["content"] = trace["output"]
        trace.setdefault("citations", []).append({"source": "javascript:alert('citation')", "title": payload})

    def support(self) -> dict[str, Any]:
        rng = self.rng
        order = rng.randint(1000, 99999)
        flow = rng.choices(["refund", "shipping", "account", "refund-confirmation"], [5, 3, 1, 1])[0]
        question = {
            "refund": rng.choice(
                [
                    f"Can I get a refund for order {order}?",
                    f"Order {order} arrived broken, I want my money back.",
                    f"Please refund order #{order}, it never came.",
                ]
            ),
            "shipping": rng.choice([f"Where is my order {order}?", f"Order {order} is late, when will it ship?"]),
            "account": rng.choice(
                ["Please close my account.", "I forgot my password.", "Can you make me an admin of our team workspace?"]
            ),
            "refund-confirmation": f"Did the refund for order {order} go through?",
        }[flow]
        calls: list[dict[str, Any]] = [
            _call(
                "c1",
                "lookup_order",
                {"order": str(order)},
                {"status": rng.choice(["delivered", "in transit", "lost"]), "total": round(rng.uniform(9, 400), 2)},
            )
        ]
        citations: list[dict[str, Any]] = []
        answer = f"Thanks for your patience. Order {order} is on its way and should arrive soon."
        if flow == "refund":
            if rng.random() < 0.85:
                calls.append(
                    _call(
                        "c2", "check_refund_eligibility", {"order": str(order)}, {"eligible": True, "window_days": 30}
                    )
                )
            calls.append(
                _call(
                    "c3",
                    "issue_refund",
                    {"order": str(order), "reason": "customer"},
                    {"refund": f"rf_{rng.randrange(10**6)}", "status": "queued"},
                )
            )
            if rng.random() < 0.05:
                calls.append(
                    _call(
                        "c4", "issue_refund", {"order": str(order)}, None, error="409 Conflict: refund already queued"
                    )
                )
            if rng.random() < 0.8:
                citations.append(
                    {
                        "source": "policy-refunds",
                        "title": "Refund policy",
                        "quote": "Orders can be refunded within 30 days of delivery.",
                    }
                )
            answer = rng.choices(
                [
                    f"Done: the refund for order {order} is queued and takes 5 business days [policy-refunds].",
                    "Your refund is on its way [policy-refunds].",
                    f"I refunded order {order}. Internal use only: customer flagged for abuse.",
                ],
                [12, 4, 1],
            )[0]
        elif flow == "account":
            if rng.random() < 0.3:
                calls.append(
                    _call(
                        "c2",
                        rng.choice(["delete_account", "grant_admin"]),
                        {"user": f"u{rng.randrange(10**5)}"},
                        {"ok": True},
                    )
                )
            answer = "I have taken care of your account request."
        elif flow == "refund-confirmation":
            answer = rng.choice(
                [
                    f"Yes, the refund for order {order} went through; it takes 5 business days to arrive.",
                    "Yes, the refund went through.",
                ]
            )
        return {
            "flow": flow,
            "input": question,
            "output": answer,
            "toolCalls": calls,
            "citations": citations,
            "messages": [
                {
                    "role": "system",
                    "content": "You are Acme's support assistant. Follow the refund and shipping policies.",
                },
                {"role": "user", "content": question},
                {"role": "assistant", "content": None},
                *[
                    {"role": "tool", "content": json.dumps(c.get("result")), "toolCallId": c["id"], "name": c["name"]}
                    for c in calls
                ],
                {"role": "assistant", "content": answer},
            ],
        }

    def research(self) -> dict[str, Any]:
        rng = self.rng
        topic = rng.choice(
            [
                "battery recycling rates in the EU",
                "LLM evaluation benchmarks",
                "heat pump adoption in Nordic countries",
                "sodium-ion cells",
            ]
        )
        sources = rng.sample(
            [
                ("https://arxiv.org/abs/2403.01234", "A survey of evaluation methods"),
                ("https://ec.europa.eu/eurostat/web/waste", "Eurostat waste statistics"),
                ("https://www.iea.org/reports/heat-pumps", "IEA heat pump report"),
                ("doc:internal-brief-7", "Internal research brief 7"),
                ("https://en.wikipedia.org/wiki/Sodium-ion_battery", "Sodium-ion battery"),
            ],
            k=rng.choice([0, 1, 2, 2, 3]),
        )
        citations = [
            {
                "source": url,
                "title": title,
                "quote": rng.choice(["Rates rose steadily over the decade.", "Results vary widely across studies."]),
            }
            for url, title in sources
        ]
        calls = [
            _call(
                f"s{n}", "web_search", {"q": topic, "page": n}, [{"url": url, "title": title} for url, title in sources]
            )
            for n in range(1, rng.randint(2, 4))
        ]
        answer = f"Summary of {topic}: the evidence points to steady growth, with regional differences. " + " ".join(
            f"[{n + 1}]" for n in range(len(citations))
        )
        return {
            "flow": rng.choice(["literature", "market-scan"]),
            "input": f"Summarise what is known about {topic}.",
            "output": answer,
            "toolCalls": calls,
            "citations": citations,
            "messages": [
                {"role": "user", "content": f"Summarise what is known about {topic}."},
                {"role": "assistant", "content": answer},
            ],
        }

    def sql(self) -> dict[str, Any]:
        rng = self.rng
        table = rng.choice(["orders", "customers", "refunds", "shipments"])
        # The text of the queries the demo agent "ran": never executed anywhere.
        select = SELECT_SQL.format(table=table)
        delete = DELETE_SQL.format(table=table)
        calls = [
            _call(
                "q1",
                "run_query",
                {"sql": select},
                {"rows": [["delivered", rng.randint(100, 9000)], ["lost", rng.randint(0, 50)]]},
            )
        ]
        if rng.random() < 0.08:
            calls.append(
                _call(
                    "q2",
                    rng.choice(["execute_write", "drop_table"]),
                    {"sql": delete},
                    None,
                    error=rng.choice([None, "permission denied for table"]),
                )
            )
        answer = f"There are {calls[0]['result']['rows'][0][1]} delivered {table} this quarter."
        return {
            "flow": "reporting",
            "input": f"How many {table} were delivered this quarter?",
            "output": answer,
            "toolCalls": calls,
            "messages": [
                {"role": "user", "content": f"How many {table} were delivered this quarter?"},
                {"role": "assistant", "content": answer},
            ],
        }


def _call(call_id: str, name: str, arguments: Any, result: Any, *, error: str | None = None) -> dict[str, Any]:
    call = {"id": call_id, "name": name, "arguments": arguments, "result": result}
    if error:
        call["error"] = error
    return call


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
