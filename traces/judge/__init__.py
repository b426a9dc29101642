"""The llm-judge as evaluations call it, and the cost ledger it writes.

- `registry`: the registered judge models and each tenant's judge policy;
- `services`: the judge services of an evaluation (routing, cache, claims, ledger) and the
  Context services every server evaluation path takes;
- `estimate`: what a run will ask judges before it starts;
- `ledger`: the cost ledger's writes, roll-ups and sums.

Its pages, endpoints and admin are `traces.ledger`'s.

The registrations, policies, cache and claims are guardrails' models (guardrails.models),
and the redaction of secrets is guardrails' (the engine applies it to every error).
"""
