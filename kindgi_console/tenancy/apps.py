from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Tenants, memberships, API keys and the scoping helpers."""

    name = "kindgi_console.tenancy"
    label = "tenancy"
    verbose_name = "Tenancy"
