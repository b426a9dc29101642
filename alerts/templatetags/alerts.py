"""Template filters of the alerts pages."""

from django import template

from alerts.serialize import redacted_url

register = template.Library()


@register.filter
def origin_only(url: str) -> str:
    """A channel URL for those who may not change it: its origin (a Slack path is a credential)."""
    return redacted_url(url)
