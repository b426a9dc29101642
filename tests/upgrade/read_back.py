"""Reads an upgraded database back through the REST API and prints what it says, as JSON.

Run by tests/upgrade/test_upgrade.py in a process of its own, with DATABASE_URL naming the
upgraded database: for each tenant it issues a key with every scope and pages through the
traces, the violations and the runs, reads each run and the ledger's totals, and opens one
reviewed violation with its review history, as a user of the API would.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from decimal import Decimal
from typing import Any

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.migrations.executor import MigrationExecutor  # noqa: E402
from django.test import Client  # noqa: E402

from guardrails.services import enforced_guardrails  # noqa: E402
from kindgi_console.tenancy.models import SCOPES, ApiKey, Tenant  # noqa: E402

settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


def get(client: Client, key: str, url: str) -> Any:
    response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {key}")
    if response.status_code != 200:
        raise SystemExit(f"GET {url}: {response.status_code} {response.content[:500]!r}")
    return response.json()


def every(client: Client, key: str, url: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    next_url: str | None = url
    while next_url:
        page = get(client, key, next_url)
        rows.extend(page["results"])
        next_url = page["next"]
    return rows


def tenant_figures(client: Client, tenant: Tenant) -> dict[str, Any]:
    key = ApiKey.issue(scopes=list(SCOPES), tenant=tenant, name="upgrade read-back")[1]
    traces = every(client, key, "/api/v1/traces?size=200")
    violations = every(client, key, "/api/v1/violations?size=200")
    runs = every(client, key, "/api/v1/evaluations?size=200")
    details = [get(client, key, f"/api/v1/evaluations/{run['id']}") for run in runs]
    reviewed = min((v["id"] for v in violations if v["state"] != "open"), default=None)
    review = get(client, key, f"/api/v1/violations/{reviewed}") if reviewed else None
    ledger = get(client, key, "/api/v1/ledger")["groups"]
    guardrails = every(client, key, "/api/v1/guardrails?size=200")
    enforced = enforced_guardrails()
    ids = [item.guardrail.id for item in enforced]
    return {
        "traces": len({t["id"] for t in traces}),
        "violations": dict(sorted(Counter(v["state"] for v in violations).items())),
        "runs": sorted([d["id"], d["status"], d["progress"]["done"], d["progress"]["total"]] for d in details),
        "reviewed": review and [review["id"], review["state"], len(review["reviews"])],
        "ledger": [sum(g["calls"] + g["cacheHits"] for g in ledger), str(sum(Decimal(g["costUsd"]) for g in ledger))],
        "guardrails": sorted(g["id"] for g in guardrails),
        # The guardrails the runtime evaluates in shadow, and whether each is its only revision.
        "shadow": sorted([item.guardrail.id, ids.count(item.guardrail.id) == 1] for item in enforced if item.shadow),
    }


def main() -> None:
    executor = MigrationExecutor(connection)
    unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if unapplied:
        raise SystemExit(f"migrations not applied: {unapplied}")
    client = Client()
    figures = {tenant.slug: tenant_figures(client, tenant) for tenant in Tenant.objects.order_by("slug")}
    json.dump(figures, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
