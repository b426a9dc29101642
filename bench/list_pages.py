"""How the list pages scale: the same pages at 10,000 rows and at 1,000,000 rows.

Run: `python bench/list_pages.py [--small 10000] [--large 1000000] [--db kindgi_pagesb_bench]`.
It (re)creates a PostgreSQL database (DATABASE_URL's server, the named database), migrates
it, bulk-generates traces, results, violations and judge ledger entries with
`generate_series` (for the timed tenant; the other tenant's grow by a tenth, so that tenant
scoping is exercised), times each page's server-side rendering in process (the median of several
requests, after a warm-up), grows the tables to the large size, times again, and prints the
two side by side with their ratio. The pages are keyset-paginated and answer from indexes,
so a page costs about the same at any table size: the target ratio is about 1.

The ledger's sums and the violation chart read the daily roll-ups (`LedgerDay`,
`ViolationDay`: a few rows per day), so they too cost the same at any table size. The bulk
load writes around the application's write paths, so the roll-ups are rebuilt after it.
`GET ledger` is timed over the default view (everything) and over one day. The drill-downs
(a chart day's violations of one guardrail, the violations of an agent and flow, a
violation's page, a trace's page) are timed too; a run's results list is `run_results.py`'s.

Prints, never asserts: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import NO_REFUNDS, median_get_ms, setup_django  # noqa: E402

PAGES = [
    ("violations list", "/violations/"),
    ("violations list, filtered", "/violations/?state=open&severity=critical"),
    ("violations list, page 2", None),  # the first page's next link
    ("traces list", "/traces/"),
    ("traces list, by agent", "/traces/?agent=support-bot"),
    ("violation chart (30 days)", "/violations/chart.json"),
    ("ledger page", "/ledger/"),
    ("GET ledger by model (all)", "/api/v1/ledger?group_by=model"),
    ("GET ledger by model (1 day)", "/api/v1/ledger?group_by=model&since={day}"),
    # Drill-downs: a chart day's violations of one guardrail, a violation, a trace.
    ("violations of a chart day", "/violations/?guardrail=no-refunds&since={day}T00:00:00Z&until={next_day}T00:00:00Z"),
    ("violations by agent and flow", "/violations/?agent=support-bot&flow=refund"),
    ("GET violations, filtered", "/api/v1/violations?severity=critical&state=open"),
    ("violation detail (newest)", "/violations/{violation}/"),
    ("trace detail (newest)", "/traces/{trace}/"),
    # Review queues: a third of the violations escalate to one of two queues, 1% are claimed.
    ("violations of a queue", "/violations/?queue=research-leads"),
    ("GET violations by queue", "/api/v1/violations?queue=research-leads&state=open"),
    ("GET violations, mine", "/api/v1/violations?assignee=me"),
    ("review queue of a queue", "/violations/queue/?queue=research-leads&assignee=none"),
    ("overview (counts per queue)", "/"),
]


def arrange() -> dict[str, Any]:
    from django.contrib.auth.models import User

    from guardrails.services import Author, save_guardrail
    from kindgi_console.tenancy.models import Membership, Tenant

    acme = Tenant.objects.create(slug="acme")
    globex = Tenant.objects.create(slug="globex")
    user = User.objects.create_user("bench", password="bench-pass-1")
    Membership.objects.create(user=user, tenant=acme, role="reviewer")
    guardrail = save_guardrail(dict(NO_REFUNDS), Author(user=None, label="bench"))
    return {
        "tenants": [acme.pk, globex.pk],
        "guardrail": guardrail.pk,
        "revision": guardrail.revisions.get().pk,
        "user": user,
    }


GROW_SQL = """
WITH new AS (
  INSERT INTO traces_runtrace (tenant_id, trace_id, agent, flow, started_at, ended_at, document,
                               content_hash, withheld, received_at)
  SELECT %(tenant)s, 'bench-' || n, (ARRAY['support-bot','research-agent','sql-agent'])[1 + n %% 3],
         (ARRAY['refund','shipping','reporting','literature'])[1 + n %% 4],
         now() - (n %% 2592000) * interval '1 second', now() - (n %% 2592000) * interval '1 second',
         jsonb_build_object('id', 'bench-' || n, 'input', 'Can I get a refund for order ' || n || '?',
                            'output', 'Done: order ' || n || ' is refunded.',
                            'toolCalls', jsonb_build_array(jsonb_build_object('name', 'issue_refund'))),
         md5(n::text) || md5(n::text), n %% 50 = 0,
         now() - (n %% 2592000) * interval '1 second'
  FROM generate_series(%(start)s, %(stop)s) AS n
  RETURNING id, tenant_id, agent, flow, received_at
), results AS (
  INSERT INTO traces_evaluationresult (tenant_id, trace_id, guardrail_id, revision_id, mode, status,
                                       reason, duration_ms, details, created_at, skip_reason, shadow)
  SELECT tenant_id, id, %(guardrail)s, %(revision)s, 'runtime', 'fail',
         'called forbidden tool ''issue_refund''', 0.01, '{}'::jsonb, received_at, '', false
  FROM new
  RETURNING id, tenant_id, trace_id, created_at
)
INSERT INTO traces_violation (tenant_id, trace_id, result_id, guardrail_id, revision_id, action,
                              severity, mode, reason, agent, flow, created_at, state,
                              reviewed_by_label, review_note, queue, assignee, assigned_at)
SELECT r.tenant_id, r.trace_id, r.id, %(guardrail)s, %(revision)s, 'halt',
       (ARRAY['critical','error','warn','info'])[1 + r.id %% 4], 'runtime',
       'called forbidden tool ''issue_refund''', n.agent, n.flow, r.created_at,
       (ARRAY['open','open','acknowledged','resolved','false-positive'])[1 + r.id %% 5], '', '',
       (ARRAY['research-leads', NULL, NULL, 'legal', NULL, NULL])[1 + r.id %% 6],
       CASE WHEN r.id %% 100 = 0 THEN 'bench' END, CASE WHEN r.id %% 100 = 0 THEN r.created_at END
FROM results r JOIN new n ON n.id = r.trace_id
"""

LEDGER_SQL = """
INSERT INTO traces_judgeledgerentry (tenant_id, guardrail_id, revision_id, model_id, input_tokens,
    output_tokens, cost_usd, latency_ms, outcome, over_budget_cost, over_budget_latency, cache_hit,
    created_at, trace_ref, provider, model_name, verdict, reason, error, billed, attempts)
SELECT %(tenant)s, %(guardrail)s, %(revision)s,
       (ARRAY['gpt-4.1-mini','claude-haiku-4-5','claude-sonnet-4-5'])[1 + n %% 3],
       800 + n %% 3000, 40 + n %% 200, (800 + n %% 3000) * 0.0000004 + (40 + n %% 200) * 0.0000016,
       300 + n %% 4000, 'PASS', n %% 7 = 0, n %% 11 = 0, n %% 13 = 0,
       now() - (n %% 2592000) * interval '1 second', 'bench-' || n, 'openai', '', 'PASS', '', '',
       n %% 13 <> 0, 1
FROM generate_series(%(start)s, %(stop)s) AS n
"""


def grow(ids: dict[str, Any], start: int, stop: int) -> None:
    """Rows start..stop for acme (the timed tenant); globex grows by a tenth alongside."""
    from django.db import connection

    with connection.cursor() as cursor:
        # A bulk load: the generated rows are consistent, foreign-key triggers are skipped.
        cursor.execute("SET session_replication_role = replica")
        for tenant, share in zip(ids["tenants"], (1, 10), strict=True):
            for low in range((start - 1) // share + 1, stop // share + 1, 200_000):
                high = min(stop // share, low + 199_999)
                params = {
                    "tenant": tenant,
                    "start": low + tenant * 10**8,
                    "stop": high + tenant * 10**8,
                    "guardrail": ids["guardrail"],
                    "revision": ids["revision"],
                }
                cursor.execute(GROW_SQL, params)
                cursor.execute(LEDGER_SQL, params)
        cursor.execute("SET session_replication_role = DEFAULT")
    # The load wrote around the write paths: count it in the daily roll-ups as they would have.
    from traces.judge import ledger
    from traces.store import violation_days

    ledger.rebuild_days()
    violation_days.rebuild()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # the visibility map lets index-only scans skip the heap


def time_pages(user: Any, repeats: int) -> dict[str, float]:
    from django.test import Client
    from django.utils import timezone

    client = Client()
    client.force_login(user)
    from traces.models import RunTrace, Violation

    today = timezone.now().date()
    newest = Violation.objects.filter(tenant__slug="acme").order_by("-created_at", "-id").values("pk", "trace_id")[0]
    names = {
        "day": today.isoformat(),
        "next_day": (today + timedelta(days=1)).isoformat(),
        "violation": newest["pk"],
        "trace": RunTrace.objects.get(pk=newest["trace_id"]).pk,
    }
    timings: dict[str, float] = {}
    first = client.get("/violations/").content.decode()
    found = re.search(r'href="([^"]+)" rel="next"', first)
    assert found, "the violation list has a single page: give more rows"
    next_url = html.unescape(found.group(1))
    for name, url in PAGES:
        timings[name] = median_get_ms(client, next_url if url is None else url.format(**names), repeats)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--db", default="kindgi_pagesb_bench")
    args = parser.parse_args()
    setup_django(args.db)
    ids = arrange()
    started = time.perf_counter()
    grow(ids, 1, args.small)
    print(f"{args.small:,} rows per table and tenant in {time.perf_counter() - started:.1f} s")
    small = time_pages(ids["user"], args.repeats)
    started = time.perf_counter()
    grow(ids, args.small + 1, args.large)
    print(f"{args.large:,} rows per table and tenant in {time.perf_counter() - started:.1f} s")
    large = time_pages(ids["user"], args.repeats)
    print()
    print(f"{'page':<30} {f'{args.small:,} rows':>12} {f'{args.large:,} rows':>14} {'ratio':>7}")
    for name, _ in PAGES:
        print(f"{name:<30} {small[name]:>9.1f} ms {large[name]:>11.1f} ms {large[name] / small[name]:>7.2f}")


if __name__ == "__main__":
    main()
