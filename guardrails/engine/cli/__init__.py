"""The CI path: `manage.py validate_guardrail` and `manage.py guardrail_ci`.

Both run without Django (manage.py calls `main` directly for them) so that a CI job pays
for the engine alone, and only for the parts its guardrails use: the judge and httpx load
for llm-judge guardrails, the sandbox for sandboxed ones, and nothing of the engine before
the arguments are parsed (`--help` costs argparse alone). They build the console's engine
from the same recipe and the same environment variables (guardrails.engine.deployment): the
packs of KINDGI_CHECK_PACKS (and `--pack MODULE`), the sandboxed zero-llm strategy with a
pool of sandbox workers (started only when a guardrail needs it), the sandbox limits,
secrets, capabilities and bindings, and the production rule (KINDGI_PRODUCTION, on by
default when DJANGO_DEBUG is false), so that a guardrail gives the same result here as on
the server.

The modules: `arguments` (parsers and entry points), `files` (reading guardrail and trace
files), `environment` (the deployment from the environment), `validate`
(validate_guardrail), `ci` (guardrail_ci), `batches` (evaluating trace files, `--jobs`) and
`reports` (text, JSON and JUnit, streamed).

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

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from guardrails.engine.cli.arguments import (
    FORMATS,
    UsageError,
    Writer,
    add_ci_arguments,
    add_pack_argument,
    add_validate_arguments,
    run_guardrail_ci,
    run_validate_guardrail,
)

if TYPE_CHECKING:
    from guardrails.engine.cli.ci import EXPORT_PATH, download_export, guardrail_ci
    from guardrails.engine.cli.environment import Deployment, load_deployment
    from guardrails.engine.cli.files import BadInput, iter_trace_file, load_json_file
    from guardrails.engine.cli.reports import Report
    from guardrails.engine.cli.validate import LoadedGuardrail, register_all, validate_guardrail

#: Names of the command modules, imported when first asked for (the engine loads with them).
_LAZY = {
    "EXPORT_PATH": "ci",
    "download_export": "ci",
    "guardrail_ci": "ci",
    "Deployment": "environment",
    "load_deployment": "environment",
    "BadInput": "files",
    "iter_trace_file": "files",
    "load_json_file": "files",
    "Report": "reports",
    "LoadedGuardrail": "validate",
    "register_all": "validate",
    "validate_guardrail": "validate",
}

__all__ = [
    # the lazy ones
    "EXPORT_PATH",
    "FORMATS",
    "BadInput",
    "Deployment",
    "LoadedGuardrail",
    "Report",
    "UsageError",
    "Writer",
    "add_ci_arguments",
    "add_pack_argument",
    "add_validate_arguments",
    "download_export",
    "guardrail_ci",
    "iter_trace_file",
    "load_deployment",
    "load_json_file",
    "main",
    "register_all",
    "run_guardrail_ci",
    "run_validate_guardrail",
    "validate_guardrail",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


COMMANDS = {"validate_guardrail": run_validate_guardrail, "guardrail_ci": run_guardrail_ci}


def main(command: str, argv: list[str], stdout: Writer, stderr: Writer) -> int:
    """Run one of the CI commands (manage.py's fast path, without Django)."""
    return COMMANDS[command](argv, stdout, stderr)


def exit_now(status: int) -> NoReturn:
    """End the process with `status` once the standard streams are flushed, without the
    interpreter's teardown (freeing every object, a last collection): 8 to 15 ms of a CI
    run, for nothing the command leaves open (its report file is closed, its worker
    processes and sandbox pool are shut down before `main` returns). Where a stream cannot
    be flushed (a closed pipe), the interpreter exits as usual and reports it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(status)
    os._exit(status)
