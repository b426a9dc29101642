"""The summaries a CI system shows: markdown (`--format markdown`, `--summary FILE`: a pull
request's comment or a GitHub job summary) and GitHub's annotations (`--annotations`).

Markdown: the verdict, a table of each guardrail's counts (and, against a baseline, its newly
and no longer failing traces), the newly failing traces, the labelled sets' figures and wrong
cases (`--labels`), the first failing traces of each guardrail with their reasons, and the
bad input; links to the console's guardrail pages when
`--console` is given. Every text a trace or a check wrote is escaped and cut to a length.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from guardrails.engine.cli.labels import figure, got

if TYPE_CHECKING:
    from guardrails.engine.cli.outcome import Failing
    from guardrails.engine.cli.reports import Report

#: The characters of a reason, a trace id or a bad-input message a summary shows.
MAX_TEXT = 300
#: The most annotations written (GitHub shows 10 errors a step, 50 a job).
MAX_ANNOTATIONS = 50
#: The wrong labelled cases a summary lists per guardrail.
SHOWN_WRONG = 10


def _one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _text(value: object) -> str:
    """Text safe in markdown, on one line: no HTML, no table cell break, no emphasis or link."""
    text = _one_line(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("\\", "\\\\")
    for char in "`*_[]#|~":
        text = text.replace(char, "\\" + char)
    return text


def _code(value: object) -> str:
    """A code span (shown as it is): no backtick to close it, no pipe to end a table cell."""
    return "`" + _one_line(value).replace("`", "'").replace("|", "\\|") + "`"


def _guardrail_cell(report: Report, index: int) -> str:
    guardrail_id = report.guardrails[index].id
    console = report.outcome.console
    if not console:
        return _code(guardrail_id)
    return f"[{_code(guardrail_id)}]({console.rstrip('/')}/guardrails/{quote(guardrail_id, safe='')}/)"


def markdown(report: Report) -> str:
    """The whole summary, ending in a newline."""
    lines = [f"## Guardrails: {report.verdict}", "", report.summary_line(), ""]
    lines.extend(_table(report))
    lines.extend(_newly_failing(report))
    lines.extend(_labelled(report))
    lines.extend(_first_failing(report))
    if report.bad_input:
        lines.extend(["", "### Bad input", ""])
        lines.extend(f"- {_text(message)}" for message in report.bad_input)
    return "\n".join(lines) + "\n"


def _table(report: Report) -> list[str]:
    outcome, compare = report.outcome, report.outcome.baseline is not None
    head = "| guardrail | on violation | blocks | pass | fail | error | skipped |"
    rule = "| --- | --- | --- | ---: | ---: | ---: | ---: |"
    if compare:
        head += " newly failing | no longer failing |"
        rule += " ---: | ---: |"
    rows = [head, rule]
    for index, (guardrail, counts) in enumerate(zip(report.guardrails, report.counts, strict=True)):
        row = (
            f"| {_guardrail_cell(report, index)} | {_text(guardrail.on_violation)} | "
            f"{'yes' if outcome.blocking(index) else 'no'} | {counts['pass']} | {counts['fail']} | "
            f"{counts['error']} | {counts['skipped']} |"
        )
        if compare:
            row += f" {outcome.tallies[index].newly} | {outcome.no_longer_failing(index)} |"
        rows.append(row)
    return rows


def _failure(report: Report, item: Failing, with_guardrail: bool) -> str:
    index, trace, where, status, reason = item
    head = f"{_guardrail_cell(report, index)} on " if with_guardrail else ""
    return f"- {head}{_code(trace)} ({_code(where)}) **{status}**: {_text(reason or '')}"


def _newly_failing(report: Report) -> list[str]:
    outcome = report.outcome
    if outcome.baseline is None:
        return []
    lines = ["", f"### Newly failing (against {_code(outcome.baseline.source)})", ""]
    shown = [item for tally in outcome.tallies for item in tally.newly_shown]
    lines.extend(_failure(report, item, True) for item in shown)
    more = sum(tally.newly for tally in outcome.tallies) - len(shown)
    if not shown:
        lines.append("None.")
    elif more:
        lines.append(f"- … and {more} more")
    fixed = [(index, trace) for index in range(len(report.guardrails)) for trace in outcome.no_longer_shown(index)]
    if fixed:
        lines.extend(["", "### No longer failing", ""])
        lines.extend(f"- {_guardrail_cell(report, index)} on {_code(trace)}" for index, trace in fixed)
    return lines


def _labelled(report: Report) -> list[str]:
    """The labelled sets (--labels): per guardrail its cases, wrong ones, precision and recall,
    then the first wrong cases of each."""
    sets = report.labels
    if sets is None:
        return []
    lines = ["", f"### Labelled set ({', '.join(_code(path) for path in sets.paths)})", ""]
    lines.extend(["| guardrail | cases | wrong | precision | recall |", "| --- | ---: | ---: | --- | --- |"])
    for index in sets.evaluated():
        confusion = sets.confusions[index]
        lines.append(
            f"| {_guardrail_cell(report, index)} | {confusion.labelled} | {confusion.wrong} | "
            f"{figure(confusion.precision())} | {figure(confusion.recall())} |"
        )
    if not sets.evaluated():
        lines.append("| none of the run's guardrails is labelled | 0 | 0 | - | - |")
    if sets.not_in_run:
        lines.extend(
            ["", f"{sets.not_in_run} cases of guardrails not in this run, not evaluated: {_text(sets.named())}"]
        )
    for index in sets.evaluated():
        shown = sets.kept[index][:SHOWN_WRONG]
        if not shown:
            continue
        lines.extend(["", f"#### {_guardrail_cell(report, index)}: {sets.confusions[index].wrong} wrong", ""])
        lines.extend(f"- {_code(case[0])} ({_code(f'{case[1]}:{case[2]}')}) {_text(got(case))}" for case in shown)
        more = sets.confusions[index].wrong - len(shown)
        if more:
            lines.append(f"- … and {more} more")
    return lines


def _first_failing(report: Report) -> list[str]:
    lines: list[str] = []
    for index, tally in enumerate(report.outcome.tallies):
        if not tally.first:
            continue
        counts = report.counts[index]
        failed = counts["fail"] + counts["error"]
        shown = f"the first {len(tally.first)} of {failed}" if failed > len(tally.first) else str(failed)
        lines.extend(["", f"#### {_guardrail_cell(report, index)}: {shown} failing", ""])
        lines.extend(_failure(report, item, False) for item in tally.first)
    if lines:
        lines[0:0] = ["", "### Failing traces"]
    return lines


# --- GitHub's annotations ------------------------------------------------------------


def _command_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _command_property(text: str) -> str:
    return _command_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: Report) -> str:
    """A GitHub `::error` workflow command per failing trace shown (the newly failing ones
    against a baseline), on the trace's file and line; `::warning` for a guardrail that does
    not block."""
    outcome, lines = report.outcome, []
    for index, tally in enumerate(outcome.tallies):
        items = tally.newly_shown if outcome.baseline is not None else tally.first
        level = "error" if outcome.blocking(index) else "warning"
        for _index, trace, where, status, reason in items:
            path, _, line = where.rpartition(":")
            title = _command_property(f"{report.guardrails[index].id}: {status} on {trace}")
            lines.append(
                f"::{level} file={_command_property(path)},line={line},title={title}::{_command_data(reason or '')}\n"
            )
    lines.extend(_labelled_annotations(report))
    return "".join(lines[:MAX_ANNOTATIONS])


def _labelled_annotations(report: Report) -> list[str]:
    """An `::error` on the labelled set's line of each wrong case a summary lists."""
    sets = report.labels
    if sets is None:
        return []
    lines = []
    for index in sets.evaluated():
        for case in sets.kept[index][:SHOWN_WRONG]:
            title = _command_property(f"{report.guardrails[index].id}: labelled case {case[0]} wrong")
            lines.append(
                f"::error file={_command_property(case[1])},line={case[2]},title={title}::{_command_data(got(case))}\n"
            )
    return lines
