"""`manage.py load_demo`: a realistic demo for every page (idempotent, for local use)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from kindgi_console.audit.log import acting_as
from traces import demo


class Command(BaseCommand):
    help = (
        "Loads the demo: tenants acme and globex; users admin, author, acme-reviewer and "
        f"globex-reviewer (password {demo.PASSWORD!r}, for local use only); a guardrail of "
        "every built-in check and llm-judge ones; a few thousand traces of the last 30 days "
        "evaluated into results, violations (some reviewed) and judge ledger entries. "
        "Running it again adds nothing that is already there."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.perf_counter()
        with acting_as("command:load_demo"):
            loaded = demo.load()
        seconds = time.perf_counter() - started
        self.stdout.write(
            f"demo loaded in {seconds:.1f} s: {loaded.guardrails} guardrails, {loaded.traces} "
            f"traces, {loaded.violations} violations ({loaded.reviews} review changes), "
            f"{loaded.ledger} judge ledger entries added"
        )
        self.stdout.write("sign in with: " + ", ".join(demo.PEOPLE) + f" (password {demo.PASSWORD})")
