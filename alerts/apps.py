from django.apps import AppConfig


class AlertsConfig(AppConfig):
    """Alert rules, their firings and the deliveries of each firing to its channels."""

    name = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        from alerts import events

        events.connect()
