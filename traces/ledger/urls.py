"""Routes of the judge's console side: the judge models page and API, and the cost ledger."""

from django.urls import path

from traces.ledger import api, judge_api, judge_views, views

urlpatterns = [
    path("ledger/", views.LedgerView.as_view(), name="ledger"),
    path("ledger/export.csv", views.LedgerExportView.as_view(), name="ledger-export"),
    path("judge-models/", judge_views.JudgeModelListView.as_view(), name="judge-model-list"),
    path("judge-models/policy/", judge_views.JudgePolicyView.as_view(), name="judge-policy-update"),
    path("judge-models/<str:model_id>/edit/", judge_views.JudgeModelEditView.as_view(), name="judge-model-edit"),
    path("judge-models/<str:model_id>/delete/", judge_views.JudgeModelDeleteView.as_view(), name="judge-model-delete"),
]

api_urlpatterns = [
    path("ledger", api.LedgerSummaryView.as_view(), name="api-ledger"),
    path("ledger/entries", api.LedgerEntryListView.as_view(), name="api-ledger-entries"),
    path("ledger/entries.csv", api.LedgerCsvView.as_view(), name="api-ledger-entries-csv"),
    path("judge-models", judge_api.JudgeModelListView.as_view(), name="api-judge-models"),
    path("judge-models/<str:model_id>", judge_api.JudgeModelDetailView.as_view(), name="api-judge-model"),
    path("tenants/<slug:slug>/judge-policy", judge_api.TenantJudgePolicyView.as_view(), name="api-tenant-judge-policy"),
]
