"""Page routes of the judge models page."""

from django.urls import path

from traces.judge import views as judge_views

urlpatterns = [
    path("judge-models/", judge_views.JudgeModelListView.as_view(), name="judge-model-list"),
    path("judge-models/policy/", judge_views.JudgePolicyView.as_view(), name="judge-policy-update"),
    path("judge-models/<str:model_id>/edit/", judge_views.JudgeModelEditView.as_view(), name="judge-model-edit"),
    path("judge-models/<str:model_id>/delete/", judge_views.JudgeModelDeleteView.as_view(), name="judge-model-delete"),
]
