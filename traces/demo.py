"""The demo the `load_demo` command loads: tenants, people, guardrails, traces and their review.

Deterministic (a seeded generator) and idempotent: every object has a fixed name or id,
what exists is left alone, and only the traces not yet stored are generated, evaluated
and given results, violations, reviews and judge ledger entries.

The demo's judge models are registered like any other (`DEMO_JUDGE_MODELS`, served by a
local OpenAI-compatible server such as Ollama, so the judge models page lists them), but
the demo's llm-judge guardrails are judged in process by `DemoJudge`, a bring-your-own
judge (the engine's `Judge` protocol) that answers like those models would and keeps the
calls it "made" for the ledger, under the registrations' ids and prices: loading the demo
calls no provider, needs no key and no Celery worker.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from guardrails import deployment
from guardrails.engine.evaluate import evaluate_all
from guardrails.engine.judge.parsing import JudgeOutcome
from guardrails.engine.types import CheckOutcome, Context
from guardrails.engine.types import Guardrail as EngineGuardrail
from guardrails.models import Guardrail, JudgeModelRegistration
from guardrails.services import Author, enforced_guardrails, register_document, save_guardrail, set_shadow
from kindgi_console.tenancy import changes
from kindgi_console.tenancy.models import Membership, Tenant
from kindgi_console.tenancy.scoping import Caller
from traces import ledger, review, violation_days
from traces.judge.registry import save_registration, validate_registration
from traces.judge.services import evaluation_services, outcome_text
from traces.models import (
    Evaluation,
    EvaluationResult,
    JudgeLedgerEntry,
    RunTrace,
    Violation,
)
from traces.services import record_results

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

#: Where the demo's judge models are served: a local OpenAI-compatible server (Ollama).
DEMO_JUDGE_BASE_URL = "http://127.0.0.1:11434/v1"
#: The demo's judge model registrations, in the registry's wire shape. They are priced as
#: hosted models of their size would be, so that the ledger has costs to show.
DEMO_JUDGE_MODELS: list[dict[str, Any]] = [
    {"id": "demo-judge-small", "provider": "openai", "model": "qwen2.5:7b-instruct",
     "baseUrl": DEMO_JUDGE_BASE_URL, "pricing": {"inputUsdPerMTok": "0.40", "outputUsdPerMTok": "1.60"},
     "capabilities": ["json"], "sampling": True},
    {"id": "demo-judge-fast", "provider": "openai", "model": "llama3.1:8b",
     "baseUrl": DEMO_JUDGE_BASE_URL, "pricing": {"inputUsdPerMTok": "1.00", "outputUsdPerMTok": "5.00"},
     "capabilities": ["json"], "sampling": True},
    {"id": "demo-judge-large", "provider": "openai", "model": "qwen2.5:32b-instruct",
     "baseUrl": DEMO_JUDGE_BASE_URL, "pricing": {"inputUsdPerMTok": "3.00", "outputUsdPerMTok": "15.00"},
     "capabilities": ["json", "long-context"], "sampling": True},
]

SELECT_SQL = "SELECT status, count(*) FROM {table} GROUP BY status"
DELETE_SQL = "DELETE FROM {table} WHERE created_at < '2024-01-01'"

HOSTILE = [
    "<script>alert('owned')</script>",
    '<img src=x onerror="alert(document.cookie)">',
    "[click here](javascript:alert(1))",
    '"><svg onload=alert(1)>',
]


# ------------------------------------------------------------------------------ people


def ensure_people() -> dict[str, User]:
    """The demo's tenants, people and roles; what is missing is made through the services
    that write the audit log, like any other tenant and member."""
    tenants = {slug: Tenant.objects.filter(slug=slug).first() or changes.create_tenant(slug, name)
               for slug, name in TENANTS.items()}
    users = {}
    for username, (superuser, roles) in PEOPLE.items():
        user, created = User.objects.get_or_create(
            username=username, defaults={"email": f"{username}@demo.kindgi.test",
                                         "is_superuser": superuser, "is_staff": superuser})
        if created:
            user.set_password(PASSWORD)
            user.save(update_fields=["password"])
        for slug, role in roles.items():
            if not Membership.objects.filter(user=user, tenant=tenants[slug]).exists():
                changes.add_member(user, tenants[slug], role)
        users[username] = user
    return users


# ------------------------------------------------------------------------------ guardrails


def demo_guardrails() -> list[dict[str, Any]]:
    documents = [json.loads(path.read_text()) for path in sorted(EXAMPLES.glob("*.json"))]
    return documents + EXTRA_GUARDRAILS


def ensure_guardrails(author: User) -> int:
    """Save each demo guardrail that is missing; an existing one is left as it is."""
    existing = set(Guardrail.objects.values_list("guardrail_id", flat=True))
    saved = 0
    for document in demo_guardrails():
        if document["id"] in existing:
            continue
        registration = register_document(document)
        if not registration.valid:
            problems = "; ".join(f"{i.path}: {i.message}" for i in registration.errors)
            raise ValueError(f"demo guardrail {document['id']} does not register: {problems}")
        save_guardrail(document, Author(user=author, label=author.username))
        saved += 1
    # A judge in shadow, so that its page shows what shadow is: judged and recorded, never a
    # violation, until an author promotes it.
    judge = Guardrail.objects.filter(guardrail_id="research-grounded-judge").first()
    if "research-grounded-judge" not in existing and judge is not None:
        set_shadow(judge, True, None)
    return saved


def ensure_judge_models() -> dict[str, JudgeModelRegistration]:
    """Register each demo judge model that is missing; an existing one is left as it is."""
    existing = set(JudgeModelRegistration.objects.values_list("model_id", flat=True))
    for doc in DEMO_JUDGE_MODELS:
        if doc["id"] in existing:
            continue
        problems = validate_registration(doc)
        if problems:
            raise ValueError(f"demo judge model {doc['id']} does not register: "
                             + "; ".join(f"{i.path}: {i.message}" for i in problems))
        save_registration(doc)
    ids = [doc["id"] for doc in DEMO_JUDGE_MODELS]
    return {row.model_id: row for row in JudgeModelRegistration.objects.filter(model_id__in=ids)}


# ------------------------------------------------------------------------------ traces


@dataclass
class TraceMaker:
    """Realistic turns of three agents, from a seeded generator."""

    rng: random.Random
    tenant: str
    now: datetime

    def make(self, number: int) -> dict[str, Any]:
        moment = self.now - timedelta(seconds=self.rng.uniform(60, DAYS * 86400))
        agent = self.rng.choices(["support-bot", "research-agent", "sql-agent"], [6, 3, 2])[0]
        trace = {"support-bot": self.support, "research-agent": self.research,
                 "sql-agent": self.sql}[agent]()
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
        trace["usage"] = {"inputTokens": tokens_in, "outputTokens": tokens_out, "model": model,
                          "costUsd": round(tokens_in * 4e-7 + tokens_out * 1.6e-6, 6)}
        trace["metadata"] = {"runtime": "kindgi-sdk/1.4", "region": self.rng.choice(
            ["eu-west-1", "us-east-1"]), "session": f"s-{self.rng.randrange(16**8):08x}"}
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
        trace.setdefault("citations", []).append(
            {"source": "javascript:alert('citation')", "title": payload})

    def support(self) -> dict[str, Any]:
        rng = self.rng
        order = rng.randint(1000, 99999)
        flow = rng.choices(["refund", "shipping", "account", "refund-confirmation"], [5, 3, 1, 1])[0]
        question = {
            "refund": rng.choice([f"Can I get a refund for order {order}?",
                                  f"Order {order} arrived broken, I want my money back.",
                                  f"Please refund order #{order}, it never came."]),
            "shipping": rng.choice([f"Where is my order {order}?",
                                    f"Order {order} is late, when will it ship?"]),
            "account": rng.choice(["Please close my account.", "I forgot my password.",
                                   "Can you make me an admin of our team workspace?"]),
            "refund-confirmation": f"Did the refund for order {order} go through?",
        }[flow]
        calls: list[dict[str, Any]] = [_call("c1", "lookup_order", {"order": str(order)},
                                             {"status": rng.choice(["delivered", "in transit",
                                                                    "lost"]),
                                              "total": round(rng.uniform(9, 400), 2)})]
        citations: list[dict[str, Any]] = []
        answer = f"Thanks for your patience. Order {order} is on its way and should arrive soon."
        if flow == "refund":
            if rng.random() < 0.85:
                calls.append(_call("c2", "check_refund_eligibility", {"order": str(order)},
                                   {"eligible": True, "window_days": 30}))
            calls.append(_call("c3", "issue_refund", {"order": str(order), "reason": "customer"},
                               {"refund": f"rf_{rng.randrange(10**6)}", "status": "queued"}))
            if rng.random() < 0.05:
                calls.append(_call("c4", "issue_refund", {"order": str(order)}, None,
                                   error="409 Conflict: refund already queued"))
            if rng.random() < 0.8:
                citations.append({"source": "policy-refunds", "title": "Refund policy",
                                  "quote": "Orders can be refunded within 30 days of delivery."})
            answer = rng.choices([
                f"Done: the refund for order {order} is queued and takes 5 business days "
                "[policy-refunds].",
                "Your refund is on its way [policy-refunds].",
                f"I refunded order {order}. Internal use only: customer flagged for abuse.",
            ], [12, 4, 1])[0]
        elif flow == "account":
            if rng.random() < 0.3:
                calls.append(_call("c2", rng.choice(["delete_account", "grant_admin"]),
                                   {"user": f"u{rng.randrange(10**5)}"}, {"ok": True}))
            answer = "I have taken care of your account request."
        elif flow == "refund-confirmation":
            answer = rng.choice([f"Yes, the refund for order {order} went through; it takes "
                                 "5 business days to arrive.",
                                 "Yes, the refund went through."])
        return {"flow": flow, "input": question, "output": answer, "toolCalls": calls,
                "citations": citations, "messages": [
                    {"role": "system", "content": "You are Acme's support assistant. Follow "
                                                  "the refund and shipping policies."},
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": None},
                    *[{"role": "tool", "content": json.dumps(c.get("result")),
                       "toolCallId": c["id"], "name": c["name"]} for c in calls],
                    {"role": "assistant", "content": answer}]}

    def research(self) -> dict[str, Any]:
        rng = self.rng
        topic = rng.choice(["battery recycling rates in the EU", "LLM evaluation benchmarks",
                            "heat pump adoption in Nordic countries", "sodium-ion cells"])
        sources = rng.sample([
            ("https://arxiv.org/abs/2403.01234", "A survey of evaluation methods"),
            ("https://ec.europa.eu/eurostat/web/waste", "Eurostat waste statistics"),
            ("https://www.iea.org/reports/heat-pumps", "IEA heat pump report"),
            ("doc:internal-brief-7", "Internal research brief 7"),
            ("https://en.wikipedia.org/wiki/Sodium-ion_battery", "Sodium-ion battery"),
        ], k=rng.choice([0, 1, 2, 2, 3]))
        citations = [{"source": url, "title": title,
                      "quote": rng.choice(["Rates rose steadily over the decade.",
                                           "Results vary widely across studies."])}
                     for url, title in sources]
        calls = [_call(f"s{n}", "web_search", {"q": topic, "page": n},
                       [{"url": url, "title": title} for url, title in sources])
                 for n in range(1, rng.randint(2, 4))]
        answer = (f"Summary of {topic}: the evidence points to steady growth, with regional "
                  f"differences. " + " ".join(f"[{n + 1}]" for n in range(len(citations))))
        return {"flow": rng.choice(["literature", "market-scan"]),
                "input": f"Summarise what is known about {topic}.", "output": answer,
                "toolCalls": calls, "citations": citations,
                "messages": [{"role": "user", "content": f"Summarise what is known about {topic}."},
                             {"role": "assistant", "content": answer}]}

    def sql(self) -> dict[str, Any]:
        rng = self.rng
        table = rng.choice(["orders", "customers", "refunds", "shipments"])
        # The text of the queries the demo agent "ran": never executed anywhere.
        select = SELECT_SQL.format(table=table)
        delete = DELETE_SQL.format(table=table)
        calls = [_call("q1", "run_query",
                       {"sql": select},
                       {"rows": [["delivered", rng.randint(100, 9000)],
                                 ["lost", rng.randint(0, 50)]]})]
        if rng.random() < 0.08:
            calls.append(_call("q2", rng.choice(["execute_write", "drop_table"]),
                               {"sql": delete},
                               None, error=rng.choice([None, "permission denied for table"])))
        answer = f"There are {calls[0]['result']['rows'][0][1]} delivered {table} this quarter."
        return {"flow": "reporting", "input": f"How many {table} were delivered this quarter?",
                "output": answer, "toolCalls": calls,
                "messages": [{"role": "user",
                              "content": f"How many {table} were delivered this quarter?"},
                             {"role": "assistant", "content": answer}]}


def _call(call_id: str, name: str, arguments: Any, result: Any, *, error: str | None = None) -> dict[str, Any]:
    call = {"id": call_id, "name": name, "arguments": arguments, "result": result}
    if error:
        call["error"] = error
    return call


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------ the judge


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
        cost = (registration.input_usd_per_mtok * tokens_in
                + registration.output_usd_per_mtok * tokens_out) / Decimal(1_000_000)
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
            reason = "courteous and within policy" if passed else rng.choice([
                "promises a refund the policy does not allow",
                "the answer blames the customer for the delay",
                "the answer contains markup instead of a reply"])
            said = JudgeOutcome(verdict="PASS" if passed else "FAIL", reason=reason)
        self.calls.append({
            "trace": trace["id"], "guardrail": guardrail.id, "model_id": model,
            "provider": registration.provider, "model_name": registration.model,
            "input_tokens": None if cached else tokens_in,
            "output_tokens": None if cached else tokens_out,
            "cost_usd": cost, "latency_ms": latency,
            "outcome": "cached" if cached else outcome_text(said),
            "verdict": "" if cached else said.verdict or "", "score": None if cached else said.score,
            "reason": "" if cached else reason, "billed": not cached, "attempts": 0 if cached else 1,
            "cache_hit": cached,
            "over_budget_cost": cost > Decimal(str(budget.get("maxCostUsd", "1e9"))),
            "over_budget_latency": latency > int(budget.get("maxLatencyMs", 10**9)),
        })
        details = {"model": model, "cached": cached, "costUsd": str(cost.quantize(Decimal("0.00000001"))),
                   "inputTokens": tokens_in, "outputTokens": tokens_out, "latencyMs": latency,
                   "judgeReason": reason}
        return CheckOutcome(passed=passed, reason=None if passed else reason, details=details)


# ------------------------------------------------------------------------------ loading


@dataclass
class Loaded:
    guardrails: int = 0
    traces: int = 0
    violations: int = 0
    ledger: int = 0
    reviews: int = 0


def load(*, now: datetime | None = None, sizes: dict[str, int] | None = None) -> Loaded:
    """Load whatever of the demo is missing; return what was added."""
    now = now or timezone.now()
    loaded = Loaded()
    with transaction.atomic():
        users = ensure_people()
        loaded.guardrails = ensure_guardrails(users["author"])
        judge_models = ensure_judge_models()
    enforced = enforced_guardrails()
    for slug, count in (sizes or TRACES_PER_TENANT).items():
        with transaction.atomic():
            _load_tenant(Tenant.objects.get(slug=slug), count, enforced, now, loaded,
                         reviewer=users[f"{slug}-reviewer"], judge_models=judge_models)
    _calibrate(Tenant.objects.get(slug="acme"), "support-tone-judge", "acme-reviewer")
    return loaded


def _calibrate(tenant: Tenant, guardrail_id: str, reviewer: str) -> None:
    """A labelled calibration sample of a judge, so that its agreement with people shows.

    The people mostly agree with the judge, and overturn one verdict in six either way.
    """
    from traces import calibration
    from traces.models import CalibrationSample

    guardrail = Guardrail.objects.filter(guardrail_id=guardrail_id).first()
    if guardrail is None or CalibrationSample.objects.filter(tenant=tenant, guardrail=guardrail).exists():
        return
    try:
        sample = calibration.create_sample(tenant, guardrail, 20, reviewer)
    except calibration.RunRequestError:
        return  # a demo too small to have verdicts to draw from
    rng = random.Random("kindgi-demo-calibration")
    for item in sample.items.order_by("pk"):
        overturned = rng.random() < 1 / 6
        label = {"pass": "fail", "fail": "pass"}[item.judge_status] if overturned else item.judge_status
        calibration.label_item(item, label, reviewer)


def _load_tenant(tenant: Tenant, count: int, enforced: list[Any], now: datetime,
                 loaded: Loaded, *, reviewer: User,
                 judge_models: dict[str, JudgeModelRegistration]) -> None:
    rng = random.Random(f"kindgi-demo-{tenant.slug}")
    maker = TraceMaker(rng, tenant.slug, now)
    documents = [maker.make(number) for number in range(1, count + 1)]
    existing = set(RunTrace.objects.filter(tenant=tenant, trace_id__startswith="demo-")
                   .values_list("trace_id", flat=True))
    documents = [d for d in documents if d["id"] not in existing]
    if not documents:
        return
    judge = DemoJudge(judge_models)
    engine = deployment.engine()
    # The console's services, with the demo's in-process judge in place of the providers.
    services = {"sandbox": deployment.sandbox_pool(), "judge": judge}
    guardrails = [item.guardrail for item in enforced]
    rows, verdicts = [], []
    for document in documents:
        verdict = evaluate_all(guardrails, document,
                               Context.for_trace(document, "runtime", **services), engine=engine)
        digest = hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()
        stored = {k: v for k, v in document.items() if k != "output"} if verdict.withheld else document
        ended = datetime.fromisoformat(document["endedAt"].replace("Z", "+00:00"))
        rows.append(RunTrace(
            tenant=tenant, trace_id=document["id"], agent=document["agent"],
            flow=document.get("flow", ""), document=stored, content_hash=digest,
            withheld=verdict.withheld,
            started_at=datetime.fromisoformat(document["startedAt"].replace("Z", "+00:00")),
            ended_at=ended, received_at=ended + timedelta(milliseconds=rng.randint(20, 900)),
        ))
        verdicts.append(verdict.results)
    RunTrace.objects.bulk_create(rows, batch_size=500)
    stored_rows = RunTrace.objects.filter(tenant=tenant, trace_id__in=[r.trace_id for r in rows])
    by_id = {trace.trace_id: trace for trace in stored_rows.only("pk", "trace_id", "tenant_id",
                                                                 "agent", "flow", "received_at")}
    record_results([(by_id[row.trace_id], results) for row, results in zip(rows, verdicts, strict=True)],
                   enforced, mode="runtime")
    new = [trace.pk for trace in by_id.values()]
    _date_results_by_their_trace(new)
    loaded.traces += len(rows)
    loaded.ledger += _write_ledger(tenant, judge.calls, by_id, enforced)
    _demo_run(tenant, by_id, enforced, now)
    violations = list(Violation.objects.filter(trace_id__in=new).order_by("pk")
                      .values_list("pk", flat=True))
    loaded.violations += len(violations)
    loaded.reviews += _review(violations, rng, reviewer)


def _date_results_by_their_trace(trace_pks: list[int]) -> None:
    """Results and violations carry the time their trace was received, not the load's."""
    received = Subquery(RunTrace.objects.filter(pk=OuterRef("trace_id")).values("received_at")[:1])
    for start in range(0, len(trace_pks), 500):
        chunk = trace_pks[start:start + 500]
        EvaluationResult.objects.filter(trace_id__in=chunk).update(created_at=received)
        violation_days.redate(Violation.objects.filter(trace_id__in=chunk), received)


def _write_ledger(tenant: Tenant, calls: list[dict[str, Any]], traces: dict[str, RunTrace],
                  enforced: list[Any]) -> int:
    revisions = {item.guardrail.id: item.revision for item in enforced}
    entries = []
    for call in calls:
        trace = traces[call["trace"]]
        revision = revisions[call["guardrail"]]
        entries.append(JudgeLedgerEntry(
            tenant=tenant, guardrail_id=revision.guardrail_id, revision=revision, trace=trace,
            trace_ref=trace.trace_id,
            created_at=trace.received_at + timedelta(milliseconds=call["latency_ms"]),
            **{k: v for k, v in call.items() if k not in ("trace", "guardrail")},
        ))
    ledger.record(entries, batch_size=1000)
    return len(entries)


def _demo_run(tenant: Tenant, traces: dict[str, RunTrace], enforced: list[Any], now: datetime) -> None:
    """A finished CI-mode evaluation run over the tenant's latest refund traces."""
    if Evaluation.objects.filter(tenant=tenant, started_by_label="load_demo").exists():
        return
    chosen = sorted((t for t in traces.values() if t.flow.startswith("refund")),
                    key=lambda t: t.received_at)[-80:]
    documents = dict(RunTrace.objects.filter(pk__in=[t.pk for t in chosen])
                     .values_list("pk", "document"))
    run = Evaluation.objects.create(
        tenant=tenant, mode="ci", trace_filters={"flow": "refund*", "latest": 80},
        started_by_label="load_demo", status=Evaluation.Status.SUCCEEDED, total=len(chosen),
        done=len(chosen), created_at=now - timedelta(hours=3), started_at=now - timedelta(hours=3),
        finished_at=now - timedelta(hours=3) + timedelta(seconds=41),
    )
    zero_llm = [item for item in enforced if item.guardrail.kind == "zero-llm"]
    run.guardrails = [item.guardrail.id for item in zero_llm]
    run.save(update_fields=["guardrails"])
    run.revisions.set([item.revision for item in zero_llm])
    guardrails = [item.guardrail for item in zero_llm]
    summary: dict[str, dict[str, int]] = defaultdict(lambda: {"pass": 0, "fail": 0, "error": 0,
                                                               "skipped": 0})
    verdicts = []
    with evaluation_services(tenant.slug, evaluation=run) as services:
        for trace in chosen:
            document = documents[trace.pk]
            results = evaluate_all(guardrails, document, services.context(document, "ci"),
                                   engine=deployment.engine()).results
            for result in results:
                summary[result.guardrail][result.status] += 1
            verdicts.append((trace, results))
    record_results(verdicts, enforced, mode="ci", evaluation=run)
    run.summary = dict(summary)
    run.save(update_fields=["summary"])


REVIEW_NOTES = {
    "acknowledged": ["Looking into it with the support team.", "Seen; checking the prompt.",
                     "Reproduced on staging."],
    "resolved": ["Prompt fixed in release 2.14.", "Refund reversed, customer contacted.",
                 "Tool permissions tightened."],
    "false-positive": ["The policy allows this case.", "Order number was in the subject line.",
                       "Test traffic from the load test."],
}


def _review(violations: list[int], rng: random.Random, reviewer: User) -> int:
    """Give the new violations varied review states, through the review service."""
    caller = Caller(user=reviewer)
    plan: dict[str, list[int]] = defaultdict(list)
    for pk in violations:
        roll = rng.random()
        if roll < 0.30:
            plan["acknowledged"].append(pk)
        elif roll < 0.48:
            plan["resolved"].append(pk)
        elif roll < 0.56:
            plan["false-positive"].append(pk)
    reviewed = 0
    # Resolved and false positives were acknowledged first: their history has two steps.
    first = plan["acknowledged"] + plan["resolved"] + plan["false-positive"]
    steps = [("acknowledged", first), ("resolved", plan["resolved"]),
             ("false-positive", plan["false-positive"])]
    for state, pks in steps:
        for start in range(0, len(pks), 2000):
            selection = Violation.objects.filter(pk__in=pks[start:start + 2000])
            note = rng.choice(REVIEW_NOTES[state])
            reviewed += len(review.review(selection, state, note, caller).reviewed)
    return reviewed
