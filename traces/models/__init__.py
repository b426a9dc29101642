"""Run traces, evaluation runs, their results, violations and the judge cost ledger.

Every model here belongs to one tenant and is read through `TenantScopedQuerySet.for_caller`.
The models live in five modules by concern; `traces.models` names them all, as migrations
and the rest of the console import them from here.
"""

from traces.models.comparisons import ComparisonChange, RunComparison
from traces.models.ledger import JudgeLedgerEntry, LedgerDay
from traces.models.runs import (
    Evaluation,
    EvaluationChunk,
    EvaluationResult,
    GuardrailPreview,
    PendingRuntimeEvaluation,
    WorkerHeartbeat,
)
from traces.models.traces import MODES, PendingSpan, RetentionPolicy, RunTrace, Upload, upload_path
from traces.models.violations import (
    DEFAULT_QUEUE,
    CalibrationItem,
    CalibrationLabel,
    CalibrationSample,
    Violation,
    ViolationDay,
    ViolationReview,
    escalation_queue,
)

__all__ = [
    "DEFAULT_QUEUE",
    "MODES",
    "CalibrationItem",
    "CalibrationLabel",
    "CalibrationSample",
    "ComparisonChange",
    "Evaluation",
    "EvaluationChunk",
    "EvaluationResult",
    "GuardrailPreview",
    "JudgeLedgerEntry",
    "LedgerDay",
    "PendingRuntimeEvaluation",
    "PendingSpan",
    "RetentionPolicy",
    "RunComparison",
    "RunTrace",
    "Upload",
    "Violation",
    "ViolationDay",
    "ViolationReview",
    "WorkerHeartbeat",
    "escalation_queue",
    "upload_path",
]
