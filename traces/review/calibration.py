"""Calibrating a guardrail against people: a stratified sample, labels, and agreement.

A reviewer asks for N traces drawn at random from the guardrail's recent pass and fail
results of its current revision (half each, as far as there are), for any guardrail (an
llm-judge, a zero-llm check), labels each pass or fail without seeing the guardrail's
verdict, and then reads the agreement: accuracy, Cohen's kappa, the false-positive rate (it
failed what people passed) and false-negative rate (it passed what people failed), each
rate with its 95% Wilson interval, and the disagreeing traces (and, when several
reviewers label it, their agreement with each other: Cohen's kappa between people and the
traces they disagree on); and how good the guardrail is: precision (of what it fails, the
share people fail too) and recall (of what people fail, the share it fails). Cohen's kappa
for two raters and two labels is the textbook formula (Cohen 1960): (observed - expected agreement) / (1 - expected).

The sample over-draws fails (half of it, where a guardrail fails a few traces in a hundred),
so recall is not the sample's own proportion: it is estimated per stratum, as for a
stratified sample (Cochran 1977, ch. 5), precision p from the labelled fails and the miss
rate q from the labelled passes, and the strata weighed by how many fails F and passes P
there were to draw from: recall = F·p / (F·p + P·q). Its interval puts each stratum's Wilson
bounds where they move recall most (the low end: p low, q high), which is conservative.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, F, QuerySet
from django.utils import timezone

from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.statistics import wilson
from guardrails.engine.types import Issue
from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.tenancy.models import Tenant
from traces.models import CalibrationItem, CalibrationLabel, CalibrationSample, EvaluationResult
from traces.runs.evaluations import RunRequestError

MAX_SIZE = 200
RECENT_DAYS = 30


def create_sample(tenant: Tenant, guardrail: Guardrail, size: object, label: str) -> CalibrationSample:
    """Draw a sample of `size` traces (RunRequestError naming the field when it cannot be)."""
    if not isinstance(size, int) or isinstance(size, bool) or not 2 <= size <= MAX_SIZE:
        raise RunRequestError([Issue("/size", f"size is an integer from 2 to {MAX_SIZE}")])
    revision = GuardrailRevision.objects.get(guardrail=guardrail, number=F("guardrail__revision"))
    recent = EvaluationResult.objects.filter(
        tenant=tenant, revision=revision, created_at__gte=timezone.now() - timedelta(days=RECENT_DAYS)
    )
    fails_total, passes_total = recent.filter(status="fail").count(), recent.filter(status="pass").count()
    fails = list(recent.filter(status="fail").order_by("?")[: size // 2])
    passes = list(recent.filter(status="pass").order_by("?")[: size - len(fails)])
    drawn = _unique_traces(fails + passes)
    if not drawn:
        raise RunRequestError(
            [
                Issue(
                    "/size",
                    "the guardrail has no pass or fail result of its current "
                    f"revision in the last {RECENT_DAYS} days to draw from",
                )
            ]
        )
    models = Counter(str(r.details.get("model") or "") for r in drawn if r.details.get("model"))
    with transaction.atomic():
        sample = CalibrationSample.objects.create(
            tenant=tenant,
            guardrail=guardrail,
            revision=revision,
            size=len(drawn),
            fails_total=fails_total,
            passes_total=passes_total,
            created_by_label=label,
            judge_model=models.most_common(1)[0][0] if models and guardrail.kind == JUDGE_KIND else "",
        )
        CalibrationItem.objects.bulk_create(
            [
                CalibrationItem(
                    tenant=tenant, sample=sample, trace_id=r.trace_id, judge_status=r.status, judge_reason=r.reason
                )
                for r in drawn
            ]
        )
    return sample


def _unique_traces(results: list[EvaluationResult]) -> list[EvaluationResult]:
    seen: set[int] = set()
    kept = []
    for result in results:
        if result.trace_id not in seen:
            seen.add(result.trace_id)
            kept.append(result)
    return kept


def label_item(item: CalibrationItem, label: object, who: str) -> None:
    """`who`'s label of the item, given once per person (again: it replaces theirs). The
    item's own label is its first labeller's, the people's verdict the guardrail is measured
    against; the others' measure agreement between people."""
    if label not in ("pass", "fail"):
        raise RunRequestError([Issue("/label", "label is pass or fail")])
    now = timezone.now()
    with transaction.atomic():
        CalibrationLabel.objects.update_or_create(
            item=item, labeller=who, defaults={"tenant_id": item.tenant_id, "label": str(label), "labelled_at": now}
        )
        if not item.label or item.labelled_by_label == who:
            item.label, item.labelled_by_label, item.labelled_at = str(label), who, now
            item.save(update_fields=["label", "labelled_by_label", "labelled_at"])


def left_for(sample: CalibrationSample, who: str) -> QuerySet[CalibrationItem]:
    """The sample's items `who` has not labelled, in the queue's order."""
    return sample.items.exclude(labels__labeller=who).order_by("pk")


def people_agreement(sample: CalibrationSample) -> dict[str, Any]:
    """Agreement between the people who labelled the sample: Cohen's kappa over the items
    two of them labelled (the first two labels of each), and the items they disagree on."""
    labels: dict[int, list[CalibrationLabel]] = {}
    for one in CalibrationLabel.objects.filter(item__sample=sample).select_related("item__trace").order_by("pk"):
        labels.setdefault(one.item_id, []).append(one)
    pairs = [(given[0].label, given[1].label) for given in labels.values() if len(given) > 1]
    agreed = sum(a == b for a, b in pairs)
    interval = wilson(agreed, len(pairs))
    kappa = cohen_kappa(pairs)
    return {
        "reviewers": sorted({one.labeller for given in labels.values() for one in given}),
        "compared": len(pairs),
        "agreed": agreed,
        "agreement": None if not pairs else round(agreed / len(pairs), 4),
        "agreementInterval": None if interval is None else [round(interval[0], 4), round(interval[1], 4)],
        "kappa": None if kappa is None else round(kappa, 4),
        "disagreements": [
            {
                "trace": given[0].item.trace.trace_id,
                "traceUrl": f"/traces/{given[0].item.trace_id}/",
                "labels": {one.labeller: one.label for one in given},
                # What the guardrail said, beside the people who disagree on it.
                "judge": given[0].item.judge_status,
                "judgeReason": given[0].item.judge_reason,
            }
            for given in labels.values()
            if len({one.label for one in given}) > 1
        ],
    }


@dataclass(frozen=True)
class Agreement:
    """The judge against people over the labelled items of a sample."""

    labelled: int
    agreed: int
    kappa: float | None
    false_positives: int
    people_passed: int
    false_negatives: int
    people_failed: int
    disagreements: list[dict[str, Any]]
    #: (fails drawn from, passes drawn from): the strata's weights for recall.
    strata: tuple[int, int] = (0, 0)

    @property
    def accuracy(self) -> float | None:
        return None if not self.labelled else self.agreed / self.labelled

    def as_dict(self) -> dict[str, Any]:
        def rate(count: int, of: int) -> dict[str, Any]:
            interval = wilson(count, of)
            return {
                "rate": None if not of else round(count / of, 4),
                "of": of,
                "interval": None if interval is None else [round(interval[0], 4), round(interval[1], 4)],
            }

        accuracy = wilson(self.agreed, self.labelled)
        return {
            "labelled": self.labelled,
            "agreed": self.agreed,
            "accuracy": None if self.accuracy is None else round(self.accuracy, 4),
            "accuracyInterval": None if accuracy is None else [round(accuracy[0], 4), round(accuracy[1], 4)],
            "kappa": None if self.kappa is None else round(self.kappa, 4),
            "falsePositiveRate": rate(self.false_positives, self.people_passed),
            "falseNegativeRate": rate(self.false_negatives, self.people_failed),
            "precision": _estimate(self.precision()),
            "recall": _estimate(self.recall()),
            "disagreements": self.disagreements,
        }

    @property
    def guardrail_fails(self) -> int:
        """Labelled items the guardrail failed: true positives and false positives."""
        return self.people_failed - self.false_negatives + self.false_positives

    @property
    def guardrail_passes(self) -> int:
        return self.labelled - self.guardrail_fails

    def precision(self) -> tuple[float, tuple[float, float] | None] | None:
        """Of the labelled fails, the share people failed too, with its Wilson interval."""
        true_positives = self.guardrail_fails - self.false_positives
        if not self.guardrail_fails:
            return None
        return true_positives / self.guardrail_fails, wilson(true_positives, self.guardrail_fails)

    def recall(self) -> tuple[float, tuple[float, float] | None] | None:
        """Of what people fail, the share the guardrail fails, the strata weighed by their
        sizes (see the module's docstring); None without labelled items in both strata."""
        precision = self.precision()
        if precision is None or not self.guardrail_passes:
            return None
        missed = (self.false_negatives / self.guardrail_passes, wilson(self.false_negatives, self.guardrail_passes))
        fails, passes = self.strata if all(self.strata) else (self.guardrail_fails, self.guardrail_passes)
        value = _recall(fails * precision[0], passes * missed[0])
        if value is None:
            return None
        assert precision[1] is not None and missed[1] is not None
        low = _recall(fails * precision[1][0], passes * missed[1][1])
        high = _recall(fails * precision[1][1], passes * missed[1][0])
        return value, None if low is None or high is None else (low, high)


def _recall(found: float, missed: float) -> float | None:
    return None if found + missed <= 0 else found / (found + missed)


def _estimate(figure: tuple[float, tuple[float, float] | None] | None) -> dict[str, Any]:
    if figure is None:
        return {"value": None, "interval": None}
    value, interval = figure
    return {
        "value": round(value, 4),
        "interval": None if interval is None else [round(interval[0], 4), round(interval[1], 4)],
    }


def cohen_kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa of (judge, person) labels; None when undefined (no pairs, or both
    raters gave one label only, so that chance agreement is certain)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    judge, people = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(judge[label] * people[label] for label in ("pass", "fail")) / (n * n)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


def agreement(sample: CalibrationSample) -> Agreement:
    items = list(sample.items.exclude(label="").select_related("trace").order_by("pk"))
    pairs = [(item.judge_status, item.label) for item in items]
    return Agreement(
        labelled=len(items),
        agreed=sum(a == b for a, b in pairs),
        kappa=cohen_kappa(pairs),
        false_positives=sum(a == "fail" and b == "pass" for a, b in pairs),
        people_passed=sum(b == "pass" for _, b in pairs),
        false_negatives=sum(a == "pass" and b == "fail" for a, b in pairs),
        people_failed=sum(b == "fail" for _, b in pairs),
        disagreements=[
            {
                "trace": i.trace.trace_id,
                "traceUrl": f"/traces/{i.trace_id}/",
                "judge": i.judge_status,
                "people": i.label,
                "judgeReason": i.judge_reason,
            }
            for i in items
            if i.judge_status != i.label
        ],
        strata=(sample.fails_total, sample.passes_total),
    )


def newest_agreements(samples: QuerySet[CalibrationSample]) -> dict[int, Agreement]:
    """Per guardrail (its key), the figures of its newest sample among `samples`, from the
    labelled items counted in one query (no disagreements, no kappa): what a list sorts by."""
    newest: dict[int, CalibrationSample] = {}
    for sample in samples.order_by("-pk").only("pk", "guardrail_id", "fails_total", "passes_total"):
        newest.setdefault(sample.guardrail_id, sample)
    counted: dict[int, Counter[tuple[str, str]]] = {pk: Counter() for pk in (s.pk for s in newest.values())}
    rows = (
        CalibrationItem.objects.filter(sample__in=[s.pk for s in newest.values()])
        .exclude(label="")
        .values_list("sample_id", "judge_status", "label")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for sample_id, verdict, label, n in rows:
        counted[sample_id][(verdict, label)] += n
    return {guardrail: _agreement_of(counted[s.pk], s) for guardrail, s in newest.items()}


def _agreement_of(pairs: Counter[tuple[str, str]], sample: CalibrationSample) -> Agreement:
    return Agreement(
        labelled=sum(pairs.values()),
        agreed=pairs[("pass", "pass")] + pairs[("fail", "fail")],
        kappa=None,
        false_positives=pairs[("fail", "pass")],
        people_passed=pairs[("fail", "pass")] + pairs[("pass", "pass")],
        false_negatives=pairs[("pass", "fail")],
        people_failed=pairs[("pass", "fail")] + pairs[("fail", "fail")],
        disagreements=[],
        strata=(sample.fails_total, sample.passes_total),
    )


def sample_as_dict(sample: CalibrationSample) -> dict[str, Any]:
    current = sample.guardrail.revision
    return {
        "id": sample.pk,
        "guardrail": sample.guardrail.guardrail_id,
        "revision": sample.revision.number,
        "judgeModel": sample.judge_model,
        "kind": sample.guardrail.kind,
        "size": sample.size,
        "drawnFrom": {"fails": sample.fails_total, "passes": sample.passes_total},
        "createdAt": sample.created_at.isoformat(),
        "currentRevision": current,
        "stale": current != sample.revision.number,
        "agreement": agreement(sample).as_dict(),
        "people": people_agreement(sample),
    }
