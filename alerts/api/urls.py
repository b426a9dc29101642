from django.urls import path

from alerts.api import views

urlpatterns = [
    path("alert-rules", views.AlertRuleListView.as_view(), name="api-alert-rules"),
    path("alert-rules/<int:pk>", views.AlertRuleDetailView.as_view(), name="api-alert-rule"),
    path("alert-channels", views.ChannelListView.as_view(), name="api-alert-channels"),
    path("alert-channels/<int:pk>", views.ChannelDetailView.as_view(), name="api-alert-channel"),
    path("alert-firings", views.FiringListView.as_view(), name="api-alert-firings"),
    path("alert-firings/<int:pk>", views.FiringDetailView.as_view(), name="api-alert-firing"),
]
