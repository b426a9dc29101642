"""REST endpoints of evaluation runs: start, read, list, cancel, their results, two runs compared,
and what a run would ask judges (the estimate).

`POST evaluations` answers 202 with the run's id at once; the run is planned and
evaluated by Celery workers, and `GET evaluations/{id}` reads its progress from its row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.types import Issue
from guardrails.services import enforced_guardrails
from kindgi_console import idempotency, paging
from kindgi_console.api import (
    ApiError,
    ConsoleAPIView,
    body_tenant,
    caller_authors,
    limit_param,
    object_body,
    read_json_body,
)
from kindgi_console.openapi import error_responses, filter_parameters
from kindgi_console.tenancy.scoping import TenantScopedQuerySet
from traces.ingest.serializers import ERRORS
from traces.judge.estimate import estimate_run
from traces.models import Evaluation, RunComparison, RunTrace
from traces.runs import comparisons, evaluations, run_ends, run_results
from traces.runs.serializers import (
    CHANGES_SCHEMA,
    COMPARE_SCHEMA,
    ESTIMATE_SCHEMA,
    RESULT_PAGE_SCHEMA,
    RUN_PAGE_SCHEMA,
    RUN_SCHEMA,
    START_BODY,
)
from traces.store import filters

START_FIELDS = {"tenant", "guardrails", "filters", "mode", "zeroLlmOnly"}
PageT = TypeVar("PageT")


def cursor_page(request: Request, read: Callable[[str | None], PageT]) -> PageT:
    """The page `read` gives after the request's `cursor`; 400 naming /cursor for a bad one."""
    try:
        return read(request.query_params.get("cursor"))
    except paging.BadCursor as error:
        raise ApiError([Issue("/cursor", str(error))]) from None


def paged_response(request: Request, next_cursor: str | None, results: list[Any]) -> Response:
    """`{"next", "results"}`: `next` is this request's URL with the next page's cursor."""
    next_url = None
    if next_cursor:
        query = request.query_params.copy()
        query["cursor"] = next_cursor
        next_url = f"{request.path}?{query.urlencode()}"
    return Response({"next": next_url, "results": results})


def run_queryset() -> QuerySet[Evaluation]:
    return Evaluation.objects.select_related("tenant").prefetch_related("revisions__guardrail")


def run_as_dict(run: Evaluation, *, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run as the API shows it; `summary` so far unless given."""
    revisions = sorted(run.revisions.all(), key=lambda r: r.guardrail.guardrail_id)
    return {
        "id": run.pk,
        "url": f"/api/v1/evaluations/{run.pk}",
        "tenant": run.tenant.slug,
        "status": run.status,
        "mode": run.mode,
        "guardrails": [{"id": r.guardrail.guardrail_id, "revision": r.number} for r in revisions],
        "filters": run.trace_filters,
        "progress": {"done": run.done, "total": run.total, "percent": run.percent},
        "summary": summary if summary is not None else run.summary,
        "startedBy": run.started_by_label,
        "createdAt": run.created_at.isoformat(),
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "error": run.error,
    }


class EvaluationListView(ConsoleAPIView):
    """`GET evaluations` lists the caller's tenants' runs, newest first; `POST` starts one."""

    queryset = run_queryset()
    scopes = {"GET": "read", "POST": "run"}
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="evaluations_list",
        responses={200: OpenApiResponse(RUN_PAGE_SCHEMA), 400: ERRORS, 401: ERRORS, 403: ERRORS},
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None  # the keyset pagination always pages
        return self.get_paginated_response([run_as_dict(run) for run in page])

    @extend_schema(
        operation_id="evaluations_start",
        request=START_BODY,
        parameters=[idempotency.PARAMETER],
        responses={202: OpenApiResponse(RUN_SCHEMA), 400: ERRORS, 401: ERRORS, 403: ERRORS, 422: ERRORS},
    )
    @idempotency.idempotent
    def post(self, request: Request) -> Response:
        run = self._start(object_body(read_json_body(request), START_FIELDS))
        return Response(run_as_dict(run_queryset().get(pk=run.pk)), status=202)

    def _start(self, body: dict[str, Any]) -> Evaluation:
        tenant = body_tenant(body)
        guardrails = body.get("guardrails") or []
        if not isinstance(guardrails, list) or not all(isinstance(g, str) for g in guardrails):
            raise ApiError([Issue("/guardrails", "guardrails is an array of guardrail ids")])
        mode = body.get("mode", "ci")
        zero_llm_only = body.get("zeroLlmOnly", False)
        if not isinstance(zero_llm_only, bool):
            raise ApiError([Issue("/zeroLlmOnly", "zeroLlmOnly is true or false")])
        request = evaluations.RunRequest(
            tenant=self.caller.tenant_for_write(tenant, "run"),
            guardrails=list(dict.fromkeys(guardrails)),
            filters=body.get("filters"),
            mode=mode,
            started_by=self.caller.user_or_none,
            label=self.caller.label,
            by_author=caller_authors(self.caller, tenant),
            zero_llm_only=zero_llm_only,
        )
        return evaluations.create_run(request)


class EvaluationDetailView(ConsoleAPIView):
    """`GET evaluations/{id}`: status, progress (done / total) and the summary so far."""

    queryset = run_queryset()
    filter_backends: list[Any] = []

    @extend_schema(operation_id="evaluations_read", responses={200: OpenApiResponse(RUN_SCHEMA), 404: ERRORS})
    def get(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(self.get_queryset(), pk=pk)
        return Response(run_as_dict(run, summary=run_ends.live_summary(run)))


class EvaluationCancelView(ConsoleAPIView):
    """`POST evaluations/{id}/cancel`: chunks not yet evaluated are not; a finished run is 409."""

    queryset = run_queryset()
    scopes = {"POST": "run"}
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="evaluations_cancel",
        request=None,
        responses={200: OpenApiResponse(RUN_SCHEMA), 404: ERRORS, 409: ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        runs = cast(TenantScopedQuerySet[Evaluation], self.get_queryset())
        run = get_object_or_404(runs.for_caller(self.caller, "run"), pk=pk)
        if not run_ends.cancel_run(run):
            raise ApiError([Issue("/status", f"the run has already {run.status}")], status_code=409)
        return Response(run_as_dict(run))


RESULT_PARAMETERS = [
    OpenApiParameter("guardrail", str, description="Only this guardrail's results."),
    OpenApiParameter("status", str, enum=list(run_results.STATUSES), description="Only results of this status."),
    OpenApiParameter("cursor", str, description="The `next` of the previous page."),
    OpenApiParameter("limit", int, description=f"Page size, at most {run_results.MAX_PAGE_SIZE}."),
]


class EvaluationResultsView(ConsoleAPIView):
    """`GET evaluations/{id}/results`: the run's results, by status, guardrail, then as stored; cursor paged."""

    queryset = Evaluation.objects.all()
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="evaluations_results",
        parameters=RESULT_PARAMETERS,
        responses={200: OpenApiResponse(RESULT_PAGE_SCHEMA), 400: ERRORS, 404: ERRORS},
    )
    def get(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(self.get_queryset(), pk=pk)
        status = request.query_params.get("status", "")
        if status and status not in run_results.STATUSES:
            raise ApiError([Issue("/status", f"status is one of {', '.join(run_results.STATUSES)}")])
        results = run_results.run_results(run, guardrail=request.query_params.get("guardrail", ""), status=status)
        size = limit_param(request.query_params.get("limit"), run_results.PAGE_SIZE, run_results.MAX_PAGE_SIZE)
        page = cursor_page(request, lambda after: run_results.results_page(results, after=after, size=size))
        return paged_response(request, page.next_cursor, [run_results.result_as_dict(r) for r in page.rows])


WITH_PARAMETER = OpenApiParameter(
    "with", int, description="A run to compare with (default: each guardrail's latest earlier results)."
)


class EvaluationCompareView(ConsoleAPIView):
    """`GET evaluations/{id}/compare[?with={other}]`: per revision of the run, what changed.

    Each guardrail is compared, trace by trace, with its own latest earlier result (from any
    run or the runtime); with `with`, with that run's results. What was not compared is
    counted with its reasons (`notCompared`, `why`). Computed once in the background
    (`traces.runs.comparisons`): 202 with the progress until the figures are complete, then
    200 with them and the first traces of each list.
    """

    queryset = Evaluation.objects.all()
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="evaluations_compare",
        parameters=[WITH_PARAMETER],
        responses={
            200: OpenApiResponse(COMPARE_SCHEMA),
            202: OpenApiResponse(COMPARE_SCHEMA),
            400: ERRORS,
            404: ERRORS,
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(self.get_queryset(), pk=pk)
        other = self._other(run, request.query_params.get("with"))
        comparison = comparisons.comparison_for(run, other)
        body: dict[str, Any] = {"evaluation": run.pk, "with": other.pk if other is not None else None}
        if comparison is None:
            return Response(
                {**body, "status": "waiting", "progress": {"done": 0, "total": 0, "percent": 0}, "guardrails": []},
                status=202,
            )
        done = comparison.status == RunComparison.Status.SUCCEEDED
        return Response(
            {
                **body,
                "status": comparison.status,
                "progress": comparisons.progress(comparison),
                **({"error": comparison.error} if comparison.error else {}),
                "guardrails": comparisons.figures_with_traces(comparison) if done else [],
            },
            status=200 if done else 202,
        )

    def _other(self, run: Evaluation, raw: str | None) -> Evaluation | None:
        """The run asked for (another tenant's: 404), or None: earlier results."""
        if raw is None or raw == "":
            return None
        if not raw.isdigit():
            raise ApiError([Issue("/with", "with is a run's id")])
        other: Evaluation = get_object_or_404(self.get_queryset(), pk=int(raw))
        if other.tenant_id != run.tenant_id:
            raise ApiError([Issue("/with", "the runs compared are of the same tenant")])
        if other.pk == run.pk:
            raise ApiError([Issue("/with", "a run is compared with another run")])
        return other


class EvaluationCompareTracesView(EvaluationCompareView):
    """`GET evaluations/{id}/compare/traces?guardrail=&change=[&revision=&with=]`: one list of a
    comparison, keyset paged (`cursor`: the `next` of the previous page, or a list's cursor in
    compare)."""

    @extend_schema(
        operation_id="evaluations_compare_traces",
        parameters=[
            WITH_PARAMETER,
            OpenApiParameter("guardrail", str, required=True),
            OpenApiParameter(
                "revision", int, description="The run's revision of it (default: its first; two in shadow)."
            ),
            OpenApiParameter("change", str, required=True, enum=list(comparisons.Kind.values)),
            OpenApiParameter("cursor", str),
            OpenApiParameter("limit", int, description=f"At most {comparisons.MAX_LISTED}."),
        ],
        responses={200: OpenApiResponse(CHANGES_SCHEMA), 400: ERRORS, 404: ERRORS, 409: ERRORS},
    )
    def get(self, request: Request, pk: int) -> Response:
        run = get_object_or_404(self.get_queryset(), pk=pk)
        other = self._other(run, request.query_params.get("with"))
        guardrail, kind, revision = self._list(request)
        comparison = comparisons.comparison_for(run, other)
        if comparison is None or comparison.status != RunComparison.Status.SUCCEEDED:
            raise ApiError([Issue("/with", "the comparison is still being computed: see compare")], status_code=409)
        size = limit_param(request.query_params.get("limit"), comparisons.LISTED, comparisons.MAX_LISTED)
        page = cursor_page(
            request,
            lambda after: comparisons.changes_page(
                comparison, guardrail, kind, revision=revision, after=after, size=size
            ),
        )
        return paged_response(request, page.next_cursor, page.rows)

    def _list(self, request: Request) -> tuple[str, str, int | None]:
        guardrail, kind = request.query_params.get("guardrail", ""), request.query_params.get("change", "")
        revision = request.query_params.get("revision", "")
        issues = []
        if not guardrail:
            issues.append(Issue("/guardrail", "guardrail is the id of a guardrail the run evaluated"))
        if kind not in comparisons.Kind.values:
            issues.append(Issue("/change", f"change is one of {', '.join(comparisons.Kind.values)}"))
        if revision and not (revision.isdigit() and len(revision) < 10):
            issues.append(Issue("/revision", "revision is a revision number of the guardrail"))
        if issues:
            raise ApiError(issues)
        return guardrail, kind, int(revision) if revision else None


def zero_llm_param(request: Request) -> bool:
    """`zeroLlmOnly`: true or false (absent: false); 400 naming it for anything else."""
    raw = request.query_params.get("zeroLlmOnly", "false")
    if raw not in ("true", "false"):
        raise ApiError([Issue("/zeroLlmOnly", "zeroLlmOnly is true or false")])
    return raw == "true"


class EvaluationEstimateView(ConsoleAPIView):
    """`GET evaluations/estimate`: what a batch run would ask judges, before it starts.

    `guardrails` (comma-separated ids; none: every enabled one; `zeroLlmOnly=true`: the
    zero-llm ones of those, which call no judge) over the traces that `agent`, `flow`,
    `since`, `until` select in `tenant` (optional for a caller of one tenant; 404 for a
    tenant the caller may not read). An id of no enabled guardrail is named in the answer's
    `errors`.
    """

    queryset = RunTrace.objects.all()
    filterset_class = filters.TraceFilter
    pagination_class = None

    @extend_schema(
        operation_id="evaluations_estimate",
        parameters=[
            OpenApiParameter("guardrails", str, description="Comma-separated ids."),
            OpenApiParameter("zeroLlmOnly", bool, description="Only the zero-llm guardrails of the selection."),
            *filter_parameters(filters.TraceFilter),
        ],
        responses={200: OpenApiResponse(ESTIMATE_SCHEMA), **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request) -> Response:
        traces = self.filter_queryset(self.get_queryset())
        tenant = self._tenant(request)
        guardrails, unknown = self._guardrails(request, tenant)
        if zero_llm_param(request):
            guardrails = [guardrail for guardrail in guardrails if guardrail.kind == evaluations.ZERO_LLM]
        estimate = estimate_run(guardrails, traces.filter(tenant=tenant), tenant)
        for name in unknown:  # said in the answer, like a guardrail without a judge
            estimate["errors"][name] = "no enabled guardrail has this id"
        return Response({"tenant": tenant.slug, **estimate})

    def _tenant(self, request: Request) -> Any:
        return self.tenant_of(self.caller, request.query_params.get("tenant"))

    @staticmethod
    def tenant_of(caller: Any, slug: str | None) -> Any:
        """The tenant to estimate for: the one named, or the caller's only one; 404 for a
        tenant the caller may not read."""
        visible = caller.tenants("read")
        if slug:
            visible = visible.filter(slug=slug)
        found = list(visible[:2])
        if len(found) == 1:
            return found[0]
        if not found:  # a tenant the caller may not read is not there, as everywhere
            raise Http404
        raise ApiError([Issue("/tenant", "name the tenant to estimate for with ?tenant=")])

    @staticmethod
    def _guardrails(request: Request, tenant: Any) -> tuple[list[Any], list[str]]:
        """The enabled guardrails named (all when none is), and the names of no such one."""
        wanted = [name.strip() for name in request.query_params.get("guardrails", "").split(",") if name.strip()]
        # A guardrail in shadow beside its enforced revision is both: each is evaluated.
        enforced = [item.guardrail for item in enforced_guardrails(tenant)]
        if not wanted:
            return enforced, []
        ids = {guardrail.id for guardrail in enforced}
        known = [guardrail for guardrail in enforced if guardrail.id in wanted]
        return known, [name for name in dict.fromkeys(wanted) if name not in ids]
