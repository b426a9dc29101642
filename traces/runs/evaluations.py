"""Evaluation runs: creating one (its guardrails pinned, its filters checked, its reviewer
limits) and the traces it selects. Planning and evaluating its chunks: `traces.runs.chunks`;
how it ends: `traces.runs.run_ends`.

Plain functions that the API, the pages and the Celery tasks (`traces.runs.tasks`) all call.
A run's state lives in its rows: `Evaluation` (status, done / total, summary) and its
`EvaluationChunk`s (a range of trace primary keys each, with a status and a lease).

Why it survives a lost worker: results are unique per trace, revision and run, so a chunk
evaluated twice stores nothing twice; a chunk's `progress` only grows, up to its size, and
the run's `done` grows by exactly as much (`count_progress`, per stored batch and when the
chunk is done), so a chunk redone after a lost worker counts each trace once; and a
chunk whose lease expired (its worker died, or its message was lost with the worker) is
sent again by `requeue_expired_work`, which runs when a worker starts and periodically.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from guardrails.engine.types import Guardrail as EngineGuardrail
from guardrails.engine.types import Issue, IssuesError, Mode
from guardrails.models import Guardrail, GuardrailRevision
from guardrails.services import live_revisions
from kindgi_console import tasking
from kindgi_console.tenancy.models import Tenant
from traces.judge.estimate import estimate_run
from traces.models import Evaluation, RunTrace, Upload
from traces.store.filters import SELECTION_ERRORS, RunTraceFilter, run_selection, selection_filters, selection_issues

logger = logging.getLogger(__name__)

FILTER_NAMES = ("agent", "flow", "since", "until", "upload")
#: The kind of guardrail that calls no model: what "zero-llm guardrails only" selects.
ZERO_LLM = "zero-llm"


class RunRequestError(IssuesError):
    """A run that cannot start as asked; each issue names the field (JSON pointer).

    `status` is 400 for a bad request, 403 for a run only an author may start.
    """


# ---------------------------------------------------------------------------- creating a run


@dataclass(frozen=True)
class RunRequest:
    """What a person or an API key asks for: guardrails (none: every enabled one), filters."""

    tenant: Tenant
    guardrails: Sequence[str] = ()
    filters: dict[str, Any] | None = None
    mode: Mode = "ci"
    started_by: Any = None
    label: str = ""
    #: False for a reviewer: a run whose judge estimate is over the tenant's limit is refused.
    by_author: bool = True
    #: Only the zero-llm guardrails of the selection (of every enabled one when none is named).
    zero_llm_only: bool = False


def pinned_revisions(
    guardrail_ids: Sequence[str], tenant: Tenant, *, zero_llm_only: bool = False
) -> list[GuardrailRevision]:
    """The current revision of each named guardrail, or of every enabled one, among those
    that apply to the run's tenant (console-wide, or its own: never another tenant's); of a
    guardrail in shadow beside an enforced revision, both (`run_targets` tells them apart).
    `zero_llm_only` keeps the zero-llm ones of those.

    Raises RunRequestError naming an id that is no (live) guardrail of the tenant.
    """
    for index, guardrail_id in enumerate(guardrail_ids):
        if "\x00" in guardrail_id:  # PostgreSQL cannot compare it: a 400, not a 500
            raise RunRequestError([Issue(f"/guardrails/{index}", "the NUL character is not allowed")])
    revisions = (
        GuardrailRevision.objects.filter(
            live_revisions(), guardrail__deleted_at__isnull=True, guardrail__in=Guardrail.objects.applying_to(tenant.pk)
        )
        .select_related("guardrail")
        .order_by("guardrail__guardrail_id", "number")
    )
    if not guardrail_ids:
        revisions = revisions.filter(guardrail__enabled=True)
        return list(revisions.filter(guardrail__kind=ZERO_LLM) if zero_llm_only else revisions)
    found = list(revisions.filter(guardrail__guardrail_id__in=list(guardrail_ids)))
    known = {revision.guardrail.guardrail_id for revision in found}
    for index, guardrail_id in enumerate(guardrail_ids):
        if guardrail_id not in known:
            raise RunRequestError([Issue(f"/guardrails/{index}", f"there is no guardrail {guardrail_id!r}")])
    return [revision for revision in found if revision.guardrail.kind == ZERO_LLM] if zero_llm_only else found


def zero_llm_guardrails(tenant: Tenant) -> list[str]:
    """The ids of the enabled zero-llm guardrails that apply to the tenant: a run of those
    calls no judge (the page's one-click "zero-llm guardrails only")."""
    guardrails = Guardrail.objects.enabled().applying_to(tenant.pk).filter(kind=ZERO_LLM)
    return list(guardrails.order_by("guardrail_id").values_list("guardrail_id", flat=True))


def clean_filters(raw: object, tenant: Tenant) -> dict[str, Any]:
    """The trace selection, checked: the JSON types here, the values by the FilterSet a run
    selects with (`traces.store.filters.run_selection`), as on the new-run page."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RunRequestError([Issue("/filters", "filters is an object")])
    unknown = sorted(set(raw) - set(FILTER_NAMES))
    if unknown:
        raise RunRequestError([Issue(f"/filters/{unknown[0]}", f"unknown filter; use {', '.join(FILTER_NAMES)}")])
    mistyped = [name for name, value in raw.items() if value not in (None, "") and not _json_type_fits(name, value)]
    if mistyped:
        raise RunRequestError([Issue(f"/filters/{name}", SELECTION_ERRORS[name]) for name in mistyped])
    selection = run_selection(raw, tenant)
    if not selection.is_valid():
        raise RunRequestError(selection_issues(selection, "/filters"))
    return selection_filters(selection)


def _json_type_fits(name: str, value: object) -> bool:
    if name == "upload":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


def create_run(request: RunRequest) -> Evaluation:
    """Record a queued run with its revisions pinned; it starts once the transaction commits."""
    if request.mode not in ("ci", "runtime"):
        raise RunRequestError([Issue("/mode", "mode is ci or runtime")])
    revisions = pinned_revisions(request.guardrails, request.tenant, zero_llm_only=request.zero_llm_only)
    if not revisions and request.zero_llm_only:
        raise RunRequestError([Issue("/zeroLlmOnly", "no zero-llm guardrail is in the selection")])
    if not revisions:
        raise RunRequestError([Issue("/guardrails", "no guardrail is enabled: name the ones to evaluate")])
    filters = clean_filters(request.filters, request.tenant)
    if not request.by_author:
        check_reviewer_limit(request.tenant, [r.document for r in revisions], filters, request.mode)
    with transaction.atomic():
        run = Evaluation.objects.create(
            tenant=request.tenant,
            guardrails=list(dict.fromkeys(revision.guardrail.guardrail_id for revision in revisions)),
            trace_filters=filters,
            mode=request.mode,
            started_by=request.started_by,
            started_by_label=request.label,
        )
        run.revisions.set(revisions)
        transaction.on_commit(lambda: send_start(run.pk))
    return run


def reviewer_limit_exceeded(tenant: Tenant, estimate: dict[str, Any] | None) -> str | None:
    """Why a reviewer may not start a run of this judge estimate (None: they may)."""
    if not estimate:
        return None
    cost = Decimal(str(estimate.get("costUsd") or "0"))
    limit = tenant.reviewer_judge_limit_usd
    if cost <= limit:
        return None
    return (
        f"its llm-judge calls are estimated at ${cost:.2f}, above this tenant's ${limit:.2f} "
        "for a reviewer's run: an author of the tenant starts it"
    )


def check_reviewer_limit(tenant: Tenant, documents: Sequence[Any], filters: dict[str, Any], mode: Mode) -> None:
    """Raise RunRequestError (403) when the judge estimate is over the tenant's reviewer limit."""
    guardrails = [EngineGuardrail(document=document) for document in documents]
    estimate = estimate_run(guardrails, selected_traces(tenant.pk, filters), tenant, mode=mode)
    why = reviewer_limit_exceeded(tenant, estimate)
    if why is not None:
        raise RunRequestError([Issue("/guardrails", why)], status=403)


def send_start(evaluation_id: int) -> None:
    tasking.send("traces.tasks.start_evaluation", evaluation_id)


# ---------------------------------------------------------------------------- selection


def selected_traces(tenant_id: int, filters: dict[str, Any]) -> QuerySet[RunTrace]:
    """The tenant's traces that a run's filters (checked by `clean_filters`) select: the
    FilterSet of `GET traces`, with the upload, so that a run selects what the list shows."""
    data = {name: str(value) for name, value in filters.items() if value not in (None, "")}
    selection = RunTraceFilter(data=data, queryset=RunTrace.objects.filter(tenant_id=tenant_id))
    if not selection.is_valid():
        raise ValueError(f"a run's filters that clean_filters did not write: {selection.form.errors.as_json()}")
    return selection.qs


def run_traces(run: Evaluation) -> QuerySet[RunTrace]:
    return selected_traces(run.tenant_id, run.trace_filters)


def start_run_of_upload(sender: Any, *, upload: Upload, **_: Any) -> None:
    """The evaluation asked for with an upload (`upload_evaluation_asked`): its traces against
    every enabled guardrail; a run that cannot start is the upload's failure."""
    user = upload.uploaded_by
    try:
        run = create_run(
            RunRequest(
                tenant=upload.tenant,
                filters={"upload": upload.pk},
                mode="ci",
                started_by=user,
                label=getattr(user, "username", "") or "upload",
            )
        )
    except RunRequestError as error:
        Upload.objects.filter(pk=upload.pk).update(failure=f"no evaluation was started: {error}")
        return
    Upload.objects.filter(pk=upload.pk).update(evaluation=run)
