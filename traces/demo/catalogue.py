"""What the demo is made of: its tenants, people, guardrails beyond the examples, judge
models, and the words its traces and reviews are written with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

PASSWORD = "kindgi-demo"  # noqa: S105 (the documented demo password, for local use)
TENANTS = {"acme": "Acme Corp", "globex": "Globex"}
#: username -> (superuser, {tenant: role})
PEOPLE: dict[str, tuple[bool, dict[str, str]]] = {
    "admin": (True, {"acme": "admin", "globex": "admin"}),
    "author": (False, {"acme": "author", "globex": "author"}),
    "acme-reviewer": (False, {"acme": "reviewer"}),
    "globex-reviewer": (False, {"globex": "reviewer"}),
}
TRACES_PER_TENANT = {"acme": 2000, "globex": 800}
DAYS = 30
EXAMPLES = Path(settings.BASE_DIR) / "examples" / "guardrails"

#: Guardrails beyond the examples: the other agents, hostile content and llm-judge ones.
EXTRA_GUARDRAILS: list[dict[str, Any]] = [
    {
        "id": "sql-agent-read-only",
        "name": "The SQL agent only reads",
        "description": "Reporting queries never write: a call to a writing tool halts the turn.",
        "kind": "zero-llm",
        "check": "never-call-tool",
        "config": {"tools": ["execute_write", "drop_table", "truncate_table"]},
        "action": {"on-violation": "halt"},
        "severity": "critical",
        "scope": {"agents": ["sql-agent"]},
    },
    {
        "id": "research-cites-sources",
        "name": "Research answers cite two sources",
        "description": "A research summary cites at least two sources so that a reader can check it.",
        "kind": "zero-llm",
        "check": "must-cite",
        "config": {"min": 2},
        "action": {"on-violation": "escalate", "escalateTo": "research-leads"},
        "severity": "error",
        "scope": {"agents": ["research-agent"]},
    },
    {
        "id": "no-markup-in-answers",
        "name": "Answers hold no HTML markup",
        "description": "Model output with script or event-handler markup is logged for review.",
        "kind": "zero-llm",
        "check": "forbidden-substring",
        "config": {"values": ["<script", "onerror=", "javascript:"], "caseSensitive": False},
        "action": {"on-violation": "log-only"},
        "severity": "warn",
    },
    {
        "id": "support-tone-judge",
        "name": "Support answers are courteous and promise nothing beyond policy",
        "description": "A judge model reads each support answer.",
        "kind": "llm-judge",
        "check": "rubric",
        "config": {
            "criteria": "The answer is courteous, does not blame the customer, and promises "
            "nothing that the refund or shipping policy does not allow.",
            "scale": "pass-fail",
        },
        "judgeCapabilities": {"required": ["json"]},
        "budget": {"maxCostUsd": 0.0008, "maxLatencyMs": 2500},
        "action": {"on-violation": "log-only"},
        "severity": "warn",
        "scope": {"agents": ["support-bot"]},
    },
    {
        "id": "research-grounded-judge",
        "name": "Research summaries are grounded in their sources",
        "description": "A judge model scores how well each claim is supported by a cited source.",
        "kind": "llm-judge",
        "check": "rubric",
        "config": {
            "criteria": "Every factual claim in the answer is supported by one of the cited "
            "sources; nothing is invented.",
            "scale": "score",
            "threshold": 0.7,
        },
        "judgeCapabilities": {"required": ["long-context"]},
        "budget": {"maxCostUsd": 0.02, "maxLatencyMs": 6000},
        "action": {"on-violation": "escalate", "escalateTo": "research-leads"},
        "severity": "error",
        "scope": {"agents": ["research-agent"]},
    },
]

#: Where the demo's judge models are served: the console's own demo judge
#: (traces.demo.judge_endpoint) on `make run`'s address; `runconsole` points them at its own.
DEMO_JUDGE_BASE_URL = "http://127.0.0.1:8000/demo-judge/v1"
#: Where demos loaded before the console served its own judge pointed them (Ollama).
OLD_DEMO_JUDGE_BASE_URL = "http://127.0.0.1:11434/v1"
#: The demo's judge model registrations, in the registry's wire shape. They are priced as
#: hosted models of their size would be, so that the ledger has costs to show.
DEMO_JUDGE_MODELS: list[dict[str, Any]] = [
    {
        "id": "demo-judge-small",
        "provider": "openai",
        "model": "qwen2.5:7b-instruct",
        "baseUrl": DEMO_JUDGE_BASE_URL,
        "pricing": {"inputUsdPerMTok": "0.40", "outputUsdPerMTok": "1.60"},
        "capabilities": ["json"],
        "sampling": True,
    },
    {
        "id": "demo-judge-fast",
        "provider": "openai",
        "model": "llama3.1:8b",
        "baseUrl": DEMO_JUDGE_BASE_URL,
        "pricing": {"inputUsdPerMTok": "1.00", "outputUsdPerMTok": "5.00"},
        "capabilities": ["json"],
        "sampling": True,
    },
    {
        "id": "demo-judge-large",
        "provider": "openai",
        "model": "qwen2.5:32b-instruct",
        "baseUrl": DEMO_JUDGE_BASE_URL,
        "pricing": {"inputUsdPerMTok": "3.00", "outputUsdPerMTok": "15.00"},
        "capabilities": ["json", "long-context"],
        "sampling": True,
    },
]

SELECT_SQL = "SELECT status, count(*) FROM {table} GROUP BY status"
DELETE_SQL = "DELETE FROM {table} WHERE created_at < '2024-01-01'"

HOSTILE = [
    "<script>alert('owned')</script>",
    '<img src=x onerror="alert(document.cookie)">',
    "[click here](javascript:alert(1))",
    '"><svg onload=alert(1)>',
]

REVIEW_NOTES = {
    "acknowledged": ["Looking into it with the support team.", "Seen; checking the prompt.", "Reproduced on staging."],
    "resolved": [
        "Prompt fixed in release 2.14.",
        "Refund reversed, customer contacted.",
        "Tool permissions tightened.",
    ],
    "false-positive": [
        "The policy allows this case.",
        "Order number was in the subject line.",
        "Test traffic from the load test.",
    ],
}
