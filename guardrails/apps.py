from django.apps import AppConfig


class GuardrailsConfig(AppConfig):
    """Guardrail documents, revisions, the check registry and the judge."""

    name = "guardrails"
    verbose_name = "Guardrails"
