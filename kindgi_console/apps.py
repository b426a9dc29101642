from django.apps import AppConfig


class KindgiConsoleConfig(AppConfig):
    """Project wiring: the run command and the console-wide pieces."""

    name = "kindgi_console"
    verbose_name = "Kindgi Console"
