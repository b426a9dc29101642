"""The console's Prometheus instruments: what the processes count as they work.

Every process of a machine (gunicorn's workers, Celery's worker processes) writes its
counts to files of its own in `PROMETHEUS_MULTIPROC_DIR` (prometheus-client's
multi-process mode; settings.py sets it to `KINDGI_VAR_DIR/metrics/<host name>` before
this module is imported), and `/metrics` adds them up when it is scraped
(`kindgi_console.ops`). What is read from the database, the broker or the cache at scrape
time (queue depths, the outbox, runs and uploads, leases, circuits) is not here: it is
`traces.store.gauges`.

Labels are bounded: a route is the URL pattern's name (never the path), a model the judge
model's registered id, a guardrail its id.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import Counter, Histogram

#: Seconds: from a cached read to a slow llm-judge verdict.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

REQUESTS = Counter(
    "kindgi_http_requests",
    "HTTP requests answered, by route class (the URL pattern's name), method and status class",
    ["route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "kindgi_http_request_duration_seconds",
    "Time to answer an HTTP request, by route class and method",
    ["route", "method"],
    buckets=LATENCY_BUCKETS,
)
VERDICTS = Counter(
    "kindgi_verdicts",
    "Runtime verdicts (POST evaluate) by stage and outcome: halt (the turn failed), pass, error",
    ["stage", "outcome"],
)
VERDICT_SECONDS = Histogram(
    "kindgi_verdict_duration_seconds",
    "Time to evaluate a runtime verdict's guardrails, by stage",
    ["stage"],
    buckets=LATENCY_BUCKETS,
)
EVALUATIONS = Counter(
    "kindgi_evaluations",
    "Guardrail evaluations by guardrail id, status (pass, fail, error, skipped) and mode (runtime, ci)",
    ["guardrail", "status", "mode"],
)
JUDGE_CALLS = Counter(
    "kindgi_judge_calls", "llm-judge calls by judge model and outcome (the ledger's)", ["model", "outcome"]
)
JUDGE_SECONDS = Histogram(
    "kindgi_judge_call_duration_seconds",
    "Time of an llm-judge call, retries included, by judge model",
    ["model"],
    buckets=LATENCY_BUCKETS,
)
JUDGE_SPEND = Counter("kindgi_judge_spend_usd", "What llm-judge calls cost, in US dollars, by judge model", ["model"])


def count_verdict(stage: str, turn: str, errors: bool, seconds: float) -> None:
    """A runtime verdict: `halt` when the turn failed, else `error` when a guardrail erred, else `pass`."""
    outcome = "halt" if turn == "failed" else "error" if errors else "pass"
    VERDICTS.labels(stage, outcome).inc()
    VERDICT_SECONDS.labels(stage).observe(seconds)


def count_evaluations(outcomes: Iterable[tuple[str, str]], mode: str) -> None:
    """Evaluations given as (guardrail id, status) pairs, counted once per distinct pair."""
    for (guardrail, status), times in Tally(outcomes).items():
        EVALUATIONS.labels(guardrail, status, mode).inc(times)


def count_judge_call(model: str, outcome: str, latency_ms: float | None, cost_usd: object) -> None:
    JUDGE_CALLS.labels(model, outcome or "unknown").inc()
    if latency_ms is not None:
        JUDGE_SECONDS.labels(model).observe(latency_ms / 1000)
    if cost_usd:
        JUDGE_SPEND.labels(model).inc(float(str(cost_usd)))
