"""The demo the `load_demo` command loads: tenants, people, guardrails, traces and their review.

Deterministic (a seeded generator) and idempotent: every object has a fixed name or id,
what exists is left alone, and only the traces not yet stored are generated, evaluated
and given results, violations, reviews and judge ledger entries.

The demo's judge models are registered like any other (`DEMO_JUDGE_MODELS`, served by the
console's own demo judge at /demo-judge/v1, so that Try it, Preview, shadow and runs call a
real provider over HTTP offline), but while loading, the demo's traces are judged in
process by `DemoJudge`, a bring-your-own judge (the engine's `Judge` protocol) that
answers like those models would and keeps the calls it "made" for the ledger, under the
registrations' ids and prices: loading the demo calls no provider, needs no key and no Celery worker.
"""

from traces.demo.catalogue import PASSWORD, PEOPLE, TENANTS, TRACES_PER_TENANT
from traces.demo.judge import DemoJudge
from traces.demo.load import Loaded, load
from traces.demo.maker import TraceMaker
from traces.demo.setup import ensure_guardrails, ensure_judge_models, ensure_people, point_judges_at

__all__ = [
    "PASSWORD",
    "PEOPLE",
    "TENANTS",
    "TRACES_PER_TENANT",
    "DemoJudge",
    "Loaded",
    "TraceMaker",
    "ensure_guardrails",
    "ensure_judge_models",
    "ensure_people",
    "load",
    "point_judges_at",
]
