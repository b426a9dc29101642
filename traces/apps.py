from django.apps import AppConfig


class TracesConfig(AppConfig):
    """Run traces, evaluation runs, results, violations and the judge cost ledger."""

    name = "traces"
    verbose_name = "Traces"
