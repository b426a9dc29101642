from django.apps import AppConfig


class TracesConfig(AppConfig):
    """Run traces, evaluation runs, results, violations and the judge cost ledger."""

    name = "traces"
    verbose_name = "Traces"

    def ready(self) -> None:
        # Deleting ledger entries or violations (the admin, a trace's cascade) takes them out
        # of the daily roll-ups, which every other write keeps through its write path.
        from django.db.models.signals import post_delete

        from traces.ingest import outbox, uploads  # noqa: F401
        from traces.models import JudgeLedgerEntry, Violation
        from traces.runs import chunks, evaluations  # noqa: F401
        from traces.store import processes, signals  # noqa: F401  (processes: Celery's signals)

        post_delete.connect(_entry_deleted, sender=JudgeLedgerEntry, dispatch_uid="ledger_days")
        post_delete.connect(_violation_deleted, sender=Violation, dispatch_uid="violation_days")
        signals.upload_evaluation_asked.connect(evaluations.start_run_of_upload, dispatch_uid="upload_runs")
        # The recoverers of runs, uploads and runtime evaluations (`kindgi_console.jobs`)
        # are registered as their modules (chunks, uploads, outbox) are imported, above.


def _entry_deleted(sender: type, instance: object, **kwargs: object) -> None:
    from traces.judge import ledger

    ledger.remove_from_days(instance)  # type: ignore[arg-type]


def _violation_deleted(sender: type, instance: object, **kwargs: object) -> None:
    from traces.store import violation_days

    violation_days.uncount(instance)  # type: ignore[arg-type]
