"""`guardrail_ci --labels FILE...`: the run's guardrails over labelled sets, their regression sets.

Each file is a labelled set as the console exports it (guardrails.engine.labelled: one record a
line, `{"guardrail", "expected", "trace", ...}`), read by the trace files' streaming reader a
record at a time, so that memory stays flat whatever the set's size. Each record's trace is
evaluated with the one guardrail it labels (`Plan.verdict`: a judge is asked about the
labelled guardrail only), in this process after the trace files; a record of a guardrail the
run does not have is counted, not evaluated. A wrong verdict blocks the build, whatever
`--block-on` and `--fail-on` say (they are of the trace files' failures): a change that breaks
labelled cases is what the set is there to stop. A bad record is bad input, named with its
file, line and field.

Every format reports it: per guardrail its labelled cases, how many it gets wrong, precision
and recall with their intervals, and the wrong cases (the first MAX_KEPT of each guardrail;
JUnit has a testcase per labelled case, spooled as the trace files' are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from guardrails.engine.cli.files import BadInput, iter_entries, parse_entry
from guardrails.engine.cli.reports import _attr, _xml
from guardrails.engine.cli.writer import Writer
from guardrails.engine.labelled import Confusion, record_issues
from guardrails.engine.types import Guardrail, Issue

if TYPE_CHECKING:
    from guardrails.engine.cli.batches import Evaluator

#: The wrong cases kept per guardrail, each shown in the text and JSON reports; the others are
#: counted (a set of a million cases that all break is a report of a thousand lines each).
MAX_KEPT = 1000
#: The bytes a record may hold beside its trace (the label, who gave it, when): a record may
#: be this much over the trace limit (KINDGI_MAX_TRACE_BYTES), and one level deeper.
RECORD_OVERHEAD = 64 << 10
#: The ids of guardrails not in the run that the report names (the others are counted).
MAX_NAMED = 10

#: One wrong verdict: the trace, the labelled set's file and line, the label, the status and
#: the reason.
Wrong = tuple[str, str, int, str, str, str | None]


class LabelledSets:
    """The labelled sets of one run: per guardrail its confusion and first wrong cases."""

    def __init__(self, guardrails: Sequence[Guardrail], paths: Sequence[str], fmt: str = "text") -> None:
        self.guardrails = guardrails
        self.paths = list(paths)
        self.confusions = [Confusion() for _ in guardrails]
        self.kept: list[list[Wrong]] = [[] for _ in guardrails]
        #: Cases of guardrails the run does not have: how many, and the first ids.
        self.not_in_run = 0
        self.not_in_run_ids: list[str] = []
        self._index = {guardrail.id: index for index, guardrail in enumerate(guardrails)}
        self._spools: list[IO[str]] = []
        if fmt == "junit":
            import tempfile  # (as the report's: only JUnit spools)

            self._spools = [
                tempfile.SpooledTemporaryFile(64 * 1024, mode="w+", encoding="utf-8")  # noqa: SIM115 (closed by close())
                for _ in guardrails
            ]

    # --- evaluating ----------------------------------------------------------------------

    def evaluate(self, path: str, evaluator: Evaluator) -> list[str]:
        """Every record of one file evaluated and counted; the bad input, each message naming
        the file, the line and the field. BadInput when the file cannot be read further."""
        bad: list[str] = []
        max_depth = evaluator.max_depth + 1  # the trace is a field of the record
        for line, raw, refused in iter_entries(path, evaluator.max_bytes + RECORD_OVERHEAD, max_depth):
            record = refused if raw is None else parse_entry(raw, max_depth)
            issues = [record] if isinstance(record, Issue) else record_issues(record, evaluator.max_depth)
            if issues:
                bad.extend(where(path, line, issue) for issue in issues if isinstance(issue, Issue))
                continue
            assert isinstance(record, Mapping)
            self._evaluate_record(record, path, line, evaluator)
        return bad

    def _evaluate_record(self, record: Mapping[str, Any], path: str, line: int, evaluator: Evaluator) -> None:
        index = self._index.get(record["guardrail"])
        if index is None:
            self.not_in_run += 1
            if len(self.not_in_run_ids) < MAX_NAMED and record["guardrail"] not in self.not_in_run_ids:
                self.not_in_run_ids.append(record["guardrail"])
            return
        trace = record["trace"]
        plan = evaluator.plan(trace.get("tenant"), trace.get("agent"), trace.get("flow"))
        status, reason, _details = plan.verdict(index, trace)
        self.add(index, (str(trace["id"]), path, line, record["expected"], status, reason))

    def add(self, index: int, case: Wrong) -> None:
        """Count one labelled case's verdict (and keep it when it is wrong and there is room)."""
        wrong = self.confusions[index].add(case[3], case[4])
        if wrong and len(self.kept[index]) < MAX_KEPT:
            self.kept[index].append(case)
        if self._spools:
            self._spools[index].write(_junit_case(self.guardrails[index], case, wrong))

    # --- what the run concludes ----------------------------------------------------------

    @property
    def labelled(self) -> int:
        return sum(confusion.labelled for confusion in self.confusions)

    @property
    def wrong(self) -> int:
        return sum(confusion.wrong for confusion in self.confusions)

    @property
    def blocks(self) -> bool:
        return self.wrong > 0

    def evaluated(self) -> list[int]:
        """The indexes of the guardrails the sets label."""
        return [index for index, confusion in enumerate(self.confusions) if confusion.labelled]

    def more(self, index: int) -> int:
        """The wrong cases of a guardrail beyond those kept."""
        return self.confusions[index].wrong - len(self.kept[index])

    # --- in each format ------------------------------------------------------------------

    def summary_counts(self) -> str:
        """What the summary line adds: the cases and the wrong ones."""
        return f"; labelled set: {self.labelled} cases, {self.wrong} wrong"

    def text(self) -> list[str]:
        """The text report's lines before the summary: per guardrail labelled, its figures and
        its wrong cases; then the cases of guardrails not in the run."""
        lines = []
        sources = ", ".join(self.paths)
        for index in self.evaluated():
            confusion = self.confusions[index]
            lines.append(
                f"LABELS {self.guardrails[index].id}: {confusion.labelled} cases, {confusion.wrong} wrong; "
                f"precision {figure(confusion.precision())}, recall {figure(confusion.recall())} (in {sources})\n"
            )
            lines.extend(f"  WRONG {_wrong_text(case)}\n" for case in self.kept[index])
            if self.more(index):
                lines.append(f"  ... and {self.more(index)} more wrong\n")
        if self.not_in_run:
            lines.append(
                f"LABELS {self.not_in_run} cases of guardrails not in this run, not evaluated: {self.named()}\n"
            )
        return lines

    def named(self) -> str:
        more = ", ..." if self.not_in_run > len(self.not_in_run_ids) else ""
        return ", ".join(self.not_in_run_ids) + more

    def as_json(self) -> dict[str, object]:
        return {
            "files": self.paths,
            "cases": self.labelled,
            "wrong": self.wrong,
            "notInRun": {"cases": self.not_in_run, "guardrails": self.not_in_run_ids},
            "guardrails": [
                {
                    "guardrail": self.guardrails[index].id,
                    **self.confusions[index].as_dict(),
                    "wrongCases": [_wrong_json(case) for case in self.kept[index]],
                    "moreWrong": self.more(index),
                }
                for index in self.evaluated()
            ],
        }

    def write_junit(self, out: Writer) -> None:
        """A testsuite per guardrail labelled (`labels: <id>`), a testcase per labelled case,
        precision and recall as properties."""
        for index in self.evaluated():
            confusion, spool = self.confusions[index], self._spools[index]
            name = _attr(f"labels: {self.guardrails[index].id}")
            out.write(
                f'  <testsuite name={name} tests="{confusion.labelled}" failures="{confusion.wrong}" '
                'errors="0" skipped="0">\n'
                "    <properties>\n"
                f'      <property name="precision" value={_attr(figure(confusion.precision()))}/>\n'
                f'      <property name="recall" value={_attr(figure(confusion.recall()))}/>\n'
                "    </properties>\n"
            )
            spool.seek(0)
            while chunk := spool.read(1 << 16):
                out.write(chunk)
            out.write("  </testsuite>\n")

    def close(self) -> None:
        for spool in self._spools:
            spool.close()


def where(path: str, line: int, issue: Issue) -> str:
    """A bad record's message: `file:line: /field: message`."""
    field_path = f" {issue.path}:" if issue.path else ""
    return f"{path}:{line}:{field_path} {issue.message}"


def figure(estimate: Mapping[str, object]) -> str:
    """`0.83 [0.44, 0.97]`, or `-` without a case to measure."""
    value, interval = estimate["value"], estimate["interval"]
    if not isinstance(value, float | int):
        return "-"
    assert isinstance(interval, list)
    return f"{value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def got(case: Wrong) -> str:
    """`expected fail, got pass` (and the reason of a fail or an error)."""
    _trace, _path, _line, expected, status, reason = case
    return f"expected {expected}, got {status}" + (f": {reason}" if reason and status in ("fail", "error") else "")


def _wrong_text(case: Wrong) -> str:
    trace, path, line = case[0], case[1], case[2]
    return f"{trace} ({path}:{line}): {got(case)}"


def _wrong_json(case: Wrong) -> dict[str, object]:
    trace, path, line, expected, status, reason = case
    return {"trace": trace, "file": path, "line": line, "expected": expected, "status": status, "reason": reason}


def _junit_case(guardrail: Guardrail, case: Wrong, wrong: bool) -> str:
    head = f"    <testcase classname={_attr('labels: ' + guardrail.id)} name={_attr(case[0])}"
    if not wrong:
        return head + "/>\n"
    body = f"{got(case)}\nlabelled case: {case[1]}:{case[2]}"
    failure = f'<failure message={_attr(got(case))} type="labelled-case-wrong">{_xml(body)}</failure>'
    return f"{head}>\n      {failure}\n    </testcase>\n"


def evaluate_all(paths: Sequence[str], sets: LabelledSets, evaluator: Evaluator) -> list[str]:
    """Every labelled set into `sets`, in order; the bad input (an unreadable file among it)."""
    bad: list[str] = []
    for path in paths:
        try:
            bad.extend(sets.evaluate(path, evaluator))
        except BadInput as exc:
            bad.append(str(exc))
    return bad
