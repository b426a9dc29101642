"""`load_demo`: every page gets something real, and running it twice changes nothing."""

from __future__ import annotations

import io
from typing import Any

from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import Count
from django.test import Client

from guardrails.engine.registry import default_registry
from guardrails.models import Guardrail, GuardrailRevision, JudgeModelRegistration
from kindgi_console.audit.models import AuditEntry
from kindgi_console.tenancy.models import Membership, Tenant
from traces.models import Evaluation, EvaluationResult, JudgeLedgerEntry, RunTrace, Violation, ViolationReview

MODELS = [
    Tenant,
    User,
    Membership,
    Guardrail,
    GuardrailRevision,
    RunTrace,
    Evaluation,
    EvaluationResult,
    Violation,
    ViolationReview,
    JudgeLedgerEntry,
    JudgeModelRegistration,
    AuditEntry,
]


def counts() -> dict[str, int]:
    return {model.__name__: model._default_manager.count() for model in MODELS}


def test_load_demo_fills_every_page_and_is_idempotent(db: Any) -> None:
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    assert "acme-reviewer" in out.getvalue()
    first = counts()
    call_command("load_demo", stdout=io.StringIO())
    assert counts() == first

    assert set(Tenant.objects.values_list("slug", flat=True)) == {"acme", "globex"}
    for username in ("admin", "author", "acme-reviewer", "globex-reviewer"):
        assert authenticate(username=username, password="kindgi-demo") is not None
    assert User.objects.get(username="admin").is_superuser
    roles = set(Membership.objects.values_list("user__username", "tenant__slug", "role"))
    assert {
        ("author", "acme", "author"),
        ("author", "globex", "author"),
        ("acme-reviewer", "acme", "reviewer"),
        ("globex-reviewer", "globex", "reviewer"),
    } <= roles
    assert ("acme-reviewer", "globex", "reviewer") not in roles

    # what the command made is in the audit log, once per change, under its name
    audited = dict(AuditEntry.objects.filter(actor="command:load_demo").values_list("action").annotate(n=Count("pk")))
    assert audited == {
        "tenant.create": 2,
        "member.add": Membership.objects.count(),
        "guardrail.shadow": 1,
        "judgemodel.create": JudgeModelRegistration.objects.count(),
    }
    assert AuditEntry.objects.filter(action="guardrail.create").count() == Guardrail.objects.count()

    checks = set(Guardrail.objects.values_list("check_name", flat=True))
    assert {check.id for check in default_registry()} <= checks  # every built-in, rubric too
    assert Guardrail.objects.filter(kind="llm-judge").exists()

    assert 2000 <= first["RunTrace"] <= 5000
    assert RunTrace.objects.filter(withheld=True).exists()
    assert RunTrace.objects.filter(document__output__icontains="<script").exists()
    assert set(Violation.objects.values_list("state", flat=True)) == {
        "open",
        "acknowledged",
        "resolved",
        "false-positive",
    }
    assert Violation.objects.filter(mode="ci").exists()
    assert JudgeLedgerEntry.objects.filter(over_budget_cost=True).exists()
    assert JudgeLedgerEntry.objects.filter(over_budget_latency=True).exists()
    assert JudgeLedgerEntry.objects.values("model_id").distinct().count() >= 2
    registered = set(JudgeModelRegistration.objects.values_list("model_id", flat=True))
    assert set(JudgeLedgerEntry.objects.values_list("model_id", flat=True)) <= registered
    assert not JudgeLedgerEntry.objects.filter(provider="").exists()
    assert not JudgeLedgerEntry.objects.filter(cache_hit=True, billed=True).exists()
    assert JudgeLedgerEntry.objects.filter(cache_hit=True, cost_usd=0, input_tokens=None).exists()
    assert JudgeLedgerEntry.objects.exclude(trace_ref="").count() == first["JudgeLedgerEntry"]
    admin = Client()
    admin.force_login(User.objects.get(username="admin"))
    page = admin.get("/judge-models/").content.decode()
    assert all(model_id in page for model_id in registered)
    days = {moment.date() for moment in Violation.objects.values_list("created_at", flat=True)}
    assert len(days) >= 20  # spread over the last 30 days


def test_the_demo_has_a_shadow_judge_skip_reasons_and_reviewed_precision(db: Any) -> None:
    call_command("load_demo", stdout=io.StringIO())
    shadow = Guardrail.objects.get(shadow=True)
    assert shadow.kind == "llm-judge"
    assert EvaluationResult.objects.filter(guardrail=shadow, shadow=True, status="fail").exists()
    assert not Violation.objects.filter(guardrail=shadow).exists()
    assert EvaluationResult.objects.filter(evaluation__isnull=False, status="skipped").exclude(skip_reason="").exists()
    reviewer = Client()
    reviewer.force_login(User.objects.get(username="acme-reviewer"))
    reviewed = (
        Violation.objects.filter(tenant__slug="acme", state="false-positive")
        .values_list("guardrail__guardrail_id", flat=True)
        .first()
    )
    html = reviewer.get(f"/guardrails/{reviewed}/").content.decode()
    assert "no review yet" not in html.split("data-quality-overall")[1].split("</tr>")[0]
    assert "In shadow" in reviewer.get(f"/guardrails/{shadow.guardrail_id}/").content.decode()
    calibrated = reviewer.get("/guardrails/support-tone-judge/").content.decode()
    assert "data-kappa" in calibrated and "20 of 20 traces labelled" in calibrated
