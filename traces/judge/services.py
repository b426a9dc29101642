"""The console's side of the llm-judge at evaluation time: the engine's JudgeServices over
the database (registrations, policies, the database cache and claims, the cost ledger), and
the Context services every server evaluation path takes.

`ConsoleJudgeServices` writes the ledger (traces.judge.ledger) beside which it lives; evaluations
get one through `evaluation_services`, so that every evaluation path (the runtime verdict,
ingestion, batch runs, previews, Try it) routes, caches and records the same way.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from types import TracebackType
from typing import Any

import httpx
from django.conf import settings
from django.db import connection
from django.utils import timezone

from guardrails import deployment
from guardrails.engine.judge import CircuitBreaker, JudgeCall, JudgeModel, JudgeOutcome, JudgePolicy
from guardrails.engine.sandbox import SandboxPool
from guardrails.engine.types import Context, Guardrail, Mode, Trace
from guardrails.models import Guardrail as GuardrailRow
from guardrails.models import GuardrailRevision, JudgeCacheEntry, JudgeClaim
from guardrails.redaction import redact_secrets
from kindgi_console import instruments
from kindgi_console.tenancy.models import Tenant
from traces.judge import ledger
from traces.judge.circuit import judge_circuit
from traces.judge.registry import policy_of, registered_models
from traces.models import JudgeLedgerEntry

logger = logging.getLogger(__name__)

_CLAIMS = JudgeClaim._meta.db_table
# A new claim, or a lapsed one taken over; no row when another evaluation holds the key.
_CLAIM = (
    f"INSERT INTO {_CLAIMS} (key, holder, expires_at) VALUES (%s, %s, %s) "  # noqa: S608 (the model's own table)
    f"ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at "
    f"WHERE {_CLAIMS}.expires_at < %s RETURNING id"
)
_CACHE_PUT = (
    f"INSERT INTO {JudgeCacheEntry._meta.db_table} (key, outcome, model_id, created_at) "  # noqa: S608 (its own table)
    "VALUES (%s, %s, %s, %s) ON CONFLICT (key) DO NOTHING"
)


def outcome_text(outcome: JudgeOutcome | None) -> str:
    """The short outcome the ledger lists: PASS, FAIL, the score, or error."""
    if outcome is None:
        return "error"
    if outcome.verdict is not None:
        return outcome.verdict
    if outcome.score is not None:
        return f"{outcome.score:g}"
    return "error"


def outcome_class(outcome: JudgeOutcome | None) -> str:
    """The outcome as a metric's label (a few values): pass, fail, score or error."""
    if outcome is None:
        return "error"
    if outcome.verdict is not None:
        return outcome.verdict.lower()
    return "score" if outcome.score is not None else "error"


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
    retries included, also ends within `call_limit_s` of its start. `circuit` is the
    breaker every process shares (traces.judge.circuit): a provider found down fails the
    calls at once.

    A run's chunk judges several traces at once on threads of its own: the model of the
    last call is kept per thread, and the HTTP client (safe across threads) made once.
    """

    tenant: Any = None  # a Tenant, its slug, or None (each trace's own)
    evaluation: Any = None
    preview: Any = None  # a GuardrailPreview: the ledger rows are that preview's spend
    until: float | None = None
    call_limit_s: float = 60.0
    circuit: CircuitBreaker | None = None
    _models: list[JudgeModel] | None = None
    _policies: dict[str | None, JudgePolicy] = field(default_factory=dict)
    _tenants: dict[str, Any] = field(default_factory=dict)
    _revisions: dict[tuple[str, int | None], tuple[int, int | None] | None] = field(default_factory=dict)
    _trace_pks: dict[tuple[int, str], int] = field(default_factory=dict)
    _client: httpx.Client | None = None
    _last: threading.local = field(default_factory=threading.local)  # .model: of this thread's last call
    _client_lock: threading.Lock = field(default_factory=threading.Lock)
    _holder: str = field(default_factory=lambda: uuid.uuid4().hex)
    _swept: bool = False
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
        # One statement (no transaction of its own): a run's chunk caches each judged trace.
        with connection.cursor() as cursor:
            cursor.execute(
                _CACHE_PUT, [key, json.dumps(outcome.to_dict()), getattr(self._last, "model", ""), timezone.now()]
            )

    def record(self, call: JudgeCall, guardrail: Guardrail, trace: Trace, context: Context) -> None:
        outcome = call.outcome or JudgeOutcome()
        self._last.model = call.model_id  # the strategy caches a call's outcome right after
        instruments.count_judge_call(call.model_id, outcome_class(call.outcome), call.latency_ms, call.cost_usd)
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
        seen by every process); False when another evaluation holds it. A lapsed claim (its
        holder died) is taken over in the same statement; the evaluation's first claim also
        clears every lapsed one, so the table holds only judgements in flight. One query a
        claim: a run's chunk makes one per judged trace."""
        now = timezone.now()
        expires = now + timedelta(seconds=max(0.0, until - time.monotonic()))
        if not self._swept:
            JudgeClaim.objects.filter(expires_at__lt=now).delete()
            self._swept = True
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM, [key, self._holder, expires, now])
            return cursor.fetchone() is not None

    def release(self, key: str) -> None:
        """Give back a claim this evaluation holds (not one that lapsed and was taken over)."""
        claims = JudgeClaim.objects.filter(key=key, holder=self._holder)
        claims._raw_delete(claims.db)  # one statement: nothing refers to a claim

    def http_client(self) -> httpx.Client:
        with self._client_lock:
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
        tenant = self._tenant(context.tenant)
        revision = self._revision(guardrail)
        if tenant is None or revision is None:
            # A guardrail or tenant the console does not store (a scripted evaluation):
            # there is no ledger to charge; say so rather than fail the evaluation.
            logger.warning("judge call of %s not recorded: no stored tenant or guardrail", guardrail.id)
            return
        trace_ref = str(trace.get("id") or "")
        # Through the ledger's one write path: the entry and its day's sums together.
        [entry] = ledger.record(
            [
                JudgeLedgerEntry(
                    tenant=tenant,
                    guardrail_id=revision[0],
                    revision_id=revision[1],
                    trace_id=self._trace_pks.get((tenant.pk, trace_ref)),
                    trace_ref=trace_ref,
                    evaluation=self.evaluation,
                    preview=self.preview,
                    **fields,
                )
            ]
        )
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
        circuit=judge_circuit(),
    )


@dataclass
class EvaluationServices:
    """The Context services of one evaluation, open until its `with` block ends.

    `sandbox` is the warm pool that runs the checks of sandboxed guardrails; `judge` the
    llm-judge's registered models, routing, database cache and cost ledger. Leaving the
    block closes what they opened (the judge's HTTP connections), on error too.
    """

    sandbox: SandboxPool | None = None
    judge: ConsoleJudgeServices | None = None

    def __enter__(self) -> EvaluationServices:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()

    def bound(self) -> dict[str, Any]:
        """The services by the names the engine's Context looks them up by (those there are)."""
        return {
            name: service for name, service in (("sandbox", self.sandbox), ("judge", self.judge)) if service is not None
        }

    def context(self, trace: Trace, mode: Mode) -> Context:
        """The engine's Context of `trace` in `mode`, with these services bound by name."""
        return Context.for_trace(trace, mode, **self.bound())

    def know_traces(self, rows: Iterable[Any]) -> None:
        """The stored traces about to be evaluated: the judge's ledger rows will name them."""
        if self.judge is not None:
            self.judge.know_traces(rows)

    def attach_trace(self, row: Any) -> None:
        """Link the ledger rows of a trace stored after its evaluation (POST evaluate)."""
        if self.judge is not None:
            self.judge.attach_trace(row)


def evaluation_services(
    tenant: Any = None, *, evaluation: Any = None, preview: Any = None, until: float | None = None
) -> EvaluationServices:
    """The services of an evaluation for `tenant` (a Tenant, its slug, or None), to use as
    `with evaluation_services(...) as services:`.

    The one place every server evaluation path (POST evaluate, ingestion, batch runs,
    previews) gets them from: the deployment's sandbox pool, and judge services routing
    under the tenant's policy (each trace's own tenant when None), charging `evaluation`
    when it is a batch run and `preview` when it is a preview. `until` (a time.monotonic()
    instant) is when the evaluation must be done, when the caller has a deadline of its own.
    """
    judge = console_judge_services(tenant, evaluation=evaluation, until=until)
    judge.preview = preview
    return EvaluationServices(sandbox=deployment.sandbox_pool(), judge=judge)
