"""`manage.py guardrail_ci`: the CI enforcement path (see guardrails.engine.cli).

manage.py runs this command without Django; this class makes it reachable through
`call_command` and Django's own command listing too.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from guardrails.engine.cli.arguments import add_ci_arguments
from guardrails.engine.cli.ci import guardrail_ci


class Command(BaseCommand):
    help = "Evaluate guardrails against trace files in mode ci; exit 1 when a guardrail blocks."

    def add_arguments(self, parser: CommandParser) -> None:
        add_ci_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        status = guardrail_ci(argparse.Namespace(**options), self.stdout, self.stderr)
        if status:
            raise SystemExit(status)
