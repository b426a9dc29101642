from django.urls import path

from traces.api import evaluations, guardrail_try, ledger, previews, quality, traces, uploads, violations
from traces.judge import api as judge
from traces.otlp.views import OtlpTracesView

urlpatterns = [
    # Guardrails' routes that evaluate or read traces: before guardrails.api.urls, whose
    # `guardrails/<path:guardrail_id>` takes any other path under guardrails/.
    path("guardrails/try", guardrail_try.GuardrailTryView.as_view(), name="api-guardrail-try"),
    path("guardrails/preview", previews.PreviewStartView.as_view(), name="api-guardrail-preview"),
    path("guardrails/previews/<int:pk>", previews.PreviewDetailView.as_view(), name="api-guardrail-preview-read"),
    path(
        "guardrails/<path:guardrail_id>/quality", quality.GuardrailQualityView.as_view(), name="api-guardrail-quality"
    ),
    path("otlp/v1/traces", OtlpTracesView.as_view(), name="api-otlp-traces"),
    path("traces", traces.TraceListView.as_view(), name="api-traces"),
    path("traces/<path:trace_id>", traces.TraceDetailView.as_view(), name="api-trace"),
    path("evaluate", traces.EvaluateView.as_view(), name="api-evaluate"),
    path("evaluations/estimate", evaluations.EvaluationEstimateView.as_view(), name="api-evaluation-estimate"),
    path("violations", violations.ViolationListView.as_view(), name="api-violations"),
    path("violations/review", violations.ViolationBulkReviewView.as_view(), name="api-violations-review"),
    path("violations/<int:pk>", violations.ViolationDetailView.as_view(), name="api-violation"),
    path("violations/<int:pk>/review", violations.ViolationReviewView.as_view(), name="api-violation-review"),
    path("ledger", ledger.LedgerSummaryView.as_view(), name="api-ledger"),
    path("ledger/entries", ledger.LedgerEntryListView.as_view(), name="api-ledger-entries"),
    path("evaluations", evaluations.EvaluationListView.as_view(), name="api-evaluations"),
    path("evaluations/<int:pk>", evaluations.EvaluationDetailView.as_view(), name="api-evaluation"),
    path("evaluations/<int:pk>/results", evaluations.EvaluationResultsView.as_view(), name="api-evaluation-results"),
    path("evaluations/<int:pk>/compare", evaluations.EvaluationCompareView.as_view(), name="api-evaluation-compare"),
    path(
        "evaluations/<int:pk>/compare/traces",
        evaluations.EvaluationCompareTracesView.as_view(),
        name="api-evaluation-compare-traces",
    ),
    path("evaluations/<int:pk>/cancel", evaluations.EvaluationCancelView.as_view(), name="api-evaluation-cancel"),
    path("uploads/<int:pk>", uploads.UploadDetailView.as_view(), name="api-upload"),
    path("judge-models", judge.JudgeModelListView.as_view(), name="api-judge-models"),
    path("judge-models/<str:model_id>", judge.JudgeModelDetailView.as_view(), name="api-judge-model"),
    path("tenants/<slug:slug>/judge-policy", judge.TenantJudgePolicyView.as_view(), name="api-tenant-judge-policy"),
    path("ledger/entries.csv", ledger.LedgerCsvView.as_view(), name="api-ledger-entries-csv"),
]
