"""The console's side of the llm-judge, beside the cost ledger it writes.

- `registry`: the registered judge models and each tenant's judge policy;
- `services`: the judge services of an evaluation (routing, cache, claims, ledger) and the
  Context services every server evaluation path takes;
- `estimate`: what a run will ask judges before it starts;
- `views`, `urls`, `api`, `admin`: the judge models page, its REST endpoints and admin.

The registrations, policies, cache and claims are guardrails' models (guardrails.models),
and the redaction of secrets is guardrails' (the engine applies it to every error).
"""
