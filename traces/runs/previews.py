"""Preview impact: an unsaved draft beside its current revision over the tenant's stored traces.

`create_preview` checks the draft (the same registration as saving) and the selection (the
filters of a run; by default the last PREVIEW_DAYS days), records a queued GuardrailPreview
and sends `traces.tasks.run_preview`. `run_preview` evaluates the newest PREVIEW_MAX selected
traces in batches, writing progress to the row; nothing is stored as a result or violation.
A trace *newly fails* when the draft fails it and the current revision does not (a new
guardrail has no current revision: every failure is new), *no longer fails* the other way.
Then both are evaluated on the guardrail's labelled set (traces.runs.preview_labels):
precision, recall and the labelled traces the draft gets wrong, kept as `changes["labelled_set"]`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, cast

from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from guardrails import deployment
from guardrails.engine.evaluate import evaluate_guardrail
from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.types import Guardrail as EngineGuardrail
from guardrails.engine.types import Issue, Mode, Result
from guardrails.models import GuardrailRevision
from guardrails.services import register_document
from kindgi_console import tasking
from kindgi_console.tenancy.models import Tenant
from traces.judge.estimate import estimate_run
from traces.judge.services import evaluation_services
from traces.models import GuardrailPreview, RunTrace
from traces.runs.evaluations import RunRequestError, check_reviewer_limit, clean_filters, selected_traces
from traces.runs.preview_labels import LabelledTally, preview_labels

PREVIEW_DAYS = 7
PREVIEW_MAX = 5000
PREVIEW_LISTED = 200
BATCH = 200
KINDS = ("newly_failing", "no_longer_failing", "unchanged")


@dataclass(frozen=True)
class PreviewRequest:
    tenant: Tenant
    draft: object
    filters: object = None
    mode: Mode = "ci"
    started_by: Any = None
    label: str = ""
    by_author: bool = True


def create_preview(request: PreviewRequest) -> GuardrailPreview:
    """A queued preview of a valid draft; RunRequestError naming the field otherwise."""
    if request.mode not in ("ci", "runtime"):
        raise RunRequestError([Issue("/mode", "mode is ci or runtime")])
    registration = register_document(request.draft)
    if registration.guardrail is None:
        raise RunRequestError([Issue("/guardrail" + i.path, i.message) for i in registration.errors])
    filters = preview_filters(request.filters, request.tenant)
    document = dict(registration.guardrail.document)
    current = current_revision(document["id"])
    if not request.by_author:
        documents = [document] + ([current.document] if current is not None else [])
        check_reviewer_limit(request.tenant, documents, filters, request.mode)
    with transaction.atomic():
        preview = GuardrailPreview.objects.create(
            tenant=request.tenant,
            draft=document,
            current=current,
            trace_filters=filters,
            mode=request.mode,
            started_by=request.started_by,
            started_by_label=request.label,
            judge_estimate_usd=judge_estimate(request.tenant, registration.guardrail, filters, request.mode),
        )
        transaction.on_commit(lambda: send_preview(preview.pk))
    return preview


def judge_estimate(tenant: Tenant, draft: EngineGuardrail, filters: dict[str, Any], mode: Mode) -> Decimal | None:
    """What judging the draft over the selection will cost at most (None: it judges nothing)."""
    if draft.kind != JUDGE_KIND:
        return None
    traces = selected_traces(tenant.pk, filters)
    return Decimal(str(estimate_run([draft], traces, tenant, mode=mode)["costUsd"]))


def draft_estimate(tenant: Tenant, draft: object, filters: object = None, mode: Mode = "ci") -> dict[str, Any]:
    """What a draft about to run will ask judges, as New evaluation's estimate says it
    (traces.judge.estimate.estimate_run): `preview`, of Preview impact over the selection
    (the draft and its current revision over the newest PREVIEW_MAX traces), and `try`,
    of Try it on the selection's newest trace. Raises RunRequestError naming the field."""
    registration = register_document(draft)
    if registration.guardrail is None:
        raise RunRequestError([Issue("/guardrail" + i.path, i.message) for i in registration.errors])
    chosen = preview_filters(filters, tenant)
    selected = selected_traces(tenant.pk, chosen)
    newest = selected.order_by("-received_at", "-pk").values("pk")
    judged = [registration.guardrail]
    current = current_revision(registration.guardrail.id)
    if current is not None:
        judged.append(EngineGuardrail(document=current.document, revision=current.number))
    return {
        "tenant": tenant.slug,
        "preview": estimate_run(judged, selected.filter(pk__in=newest[:PREVIEW_MAX]), tenant, mode=mode),
        "try": estimate_run([registration.guardrail], selected.filter(pk__in=newest[:1]), tenant, mode=mode),
    }


def preview_filters(raw: object, tenant: Tenant) -> dict[str, Any]:
    """A run's filters under `/traces`; without `since` (and without an upload), the last week."""
    try:
        filters = clean_filters(raw, tenant)
    except RunRequestError as error:
        raise RunRequestError(
            [Issue(i.path.replace("/filters", "/traces", 1), i.message) for i in error.issues]
        ) from None
    if "since" not in filters and "upload" not in filters:
        filters["since"] = (timezone.now() - timedelta(days=PREVIEW_DAYS)).isoformat()
    return filters


def current_revision(guardrail_id: str) -> GuardrailRevision | None:
    return GuardrailRevision.objects.filter(
        guardrail__guardrail_id=guardrail_id, guardrail__deleted_at__isnull=True, number=F("guardrail__revision")
    ).first()


def send_preview(preview_id: int) -> None:
    tasking.send("traces.tasks.run_preview", preview_id)


def preview_traces(preview: GuardrailPreview) -> QuerySet[RunTrace]:
    """The newest PREVIEW_MAX traces the preview's filters select."""
    return selected_traces(preview.tenant_id, preview.trace_filters).order_by("-received_at", "-pk")[:PREVIEW_MAX]


def run_preview(preview_id: int) -> None:
    """Evaluate a queued preview (one claimed by no one else); a failure is kept on the row."""
    claimed = GuardrailPreview.objects.filter(pk=preview_id, status=GuardrailPreview.Status.QUEUED).update(
        status=GuardrailPreview.Status.RUNNING
    )
    if not claimed:
        return
    preview = GuardrailPreview.objects.select_related("tenant", "current").get(pk=preview_id)
    try:
        _evaluate(preview)
    except Exception as error:  # kept on the row for the page, then raised for the worker's log
        GuardrailPreview.objects.filter(pk=preview_id).update(
            status=GuardrailPreview.Status.FAILED,
            error=f"{type(error).__name__}: {error}"[:2000],
            finished_at=timezone.now(),
        )
        raise


class PreviewStopped(Exception):
    """A preview that cannot go on: its judge cannot be reached, or its time ran out."""


#: Traces in a row whose judge call could not reach the provider that stop a preview.
UNREACHABLE_IN_A_ROW = 3
#: Words of a judge call's error that say the provider was not reached (the judge client's
#: transport faults, the circuit's refusal, a deadline that passed waiting for an answer).
UNREACHABLE = ("could not reach", "timed out", "provider unavailable", "time limit")


def preview_time_limit() -> float:
    """Seconds a preview may take in all: its task's soft limit, less a margin to record why."""
    return max(1.0, float(settings.CELERY_TASK_SOFT_TIME_LIMIT) - 5.0)


def unreachable(result: Result | None) -> bool:
    """Whether a result is a judge call that did not reach its provider."""
    reason = (result.reason or "") if result is not None and result.status == "error" else ""
    return reason.startswith("judge call failed") and any(words in reason for words in UNREACHABLE)


def _evaluate(preview: GuardrailPreview) -> None:
    """The selection's traces, then the guardrail's labelled set (traces.runs.preview_labels),
    each in batches: `done` of `total` counts both."""
    pks = list(preview_traces(preview).values_list("pk", flat=True))
    labels, labelled_total = preview_labels(preview)
    GuardrailPreview.objects.filter(pk=preview.pk).update(total=len(pks) + len(labels))
    until = time.monotonic() + preview_time_limit()
    draft = EngineGuardrail(document=preview.draft)
    current = (
        EngineGuardrail(document=preview.current.document, revision=preview.current.number)
        if preview.current is not None
        else None
    )
    tally, labelled = Tally(), LabelledTally(labels, labelled_total, current is not None)
    work: list[tuple[list[int], Tally | LabelledTally]] = [
        (pks, tally),
        ([label.trace_pk for label in labels], labelled),
    ]
    done = 0
    for chosen, counted in work:
        for start in range(0, len(chosen), BATCH):
            rows = list(RunTrace.objects.filter(pk__in=chosen[start : start + BATCH]).select_related("tenant"))
            try:
                _evaluate_batch(preview, draft, current, rows, counted, until)
            except PreviewStopped as stopped:
                _finish(preview, tally, labelled, done=done + counted.seen_in_batch, error=str(stopped))
                return
            done += len(rows)
            GuardrailPreview.objects.filter(pk=preview.pk).update(done=done)
    _finish(preview, tally, labelled)


def _finish(
    preview: GuardrailPreview, tally: Tally, labelled: LabelledTally, done: int | None = None, error: str = ""
) -> None:
    """What the preview found, kept on its row: succeeded, or failed with `error` (after
    `done` traces)."""
    status = GuardrailPreview.Status.FAILED if error else GuardrailPreview.Status.SUCCEEDED
    stopped: dict[str, Any] = {"done": done, "error": error[:2000]} if error else {}
    GuardrailPreview.objects.filter(pk=preview.pk).update(
        status=status,
        counts=tally.counts,
        changes={**tally.changes, "labelled_set": labelled.as_dict()},
        judge_cost_usd=tally.cost + labelled.cost,
        finished_at=timezone.now(),
        **stopped,
    )


class Tally:
    """What a preview found so far: counts, the first traces of each kind, judge spend."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.changes: dict[str, list[dict[str, Any]]] = {"newly_failing": [], "no_longer_failing": []}
        self.cost = Decimal(0)
        self.seen_in_batch = 0
        self.unreachable_in_a_row = 0

    def add(self, trace: RunTrace, after: Result, before: Result | None) -> None:
        failing_now, failing_before = after.status == "fail", before is not None and before.status == "fail"
        kind = (
            "newly_failing"
            if failing_now and not failing_before
            else "no_longer_failing"
            if failing_before and not failing_now
            else "unchanged"
        )
        self.counts[kind] += 1
        listed = self.changes.get(kind)
        if listed is not None and len(listed) < PREVIEW_LISTED:
            reason = after.reason if failing_now else (before.reason if before is not None else None)
            listed.append(
                {
                    "trace": trace.trace_id,
                    "traceUrl": f"/traces/{trace.pk}/",
                    "reason": reason or "",
                    "now": after.status,
                    "before": before.status if before is not None else None,
                }
            )
        for result in (after, before):
            if result is not None and result.details.get("costUsd"):
                self.cost += Decimal(str(result.details["costUsd"]))


def _evaluate_batch(
    preview: GuardrailPreview,
    draft: EngineGuardrail,
    current: EngineGuardrail | None,
    rows: list[RunTrace],
    tally: Tally | LabelledTally,
    until: float,
) -> None:
    """Evaluate a batch of the preview's traces, by `until` (a time.monotonic() instant).

    Raises PreviewStopped when the time is up, or when the judge of UNREACHABLE_IN_A_ROW
    traces in a row could not be reached: each would only wait out its own time limit.
    """
    engine = deployment.engine()
    tally.seen_in_batch = 0
    with evaluation_services(preview.tenant, preview=preview, until=until) as services:
        services.know_traces(rows)
        for row in rows:
            if time.monotonic() >= until:
                raise PreviewStopped(
                    f"the preview ran out of its time limit ({preview_time_limit():.0f} s) before judging every "
                    "trace: pick fewer traces (a shorter period, an agent or a flow)"
                )
            context = services.context(row.document, cast(Mode, preview.mode))
            after = evaluate_guardrail(draft, row.document, context, engine=engine)
            before = evaluate_guardrail(current, row.document, context, engine=engine) if current else None
            tally.add(row, after, before)
            tally.seen_in_batch += 1
            _stop_if_unreachable(tally, after, before)


def _stop_if_unreachable(tally: Tally | LabelledTally, after: Result, before: Result | None) -> None:
    failed = next((r for r in (after, before) if unreachable(r)), None)
    tally.unreachable_in_a_row = tally.unreachable_in_a_row + 1 if failed is not None else 0
    if failed is not None and tally.unreachable_in_a_row >= UNREACHABLE_IN_A_ROW:
        reason = (failed.reason or "").removeprefix("judge call failed: ")
        raise PreviewStopped(
            f"the judge could not be reached ({reason}) for {UNREACHABLE_IN_A_ROW} traces in a row, so the "
            "preview stopped: check the judge model's address on the judge models page"
        )


def preview_as_dict(preview: GuardrailPreview) -> dict[str, Any]:
    return {
        "id": preview.pk,
        "url": f"/api/v1/guardrails/previews/{preview.pk}",
        "page": f"/guardrails/previews/{preview.pk}/",
        "tenant": preview.tenant.slug,
        "guardrail": preview.draft.get("id"),
        "currentRevision": preview.current.number if preview.current is not None else None,
        "status": preview.status,
        "mode": preview.mode,
        "traces": preview.trace_filters,
        "progress": {"done": preview.done, "total": preview.total, "percent": preview.percent},
        "counts": {
            "newlyFailing": preview.counts.get("newly_failing", 0),
            "noLongerFailing": preview.counts.get("no_longer_failing", 0),
            "unchanged": preview.counts.get("unchanged", 0),
        },
        "newlyFailing": preview.changes.get("newly_failing", []),
        "noLongerFailing": preview.changes.get("no_longer_failing", []),
        "labelledSet": preview.changes.get("labelled_set"),
        "judgeEstimateUsd": None if preview.judge_estimate_usd is None else str(preview.judge_estimate_usd),
        "judgeCostUsd": str(preview.judge_cost_usd),
        "error": preview.error,
        "createdAt": preview.created_at.isoformat(),
    }
