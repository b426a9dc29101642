"""What the guardrail pages compute: import of uploaded files, export, revision diffs, pass rates.

Kept apart from the views so that the views stay thin and these read as plain functions.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from guardrails.services import (
    Author,
    OwnershipError,
    check_owner,
    ownership_issues,
    register_document,
    save_guardrail,
    unavailable_id,
)
from kindgi_console.jsonbody import JsonBodyError, parse_json
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller

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
    status: str  # "created", "updated", "unchanged", "invalid", or "valid" (not saved)
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    document: dict[str, Any] | None = field(default=None, repr=False)

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


def import_files(files: list[Any], author: Author, owner: Tenant | None, caller: Caller) -> list[ImportedFile]:
    """Validate every uploaded guardrail as the API does; save them all, or none.

    New guardrails belong to `owner` (None: the whole console); a guardrail the caller may
    not change (console-wide, or another tenant's id) is invalid. Nothing is saved unless
    every file and every guardrail is valid: the good ones are then reported `valid`.
    """
    reports = [_read_file(upload, owner, caller) for upload in files[:MAX_IMPORT_FILES]]
    items = [item for report in reports for item in report.guardrails]
    if not all(report.ok for report in reports):
        for item in items:
            if item.status != "invalid":
                item.status = "valid"
        return reports
    with transaction.atomic():
        for item in items:
            if item.status != "unchanged":
                assert item.document is not None
                save_guardrail(item.document, author, owner=owner, audit_verb="import")
    return reports


def _read_file(upload: Any, owner: Tenant | None, caller: Caller) -> ImportedFile:
    report = ImportedFile(name=str(upload.name))
    if upload.size > MAX_IMPORT_FILE_BYTES:
        report.error = f"the file is over the limit of {MAX_IMPORT_FILE_BYTES} bytes"
        return report
    try:
        data = parse_json(upload.read())
    except JsonBodyError as error:
        report.error = f"not JSON: {error}"
        return report
    items: list[tuple[int | None, object]] = list(enumerate(data)) if isinstance(data, list) else [(None, data)]
    if not items:
        report.error = "the file holds an empty array: no guardrail to import"
    report.guardrails = [_check_document(index, doc, owner, caller) for index, doc in items]
    return report


def _check_document(index: int | None, document: object, owner: Tenant | None, caller: Caller) -> ImportedGuardrail:
    """Registration and ownership of one guardrail, saving nothing."""
    registration = register_document(document)
    guardrail_id = str(document["id"]) if isinstance(document, dict) and "id" in document else None
    if not registration.valid:
        return ImportedGuardrail(index, guardrail_id, "invalid", registration.errors, registration.warnings)
    assert isinstance(document, dict)
    current = Guardrail.objects.filter(guardrail_id=document["id"]).select_related("tenant").first()
    errors = _ownership_errors(document, current, owner, caller)
    if errors:
        return ImportedGuardrail(index, guardrail_id, "invalid", errors, registration.warnings)
    live = current if current is not None and current.deleted_at is None else None
    if live is not None and pretty_json(live.document) == pretty_json(document):
        status = "unchanged"
    else:
        status = "created" if live is None else "updated"
    return ImportedGuardrail(index, guardrail_id, status, [], registration.warnings, document)


def _ownership_errors(
    document: dict[str, Any], current: Guardrail | None, owner: Tenant | None, caller: Caller
) -> list[Issue]:
    if current is None:
        try:
            check_owner(document["id"], owner)
        except OwnershipError as error:
            return error.issues
        return ownership_issues(document, owner)
    if not Guardrail.objects.for_caller(caller, "author").filter(pk=current.pk).exists():
        if current.deleted_at is not None or not Guardrail.objects.for_caller(caller).filter(pk=current.pk).exists():
            return [unavailable_id(document["id"])]  # another tenant's, or deleted: nothing said of it
        return [Issue("/id", f"{document['id']!r} is a console-wide guardrail, changed only by console admins")]
    return ownership_issues(document, current.tenant)


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
        results.filter(created_at__date__gte=since)
        .exclude(status="skipped")
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
