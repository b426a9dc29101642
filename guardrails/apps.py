from django.apps import AppConfig
from django.core import checks


class GuardrailsConfig(AppConfig):
    """Guardrail documents, revisions, the check registry and the judge."""

    name = "guardrails"
    verbose_name = "Guardrails"

    def ready(self) -> None:
        """Load the check packs once, at start-up: an invalid pack stops it here."""
        from guardrails import deployment

        deployment.load_at_start_up()
        checks.register(deployment.pack_system_checks, "guardrails")
        checks.register(deployment.sandbox_system_checks, "guardrails", deploy=True)
