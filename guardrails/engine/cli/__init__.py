"""The CI path: `manage.py validate_guardrail` and `manage.py guardrail_ci`.

Both run without Django (manage.py calls `main` directly for them) so that a CI job pays
for the engine alone (through Django, a run of 20,000 traces x 7 guardrails takes 2.9 times
as long: 1.46 s against 0.51 s), and only for the parts its guardrails use: the judge and
httpx load for llm-judge guardrails, the sandbox for sandboxed ones, and nothing of the
engine before the arguments are parsed (`--help` costs argparse alone: 25 ms, against 52 ms
with the engine imported first). They build the console's engine
from the same recipe and the same environment variables (guardrails.engine.deployment): the
packs of KINDGI_CHECK_PACKS (and `--pack MODULE`), the sandboxed zero-llm strategy with a
pool of sandbox workers (started only when a guardrail needs it), the sandbox limits,
secrets, capabilities and bindings, and the production rule (KINDGI_PRODUCTION, on by
default when DJANGO_DEBUG is false), so that a guardrail gives the same result here as on
the server.

This package imports only `arguments`; callers import the rest from its modules:
`arguments` (parsers and entry points), `files` (reading guardrail and trace
files), `environment` (the deployment from the environment), `validate`
(validate_guardrail), `ci` (guardrail_ci), `batches` (evaluating trace files, `--jobs`),
`reports` (text, JSON and JUnit, streamed), `outcome` (what blocks, `--baseline`),
`summary` (markdown and GitHub annotations), `remote_baseline` (`--baseline console`) and
`console` (the console scripts of kindgi-guardrails, packages/guardrails, and `python -m`).

llm-judge guardrails need judge models: `guardrail_ci --judge-models judges.json` reads a JSON
array of registrations, the answer of `GET /api/v1/judge-models` saved as it is (id, provider,
model, baseUrl, apiKeyEnv, pricing, capabilities, thinking, sampling, enabled, apiKeySet), and
routes each llm-judge guardrail among them as the console does (a disabled registration never;
every model allowed; no cache across runs). The API keys come from the environment variables
the registrations name. The run writes one line on stderr with its judge calls and their
cost. Without the file, an llm-judge guardrail's result is `error` (no judge bound), which
blocks.
"""

from __future__ import annotations

from guardrails.engine.cli.arguments import run_guardrail_ci, run_validate_guardrail
from guardrails.engine.cli.writer import Writer

__all__ = ["COMMANDS", "main", "run_guardrail_ci", "run_validate_guardrail"]

COMMANDS = {"validate_guardrail": run_validate_guardrail, "guardrail_ci": run_guardrail_ci}


def main(command: str, argv: list[str], stdout: Writer, stderr: Writer) -> int:
    """Run one of the CI commands (manage.py's path without Django)."""
    return COMMANDS[command](argv, stdout, stderr)
