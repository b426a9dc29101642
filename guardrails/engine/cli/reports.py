"""The CI reports, written as results come, in bounded memory.

Evaluating a batch of traces renders its part of the report at once (`render_batch`, in a
worker process under `--jobs`), so that a result is never kept as an object: the JSON report
is written straight to its output, results first and the summary last; the text report
writes each fail or error as it comes; the JUnit report keeps each guardrail's test cases in
a temporary file (in memory until it grows) until the run is done, since a test suite's
counts come before its cases.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import IO, TYPE_CHECKING

import orjson

from guardrails.engine.cli.outcome import Failing, Outcome
from guardrails.engine.cli.writer import Writer
from guardrails.engine.evaluate import Verdict
from guardrails.engine.types import Guardrail

if TYPE_CHECKING:  # the labelled sets' module is imported by a run with --labels only
    from guardrails.engine.cli.labels import LabelledSets

STATUSES = ("pass", "fail", "error", "skipped")
#: The rows of the JSON report a renderer keeps, each a trace's results but for its id and
#: line: at most this many, holding at most _MAX_ROW_CHARS characters in all (a check may
#: fail every trace with a long reason of its own).
_MAX_ROWS = 1024
_MAX_ROW_CHARS = 2 * 1024 * 1024
#: Where a row's trace and line go: characters a JSON text written by orjson never holds
#: unescaped (it writes a control character as \\u0001).
_TRACE, _LINE = "\x01", "\x02"
#: The most bad-input messages a report keeps (and shows); the rest are counted.
MAX_BAD_INPUT = 1000


@dataclass
class Batch:
    """A batch of traces evaluated and rendered: what a worker process sends back."""

    traces: int = 0
    #: Per guardrail, the count of each status.
    counts: list[dict[str, int]] = field(default_factory=list)
    bad_input: list[str] = field(default_factory=list)
    #: text: the fail and error lines; json: the result objects, comma-separated.
    text: str = ""
    #: junit: per guardrail, its test cases.
    suites: list[str] = field(default_factory=list)
    #: Each fail and error, when the run summarises or compares them (Renderer's `collect`).
    failing: list[Failing] = field(default_factory=list)


def new_counts(guardrails: Sequence[Guardrail]) -> list[dict[str, int]]:
    return [dict.fromkeys(STATUSES, 0) for _ in guardrails]


# --- rendering a batch -------------------------------------------------------------------

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(text: str) -> str:
    # html.escape's replacements, written here: the html module loads its table of 2,000
    # named entities (and xml.sax.saxutils urllib and http.client), memory a run never uses.
    text = _XML_INVALID.sub("\ufffd", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;").replace("'", "&#x27;")


def _attr(text: str) -> str:
    return f'"{_xml(text)}"'


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


#: A verdict's status and reason: all that its JSON result shows of it.
_status_and_reason = itemgetter(0, 1)


@dataclass(slots=True)
class _Row:
    """A trace's JSON results with the marks _LINE, split at the marks _TRACE (the trace's
    id joins them: one pass, where a replace takes two), and its use in this batch."""

    pieces: list[str]
    size: int
    statuses: list[str]
    uses: int = 0


class Renderer:
    """Renders the verdicts of each trace in one format, into a Batch.

    What does not change from one result to the next (a guardrail's id, action and
    severity, a file's name) is rendered once, here. A renderer serves every batch of one
    file: `take` hands over what it rendered and starts the next batch.
    """

    def __init__(self, guardrails: Sequence[Guardrail], fmt: str, path: str, collect: bool = False) -> None:
        self.fmt = fmt
        self.path = path
        #: Keep each fail and error in the batch too (a markdown summary, annotations, a baseline).
        self.collect = collect
        self.batch = Batch(counts=new_counts(guardrails))
        self._parts: list[str] = []
        self._cases: list[list[str]] = [[] for _ in guardrails]
        self._guardrails = guardrails
        file = _json(path)
        self._json_head = [f'{{"guardrail":{_json(g.id)},"trace":{_TRACE}' for g in guardrails]
        self._json_tail = [
            f',"action":{_json(g.on_violation)},"severity":{_json(g.severity)},"file":{file},"line":{_LINE}}}'
            for g in guardrails
        ]
        self._json_rows: dict[tuple[tuple[str, str | None], ...], _Row] = {}
        self._json_row_chars = 0
        self._json_used: list[_Row] = []
        self._case_head = [f"    <testcase classname={_attr(g.id)} name=" for g in guardrails]
        self._text_tail = [f" [on-violation {g.on_violation}, severity {g.severity or '-'}]\n" for g in guardrails]

    def add(self, trace_id: str, line: int, verdicts: list[Verdict]) -> None:
        """Count and render one trace's verdicts (one per guardrail, in order)."""
        self.batch.traces += 1
        if self.collect:
            self._collect(trace_id, line, verdicts)
        if self.fmt == "json":
            self._add_json(trace_id, line, verdicts)
        elif self.fmt == "junit":
            self._add_junit(trace_id, line, verdicts)
        elif self.fmt == "markdown":
            self._count(verdicts)  # (the summary shows what `collect` kept)
        else:
            self._add_text(trace_id, line, verdicts)

    def _count(self, verdicts: list[Verdict]) -> None:
        counts = self.batch.counts
        for index, (status, _reason, _details) in enumerate(verdicts):
            counts[index][status] += 1

    def _collect(self, trace_id: str, line: int, verdicts: list[Verdict]) -> None:
        where = f"{self.path}:{line}"
        for index, (status, reason, _details) in enumerate(verdicts):
            if status == "fail" or status == "error":
                self.batch.failing.append((index, trace_id, where, status, reason))

    def _add_text(self, trace_id: str, line: int, verdicts: list[Verdict]) -> None:
        counts = self.batch.counts
        for index, (status, reason, _details) in enumerate(verdicts):
            counts[index][status] += 1
            if status == "fail" or status == "error":
                guardrail_id = self._guardrails[index].id
                self._parts.append(
                    f"{status.upper():5} {guardrail_id} on {trace_id} ({self.path}:{line}): {reason}"
                    + self._text_tail[index]
                )

    def _add_json(self, trace_id: str, line: int, verdicts: list[Verdict]) -> None:
        # A trace's results differ from another's with the same statuses and reasons only
        # by the trace and the line: most traces share a row, rendered once and counted.
        key = tuple(map(_status_and_reason, verdicts))
        row = self._json_rows.get(key)
        if row is None:
            row = self._json_row(key)
        if not row.uses:
            self._json_used.append(row)
        row.uses += 1
        self._parts.append(_json(trace_id).join(row.pieces).replace(_LINE, str(line)))

    def _json_row(self, key: tuple[tuple[str, str | None], ...]) -> _Row:
        results = []
        for index, (status, reason) in enumerate(key):
            shown = "null" if reason is None else _json(reason)
            results.append(f'{self._json_head[index]},"status":"{status}","reason":{shown}{self._json_tail[index]}')
        text = ",".join(results)
        row = _Row(text.split(_TRACE), len(text), [status for status, _reason in key])
        if len(self._json_rows) >= _MAX_ROWS or self._json_row_chars + row.size > _MAX_ROW_CHARS:
            self._json_rows.clear()  # each fail's reason may be its own: bounded
            self._json_row_chars = 0
        self._json_rows[key] = row
        self._json_row_chars += row.size
        return row

    def _add_junit(self, trace_id: str, line: int, verdicts: list[Verdict]) -> None:
        name, counts = _attr(trace_id), self.batch.counts
        for index, (status, reason, _details) in enumerate(verdicts):
            counts[index][status] += 1
            case = self._case_head[index] + name
            if status == "pass":
                self._cases[index].append(case + "/>\n")
                continue
            outcome = _junit_outcome(self._guardrails[index], status, reason, f"{self.path}:{line}")
            self._cases[index].append(f"{case}>\n{outcome}    </testcase>\n")

    def take(self) -> Batch:
        """The batch rendered so far; the renderer starts a new one."""
        batch = self.batch
        for row in self._json_used:
            for counts, status in zip(batch.counts, row.statuses, strict=True):
                counts[status] += row.uses
            row.uses = 0
        self._json_used = []
        batch.text = ("," if self.fmt == "json" else "").join(self._parts)
        batch.suites = ["".join(cases) for cases in self._cases] if self.fmt == "junit" else []
        self.batch = Batch(counts=new_counts(self._guardrails))
        self._parts = []
        self._cases = [[] for _ in self._guardrails]
        return batch


def _junit_outcome(guardrail: Guardrail, status: str, reason: str | None, where: str) -> str:
    if status == "skipped":
        return '      <skipped message="the guardrail\'s scope does not select this trace"/>\n'
    tag = "failure" if status == "fail" else "error"
    kind = "guardrail-violation" if status == "fail" else "guardrail-error"
    body = f"{reason}\ntrace: {where}\non-violation: {guardrail.on_violation}\nseverity: {guardrail.severity or '-'}"
    return f'      <{tag} message={_attr(reason or "")} type="{kind}">{_xml(body)}</{tag}>\n'


# --- writing the report ------------------------------------------------------------------


class Report:
    """A CI run's report, written to `out` batch by batch: counts, bad input, the verdict."""

    def __init__(self, guardrails: Sequence[Guardrail], fmt: str, out: Writer, outcome: Outcome | None = None) -> None:
        self.guardrails = guardrails
        self.fmt = fmt
        self.out = out
        #: What blocks, the first failing traces and the comparison with a baseline.
        self.outcome = outcome or Outcome(guardrails)
        #: The labelled sets of `--labels` and the guardrails' verdicts on them.
        self.labels: LabelledSets | None = None
        self.counts = new_counts(guardrails)
        self.bad_input: list[str] = []
        self.more_bad_input = 0
        self.traces = 0
        self.seconds = 0.0
        self._written = 0
        self._spools: list[IO[str]] = []
        if fmt == "junit":
            import tempfile  # with shutil, bz2 and lzma: only JUnit reports spool

            size = max(16 * 1024, (1 << 20) // max(1, len(guardrails)))
            # Open for the whole run, closed by close(): not a with block.
            self._spools = [
                tempfile.SpooledTemporaryFile(size, mode="w+", encoding="utf-8")  # noqa: SIM115
                for _ in guardrails
            ]

    @property
    def totals(self) -> dict[str, int]:
        return {status: sum(counts[status] for counts in self.counts) for status in STATUSES}

    @property
    def blocks(self) -> bool:
        return self.outcome.blocks(self.counts) or (self.labels is not None and self.labels.blocks)

    def add_bad_input(self, messages: list[str]) -> None:
        """Keep the first MAX_BAD_INPUT messages; count the others."""
        room = max(0, MAX_BAD_INPUT - len(self.bad_input))
        self.bad_input.extend(messages[:room])
        self.more_bad_input += len(messages[room:])

    def add(self, batch: Batch) -> None:
        self.traces += batch.traces
        self.add_bad_input(batch.bad_input)
        if batch.failing:
            self.outcome.add(batch.failing)
        for mine, theirs in zip(self.counts, batch.counts, strict=True):
            for status, count in theirs.items():
                mine[status] += count
        if self.fmt == "junit":
            for spool, cases in zip(self._spools, batch.suites, strict=True):
                spool.write(cases)
        elif self.fmt == "json":
            self._write_json_results(batch.text)
        else:
            self.out.write(batch.text)

    def _write_json_results(self, text: str) -> None:
        if not self._written:
            self.out.write('{"results":[')
        if text:
            if self._written > 1:
                self.out.write(",")  # (not joined to a batch's megabyte of text: a copy)
            self.out.write(text)
            self._written = 2
        else:
            self._written = max(self._written, 1)

    def finish(self) -> None:
        """Write what comes after the results: the summary (and, for JUnit, everything)."""
        if self.more_bad_input:
            self.bad_input.append(f"... and {self.more_bad_input} more traces of bad input, not shown")
            self.more_bad_input = 0
        if self.fmt == "json":
            self._write_json_results("")
            passed = not self.blocks and not self.bad_input
            errors = [{"message": message} for message in self.bad_input]
            tail: dict[str, object] = {"errors": errors, "summary": self.totals, "passed": passed}
            if self.outcome.baseline is not None:
                tail["baseline"] = self.outcome.comparison_json()
            if self.labels is not None:
                tail["labels"] = self.labels.as_json()
            self.out.write("]," + _json(tail)[1:] + "\n")
        elif self.fmt == "junit":
            self._write_junit()
        elif self.fmt == "markdown":
            self.out.write(self.markdown())
        else:
            labels = self.labels.text() if self.labels is not None else []
            self.out.write("".join(self.outcome.comparison_text() + labels) + self.summary_line() + "\n")

    @property
    def verdict(self) -> str:
        """BAD INPUT (exit 2), BLOCKED (exit 1) or PASSED (exit 0)."""
        if self.bad_input or self.more_bad_input:
            return "BAD INPUT"
        return "BLOCKED" if self.blocks else "PASSED"

    def summary_line(self) -> str:
        c = self.totals
        return (
            f"{self.verdict}: {len(self.guardrails)} guardrails x {self.traces} traces: "
            f"{c['pass']} pass, {c['fail']} fail, {c['error']} error, {c['skipped']} skipped"
            f"{self.outcome.comparison_counts()}{self.labels.summary_counts() if self.labels is not None else ''}"
            f" ({self.seconds:.2f}s)"
        )

    def markdown(self) -> str:
        """The summary a pull request or a job summary shows (guardrails.engine.cli.summary)."""
        from guardrails.engine.cli.summary import markdown

        return markdown(self)

    def _write_junit(self) -> None:
        """JUnit XML: a testsuite per guardrail, a testcase per guardrail and trace."""
        c, bad = self.totals, len(self.bad_input)
        cases, wrong = (self.labels.labelled, self.labels.wrong) if self.labels is not None else (0, 0)
        self.out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        self.out.write(
            f'<testsuites name="guardrail_ci" tests="{sum(c.values()) + bad + cases}" '
            f'failures="{c["fail"] + wrong}" errors="{c["error"] + bad}" '
            f'skipped="{c["skipped"]}" time="{self.seconds:.3f}">\n'
        )
        for index, (guardrail, counts, spool) in enumerate(
            zip(self.guardrails, self.counts, self._spools, strict=True)
        ):
            self.out.write(
                f'  <testsuite name={_attr(guardrail.id)} tests="{sum(counts.values())}" '
                f'failures="{counts["fail"]}" errors="{counts["error"]}" skipped="{counts["skipped"]}">\n'
            )
            self.out.write(self._junit_properties(index))
            spool.seek(0)
            while chunk := spool.read(1 << 16):
                self.out.write(chunk)
            spool.close()
            self.out.write("  </testsuite>\n")
        if self.labels is not None:
            self.labels.write_junit(self.out)
        if self.bad_input:
            self.out.write("".join(_junit_bad_input(self.bad_input)))
        self.out.write("</testsuites>\n")

    def _junit_properties(self, index: int) -> str:
        """A testsuite's comparison with the baseline, as JUnit properties (none without one)."""
        if self.outcome.baseline is None:
            return ""
        tally = self.outcome.tallies[index]
        return (
            "    <properties>\n"
            f'      <property name="newly-failing" value="{tally.newly}"/>\n'
            f'      <property name="no-longer-failing" value="{self.outcome.no_longer_failing(index)}"/>\n'
            "    </properties>\n"
        )

    def close(self) -> None:
        for spool in self._spools:
            spool.close()
        if self.labels is not None:
            self.labels.close()


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
