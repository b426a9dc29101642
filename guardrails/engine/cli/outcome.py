"""What a CI run concludes beyond its counts: which guardrails block (`--block-on`), whether
any failure blocks or only a new one (`--fail-on`), the first failing traces a summary shows,
and the comparison with a baseline report (`--baseline`): per guardrail, the traces newly
failing and those no longer failing.

A baseline is the JSON report of another run (the base branch's), read once: only its failing
(guardrail, trace) pairs are kept. A trace fails when its result is `fail` or `error`, the
results that block a build.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import orjson

from guardrails.engine.cli.files import BadInput
from guardrails.engine.types import Guardrail

#: One fail or error of a run: the guardrail's index, the trace, where it is (file:line),
#: the status and the reason.
Failing = tuple[int, str, str, str, str | None]
#: The failing traces a summary lists per guardrail (and per list of a comparison).
SHOWN = 10
#: The largest baseline report read (a JSON report of 1,000,000 traces x 7 guardrails is
#: about 1 GB; one of 20,000 traces, 20 MB).
MAX_BASELINE_BYTES = 256 << 20
FAIL_ON = ("any", "new")


@dataclass
class Baseline:
    """The failing traces of each guardrail in a baseline report."""

    source: str
    failing: dict[str, set[str]]


def load_baseline(path: str) -> Baseline:
    """The failing (guardrail, trace) pairs of a JSON report; BadInput naming what is wrong."""
    try:
        size = os.path.getsize(path)
        if size > MAX_BASELINE_BYTES:
            raise BadInput(f"{path}: a baseline report of {size} bytes is over the {MAX_BASELINE_BYTES} allowed")
        with open(path, "rb") as handle:
            doc = orjson.loads(handle.read())
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    results = doc.get("results") if isinstance(doc, Mapping) else None
    if not isinstance(results, list):
        raise BadInput(f"{path}: /results: a baseline is a JSON report (--format json), with its results")
    return Baseline(path, _failing_pairs(path, results))


def _failing_pairs(path: str, results: list[object]) -> dict[str, set[str]]:
    failing: dict[str, set[str]] = {}
    for index, result in enumerate(results):
        if not isinstance(result, Mapping):
            raise BadInput(f"{path}: /results/{index}: must be an object")
        guardrail, trace, status = result.get("guardrail"), result.get("trace"), result.get("status")
        for name, value in (("guardrail", guardrail), ("trace", trace), ("status", status)):
            if not isinstance(value, str):
                raise BadInput(f"{path}: /results/{index}/{name}: must be a string")
        if status in ("fail", "error"):
            failing.setdefault(str(guardrail), set()).add(str(trace))
    return failing


@dataclass
class Tally:
    """One guardrail's failures as a summary shows them, and against the baseline."""

    first: list[Failing] = field(default_factory=list)
    newly: int = 0
    newly_shown: list[Failing] = field(default_factory=list)
    #: Traces failing in the baseline that fail now too.
    still: set[str] = field(default_factory=set)


class Outcome:
    """Blocking, the first failures and the comparison with a baseline, for one run."""

    def __init__(
        self,
        guardrails: Sequence[Guardrail],
        *,
        baseline: Baseline | None = None,
        block_on: Iterable[str] | None = None,
        fail_on: str = "any",
        console: str | None = None,
    ) -> None:
        self.guardrails = guardrails
        self.baseline = baseline
        #: The actions whose guardrails block the build; None: every action (the contract).
        self.block_on = None if block_on is None else frozenset(block_on)
        self.fail_on = fail_on
        self.console = console
        self.tallies = [Tally() for _ in guardrails]
        self._before = [baseline.failing.get(g.id, set()) if baseline else set() for g in guardrails]

    def blocking(self, index: int) -> bool:
        """Whether a failure of this guardrail blocks the build (its action is in --block-on)."""
        return self.block_on is None or self.guardrails[index].on_violation in self.block_on

    def add(self, failing: Iterable[Failing]) -> None:
        compare = self.baseline is not None
        for item in failing:
            index, trace = item[0], item[1]
            tally = self.tallies[index]
            if len(tally.first) < SHOWN:
                tally.first.append(item)
            if not compare:
                continue
            if trace in self._before[index]:
                tally.still.add(trace)
                continue
            tally.newly += 1
            if len(tally.newly_shown) < SHOWN:
                tally.newly_shown.append(item)

    def blocks(self, counts: Sequence[Mapping[str, int]]) -> bool:
        """Whether the run blocks: a blocking guardrail failed (`--fail-on new`: newly)."""
        for index, count in enumerate(counts):
            if not self.blocking(index):
                continue
            failed = self.tallies[index].newly if self.fail_on == "new" else count["fail"] + count["error"]
            if failed:
                return True
        return False

    def no_longer_failing(self, index: int) -> int:
        return len(self._before[index] - self.tallies[index].still)

    def no_longer_shown(self, index: int) -> list[str]:
        return sorted(self._before[index] - self.tallies[index].still)[:SHOWN]

    # --- the comparison in each format ------------------------------------------------

    def comparison_counts(self) -> str:
        """What the text summary line adds with a baseline."""
        if self.baseline is None:
            return ""
        newly = sum(tally.newly for tally in self.tallies)
        fixed = sum(self.no_longer_failing(index) for index in range(len(self.guardrails)))
        return f"; against the baseline: {newly} newly failing, {fixed} no longer failing"

    def comparison_text(self) -> list[str]:
        """The text report's lines before the summary: per guardrail that changed, its counts
        and the first traces of each list."""
        if self.baseline is None:
            return []
        lines = []
        for index, guardrail in enumerate(self.guardrails):
            tally, fixed = self.tallies[index], self.no_longer_failing(index)
            if not tally.newly and not fixed:
                continue
            lines.append(
                f"BASELINE {guardrail.id}: {tally.newly} newly failing, {fixed} no longer failing"
                f" (against {self.baseline.source})\n"
            )
            lines.extend(f"  NEW   {trace} ({where}): {reason}\n" for _i, trace, where, _s, reason in tally.newly_shown)
            lines.extend(f"  FIXED {trace}\n" for trace in self.no_longer_shown(index))
        return lines

    def comparison_json(self) -> dict[str, object]:
        assert self.baseline is not None
        return {
            "report": self.baseline.source,
            "guardrails": [
                {
                    "guardrail": guardrail.id,
                    "newlyFailing": self.tallies[index].newly,
                    "noLongerFailing": self.no_longer_failing(index),
                    "newlyFailingTraces": [trace for _i, trace, *_rest in self.tallies[index].newly_shown],
                    "noLongerFailingTraces": self.no_longer_shown(index),
                }
                for index, guardrail in enumerate(self.guardrails)
            ],
        }
