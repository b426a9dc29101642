from django.apps import AppConfig


class AlertsConfig(AppConfig):
    """Alert rules, their firings and the deliveries of each firing to its channels."""

    name = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        from alerts import delivery, events  # noqa: F401 (delivery registers its recoverer)

        events.connect()
