from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The append-only audit log: who changed what, written with the change itself."""

    name = "kindgi_console.audit"
    label = "audit"
    verbose_name = "Audit log"
