"""`manage.py settings_table`: the README's settings table, from the one declaration."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from guardrails.engine.environment import settings_table


class Command(BaseCommand):
    help = "Prints the README's table of environment variables (guardrails/engine/environment.py)."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(settings_table(), ending="")
