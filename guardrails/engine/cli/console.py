"""The console scripts of the kindgi-guardrails distribution: `guardrail-ci` and
`guardrail-validate` (packages/guardrails/pyproject.toml), and `python -m guardrails.engine.cli`.

They are manage.py's `guardrail_ci` and `validate_guardrail`, argument for argument: the same
functions, the same reports and exit statuses; only the program name in the usage differs.
"""

from __future__ import annotations

import sys

from guardrails.engine.cli.arguments import run_guardrail_ci, run_validate_guardrail

USAGE = (
    "usage: python -m guardrails.engine.cli {ci,validate} ARGUMENTS...\n"
    "  ci        evaluate guardrails over trace files (guardrail-ci, manage.py guardrail_ci)\n"
    "  validate  validate guardrail files (guardrail-validate, manage.py validate_guardrail)\n"
)


def guardrail_ci() -> int:
    """`guardrail-ci ARGUMENTS...`."""
    return run_guardrail_ci(sys.argv[1:], sys.stdout, sys.stderr, prog="guardrail-ci")


def guardrail_validate() -> int:
    """`guardrail-validate PATH...`."""
    return run_validate_guardrail(sys.argv[1:], sys.stdout, sys.stderr, prog="guardrail-validate")


def module_main(argv: list[str]) -> int:
    """`python -m guardrails.engine.cli {ci,validate} ARGUMENTS...` (manage.py's names too)."""
    command = argv[0] if argv else ""
    prog = "python -m guardrails.engine.cli"
    if command in ("ci", "guardrail_ci", "guardrail-ci"):
        return run_guardrail_ci(argv[1:], sys.stdout, sys.stderr, prog=f"{prog} {command}")
    if command in ("validate", "validate_guardrail", "guardrail-validate"):
        return run_validate_guardrail(argv[1:], sys.stdout, sys.stderr, prog=f"{prog} {command}")
    if command in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    sys.stderr.write(USAGE + (f"error: unknown command {command!r}\n" if command else "error: give a command\n"))
    return 2
