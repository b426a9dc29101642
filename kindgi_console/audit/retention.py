"""Retention, the one exception to the append-only log: entries older than a cut-off go.

On PostgreSQL the table's trigger refuses DELETE unless the transaction has set
`kindgi.audit_retention` to `on` (SET LOCAL: it ends with the transaction).
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from kindgi_console.audit.models import AuditEntry


def purge_older_than(days: int) -> int:
    """Delete the entries older than `days` days; the number deleted."""
    cutoff = timezone.now() - timedelta(days=days)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL kindgi.audit_retention = 'on'")
        deleted, _ = AuditEntry.objects.filter(created_at__lt=cutoff).delete()
    return deleted
