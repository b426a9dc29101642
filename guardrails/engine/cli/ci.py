"""`manage.py guardrail_ci`: evaluate guardrails over trace files in mode ci.

Exit statuses follow interfaces.md: 0 nothing blocks, 1 a selected guardrail gave fail or
error, 2 bad input (each named with file and line, or an invalid check pack). With
`--labels`, a labelled case given the wrong verdict blocks too (guardrails.engine.cli.labels).

llm-judge guardrails need judge models (`--judge-models`, environment.judge_services);
without them an llm-judge guardrail's result is `error` (no judge bound), which blocks.
With `--jobs N`, trace files are evaluated in N processes; a run with llm-judge or
sandboxed guardrails stays in one process (its judge calls and sandbox pool are shared).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, Any

import orjson

from guardrails.engine import deployment as recipe
from guardrails.engine import environment
from guardrails.engine.cli.batches import Evaluator, Workers, evaluate_file
from guardrails.engine.cli.environment import (
    Deployment,
    judge_services,
    judge_summary,
    load_deployment,
    sandbox_pool,
    trace_limits,
    write_pack_warnings,
)
from guardrails.engine.cli.files import BadInput, iter_entries, load_json_file
from guardrails.engine.cli.outcome import Baseline, Outcome, load_baseline
from guardrails.engine.cli.reports import Report
from guardrails.engine.cli.validate import register_all
from guardrails.engine.cli.writer import Writer
from guardrails.engine.evaluate import Engine
from guardrails.engine.types import Guardrail

EXPORT_PATH = "/api/v1/guardrails/export"


def guardrail_ci(args: argparse.Namespace, stdout: Writer, stderr: Writer) -> int:
    started = time.perf_counter()
    try:
        evaluator = _evaluator(args, stderr)
    except BadInput as exc:
        stderr.write(f"{exc}\n")
        return 2
    if evaluator is None:
        return 2
    try:
        outcome = _outcome(args, evaluator.guardrails)
    except BadInput as exc:
        _close(evaluator.services)
        stderr.write(f"{exc}\n")
        return 2
    evaluator.collect = _collects(args, outcome)
    try:
        with _output(args, stdout) as out:
            report = Report(evaluator.guardrails, args.format, out, outcome)
            try:
                _evaluate_all(args.traces, evaluator, report, _jobs(args, evaluator, stderr))
                _evaluate_labels(getattr(args, "labels", None) or [], evaluator, report)
                report.seconds = time.perf_counter() - started
                report.finish()
            finally:
                report.close()
    finally:
        _close(evaluator.services)
    return _conclude(args, report, evaluator.services, stdout, stderr)


def _outcome(args: argparse.Namespace, guardrails: Sequence[Guardrail]) -> Outcome:
    """What blocks and what the run is compared with (--block-on, --fail-on, --baseline)."""
    fail_on = getattr(args, "fail_on", None) or "any"
    path = getattr(args, "baseline", None)
    if fail_on == "new" and not path:
        raise BadInput("--fail-on new needs --baseline REPORT (the base branch's JSON report)")
    baseline = _baseline(args, path, guardrails) if path else None
    block_on = getattr(args, "block_on", None)
    return Outcome(guardrails, baseline=baseline, block_on=block_on, fail_on=fail_on, console=args.console)


def _baseline(args: argparse.Namespace, path: str, guardrails: Sequence[Guardrail]) -> Baseline:
    """The baseline report's failing traces, or with `--baseline console` the console's."""
    if path != "console":
        return load_baseline(path)
    if not args.console:
        raise BadInput("--baseline console needs --console URL (a file named console: ./console)")
    from guardrails.engine.cli.remote_baseline import console_baseline  # (httpx: only this run pays)

    return console_baseline(args.console, [guardrail.id for guardrail in guardrails])


def _collects(args: argparse.Namespace, outcome: Outcome) -> bool:
    """Whether the run keeps its fails and errors: only what shows or compares them does."""
    return bool(
        args.format == "markdown"
        or getattr(args, "summary", None)
        or getattr(args, "annotations", False)
        or outcome.baseline is not None
    )


def _evaluator(args: argparse.Namespace, stderr: Writer) -> Evaluator | None:
    """The deployment, guardrails and services of the run; None (after saying why) when a
    guardrail is invalid, BadInput for any other bad input."""
    limits = trace_limits()
    deployment = load_deployment(getattr(args, "pack", None) or ())
    write_pack_warnings(deployment, stderr)
    guardrails = _load_guardrails(args, deployment, stderr)
    judge = judge_services(getattr(args, "judge_models", None))
    if guardrails is None:
        if judge is not None:
            judge.client.close()
        return None
    services = _evaluation_services(guardrails, deployment.engine)
    if judge is not None:
        services["judge"] = judge
    return Evaluator(deployment.engine, guardrails, services, args.format, limits)


def _jobs(args: argparse.Namespace, evaluator: Evaluator, stderr: Writer) -> int:
    jobs: int = getattr(args, "jobs", 1) or 1
    if jobs > 1 and evaluator.services:
        stderr.write("note: llm-judge and sandboxed guardrails run in one process: --jobs is ignored\n")
        return 1
    return jobs


def _close(services: Mapping[str, Any]) -> None:
    if "sandbox" in services:
        services["sandbox"].shutdown()
    if "judge" in services:
        services["judge"].client.close()


def _conclude(
    args: argparse.Namespace, report: Report, services: Mapping[str, Any], stdout: Writer, stderr: Writer
) -> int:
    """Say where the report went, what the judge cost and what input was bad; the status."""
    if args.output:
        stdout.write(report.summary_line() + f"\nreport written to {args.output}\n")
    if getattr(args, "summary", None):
        _append_summary(args.summary, report)
    if getattr(args, "annotations", False):
        from guardrails.engine.cli.summary import github_annotations

        stdout.write(github_annotations(report))
    if "judge" in services:
        stderr.write(judge_summary(services["judge"]))
    for message in report.bad_input:
        stderr.write(f"{message}\n")
    if report.bad_input:
        return 2
    return 1 if report.blocks else 0


def _append_summary(path: str, report: Report) -> None:
    """The markdown summary appended to `path` (a job summary file other steps write too)."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(report.markdown())
    except OSError as exc:
        report.add_bad_input([f"{path}: cannot write the summary: {exc.strerror or exc}"])


@contextmanager
def _output(args: argparse.Namespace, stdout: Writer) -> Iterator[Writer]:
    if not args.output:
        yield stdout
        return
    handle: IO[str]
    with open(args.output, "w", encoding="utf-8") as handle:
        yield handle


def _evaluate_all(paths: list[str], evaluator: Evaluator, report: Report, jobs: int) -> None:
    """Every trace file into the report, in order; an unreadable file is bad input."""
    workers = Workers(evaluator, jobs) if jobs > 1 else None
    try:
        for path in paths:
            try:
                entries = iter_entries(path, evaluator.max_bytes, evaluator.max_depth)
                for batch in evaluate_file(path, evaluator, entries, workers):
                    report.add(batch)
            except BadInput as exc:
                report.add_bad_input([str(exc)])
    finally:
        if workers is not None:
            workers.close()


def _evaluate_labels(paths: list[str], evaluator: Evaluator, report: Report) -> None:
    """The labelled sets (--labels) into the report, after the trace files, in this process."""
    if not paths:
        return
    from guardrails.engine.cli.labels import LabelledSets, evaluate_all  # (a run without --labels pays nothing)

    report.labels = LabelledSets(evaluator.guardrails, paths, evaluator.fmt)
    report.add_bad_input(evaluate_all(paths, report.labels, evaluator))


def _evaluation_services(guardrails: list[Guardrail], engine: Engine) -> dict[str, Any]:
    """The Context services: a sandbox pool only when a guardrail runs in the sandbox."""
    if recipe.needs_sandbox(guardrails, engine.registry):
        return {"sandbox": sandbox_pool()}
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

    key = environment.ENGINE.text("KINDGI_API_KEY").strip()
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
