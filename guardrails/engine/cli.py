"""The CI path: `manage.py validate_guardrail` and `manage.py guardrail_ci`.

Both run without Django (manage.py calls `main` directly for them) so that a CI job pays
for the engine alone. They build the console's engine from the same recipe and the same
environment variables (guardrails.engine.deployment): the packs of KINDGI_CHECK_PACKS (and
`--pack MODULE`), the sandboxed zero-llm strategy with a pool of sandbox workers (started
only when a guardrail needs it), the sandbox limits, secrets, capabilities and bindings, and
the production rule (KINDGI_PRODUCTION, on by default when DJANGO_DEBUG is false), so that a
guardrail gives the same result here as on the server.

Exit statuses follow interfaces.md: validate_guardrail 0 all valid, 1 any invalid, 2 a file
unreadable or not JSON; guardrail_ci 0 nothing blocks, 1 a selected guardrail gave fail or
error, 2 bad input (each named with file and line, or an invalid check pack).

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

import argparse
import gzip
import html
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import orjson

from guardrails.engine import deployment as recipe
from guardrails.engine.evaluate import Engine
from guardrails.engine.packs import PackError
from guardrails.engine.registration import Registration, RegistrationPolicy, define_guardrail
from guardrails.engine.schema import (
    MAX_DEPTH,
    MAX_TRACE_BYTES,
    validate_runtrace,
    validate_runtrace_line,
)
from guardrails.engine.types import Context, Guardrail, Issue, Status

if TYPE_CHECKING:  # the judge's services load only for a run given --judge-models
    from guardrails.engine.judge import InMemoryJudgeServices

EXPORT_PATH = "/api/v1/guardrails/export"
FORMATS = ("text", "json", "junit")


class Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


class UsageError(Exception):
    """Bad command-line arguments (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser that reports errors to the caller instead of exiting."""

    def error(self, message: str) -> Any:
        raise UsageError(message)


# --- reading files ---------------------------------------------------------------------


class BadInput(Exception):
    """A file that cannot be read or parsed: the message names it (and the line)."""


def _read_bytes(path: str) -> bytes:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                return handle.read()
        return Path(path).read_bytes()
    except (OSError, EOFError) as exc:
        raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def _os_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def load_json_file(path: str) -> object:
    """One JSON document from a file (gzip-compressed when it ends in .gz)."""
    data = _read_bytes(path)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc


def _is_jsonl(path: str) -> bool:
    name = path[:-3] if path.endswith(".gz") else path
    return name.endswith((".jsonl", ".ndjson"))


def iter_trace_file(path: str) -> Iterator[tuple[int, object | Issue]]:
    """Each trace of a file with its line number, or an Issue for a line that is not JSON.

    JSON Lines files (`.jsonl`, optionally `.gz`) are streamed line by line, blank lines
    skipped; a JSON file holds one trace or an array of them. An unreadable file raises
    BadInput.
    """
    for line, _raw, item in _iter_traces(path, MAX_TRACE_BYTES):
        yield line, item


def _iter_traces(path: str, max_bytes: int) -> Iterator[tuple[int, bytes | None, object | Issue]]:
    if _is_jsonl(path):
        yield from _iter_jsonl(path, max_bytes)
    else:
        yield from _iter_json(path, max_bytes)


def _open_lines(path: str) -> IO[bytes] | gzip.GzipFile:
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rb")
        return open(path, "rb")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def _iter_jsonl(path: str, max_bytes: int) -> Iterator[tuple[int, bytes | None, object | Issue]]:
    with _open_lines(path) as handle:
        try:
            for number, raw in enumerate(handle, start=1):
                yield number, raw, _parse_line(raw, max_bytes)
        except (OSError, EOFError) as exc:
            raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def _parse_line(raw: bytes, max_bytes: int) -> object | Issue:
    if len(raw) > max_bytes:
        return Issue("", f"trace is larger than {max_bytes} bytes")
    if not raw.strip():
        return _BLANK
    try:
        doc: object = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return Issue("", f"not valid JSON: {exc.msg}")
    return doc


_BLANK = object()  # a blank line of a JSON Lines file: skipped


def _iter_json(path: str, max_bytes: int) -> Iterator[tuple[int, bytes | None, object | Issue]]:
    data = _read_bytes(path)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        yield exc.lineno, None, Issue("", f"not valid JSON: {exc.msg}")
        return
    items = doc if isinstance(doc, list) else [doc]
    lines = _item_lines(data, len(items)) if isinstance(doc, list) else [1]
    for index, item in enumerate(items):
        if len(orjson.dumps(item)) > max_bytes:
            yield lines[index], None, Issue(f"/{index}", f"trace is larger than {max_bytes} bytes")
        else:
            yield lines[index], None, item


# A JSON string, a structural character, a newline, or a literal (number, true, null).
_JSON_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|[\[\]{},\n]|[^\s\[\]{},"]+')


def _item_lines(data: bytes, count: int) -> list[int]:
    """The line on which each element of a top-level JSON array starts."""
    lines: list[int] = []
    depth, line, expecting = 0, 1, False
    for token in _JSON_TOKEN.finditer(data):
        first = token.group()[:1]
        if first == b"\n":
            line += 1
            continue
        if depth == 1 and expecting and first not in (b"]", b","):
            lines.append(line)
            expecting = False
        if first in (b"[", b"{"):
            depth += 1
            expecting = depth == 1
        elif first in (b"]", b"}"):
            depth -= 1
        elif first == b"," and depth == 1:
            expecting = True
    return (lines + [line] * count)[:count]


# --- the deployment, from the environment --------------------------------------------

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    raise BadInput(f"{name}={raw!r} is not a boolean (use true or false)")


def _env_whole_number(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name, "").strip()
    if raw and not raw.isdigit():
        raise BadInput(f"{name}={raw!r} is not a whole number")
    value = int(raw) if raw else default
    if value < minimum:
        raise BadInput(f"{name}={value} must be at least {minimum}")
    return value


@dataclass
class Deployment:
    """The console's engine and registration policy, as the environment configures them."""

    engine: Engine
    policy: RegistrationPolicy
    warnings: list[Issue]


def load_deployment(extra_packs: Sequence[str] = ()) -> Deployment:
    """The built-in checks, the packs of KINDGI_CHECK_PACKS and `extra_packs`, the sandboxed
    strategies and the console's registration policy; BadInput for an invalid pack."""
    packs = list(dict.fromkeys([*_env_list("KINDGI_CHECK_PACKS"), *extra_packs]))
    try:
        engine, warnings = recipe.load_engine(packs)
    except PackError as exc:
        raise BadInput(f"check packs: {exc}") from exc
    production = _env_bool("KINDGI_PRODUCTION", not _env_bool("DJANGO_DEBUG", True))
    policy = recipe.registration_policy(
        production=production,
        environ=_handler_environ(),
        secret_names=_env_list("KINDGI_SECRETS"),
        capabilities=_env_list("KINDGI_CAPABILITIES"),
        bindings=_env_list("KINDGI_BINDINGS"),
    )
    return Deployment(engine, policy, warnings)


def _handler_environ() -> dict[str, str]:
    return recipe.handler_environ(os.environ, _env_list("KINDGI_SECRETS"))


def _sandbox_pool() -> Any:
    """A pool of sandbox workers with the console's limits (imported only when needed)."""
    from guardrails.engine.sandbox import SandboxDefaults, SandboxPool

    # The settings' defaults (kindgi_console/settings.py), read from the same variables.
    defaults = SandboxDefaults(
        mem_mb=_env_whole_number("KINDGI_SANDBOX_MEM_MB", 256, 16),
        cpu_ms=_env_whole_number("KINDGI_SANDBOX_CPU_MS", 1000, 10),
        pool_size=_env_whole_number("KINDGI_SANDBOX_POOL_SIZE", 2, 1),
    )
    return SandboxPool(defaults, environ=_handler_environ())


def _write_pack_warnings(deployment: Deployment, stderr: Writer) -> None:
    for issue in deployment.warnings:
        stderr.write(f"warning: check packs: {issue.message}\n")


def add_pack_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pack",
        action="append",
        default=[],
        metavar="MODULE",
        help="load this check pack too (besides those of KINDGI_CHECK_PACKS); repeatable",
    )


# --- validate_guardrail ----------------------------------------------------------------


@dataclass
class LoadedGuardrail:
    """A guardrail document from a file, with where it came from and its registration."""

    source: str
    index: int | None
    document: object
    registration: Registration

    @property
    def id(self) -> str | None:
        doc = self.document
        return str(doc["id"]) if isinstance(doc, Mapping) and "id" in doc else None

    @property
    def label(self) -> str:
        where = self.source if self.index is None else f"{self.source}[{self.index}]"
        return f"{where} ({self.id})" if self.id is not None else where


def _documents(doc: object) -> list[tuple[int | None, object]]:
    if isinstance(doc, list):
        return list(enumerate(doc))
    return [(None, doc)]


def register_all(
    sources: Sequence[tuple[str, object]], engine: Engine, policy: RegistrationPolicy | None = None
) -> list[LoadedGuardrail]:
    """Define every guardrail of every source; a second guardrail with an id is an error."""
    loaded: list[LoadedGuardrail] = []
    seen: dict[str, str] = {}
    for source, doc in sources:
        for index, item in _documents(doc):
            registration = define_guardrail(
                item, registry=engine.registry, strategies=engine.strategies, policy=policy
            )
            entry = LoadedGuardrail(source, index, item, registration)
            if registration.valid and entry.id is not None:
                if entry.id in seen:
                    registration.errors.append(
                        Issue("/id", f"guardrail '{entry.id}' is also defined in {seen[entry.id]}")
                    )
                    registration.guardrail = None
                seen.setdefault(entry.id, entry.label)
            loaded.append(entry)
    return loaded


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="guardrail files (JSON)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    add_pack_argument(parser)


def run_validate_guardrail(argv: list[str], stdout: Writer, stderr: Writer) -> int:
    """`validate_guardrail PATH... [--format text|json]`."""
    parser = _Parser(prog="manage.py validate_guardrail", description="Validate guardrail files.")
    add_validate_arguments(parser)
    return _run(parser, validate_guardrail, argv, stdout, stderr)


def _run(
    parser: _Parser,
    command: Callable[[argparse.Namespace, Writer, Writer], int],
    argv: list[str],
    stdout: Writer,
    stderr: Writer,
) -> int:
    """Parse `argv` and run `command`; bad arguments are bad input (status 2)."""
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        stderr.write(f"{parser.format_usage()}error: {exc}\n")
        return 2
    return command(args, stdout, stderr)


def validate_guardrail(args: argparse.Namespace, stdout: Writer, stderr: Writer) -> int:
    try:
        deployment = load_deployment(args.pack)
    except BadInput as exc:
        stderr.write(f"{exc}\n")
        return 2
    _write_pack_warnings(deployment, stderr)
    sources: list[tuple[str, object]] = []
    unreadable: list[str] = []
    for path in args.paths:
        try:
            sources.append((path, load_json_file(path)))
        except BadInput as exc:
            unreadable.append(str(exc))
    loaded = register_all(sources, deployment.engine, deployment.policy)
    valid = not unreadable and all(entry.registration.valid for entry in loaded)
    if args.format == "json":
        stdout.write(_validation_json(loaded, unreadable, valid) + "\n")
    else:
        _validation_text(loaded, unreadable, stdout, stderr)
    if unreadable:
        return 2
    return 0 if valid else 1


def _validation_json(loaded: list[LoadedGuardrail], unreadable: list[str], valid: bool) -> str:
    report: dict[str, Any] = {
        "valid": valid,
        "guardrails": [
            {
                "file": entry.source,
                "index": entry.index,
                "id": entry.id,
                "valid": entry.registration.valid,
                "errors": [issue.as_dict() for issue in entry.registration.errors],
                "warnings": [issue.as_dict() for issue in entry.registration.warnings],
            }
            for entry in loaded
        ],
    }
    if unreadable:
        report["files"] = [{"message": message} for message in unreadable]
    return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()


def _validation_text(loaded: list[LoadedGuardrail], unreadable: list[str], stdout: Writer, stderr: Writer) -> None:
    for message in unreadable:
        stderr.write(f"{message}\n")
    for entry in loaded:
        registration = entry.registration
        stdout.write(f"{entry.label}: {'ok' if registration.valid else 'invalid'}\n")
        for issue in registration.errors:
            stdout.write(f"  {issue.path or '/'}: {issue.message}\n")
        for issue in registration.warnings:
            stdout.write(f"  warning {issue.path or '/'}: {issue.message}\n")


# --- guardrail_ci ----------------------------------------------------------------------


def add_ci_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--guardrails", nargs="+", default=[], metavar="PATH")
    parser.add_argument("--console", metavar="URL", help="read the console's export (API key: KINDGI_API_KEY)")
    parser.add_argument("--traces", nargs="+", required=True, metavar="PATH")
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument("--output", metavar="FILE", help="write the report here, not stdout")
    parser.add_argument(
        "--judge-models",
        metavar="FILE",
        help="judge models for llm-judge guardrails: a JSON array of registrations "
        "(the shape of GET /api/v1/judge-models; keys from the environment variables they name)",
    )
    add_pack_argument(parser)


def run_guardrail_ci(argv: list[str], stdout: Writer, stderr: Writer) -> int:
    """`guardrail_ci --guardrails PATH... --traces PATH... [--format ...] [--output FILE]`."""
    parser = _Parser(
        prog="manage.py guardrail_ci",
        description="Evaluate guardrails against trace files in mode ci.",
    )
    add_ci_arguments(parser)
    return _run(parser, guardrail_ci, argv, stdout, stderr)


@dataclass
class CiReport:
    """What a CI run found: results (compactly), counts and bad input."""

    guardrails: list[Guardrail]
    keep_passes: bool
    counts: dict[str, int] = field(default_factory=lambda: {"pass": 0, "fail": 0, "error": 0, "skipped": 0})
    #: (guardrail index, trace id, status, reason, file, line)
    results: list[tuple[int, str, Status, str | None, str, int]] = field(default_factory=list)
    bad_input: list[str] = field(default_factory=list)
    traces: int = 0
    seconds: float = 0.0

    @property
    def blocks(self) -> bool:
        return self.counts["fail"] + self.counts["error"] > 0


def guardrail_ci(args: argparse.Namespace, stdout: Writer, stderr: Writer) -> int:
    started = time.perf_counter()
    try:
        max_bytes, max_depth = _limits()
        deployment = load_deployment(getattr(args, "pack", None) or ())
        _write_pack_warnings(deployment, stderr)
        guardrails = _load_guardrails(args, deployment, stderr)
        judge = _judge_services(getattr(args, "judge_models", None))
    except BadInput as exc:
        stderr.write(f"{exc}\n")
        return 2
    if guardrails is None:
        return 2
    report = CiReport(guardrails, keep_passes=args.format != "text")
    try:
        services = _evaluation_services(guardrails, deployment.engine)
    except BadInput as exc:
        stderr.write(f"{exc}\n")
        return 2
    if judge is not None:
        services["judge"] = judge
    try:
        for path in args.traces:
            try:
                _evaluate_file(path, deployment.engine, report, max_bytes, max_depth, services)
            except BadInput as exc:
                report.bad_input.append(str(exc))
    finally:
        if "sandbox" in services:
            services["sandbox"].shutdown()
        if judge is not None:
            judge.client.close()
    report.seconds = time.perf_counter() - started
    _write_report(args, report, stdout)
    if judge is not None:
        stderr.write(_judge_summary(judge))
    for message in report.bad_input:
        stderr.write(f"{message}\n")
    if report.bad_input:
        return 2
    return 1 if report.blocks else 0


def _limits() -> tuple[int, int]:
    """The trace size and depth limits: the console's settings, read from the environment."""
    return (
        _env_whole_number("KINDGI_MAX_TRACE_BYTES", MAX_TRACE_BYTES),
        _env_whole_number("KINDGI_MAX_DEPTH", MAX_DEPTH),
    )


def _evaluation_services(guardrails: list[Guardrail], engine: Engine) -> dict[str, Any]:
    """The Context services: a sandbox pool only when a guardrail runs in the sandbox."""
    if recipe.needs_sandbox(guardrails, engine.registry):
        return {"sandbox": _sandbox_pool()}
    return {}


def _load_guardrails(args: argparse.Namespace, deployment: Deployment, stderr: Writer) -> list[Guardrail] | None:
    """Every guardrail of the files and the console export; None (after saying why) when
    any is invalid."""
    sources = [(path, load_json_file(path)) for path in args.guardrails]
    if args.console:
        sources.append(download_export(args.console))
    if not sources:
        raise BadInput("give --guardrails PATH... or --console URL")
    loaded = register_all(sources, deployment.engine, deployment.policy)
    for entry in loaded:
        for issue in entry.registration.warnings:
            stderr.write(f"{entry.label}: warning {issue.path or '/'}: {issue.message}\n")
    invalid = [entry for entry in loaded if not entry.registration.valid]
    for entry in invalid:
        for issue in entry.registration.errors:
            stderr.write(f"{entry.label}: {issue.path or '/'}: {issue.message}\n")
    if invalid:
        return None
    return [entry.registration.guardrail for entry in loaded if entry.registration.guardrail]


def download_export(url: str) -> tuple[str, object]:
    """GET {url}/api/v1/guardrails/export with the API key in KINDGI_API_KEY."""
    import httpx  # imported here: only a run that reads the console pays for it

    key = os.environ.get("KINDGI_API_KEY", "").strip()
    if not key:
        raise BadInput("--console needs the API key in the environment variable KINDGI_API_KEY")
    export_url = url.rstrip("/") + EXPORT_PATH
    try:
        response = httpx.get(export_url, headers={"Authorization": f"Bearer {key}"}, timeout=30.0)
    except httpx.HTTPError as exc:
        raise BadInput(f"{export_url}: cannot download: {exc}") from exc
    if response.status_code != 200:
        raise BadInput(f"{export_url}: the console answered {response.status_code}")
    try:
        doc = orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{export_url}: not valid JSON: {exc.msg}") from exc
    if not isinstance(doc, list):
        raise BadInput(f"{export_url}: the export must be a JSON array of guardrails")
    return export_url, doc


def _judge_services(path: str | None) -> InMemoryJudgeServices | None:
    """Judge services over the registrations in `path` (a JSON array); None without a file.

    The file is the console's `GET /api/v1/judge-models` answer as it is (a disabled
    registration is never routed to, as in production), or the same array written by hand.
    Each registration is checked like the console checks one; the keys come from the
    environment variables the registrations name, at call time. A judge call may take
    KINDGI_JUDGE_CALL_LIMIT_S seconds (default 60), retries included.
    """
    if not path:
        return None
    import httpx  # imported here: only a run with llm-judge guardrails pays for it

    from guardrails.engine.judge import InMemoryJudgeServices, InvalidJudgeModel, judge_models_of_export

    try:
        models = judge_models_of_export(load_json_file(path))
    except InvalidJudgeModel as error:
        raise BadInput("\n".join(f"{path}: {issue.path or '/'}: {issue.message}" for issue in error.issues)) from None
    raw_limit = os.environ.get("KINDGI_JUDGE_CALL_LIMIT_S", "").strip()
    if raw_limit and not raw_limit.isdigit():
        raise BadInput(f"KINDGI_JUDGE_CALL_LIMIT_S={raw_limit!r} is not a whole number")
    return InMemoryJudgeServices(
        models=models,
        client=httpx.Client(),
        time_limit_s=float(raw_limit or 60),
    )


def _judge_summary(judge: InMemoryJudgeServices) -> str:
    """One line on stderr: what the run's judge calls cost (the reports stay as they are)."""
    calls = [call for call, _guardrail, _revision in judge.calls]
    cost = sum((call.cost_usd for call in calls), Decimal(0))
    billed = sum(1 for call in calls if call.billed)
    return f"judge: {len(calls)} calls ({billed} billed), {cost} USD\n"


def _evaluate_file(
    path: str,
    engine: Engine,
    report: CiReport,
    max_bytes: int,
    max_depth: int,
    services: Mapping[str, Any] | None = None,
) -> None:
    guardrails = list(enumerate(report.guardrails))
    services = services or {}
    verdict = engine.verdict
    counts, results, keep_passes = report.counts, report.results, report.keep_passes
    for line, raw, item in _iter_traces(path, max_bytes):
        if item is _BLANK:
            continue
        if isinstance(item, Issue):
            report.bad_input.append(_where(path, line, item))
            continue
        issues = (
            validate_runtrace(item, max_depth=max_depth)
            if raw is None
            else validate_runtrace_line(raw, item, max_depth=max_depth)
        )
        if issues or not isinstance(item, Mapping):
            report.bad_input.extend(_where(path, line, issue) for issue in issues)
            continue
        report.traces += 1
        trace_id = item["id"]
        context = Context(
            mode="ci",
            tenant=item.get("tenant"),
            agent=item.get("agent"),
            flow=item.get("flow"),
            services=services,
        )
        for index, guardrail in guardrails:
            status, reason, _details = verdict(guardrail, item, context)
            counts[status] += 1
            if keep_passes or status == "fail" or status == "error":
                results.append((index, trace_id, status, reason, path, line))


def _where(path: str, line: int, issue: Issue) -> str:
    field_path = f" {issue.path}:" if issue.path else ""
    return f"{path}:{line}:{field_path} {issue.message}"


# --- reports ---------------------------------------------------------------------------


def _write_report(args: argparse.Namespace, report: CiReport, stdout: Writer) -> None:
    """Write the report in pieces, so that a large run never holds it whole in memory."""
    render = {"text": _text_report, "json": _json_report, "junit": _junit_report}[args.format]
    if not args.output:
        for piece in render(report):
            stdout.write(piece)
        return
    with open(args.output, "w", encoding="utf-8") as handle:
        for piece in render(report):
            handle.write(piece)
    stdout.write(_summary_line(report) + f"\nreport written to {args.output}\n")


def _summary_line(report: CiReport) -> str:
    c = report.counts
    verdict = "BLOCKED" if report.blocks else "PASSED"
    return (
        f"{verdict}: {len(report.guardrails)} guardrails x {report.traces} traces: "
        f"{c['pass']} pass, {c['fail']} fail, {c['error']} error, {c['skipped']} skipped"
        f" ({report.seconds:.2f}s)"
    )


def _text_report(report: CiReport) -> Iterator[str]:
    for index, trace_id, status, reason, path, line in report.results:
        if status in ("fail", "error"):
            guardrail = report.guardrails[index]
            yield (
                f"{status.upper():5} {guardrail.id} on {trace_id} ({path}:{line}): {reason}"
                f" [on-violation {guardrail.on_violation}, severity {guardrail.severity or '-'}]\n"
            )
    yield _summary_line(report) + "\n"


def _json_report(report: CiReport) -> Iterator[str]:
    head = {"passed": not report.blocks and not report.bad_input, "summary": report.counts}
    yield orjson.dumps(head).decode()[:-1] + ',"results":['
    results = report.results
    for start in range(0, len(results), _CHUNK):
        chunk = [_result_dict(report, result) for result in results[start : start + _CHUNK]]
        yield ("," if start else "") + orjson.dumps(chunk).decode()[1:-1]
    errors = [{"message": message} for message in report.bad_input]
    yield '],"errors":' + orjson.dumps(errors).decode() + "}\n"


_CHUNK = 2000


def _result_dict(report: CiReport, result: tuple[int, str, Status, str | None, str, int]) -> dict[str, Any]:
    index, trace_id, status, reason, path, line = result
    guardrail = report.guardrails[index]
    return {
        "guardrail": guardrail.id,
        "trace": trace_id,
        "status": status,
        "reason": reason,
        "action": guardrail.on_violation,
        "severity": guardrail.severity,
        "file": path,
        "line": line,
    }


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(text: str) -> str:
    # html.escape gives XML-valid entities and, unlike xml.sax.saxutils, imports nothing
    # heavy (saxutils pulls in urllib and http.client: a tenth of the command's start-up).
    return html.escape(_XML_INVALID.sub("\ufffd", text))


def _attr(text: str) -> str:
    return f'"{_xml(text)}"'


def _junit_report(report: CiReport) -> Iterator[str]:
    """JUnit XML: a testsuite per guardrail, a testcase per guardrail and trace."""
    by_guardrail: list[list[tuple[str, Status, str | None, str, int]]] = [[] for _ in report.guardrails]
    for index, trace_id, status, reason, path, line in report.results:
        by_guardrail[index].append((trace_id, status, reason, path, line))
    c = report.counts
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    yield (
        f'<testsuites name="guardrail_ci" tests="{sum(c.values()) + len(report.bad_input)}" '
        f'failures="{c["fail"]}" errors="{c["error"] + len(report.bad_input)}" '
        f'skipped="{c["skipped"]}" time="{report.seconds:.3f}">\n'
    )
    for guardrail, cases in zip(report.guardrails, by_guardrail, strict=True):
        yield "".join(_junit_suite(guardrail, cases))
    if report.bad_input:
        yield "".join(_junit_bad_input(report.bad_input))
    yield "</testsuites>\n"


def _junit_suite(guardrail: Guardrail, cases: list[tuple[str, Status, str | None, str, int]]) -> list[str]:
    statuses = [status for _, status, _, _, _ in cases]
    name = _attr(guardrail.id)
    parts = [
        f'  <testsuite name={name} tests="{len(cases)}" failures="{statuses.count("fail")}" '
        f'errors="{statuses.count("error")}" skipped="{statuses.count("skipped")}">\n'
    ]
    for trace_id, status, reason, path, line in cases:
        case = f"    <testcase classname={name} name={_attr(trace_id)}"
        if status == "pass":
            parts.append(case + "/>\n")
            continue
        parts.append(case + ">\n")
        parts.append(_junit_outcome(guardrail, status, reason, f"{path}:{line}"))
        parts.append("    </testcase>\n")
    parts.append("  </testsuite>\n")
    return parts


def _junit_outcome(guardrail: Guardrail, status: Status, reason: str | None, where: str) -> str:
    if status == "skipped":
        return '      <skipped message="the guardrail\'s scope does not select this trace"/>\n'
    tag = "failure" if status == "fail" else "error"
    kind = "guardrail-violation" if status == "fail" else "guardrail-error"
    body = f"{reason}\ntrace: {where}\non-violation: {guardrail.on_violation}\nseverity: {guardrail.severity or '-'}"
    return f'      <{tag} message={_attr(reason or "")} type="{kind}">{_xml(body)}</{tag}>\n'


def _junit_bad_input(messages: list[str]) -> list[str]:
    parts = [
        f'  <testsuite name="guardrail_ci input" tests="{len(messages)}" '
        f'errors="{len(messages)}" failures="0" skipped="0">\n'
    ]
    for number, message in enumerate(messages, start=1):
        parts.append(
            f'    <testcase classname="guardrail_ci input" name="bad input {number}">\n'
            f'      <error message={_attr(message)} type="bad-input">{_xml(message)}</error>\n'
            "    </testcase>\n"
        )
    parts.append("  </testsuite>\n")
    return parts


# --- entry point -----------------------------------------------------------------------

COMMANDS = {"validate_guardrail": run_validate_guardrail, "guardrail_ci": run_guardrail_ci}


def main(command: str, argv: list[str], stdout: Writer, stderr: Writer) -> int:
    """Run one of the CI commands (manage.py's fast path, without Django)."""
    return COMMANDS[command](argv, stdout, stderr)
