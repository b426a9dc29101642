"""How a run's results, two runs compared and a guardrail's quality scale: 10k against 1M results.

Run: `python bench/run_results.py [--small 10000] [--large 1000000] [--db kindgi_review_bench]`.
It (re)creates a PostgreSQL database (DATABASE_URL's server, the named database), migrates
it, and bulk-generates with `generate_series` two runs of one guardrail over the same traces
(an older run at revision 1, a newer one at revision 2: a fifth of the traces fail in the
older, more in the newer), a violation per failure of the newer run, a fifth of them reviewed
as false positives. It times each endpoint in process (the median of several requests after
a warm-up), grows to the large size, times again, and prints both with their ratio.

The results list is a keyset on (status, guardrail, id) over an index, so its pages cost the same at
any size (ratio about 1). Compare reads a comparison computed once in the background and
kept (`traces.runs.comparisons`: its figures and a keyset page of changed traces), and quality
reads the daily roll-up (`ViolationDay`) that the writers and the review keep: neither
reads the results or the violations at request time, so their ratio is about 1 too. The
one-off computation of the comparison grows with the runs; it is printed apart.

The bulk load writes rows around the console's write paths, so it then does what those
paths would have done: recounts the roll-up (`violation_days.rebuild`) and drops the kept
comparisons of the runs it grew. Tasks run in process (CELERY_TASK_ALWAYS_EAGER).
Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import NO_REFUNDS, median_get_ms  # noqa: E402
from bench.common import setup_django as fresh_database  # noqa: E402


def setup_django(database: str) -> None:
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"  # the comparison is computed in this process
    fresh_database(database)


def arrange() -> dict[str, Any]:
    from guardrails.services import Author, save_guardrail
    from kindgi_console.tenancy.models import ApiKey, Tenant
    from traces.models import Evaluation

    acme = Tenant.objects.create(slug="acme")
    document = dict(NO_REFUNDS)
    author = Author(user=None, label="bench")
    guardrail = save_guardrail(document, author)
    old = Evaluation.objects.create(tenant=acme, status="succeeded")
    old.revisions.set([guardrail.revisions.get(number=1)])
    guardrail = save_guardrail({**document, "config": {"tools": ["issue_refund", "lookup_order"]}}, author)
    new = Evaluation.objects.create(tenant=acme, status="succeeded")
    new.revisions.set([guardrail.revisions.get(number=2)])
    key = ApiKey.issue(scopes=["read"], tenant=acme, name="bench")[1]
    return {
        "tenant": acme.pk,
        "guardrail": guardrail.pk,
        "old": old.pk,
        "new": new.pk,
        "key": key,
        "rev1": guardrail.revisions.get(number=1).pk,
        "rev2": guardrail.revisions.get(number=2).pk,
    }


GROW_SQL = """
WITH new AS (
  INSERT INTO traces_runtrace (tenant_id, trace_id, agent, flow, document, content_hash, withheld, received_at)
  SELECT %(tenant)s, 'bench-' || n, 'support-bot', 'refund', jsonb_build_object('id', 'bench-' || n),
         md5(n::text) || md5(n::text), false, now() - (n %% 86400) * interval '1 second'
  FROM generate_series(%(start)s, %(stop)s) AS n
  RETURNING id, tenant_id
), old AS (
  INSERT INTO traces_evaluationresult (tenant_id, trace_id, guardrail_id, revision_id, evaluation_id, mode,
                                       status, reason, skip_reason, shadow, duration_ms, details, created_at)
  SELECT tenant_id, id, %(guardrail)s, %(rev1)s, %(old)s, 'ci',
         CASE WHEN id %% 5 = 0 THEN 'fail' WHEN id %% 10 = 1 THEN 'skipped' ELSE 'pass' END,
         'called forbidden tool', CASE WHEN id %% 10 = 1 THEN 'flows' ELSE '' END, false, 0.01, '{}'::jsonb,
         now() - interval '1 day'
  FROM new
), results AS (
  INSERT INTO traces_evaluationresult (tenant_id, trace_id, guardrail_id, revision_id, evaluation_id, mode,
                                       status, reason, skip_reason, shadow, duration_ms, details, created_at)
  SELECT tenant_id, id, %(guardrail)s, %(rev2)s, %(new)s, 'ci',
         CASE WHEN id %% 5 = 0 OR id %% 7 = 0 THEN 'fail' WHEN id %% 10 = 1 THEN 'skipped' ELSE 'pass' END,
         'called forbidden tool', CASE WHEN id %% 10 = 1 THEN 'flows' ELSE '' END, false, 0.01, '{}'::jsonb, now()
  FROM new
  RETURNING id, tenant_id, trace_id, status, created_at
)
INSERT INTO traces_violation (tenant_id, trace_id, result_id, guardrail_id, revision_id, evaluation_id, action,
                              severity, mode, reason, agent, flow, created_at, state, reviewed_by_label, review_note)
SELECT tenant_id, trace_id, id, %(guardrail)s, %(rev2)s, %(new)s, 'halt', 'critical', 'ci', 'called forbidden tool',
       'support-bot', 'refund', created_at,
       (ARRAY['open','open','acknowledged','resolved','false-positive'])[1 + id %% 5], '', ''
FROM results WHERE status = 'fail'
"""


def grow(ids: dict[str, Any], start: int, stop: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")  # a consistent bulk load
        for low in range(start, stop + 1, 200_000):
            cursor.execute(GROW_SQL, {**ids, "start": low, "stop": min(stop, low + 199_999)})
        cursor.execute("SET session_replication_role = DEFAULT")
    from traces.models import RunComparison
    from traces.store import violation_days

    violation_days.rebuild()
    RunComparison.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def endpoints(ids: dict[str, Any], client: Any) -> list[tuple[str, str]]:
    base = f"/api/v1/evaluations/{ids['new']}"
    first = client.get(f"{base}/results?status=pass&limit=50").json()
    return [
        ("results, first page", f"{base}/results"),
        ("results, failures of one guardrail", f"{base}/results?guardrail=no-refunds&status=fail"),
        ("results, page 2 of passes", first["next"]),
        ("results, skipped", f"{base}/results?status=skipped"),
        ("compare with the older run", f"{base}/compare?with={ids['old']}"),
        ("compare with earlier results", f"{base}/compare"),
        (
            "compare, a later page of traces",
            f"{base}/compare/traces?with={ids['old']}&guardrail=no-refunds"
            f"&change=newly-failing&cursor={later_cursor(ids, client)}",
        ),
        ("guardrail quality", "/api/v1/guardrails/no-refunds/quality"),
        ("guardrail quality, last 30 days", f"/api/v1/guardrails/no-refunds/quality?since={month_ago()}"),
    ]


def month_ago() -> str:
    """Midnight 29 days before today, as the guardrail page's 30-day period starts."""
    from datetime import timedelta

    from django.utils import timezone

    from traces.review.quality import midnight

    return midnight(timezone.localdate() - timedelta(days=29)).isoformat().replace("+00:00", "Z").replace("+", "%2B")


def later_cursor(ids: dict[str, Any], client: Any) -> str:
    """Computes the comparison once (timed and printed) and gives the cursor of a page
    after the first few, as a reader paging through the list would have."""
    url = f"/api/v1/evaluations/{ids['new']}/compare?with={ids['old']}"
    started = time.perf_counter()
    body = client.get(url).json()
    print(
        f"  comparison computed once in {time.perf_counter() - started:.1f} s ({body['status']}): "
        + ", ".join(f"{row['guardrail']} {row['newlyFailing']:,} newly failing" for row in body["guardrails"])
    )
    started = time.perf_counter()
    earlier = client.get(f"/api/v1/evaluations/{ids['new']}/compare").json()
    print(
        f"  comparison with earlier results computed once in {time.perf_counter() - started:.1f} s "
        f"({earlier['status']})"
    )
    cursor = body["guardrails"][0]["newlyFailingCursor"]
    for _ in range(3):
        page = client.get(
            f"/api/v1/evaluations/{ids['new']}/compare/traces?with={ids['old']}"
            f"&guardrail=no-refunds&change=newly-failing&cursor={cursor}"
        ).json()
        cursor = page["next"].split("cursor=")[1]
    return str(cursor)


def time_all(ids: dict[str, Any], repeats: int) -> dict[str, float]:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {ids['key']}")
    timings = {}
    for name, url in endpoints(ids, client):
        timings[name] = median_get_ms(client, url, repeats)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000, help="traces (each run has one result per trace)")
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--db", default="kindgi_review_bench")
    args = parser.parse_args()
    setup_django(args.db)
    ids = arrange()
    grow(ids, 1, args.small)
    small = time_all(ids, args.repeats)
    started = time.perf_counter()
    grow(ids, args.small + 1, args.large)
    print(f"grown to {args.large:,} results per run in {time.perf_counter() - started:.0f} s")
    large = time_all(ids, args.repeats)
    print(f"{'endpoint':<36} {f'{args.small:,}':>10} {f'{args.large:,}':>12} {'ratio':>7}")
    for name in small:
        print(f"{name:<36} {small[name]:>7.1f} ms {large[name]:>9.1f} ms {large[name] / small[name]:>7.2f}")


if __name__ == "__main__":
    main()
