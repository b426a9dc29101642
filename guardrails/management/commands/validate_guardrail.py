"""`manage.py validate_guardrail`: validate guardrail files (see guardrails.engine.cli).

manage.py runs this command without Django; this class makes it reachable through
`call_command` and Django's own command listing too.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from guardrails.engine.cli.arguments import add_validate_arguments
from guardrails.engine.cli.validate import validate_guardrail


class Command(BaseCommand):
    help = "Validate guardrail files against schema 1.1.0 and the check registry."

    def add_arguments(self, parser: CommandParser) -> None:
        add_validate_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        status = validate_guardrail(argparse.Namespace(**options), self.stdout, self.stderr)
        if status:
            raise SystemExit(status)
