"""What the guardrail pages compute: import of uploaded files, export, revision diffs, pass rates.

Kept apart from the views so that the views stay thin and these read as plain functions.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from guardrails.services import Author, register_document, save_guardrail

#: Largest guardrail file the import page reads (a guardrail is a few kilobytes).
MAX_IMPORT_FILE_BYTES = 1024 * 1024
#: At most this many files in one import.
MAX_IMPORT_FILES = 50


def pretty_json(document: object) -> str:
    """The wire document as people read it and as export writes it: 2-space indent, keys as authored."""
    return json.dumps(document, indent=2, ensure_ascii=False)


# ---------------------------------------------------------------------------- import


@dataclass
class ImportedGuardrail:
    """One guardrail of an uploaded file: where it was, and what became of it."""

    index: int | None
    guardrail_id: str | None
    status: str  # "created", "updated", "unchanged" or "invalid"
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)

    @property
    def location(self) -> str:
        return "" if self.index is None else f"[{self.index}]"


@dataclass
class ImportedFile:
    """An uploaded file: its guardrails, or the error that made it unreadable."""

    name: str
    guardrails: list[ImportedGuardrail] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and all(g.status != "invalid" for g in self.guardrails)


def import_files(files: list[Any], author: Author) -> list[ImportedFile]:
    """Validate each uploaded file's guardrails as the API does and save the valid ones."""
    return [_import_file(upload, author) for upload in files[:MAX_IMPORT_FILES]]


def _import_file(upload: Any, author: Author) -> ImportedFile:
    report = ImportedFile(name=str(upload.name))
    if upload.size > MAX_IMPORT_FILE_BYTES:
        report.error = f"the file is over the limit of {MAX_IMPORT_FILE_BYTES} bytes"
        return report
    try:
        data = json.loads(upload.read().decode("utf-8"))
    except UnicodeDecodeError:
        report.error = "the file is not UTF-8 text"
        return report
    except json.JSONDecodeError as error:
        report.error = f"not JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        return report
    if isinstance(data, list):
        items: list[tuple[int | None, object]] = list(enumerate(data))
    else:
        items = [(None, data)]
    if not items:
        report.error = "the file holds an empty array: no guardrail to import"
    report.guardrails = [_import_document(index, doc, author) for index, doc in items]
    return report


def _import_document(index: int | None, document: object, author: Author) -> ImportedGuardrail:
    registration = register_document(document)
    guardrail_id = str(document["id"]) if isinstance(document, dict) and "id" in document else None
    if not registration.valid:
        return ImportedGuardrail(index, guardrail_id, "invalid", registration.errors,
                                 registration.warnings)
    assert isinstance(document, dict)
    current = Guardrail.objects.live().filter(guardrail_id=document["id"]).first()
    if current is not None and pretty_json(current.document) == pretty_json(document):
        return ImportedGuardrail(index, guardrail_id, "unchanged", [], registration.warnings)
    save_guardrail(document, author, audit_verb="import")
    status = "created" if current is None else "updated"
    return ImportedGuardrail(index, guardrail_id, status, [], registration.warnings)


# ---------------------------------------------------------------------------- diff


@dataclass(frozen=True)
class DiffLine:
    """One row of a unified diff: `add`, `del`, `ctx` or `hunk`, with both line numbers."""

    kind: str
    old: int | None
    new: int | None
    text: str

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "-", "ctx": " "}.get(self.kind, "")


def document_diff(old: object, new: object, context: int = 3) -> list[DiffLine]:
    """A unified line diff of two documents' pretty JSON (empty when they are the same)."""
    a = pretty_json(old).splitlines()
    b = pretty_json(new).splitlines()
    rows: list[DiffLine] = []
    for group in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        header = f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"
        rows.append(DiffLine("hunk", None, None, header))
        for tag, i1, i2, j1, j2 in group:
            rows.extend(_opcode_rows(tag, a, b, i1, i2, j1, j2))
    return rows


def _opcode_rows(tag: str, a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int) -> list[DiffLine]:
    if tag == "equal":
        return [DiffLine("ctx", i + 1, j1 + n + 1, a[i]) for n, i in enumerate(range(i1, i2))]
    removed = [DiffLine("del", i + 1, None, a[i]) for i in range(i1, i2)]
    added = [DiffLine("add", None, j + 1, b[j]) for j in range(j1, j2)]
    return removed + added


# ---------------------------------------------------------------------------- pass rate


def pass_rate_chart(results: Any, days: int = 30) -> dict[str, Any]:
    """Daily pass rate (0-100) of the given EvaluationResult rows over the last `days` days.

    One aggregate query; days without a result stay empty (None) rather than 0 %, so the
    line is not pulled down by days nothing was evaluated.
    """
    today = timezone.now().date()
    since = today - timedelta(days=days - 1)
    rows = (
        results.filter(created_at__date__gte=since).exclude(status="skipped")
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(total=Count("pk"), passed=Count("pk", filter=Q(status="pass")))
        .order_by("day")
    )
    by_day = {row["day"]: row for row in rows}
    labels, rates, totals = [], [], []
    for offset in range(days):
        day = since + timedelta(days=offset)
        row = by_day.get(day)
        labels.append(day.isoformat())
        rates.append(round(100 * row["passed"] / row["total"], 1) if row else None)
        totals.append(row["total"] if row else 0)
    return {
        "type": "line",
        "yFormat": "percent",
        "labels": labels,
        "datasets": [{"label": "Pass rate", "data": rates}],
        "evaluated": sum(totals),
    }
