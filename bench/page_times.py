"""Every page's server time at the demo's size, against the 100 ms the pages aim for.

Run: `python bench/page_times.py [--db kindgi_pages_times] [--repeats 5]`. It (re)creates a
PostgreSQL database on DATABASE_URL's server (BENCH_POSTGRES), migrates it, loads the demo
(`load_demo`: 2,000 traces in acme, 800 in globex, their results, violations, reviews, runs
and judge ledger), then times each page's server-side rendering in process as the demo's
admin (the median of several requests, after a warm-up) and prints it beside the target.

Prints, never asserts: timings depend on the machine (and this one is shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_MS = 100.0


def pages() -> list[tuple[str, str]]:
    """Every page, with the demo's rows for the detail pages."""
    from guardrails.models import Guardrail
    from traces.models import Evaluation, RunTrace, Upload, Violation

    trace = RunTrace.objects.filter(tenant__slug="acme").order_by("-received_at").first()
    violation = Violation.objects.filter(tenant__slug="acme").order_by("-created_at").first()
    assert trace is not None and violation is not None, "load the demo first"
    guardrail = Guardrail.objects.filter(revision__gt=1).first() or Guardrail.objects.first()
    assert guardrail is not None, "load the demo first"
    listed = [
        ("overview", "/"),
        ("guardrails", "/guardrails/"),
        ("guardrail", f"/guardrails/{guardrail.guardrail_id}/"),
        ("guardrail editor", f"/guardrails/{guardrail.guardrail_id}/edit/"),
        ("guardrail import", "/guardrails/import/"),
        ("traces", "/traces/"),
        ("trace", f"/traces/{trace.pk}/"),
        ("try-it traces", f"/traces/picker.json?guardrail={guardrail.guardrail_id}"),
        ("evaluations", "/evaluations/"),
        ("evaluation new", "/evaluations/new/"),
        ("uploads", "/uploads/"),
        ("upload new", "/uploads/new/"),
        ("violations", "/violations/"),
        ("violation", f"/violations/{violation.pk}/"),
        ("violation chart", "/violations/chart.json?by=severity"),
        ("review queue", "/violations/queue/"),
        ("ledger", "/ledger/"),
        ("ledger by tenant", "/ledger/?group=tenant&tenant=*"),
        ("judge models", "/judge-models/"),
        ("tenants", "/manage/tenants/"),
        ("members", "/manage/members/"),
        ("api keys", "/manage/api-keys/"),
    ]
    evaluation = Evaluation.objects.filter(tenant__slug="acme").first()
    upload = Upload.objects.filter(tenant__slug="acme").first()
    if evaluation is not None:
        listed.append(("evaluation", f"/evaluations/{evaluation.pk}/"))
    if upload is not None:
        listed.append(("upload", f"/uploads/{upload.pk}/"))
    return listed


def time_pages(user: Any, repeats: int) -> list[tuple[str, str, float]]:
    from django.test import Client

    from bench.common import median_get_ms

    client = Client()
    client.force_login(user)
    rows = []
    for name, url in pages():
        rows.append((name, url, median_get_ms(client, url, repeats)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="kindgi_pages_times")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from bench.common import setup_django

    setup_django(args.db)
    from django.contrib.auth.models import User
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("load_demo", verbosity=0)
    print(f"demo loaded in {time.perf_counter() - started:.1f} s")
    rows = time_pages(User.objects.get(username="admin"), args.repeats)
    print(f"\n{'page':<20} {'server time':>12} {'of target':>10}")
    for name, _, ms in rows:
        print(f"{name:<20} {ms:>9.1f} ms {ms / TARGET_MS:>9.2f}x")
    slowest = max(rows, key=lambda row: row[2])
    share = slowest[2] / TARGET_MS
    print(f"\nslowest: {slowest[0]} {slowest[2]:.1f} ms ({share:.2f} of the {TARGET_MS:.0f} ms target)")


if __name__ == "__main__":
    main()
