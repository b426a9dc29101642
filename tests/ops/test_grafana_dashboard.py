"""deploy/grafana/kindgi.json reads only metrics the console exports: every metric an expr
names is one /metrics answers (scraped here, parsed with prometheus-client's parser)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from kindgi_console import instruments
from kindgi_console.tenancy.models import ApiKey

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "kindgi.json"
#: PromQL words that look like metric names but are functions, keywords or label names.
PROMQL = {"sum", "max", "min", "by", "rate", "increase", "histogram_quantile", "le"}


def exprs() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in document["panels"] for target in panel["targets"]]


def metric_names(expr: str) -> set[str]:
    without_labels = re.sub(r"\b(by|without) \([^)]*\)|\{[^}]*\}|\[[^\]]*\]", "", expr)
    return {word for word in re.findall(r"[a-z_][a-z0-9_]*", without_labels) if word not in PROMQL}


def exported(client: Client) -> set[str]:
    """Every sample name /metrics answers, once each instrument has a value."""
    instruments.REQUESTS.labels("test", "GET", "2xx").inc(0)
    instruments.REQUEST_SECONDS.labels("test", "GET")
    instruments.VERDICT_SECONDS.labels("output")
    instruments.JUDGE_SECONDS.labels("test")
    for counter in (instruments.VERDICTS, instruments.EVALUATIONS, instruments.JUDGE_CALLS, instruments.JUDGE_SPEND):
        counter.labels(*["test"] * len(counter._labelnames)).inc(0)
    secret = ApiKey.issue(scopes=["metrics"])[1]
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert answer.status_code == 200
    families = list(text_string_to_metric_families(answer.content.decode()))
    # a gauge with no sample yet (no judge model registered) is still declared: its family's name
    return {family.name for family in families} | {sample.name for family in families for sample in family.samples}


def test_the_dashboard_is_valid_json_with_panels() -> None:
    assert len(exprs()) >= 15


@pytest.mark.django_db
def test_every_expr_names_a_metric_the_console_exports(client: Client, settings: Any) -> None:
    names = exported(client)

    for expr in exprs():
        named = metric_names(expr)
        assert named, expr
        assert named <= names, f"{expr} names {sorted(named - names)}, which /metrics does not export"
