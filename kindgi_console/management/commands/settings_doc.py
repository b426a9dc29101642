"""`manage.py settings_doc`: writes docs/settings.md from the console's declaration."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kindgi_console.env import DECLARATION
from kindgi_console.settings_doc import PATH, render


class Command(BaseCommand):
    help = "Writes docs/settings.md from the declaration of the environment (kindgi_console/env.py)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--check", action="store_true", help="write nothing; fail when the file differs")

    def handle(self, *args: Any, **options: Any) -> None:
        text = render()
        current = PATH.read_text(encoding="utf-8") if PATH.exists() else ""
        if options["check"]:
            if current != text:
                raise CommandError(f"{PATH} differs from the declaration: run manage.py settings_doc")
            return
        if current != text:
            PATH.write_text(text, encoding="utf-8")
        self.stdout.write(f"{PATH.name}: {len(DECLARATION.variables)} settings")
