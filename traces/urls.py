"""The pages of traces, violations and the judge cost ledger."""

from django.urls import path

from traces import views

urlpatterns = [
    path("traces/", views.TraceListView.as_view(), name="trace-list"),
    path("traces/<int:pk>/", views.TraceDetailView.as_view(), name="trace-detail"),
    path("violations/", views.ViolationListView.as_view(), name="violation-list"),
    path("violations/chart.json", views.ViolationChartView.as_view(), name="violation-chart"),
    path("violations/review/", views.ViolationBulkReviewView.as_view(), name="violation-review-bulk"),
    path("violations/<int:pk>/", views.ViolationDetailView.as_view(), name="violation-detail"),
    path("violations/<int:pk>/review/", views.ViolationReviewView.as_view(), name="violation-review"),
    path("ledger/", views.LedgerView.as_view(), name="ledger"),
    path("ledger/export.csv", views.LedgerExportView.as_view(), name="ledger-export"),
]
