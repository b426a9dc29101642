from django.urls import path

from alerts import views

urlpatterns = [
    path("alerts/", views.AlertListView.as_view(), name="alert-list"),
    path("alerts/rules/<int:pk>/", views.AlertRuleView.as_view(), name="alert-rule"),
    path("alerts/channels/<int:pk>/test/", views.ChannelTestView.as_view(), name="alert-channel-test"),
    path("alerts/firings/<int:pk>/", views.FiringView.as_view(), name="alert-firing"),
]
