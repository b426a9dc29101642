"""The console's side of the llm-judge: registrations and policies in the database, the
database cache, the cost ledger, and the estimate before a run.

`ConsoleJudgeServices` is the engine's JudgeServices over the database; evaluations get
one through `guardrails.deployment.evaluation_services`, so that every evaluation path (the
runtime verdict, ingestion, batch runs) routes, caches and records the same way.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from guardrails.engine.evaluate import selects
from guardrails.engine.judge import (
    KIND as JUDGE_KIND,
)
from guardrails.engine.judge import (
    JudgeCall,
    JudgeModel,
    JudgeOutcome,
    JudgePolicy,
    NoJudgeModel,
    estimate_call,
    route_for,
    validate_judge_model,
)
from guardrails.engine.judge.models import exact_price
from guardrails.engine.types import Context, Guardrail, Issue, Mode, Trace
from guardrails.models import Guardrail as GuardrailRow
from guardrails.models import (
    GuardrailRevision,
    JudgeCacheEntry,
    JudgeClaim,
    JudgeModelRegistration,
    TenantJudgePolicy,
)
from guardrails.redaction import forget_key_names, redact_secrets
from kindgi_console.audit import log as audit

logger = logging.getLogger(__name__)

#: Prices are kept with six decimal places, so that a call's cost is exact at twelve.
PRICE_PLACES = 6
PRICE_MAX = Decimal("1000000")

# ---------------------------------------------------------------------------- registrations


def validate_registration(doc: object) -> list[Issue]:
    """Every error of a registration as the API and pages take it (the wire shape, plus
    `enabled`), with JSON pointers; prices with at most six decimal places."""
    if not isinstance(doc, dict):
        return [Issue("", "a judge model registration is a JSON object")]
    issues: list[Issue] = []
    if "enabled" in doc and not isinstance(doc["enabled"], bool):
        issues.append(Issue("/enabled", "enabled is true or false"))
    issues.extend(validate_judge_model(wire_part(doc)))
    if issues:
        return issues
    for name in ("inputUsdPerMTok", "outputUsdPerMTok"):
        price = exact_price(doc["pricing"][name])
        exponent = price.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -PRICE_PLACES:
            issues.append(Issue(f"/pricing/{name}", "a price has at most six decimal places"))
        elif price >= PRICE_MAX:
            issues.append(Issue(f"/pricing/{name}", "a price is below 1,000,000 USD per million tokens"))
    return issues


def wire_part(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The registration without the console's own fields (`enabled`, `apiKeySet`)."""
    return {name: value for name, value in doc.items() if name not in ("enabled", "apiKeySet")}


def judge_model_of(row: JudgeModelRegistration) -> JudgeModel:
    """The engine's JudgeModel of a registration row (a disabled one is never routed to)."""
    model = JudgeModel.from_dict(registration_doc(row, console_fields=False))
    return model if row.enabled else replace(model, enabled=False)


def registration_doc(row: JudgeModelRegistration, *, console_fields: bool = True) -> dict[str, Any]:
    """A registration row in the wire shape (prices as decimal strings); with
    `console_fields`, also `enabled` and `apiKeySet` (whether its variable is set here)."""
    doc: dict[str, Any] = {
        "id": row.model_id,
        "provider": row.provider,
        "model": row.model,
        "baseUrl": row.base_url,
        "apiKeyEnv": row.api_key_env or None,
        "pricing": {
            "inputUsdPerMTok": _price_text(row.input_usd_per_mtok),
            "outputUsdPerMTok": _price_text(row.output_usd_per_mtok),
        },
        "capabilities": list(row.capabilities or []),
        "sampling": row.sampling,
    }
    if row.thinking:
        doc["thinking"] = dict(row.thinking)
    if console_fields:
        doc["enabled"] = row.enabled
        doc["apiKeySet"] = api_key_set(row)
    return doc


def api_key_set(row: JudgeModelRegistration) -> bool | None:
    """Whether the variable holding the key is set here; None for a model that takes none."""
    if not row.api_key_env:
        return None
    return bool(os.environ.get(row.api_key_env))


def _price_text(value: Decimal) -> str:
    text = format(Decimal(value), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@transaction.atomic
@transaction.atomic
def save_registration(doc: Mapping[str, Any], *, model_id: str | None = None) -> JudgeModelRegistration:
    """Create or replace the registration of `doc["id"]` (validated by validate_registration).

    `model_id`, for a replacement, is the id in the URL: the document may not rename it.
    """
    wanted = model_id or str(doc["id"])
    row = JudgeModelRegistration.objects.select_for_update().filter(model_id=wanted).first()
    before = _audited(row) if row else None
    row = row or JudgeModelRegistration(model_id=wanted)
    model = JudgeModel.from_dict(wire_part(doc))
    row.provider = model.provider
    row.model = model.model
    row.base_url = model.base_url
    row.api_key_env = model.api_key_env or ""
    row.input_usd_per_mtok = model.input_usd_per_mtok
    row.output_usd_per_mtok = model.output_usd_per_mtok
    row.capabilities = sorted(model.capabilities)
    row.thinking = None if model.thinking is None else model.thinking.to_dict()
    row.sampling = model.sampling
    if "enabled" in doc:
        row.enabled = bool(doc["enabled"])
    row.updated_at = timezone.now()
    row.save()
    forget_key_names()
    audit.record("judgemodel.update" if before else "judgemodel.create", row, before=before, after=_audited(row),
                 tenant=None, object_id=row.model_id)
    return row


def _audited(row: JudgeModelRegistration) -> dict[str, Any]:
    return {**registration_doc(row, console_fields=False), "enabled": row.enabled}


@transaction.atomic
def delete_registration(model_id: str) -> bool:
    """Delete a registration (the ledger keeps naming its id); whether there was one."""
    row = JudgeModelRegistration.objects.select_for_update().filter(model_id=model_id).first()
    if row is None:
        return False
    audit.record("judgemodel.delete", row, before=_audited(row), tenant=None, object_id=model_id)
    row.delete()
    forget_key_names()
    return True


def registered_models() -> list[JudgeModel]:
    """Every registration as the engine's JudgeModel, in one query: routing skips the
    disabled ones, and tells a guardrail pinned to one that it is disabled."""
    return [judge_model_of(row) for row in JudgeModelRegistration.objects.all()]


def policy_of(tenant: Any) -> JudgePolicy:
    """A tenant's judge policy (every model, when it has none), in one query."""
    if tenant is None:
        return JudgePolicy()
    allowed = (
        TenantJudgePolicy.objects.filter(tenant=tenant).values_list("allowed_models", flat=True).first()
    )
    return JudgePolicy.allowing(allowed, tenant=tenant.slug)


def validate_policy(doc: object) -> list[Issue]:
    """Errors of a tenant judge policy `{"allowedModels": [...] | null}`; every id registered."""
    from guardrails.engine.judge import JUDGE_POLICY_SCHEMA
    from guardrails.engine.schema import validate_against

    issues = validate_against(JUDGE_POLICY_SCHEMA, doc)
    if issues or not isinstance(doc, dict) or doc.get("allowedModels") is None:
        return issues
    wanted = list(doc["allowedModels"])
    known = set(JudgeModelRegistration.objects.filter(model_id__in=wanted).values_list("model_id", flat=True))
    return [
        Issue(f"/allowedModels/{index}", f"no judge model {model_id!r} is registered")
        for index, model_id in enumerate(wanted)
        if model_id not in known
    ]


@transaction.atomic
def save_policy(tenant: Any, doc: Mapping[str, Any]) -> TenantJudgePolicy:
    """Set a tenant's policy (validated by validate_policy)."""
    allowed = doc.get("allowedModels")
    before = TenantJudgePolicy.objects.filter(tenant=tenant).values_list("allowed_models", flat=True).first()
    policy, _ = TenantJudgePolicy.objects.update_or_create(
        tenant=tenant,
        defaults={"allowed_models": None if allowed is None else sorted(allowed), "updated_at": timezone.now()},
    )
    audit.record("judgepolicy.update", policy, before={"allowedModels": before},
                 after={"allowedModels": policy.allowed_models}, object_id=tenant.slug, object_repr=str(tenant))
    return policy


# ---------------------------------------------------------------------------- the services


def outcome_text(outcome: JudgeOutcome | None) -> str:
    """The short outcome the ledger lists: PASS, FAIL, the score, or error."""
    if outcome is None:
        return "error"
    if outcome.verdict is not None:
        return outcome.verdict
    if outcome.score is not None:
        return f"{outcome.score:g}"
    return "error"


@dataclass
class ConsoleJudgeServices:
    """JudgeServices over the database for one evaluation (a request, a task, a run).

    Registrations are read once and each tenant's policy once, for the whole evaluation.
    The cache is JudgeCacheEntry, and JudgeClaim makes evaluations that judge the same key
    at once (two runs, two requests) wait for one call; every provider call and cache hit is a
    JudgeLedgerEntry under `tenant` (or the trace's), the guardrail's revision, the
    `evaluation` when in a run, and the stored trace when its row is known
    (`know_traces`, or `attach_trace` once it is stored). One httpx client serves the
    whole evaluation; `close()` it (it is also closed when the services are collected).
    `until` is the time.monotonic() instant the evaluation must be done by; a judge call,
    retries included, also ends within `call_limit_s` of its start.
    """

    tenant: Any = None  # a Tenant, its slug, or None (each trace's own)
    evaluation: Any = None
    preview: Any = None  # a GuardrailPreview: the ledger rows are that preview's spend
    until: float | None = None
    call_limit_s: float = 60.0
    _models: list[JudgeModel] | None = None
    _policies: dict[str | None, JudgePolicy] = field(default_factory=dict)
    _tenants: dict[str, Any] = field(default_factory=dict)
    _revisions: dict[tuple[str, int | None], tuple[int, int | None] | None] = field(default_factory=dict)
    _trace_pks: dict[tuple[int, str], int] = field(default_factory=dict)
    _client: httpx.Client | None = None
    _last_model: str = ""
    _holder: str = field(default_factory=lambda: uuid.uuid4().hex)
    recorded: list[int] = field(default_factory=list)

    @property
    def deadline(self) -> float:
        by_call = time.monotonic() + self.call_limit_s
        return by_call if self.until is None else min(self.until, by_call)

    def models_for(self, tenant: str | None) -> tuple[list[JudgeModel], JudgePolicy]:
        if self._models is None:
            self._models = registered_models()
        if tenant not in self._policies:
            self._policies[tenant] = policy_of(self._tenant(tenant))
        return list(self._models), self._policies[tenant]

    def cache_get(self, key: str) -> JudgeOutcome | None:
        outcome = JudgeCacheEntry.objects.filter(key=key).values_list("outcome", flat=True).first()
        return None if outcome is None else JudgeOutcome.from_dict(outcome)

    def cache_put(self, key: str, outcome: JudgeOutcome) -> None:
        JudgeCacheEntry.objects.bulk_create(
            [JudgeCacheEntry(key=key, outcome=outcome.to_dict(), model_id=self._last_model)], ignore_conflicts=True
        )

    def record(self, call: JudgeCall, guardrail: Guardrail, trace: Trace, context: Context) -> None:
        outcome = call.outcome or JudgeOutcome()
        self._last_model = call.model_id  # the strategy caches a call's outcome right after
        self._write(
            guardrail,
            trace,
            context,
            model_id=call.model_id,
            provider=call.provider,
            model_name=call.model_name,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cost_usd=call.cost_usd,
            latency_ms=call.latency_ms,
            outcome=outcome_text(call.outcome),
            verdict=outcome.verdict or "",
            score=outcome.score,
            reason=outcome.reason or "",
            error=redact_secrets(call.error or ""),
            billed=call.billed,
            attempts=call.attempts,
            over_budget_cost=call.over_cost,
            over_budget_latency=call.over_latency,
        )

    def record_cache_hit(self, model: JudgeModel, guardrail: Guardrail, trace: Trace, context: Context) -> None:
        """A judgement answered from the cache: a ledger row that cost nothing."""
        self._write(
            guardrail,
            trace,
            context,
            model_id=model.id,
            provider=model.provider,
            model_name=model.model,
            cost_usd=Decimal(0),
            latency_ms=0,
            outcome="cached",
            billed=False,
            attempts=0,
            cache_hit=True,
        )

    def claim(self, key: str, until: float) -> bool:
        """Take the judgement of `key` until the monotonic instant `until` (a JudgeClaim row,
        seen by every process); False when another evaluation holds it. Lapsed claims (their
        holders died) are cleared first, so the table holds only judgements in flight."""
        now = timezone.now()
        expires = now + timedelta(seconds=max(0.0, until - time.monotonic()))
        JudgeClaim.objects.filter(expires_at__lt=now).delete()
        try:
            with transaction.atomic():
                JudgeClaim.objects.create(key=key, holder=self._holder, expires_at=expires)
        except IntegrityError:
            return False
        return True

    def release(self, key: str) -> None:
        """Give back a claim this evaluation holds (not one that lapsed and was taken over)."""
        JudgeClaim.objects.filter(key=key, holder=self._holder).delete()

    def http_client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(follow_redirects=False)
            weakref.finalize(self, self._client.close)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- linking ledger rows to stored traces

    def know_traces(self, rows: Iterable[Any]) -> None:
        """Stored traces about to be evaluated (anything with `pk`, `tenant_id` and
        `trace_id`): their ledger rows will name them. Reads nothing from the database."""
        for row in rows:
            self._trace_pks[(row.tenant_id, row.trace_id)] = row.pk

    def attach_trace(self, row: Any) -> None:
        """Link the rows this evaluation recorded for a trace that has since been stored."""
        from traces.models import JudgeLedgerEntry

        if self.recorded:
            JudgeLedgerEntry.objects.filter(
                pk__in=self.recorded, trace__isnull=True, tenant_id=row.tenant_id, trace_ref=row.trace_id
            ).update(trace=row)

    # -- internals

    def _tenant(self, slug: str | None) -> Any:
        """The Tenant row of `slug` (None: the evaluation's own, given as a row or a slug),
        read once and only when first needed."""
        if slug is None:
            if not isinstance(self.tenant, str):
                return self.tenant
            slug = self.tenant
        if self.tenant is not None and not isinstance(self.tenant, str) and self.tenant.slug == slug:
            return self.tenant
        if slug not in self._tenants:
            from kindgi_console.tenancy.models import Tenant

            self._tenants[slug] = Tenant.objects.filter(slug=slug).first()
        return self._tenants[slug]

    def _revision(self, guardrail: Guardrail) -> tuple[int, int | None] | None:
        """(guardrail pk, revision pk) of an engine guardrail, looked up once."""
        wanted = (guardrail.id, guardrail.revision)
        if wanted not in self._revisions:
            if guardrail.revision is None:
                pk = GuardrailRow.objects.filter(guardrail_id=guardrail.id).values_list("pk", flat=True).first()
                self._revisions[wanted] = None if pk is None else (pk, None)
            else:
                found = (
                    GuardrailRevision.objects.filter(guardrail__guardrail_id=guardrail.id, number=guardrail.revision)
                    .values_list("guardrail_id", "pk")
                    .first()
                )
                self._revisions[wanted] = found
        return self._revisions[wanted]

    def _write(self, guardrail: Guardrail, trace: Trace, context: Context, **fields: Any) -> None:
        from traces import ledger
        from traces.models import JudgeLedgerEntry

        tenant = self._tenant(context.tenant)
        revision = self._revision(guardrail)
        if tenant is None or revision is None:
            # A guardrail or tenant the console does not store (a scripted evaluation):
            # there is no ledger to charge; say so rather than fail the evaluation.
            logger.warning("judge call of %s not recorded: no stored tenant or guardrail", guardrail.id)
            return
        trace_ref = str(trace.get("id") or "")
        # Through the ledger's one write path: the entry and its day's sums together.
        [entry] = ledger.record([JudgeLedgerEntry(
            tenant=tenant,
            guardrail_id=revision[0],
            revision_id=revision[1],
            trace_id=self._trace_pks.get((tenant.pk, trace_ref)),
            trace_ref=trace_ref,
            evaluation=self.evaluation,
            preview=self.preview,
            **fields,
        )])
        self.recorded.append(entry.pk)


def console_judge_services(
    tenant: Any = None, *, evaluation: Any = None, until: float | None = None
) -> ConsoleJudgeServices:
    """The judge services of one evaluation for `tenant` (a Tenant, its slug, or None: each
    trace's own): done by `until` (a time.monotonic() instant) when the caller has set its
    deadline, else within a run's time limit (the task's soft limit) or a request's
    (KINDGI_EVALUATE_TIME_LIMIT_S)."""
    limit = settings.CELERY_TASK_SOFT_TIME_LIMIT if evaluation is not None else settings.KINDGI_EVALUATE_TIME_LIMIT_S
    return ConsoleJudgeServices(
        tenant=tenant,
        evaluation=evaluation,
        until=time.monotonic() + limit if until is None else until,
        call_limit_s=settings.KINDGI_JUDGE_CALL_LIMIT_S,
    )


# ---------------------------------------------------------------------------- the estimate

#: At most this many traces are read to estimate a run; a larger selection is extrapolated.
ESTIMATE_SAMPLE = 500


def estimate_run(
    guardrails: Iterable[Guardrail], traces: Any, tenant: Any, *, mode: Mode = "ci", sample: int | None = None
) -> dict[str, Any]:
    """What a run of `guardrails` over the `traces` queryset (RunTrace rows) will ask judges.

    Returns ``{"calls", "cached", "costUsd", "traces", "sampled", "extrapolated", "models":
    {guardrail id: model id}, "errors": {guardrail id: why no judge}}``: `calls` are the judge
    calls still to pay (cache hits are `cached`, free), `costUsd` their upper estimate at the
    routed models' prices (engine estimate_call: the whole output limit used). Only llm-judge
    guardrails whose scope selects a trace count. At most `sample` (ESTIMATE_SAMPLE) traces,
    the newest, are read; for a larger selection the counts and the cost are scaled up to
    the whole selection and `extrapolated` is true. Queries: the trace count, the sample,
    the registry, the tenant's policy, and one cache lookup per guardrail.
    """
    limit = ESTIMATE_SAMPLE if sample is None else sample
    judged = [g for g in guardrails if g.kind == JUDGE_KIND]
    answer: dict[str, Any] = {
        "calls": 0, "cached": 0, "costUsd": "0", "traces": 0, "sampled": 0,
        "extrapolated": False, "models": {}, "errors": {},
    }
    if not judged:
        return answer
    total = traces.count()
    rows = list(traces.order_by("-received_at", "-pk").values_list("document", flat=True)[:limit])
    answer.update(traces=total, sampled=len(rows), extrapolated=len(rows) < total)
    services = ConsoleJudgeServices(tenant=tenant)
    calls = cached = 0
    cost = Decimal(0)
    for guardrail in judged:
        try:
            model = route_for(services, guardrail, getattr(tenant, "slug", None))
        except NoJudgeModel as error:
            answer["errors"][guardrail.id] = str(error)
            continue
        answer["models"][guardrail.id] = model.id
        estimates = [
            estimate_call(guardrail, document, model)
            for document in rows
            if selects(guardrail, Context.for_trace(document, mode))
        ]
        hits = set(
            JudgeCacheEntry.objects.filter(key__in=[e.cache_key for e in estimates]).values_list("key", flat=True)
        )
        cached += sum(1 for e in estimates if e.cache_key in hits)
        paid = [e for e in estimates if e.cache_key not in hits]
        calls += len(paid)
        cost += sum((e.cost_usd for e in paid), Decimal(0))
    if answer["extrapolated"] and rows:
        scale = Decimal(total) / Decimal(len(rows))
        judgements = round((calls + cached) * scale)  # rounded once, so the parts add up
        cached = min(judgements, round(cached * scale))
        calls, cost = judgements - cached, cost * scale
    answer.update(calls=calls, cached=cached, costUsd=_cost_text(cost))
    return answer


def _cost_text(cost: Decimal) -> str:
    """An estimate to the millionth of a dollar, as a plain decimal string."""
    text = format(cost.quantize(Decimal("0.000001")), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
