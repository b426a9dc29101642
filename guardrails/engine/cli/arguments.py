"""The CI commands' arguments, and their entry points: parse first, import the engine after.

This module imports argparse and nothing of the engine, so that `guardrail_ci --help` and a
usage error cost the interpreter's start and argparse alone; the command's own module (and
with it the engine) is imported once the arguments are known to be good.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from guardrails.engine.cli.writer import Writer

FORMATS = ("text", "json", "junit", "markdown")


class UsageError(Exception):
    """Bad command-line arguments (exit status 2)."""


def _help_width() -> int:
    """The width argparse would give help (shutil.get_terminal_size's, less 2), found without
    importing shutil: argparse's formatter imports it, with bz2 and lzma, on every run."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _help_width() if width is None else width)


class _Parser(argparse.ArgumentParser):
    """An argument parser that reports errors to the caller instead of exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:
        raise UsageError(message)


def add_pack_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pack",
        action="append",
        default=[],
        metavar="MODULE",
        help="load this check pack too (besides those of KINDGI_CHECK_PACKS); repeatable",
    )


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="guardrail files (JSON)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    add_pack_argument(parser)


def _jobs(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to 64")
    return int(text)


def _actions(text: str) -> list[str]:
    actions = [action.strip() for action in text.split(",")]
    if not all(actions) or len(actions) > 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of actions (halt,log-only,...)")
    return actions


def add_ci_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--guardrails", nargs="+", default=[], metavar="PATH")
    parser.add_argument("--console", metavar="URL", help="read the console's export (API key: KINDGI_API_KEY)")
    parser.add_argument("--traces", nargs="+", default=[], metavar="PATH", help="trace files (JSON Lines or JSON)")
    parser.add_argument(
        "--labels",
        nargs="+",
        default=[],
        metavar="FILE",
        help="labelled sets (JSON Lines, as the console exports them): block when a labelled case "
        "gets the wrong verdict; the report adds each guardrail's precision and recall on them",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="text", metavar="FORMAT", help="text (default), json, junit or markdown"
    )
    parser.add_argument("--output", metavar="FILE", help="write the report here, not stdout")
    parser.add_argument(
        "--summary",
        metavar="FILE",
        help="append the markdown summary to FILE too, whatever the format (GitHub's $GITHUB_STEP_SUMMARY)",
    )
    parser.add_argument(
        "--annotations", action="store_true", help="print a GitHub annotation (::error) for each failing trace shown"
    )
    parser.add_argument(
        "--baseline",
        metavar="REPORT",
        help="a JSON report of the base branch, or `console`: the last run of the console (--console) of these "
        "guardrails; the report adds their newly and no longer failing traces",
    )
    parser.add_argument(
        "--fail-on",
        choices=("any", "new"),
        default="any",
        help="block on any failure (default, as the contract says) or only on newly failing traces (needs --baseline)",
    )
    parser.add_argument(
        "--block-on",
        type=_actions,
        metavar="ACTIONS",
        help="the on-violation actions whose failures block, comma-separated (default: every action)",
    )
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="N",
        help="evaluate the trace files in N processes (the report is the same, in the same order)",
    )
    parser.add_argument(
        "--judge-models",
        metavar="FILE",
        help="judge models for llm-judge guardrails: a JSON array of registrations "
        "(the shape of GET /api/v1/judge-models; keys from the environment variables they name)",
    )
    add_pack_argument(parser)


Command = Callable[[argparse.Namespace, Writer, Writer], int]


def run_validate_guardrail(
    argv: list[str], stdout: Writer, stderr: Writer, prog: str = "manage.py validate_guardrail"
) -> int:
    """`validate_guardrail PATH... [--format text|json]`."""
    parser = _Parser(prog=prog, description="Validate guardrail files.")
    add_validate_arguments(parser)
    args = _parse(parser, argv, stderr)
    if args is None:
        return 2
    from guardrails.engine.cli.validate import validate_guardrail

    return validate_guardrail(args, stdout, stderr)


def run_guardrail_ci(argv: list[str], stdout: Writer, stderr: Writer, prog: str = "manage.py guardrail_ci") -> int:
    """`guardrail_ci --guardrails PATH... --traces PATH... [--labels FILE...] [--format ...] [--output FILE]`."""
    parser = _Parser(prog=prog, description="Evaluate guardrails against trace files in mode ci.")
    add_ci_arguments(parser)
    args = _parse(parser, argv, stderr)
    if args is not None and not args.traces and not args.labels:
        stderr.write(f"{parser.format_usage()}error: give --traces PATH... or --labels FILE... (or both)\n")
        return 2
    if args is None:
        return 2
    from guardrails.engine.cli.ci import guardrail_ci

    return guardrail_ci(args, stdout, stderr)


def _parse(parser: _Parser, argv: list[str], stderr: Writer) -> argparse.Namespace | None:
    """The arguments, or None after saying what is wrong (bad arguments are bad input)."""
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        stderr.write(f"{parser.format_usage()}error: {exc}\n")
        return None
