"""`manage.py purge_audit --days N`: the audit log's retention."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from kindgi_console.audit.retention import purge_older_than


class Command(BaseCommand):
    help = "Delete audit entries older than --days days (the only deletion the log allows)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["days"] < 1:
            self.stderr.write("--days must be at least 1")
            raise SystemExit(1)
        self.stdout.write(f"{purge_older_than(options['days'])} entries deleted")
