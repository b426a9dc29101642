from django.urls import path

from kindgi_console.audit.views import AuditLogView

urlpatterns = [path("manage/audit/", AuditLogView.as_view(), name="audit-log")]
