"""Agent turns from spans: finished turns are stored as RunTraces, unfinished ones wait in the database.

A turn is an `invoke_agent` span and the spans under it (under its nearest such span,
when agents nest); a trace without any is one turn under its root span, if one of its
spans is generative. A turn is finished when its head arrives. Until then its spans wait
as `PendingSpan` rows, at most KINDGI_OTLP_MAX_PENDING_SPANS per tenant; the periodic
task stores what arrived of a turn that has waited KINDGI_OTLP_TURN_TIMEOUT_S, marked
incomplete. Storing goes through `traces.ingest.documents`, as `POST /api/v1/traces` does: the same
validation, limits, idempotency and runtime evaluation.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from guardrails.engine.types import Issue
from kindgi_console import deadline
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller
from traces.ingest import documents
from traces.ingest.evaluate import queue_runtime_evaluation
from traces.ingest.otlp.mapping import document_of, is_agent, is_generative
from traces.ingest.otlp.spans import Span, spans_of
from traces.models import PendingSpan, RunTrace


@dataclass
class Outcome:
    """What became of an export's spans: how many were refused, and why (the first reasons)."""

    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    def refuse(self, count: int, reason: str) -> None:
        self.rejected += count
        if len(self.reasons) < 5 and reason not in self.reasons:
            self.reasons.append(reason)

    @property
    def message(self) -> str:
        return "; ".join(self.reasons)


@dataclass
class Turn:
    """The spans of one agent turn, and its head (None: it timed out before the head came)."""

    turn_id: str
    spans: list[Span]
    head: Span | None


class TenantCaller(Caller):
    """The tenant of an export's spans, settled before the traces are prepared."""

    def __init__(self, tenant: Tenant) -> None:
        super().__init__()
        self.tenant = tenant

    def tenant_for_write(self, slug: str | None, scope: str) -> Tenant:
        return self.tenant


def receive(caller: Caller, request: ExportTraceServiceRequest) -> Outcome:
    """Take an export's spans: store the turns they finish, keep the others waiting."""
    spans, malformed = spans_of(request)
    outcome = Outcome()
    if malformed:
        outcome.refuse(malformed, f"{malformed} spans have a trace or span id of the wrong length")
    # One transaction a tenant, in the order of their ids (a tenant's trace locks, see
    # `_lock_traces`, are held by one transaction at a time, and never two tenants' at once).
    for tenant, group in sorted(_by_tenant(caller, spans, outcome).items(), key=lambda pair: pair[0].pk):
        with deadline.atomic("storing the spans"):
            _receive_for(tenant, group, outcome)
    return outcome


def _by_tenant(caller: Caller, spans: list[Span], outcome: Outcome) -> dict[Tenant, list[Span]]:
    """The key's tenant; for a key of the whole console, each span's resource attribute."""
    assert caller.key is not None
    if caller.key.tenant is not None:
        return {caller.key.tenant: spans} if spans else {}
    attribute = settings.KINDGI_OTLP_TENANT_ATTRIBUTE
    slugs = {str(span.resource.get(attribute, "")) for span in spans}
    tenants = {tenant.slug: tenant for tenant in Tenant.objects.filter(slug__in=slugs)}
    grouped: dict[Tenant, list[Span]] = defaultdict(list)
    for span in spans:
        tenant = tenants.get(str(span.resource.get(attribute, "")))
        if tenant is None:
            outcome.refuse(1, f"a key of the whole console needs the resource attribute {attribute} naming a tenant")
        else:
            grouped[tenant].append(span)
    return grouped


def _receive_for(tenant: Tenant, spans: list[Span], outcome: Outcome) -> None:
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    _lock_traces(tenant, sorted(by_trace))
    ending = {trace_id for trace_id, group in by_trace.items() if any(_ends_turn(s) for s in group)}
    waiting = _take_waiting(tenant, sorted(ending))
    turns: list[Turn] = []
    still_open: list[Span] = []
    for trace_id, group in by_trace.items():
        if trace_id not in ending:
            still_open.extend(group)
            continue
        known = {span.span_id: span for span in waiting.get(trace_id, [])}
        known.update((span.span_id, span) for span in group)
        finished, leftover = split(list(known.values()))
        turns.extend(finished)
        still_open.extend(leftover)
    _store(tenant, turns, outcome)
    _keep_waiting(tenant, still_open, outcome)


#: The tenant's traces are locked in this many groups (by a hash of the trace id): an export
#: holds at most this many locks, whatever the number of its traces.
TRACE_LOCKS = 32


def lock_group(trace_id: str) -> int:
    """The group of a trace's lock: the same in every process (CRC-32 of the id)."""
    return zlib.crc32(trace_id.encode()) % TRACE_LOCKS


def _lock_traces(tenant: Tenant, trace_ids: list[str]) -> None:
    """Hold these traces until the transaction ends (PostgreSQL), so that two exports of one
    trace at once (two services of one agent, say) do not each miss the other's spans.

    A lock is one of the tenant's TRACE_LOCKS groups of trace ids, not one per trace: an
    export of 16,000 traces takes at most TRACE_LOCKS locks, where one per trace filled
    PostgreSQL's shared lock table ("out of shared memory") and made other transactions on
    the server fail, other databases' included. Two exports of one trace take its group's
    lock; two exports of traces of different groups go on side by side. The groups are
    taken in ascending order, so that two exports cannot wait for each other.
    """
    if connection.vendor != "postgresql" or not trace_ids:
        return
    groups = sorted({lock_group(trace_id) for trace_id in trace_ids})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('otlp/' || %s || '/' || g, 0)) "
            "FROM unnest(%s::int[]) WITH ORDINALITY AS t(g, n) ORDER BY n",
            [str(tenant.pk), groups],
        )


def _ends_turn(span: Span) -> bool:
    return is_agent(span) or span.is_root


def _take_waiting(tenant: Tenant, trace_ids: list[str]) -> dict[str, list[Span]]:
    """The waiting spans of these traces, taken out of the waiting room (deleted, till commit)."""
    if not trace_ids:
        return {}
    waiting: dict[str, list[Span]] = defaultdict(list)
    for data in _delete_waiting(tenant, trace_ids):
        span = Span.from_json(data)
        waiting[span.trace_id].append(span)
    return waiting


# The table name is a constant of the model: no input reaches the statement's text.
DELETE_WAITING = (
    f"DELETE FROM {PendingSpan._meta.db_table} "  # noqa: S608
    "WHERE tenant_id = %s AND otel_trace_id = ANY(%s::text[]) RETURNING span"
)


def _delete_waiting(tenant: Tenant, trace_ids: list[str]) -> list[dict[str, Any]]:
    """Delete the traces' waiting spans and return them: one statement on PostgreSQL."""
    if connection.vendor != "postgresql":
        rows = PendingSpan.objects.select_for_update().filter(tenant=tenant, otel_trace_id__in=trace_ids)
        pks, spans = [], []
        for pk, data in rows.values_list("pk", "span"):
            pks.append(pk)
            spans.append(data)
        PendingSpan.objects.filter(pk__in=pks).delete()
        return spans
    with connection.cursor() as cursor:
        cursor.execute(DELETE_WAITING, [tenant.pk, trace_ids])
        # Django has psycopg hand jsonb over as text (its JSONField decodes it): so do we.
        return [orjson.loads(data) if isinstance(data, str) else data for (data,) in cursor.fetchall()]


def split(spans: list[Span]) -> tuple[list[Turn], list[Span]]:
    """The finished turns among the known spans of one trace, and the spans still waiting.

    Spans that belong to no turn once the trace's root has arrived (a web framework's
    request span, say) are dropped: no turn will claim them.
    """
    by_id = {span.span_id: span for span in spans}
    agents = [span for span in spans if is_agent(span)]
    root_arrived = any(span.is_root for span in spans)
    if not agents:
        root = next((span for span in spans if span.is_root), None)
        if root is None:
            return [], spans
        turn = Turn(turn_id(root), spans, root)
        return ([turn] if any(is_generative(span) for span in spans) else []), []
    members: dict[str, list[Span]] = {agent.span_id: [] for agent in agents}
    leftover = []
    agent_ids = {agent.span_id for agent in agents}
    owners = _resolve(by_id, lambda span: span.span_id if span.span_id in agent_ids else None, lambda _cycle: None)
    for span in spans:
        owner = owners[span.span_id]
        if owner is not None:
            members[owner].append(span)
        elif not root_arrived:
            leftover.append(span)
    turns = [Turn(turn_id(agent), members[agent.span_id], agent) for agent in agents]
    return turns, leftover


def _resolve(
    by_id: dict[str, Span],
    own: Callable[[Span], str | None],
    of_cycle: Callable[[list[Span]], str | None],
    of_missing: Callable[[Span], str | None] = lambda _top: None,
) -> dict[str, str | None]:
    """A value for every span, found up its parents: its `own` (not None) if it has one, else
    its parent's; at a span whose parent is not known, `of_missing(that span)`; for spans on
    a parent cycle with no `own` value on it, `of_cycle(the cycle)`.

    Linear: each span is walked once, and its value is kept for every span below it, where
    walking up from each span (a chain of 10,000 spans, a cycle) was quadratic. Checks the
    request's deadline as it goes.
    """
    values: dict[str, str | None] = {}
    for start in by_id.values():
        if start.span_id in values:
            continue
        path: list[Span] = []  # the spans walked up from `start`, whose value is the walk's end's
        on_path: dict[str, int] = {}
        current = start
        while True:
            if current.span_id in values:
                value = values[current.span_id]
                break
            value = own(current)
            if value is not None:
                values[current.span_id] = value
                break
            if current.span_id in on_path:  # round a parent cycle, back where it began
                at = on_path[current.span_id]
                value = of_cycle(path[at:])
                for member in path[at:]:
                    values[member.span_id] = value
                del path[at:]
                break
            on_path[current.span_id] = len(path)
            path.append(current)
            deadline.check("walking the spans' parents")
            parent = by_id.get(current.parent_id) if current.parent_id else None
            if parent is None:
                value = of_missing(current)
                break
            current = parent
        for span in path:
            values[span.span_id] = value
    return values


def turn_id(head: Span) -> str:
    """The RunTrace id of a turn: its trace id and its head's span id."""
    return f"{head.trace_id}-{head.span_id}"


def _store(tenant: Tenant, turns: list[Turn], outcome: Outcome) -> None:
    """Store the turns as RunTraces; a turn stored before (an export sent again) is left as it is."""
    if not turns:
        return
    stored = set(
        RunTrace.objects.filter(tenant=tenant, trace_id__in=[turn.turn_id for turn in turns]).values_list(
            "trace_id", flat=True
        )
    )
    fresh = [turn for turn in turns if turn.turn_id not in stored]
    caller = TenantCaller(tenant)
    items = []
    for index, turn in enumerate(fresh):
        deadline.check("mapping the turns to traces")
        items.append(documents.prepare(caller, document_of(turn.turn_id, turn.spans, turn.head), index))
    for item in items:
        _refuse_overlong_columns(item)
    documents.store(items, on_created=queue_runtime_evaluation)
    for turn, item in zip(fresh, items, strict=True):
        if item.status in (documents.INVALID, documents.CONFLICT):
            reason = "; ".join(f"{issue.path or '/'}: {issue.message}" for issue in item.errors[:3])
            outcome.refuse(len(turn.spans), f"turn {turn.turn_id}: {reason}")


#: The columns a RunTrace's `agent` and `flow` are kept in hold this many characters.
COLUMN_CHARS = 200


def _refuse_overlong_columns(item: documents.Item) -> None:
    """An agent or flow name longer than its column is refused by name, never a database error."""
    document = item.document or {}
    for name in ("agent", "flow"):
        if item.status == documents.CREATED and len(document.get(name) or "") > COLUMN_CHARS:
            item.status = documents.INVALID
            item.errors = [Issue(f"/{name}", f"{name} is longer than {COLUMN_CHARS} characters")]


def _keep_waiting(tenant: Tenant, spans: list[Span], outcome: Outcome) -> None:
    """Keep the spans of unfinished turns, up to the tenant's room; the others are refused."""
    sized = _small_enough(spans, outcome)
    if not sized:
        return
    limit = settings.KINDGI_OTLP_MAX_PENDING_SPANS
    room = max(0, limit - PendingSpan.objects.filter(tenant=tenant).count())
    if len(sized) > room:
        outcome.refuse(
            len(sized) - room,
            f"the tenant has {limit} spans of unfinished turns waiting, the most it may: finish those turns first",
        )
    _insert_waiting(tenant, sized[:room])


# The table name is a constant of the model: no input reaches the statement's text.
INSERT_WAITING = (
    f"INSERT INTO {PendingSpan._meta.db_table} (tenant_id, otel_trace_id, span_id, span, received_at) "  # noqa: S608
    "SELECT %s, r.t, r.s, r.j, %s FROM jsonb_to_recordset(%s::jsonb) AS r(t text, s text, j jsonb) "
    "ON CONFLICT (tenant_id, otel_trace_id, span_id) DO NOTHING"
)


def _insert_waiting(tenant: Tenant, spans: list[tuple[Span, dict[str, Any]]]) -> None:
    """Insert the waiting spans once each. On PostgreSQL as one JSON parameter: Django's bulk
    insert sends arrays of JSON text, which psycopg escapes character by character."""
    now = timezone.now()
    if connection.vendor != "postgresql":
        PendingSpan.objects.bulk_create(
            [
                PendingSpan(
                    tenant=tenant, otel_trace_id=span.trace_id, span_id=span.span_id, span=data, received_at=now
                )
                for span, data in spans
            ],
            ignore_conflicts=True,
        )
        return
    rows = orjson.dumps([{"t": span.trace_id, "s": span.span_id, "j": data} for span, data in spans])
    with connection.cursor() as cursor:
        cursor.execute(INSERT_WAITING, [tenant.pk, now, rows.decode()])


def _small_enough(spans: list[Span], outcome: Outcome) -> list[tuple[Span, dict[str, Any]]]:
    """The spans a trace could hold: not larger than a trace, and without NUL (refused as in REST)."""
    limit = settings.KINDGI_MAX_TRACE_BYTES
    kept = []
    for span in spans:
        deadline.check("keeping the spans of unfinished turns")
        data = span.as_json()
        raw = orjson.dumps(data)
        if len(raw) > limit:
            outcome.refuse(1, f"span {span.span_id} is over the limit of {limit} bytes of a trace")
        elif b"\\u0000" in raw:  # PostgreSQL cannot store NUL in jsonb
            outcome.refuse(1, f"span {span.span_id} holds the NUL character, which is not allowed")
        else:
            kept.append((span, data))
    return kept


def complete_waiting(now: datetime | None = None, limit: int = 500) -> int:
    """Store what arrived of the turns that have waited too long, marked incomplete.

    A trace's waiting spans are grouped under their highest known ancestor; the group's
    id names the span they wait for (the parent that never came), so that the head arriving
    later finds its turn already stored. Returns how many traces were completed.
    """
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.KINDGI_OTLP_TURN_TIMEOUT_S)
    stale = list(
        PendingSpan.objects.values("tenant_id", "otel_trace_id")
        .annotate(last=Max("received_at"))
        .filter(last__lt=cutoff)
        .order_by("last")[:limit]
    )
    tenants = Tenant.objects.in_bulk({row["tenant_id"] for row in stale})
    for row in stale:
        with transaction.atomic():
            tenant = tenants[row["tenant_id"]]
            _lock_traces(tenant, [row["otel_trace_id"]])
            spans = _take_waiting(tenant, [row["otel_trace_id"]]).get(row["otel_trace_id"], [])
            _store(tenant, incomplete_turns(spans), Outcome())
    return len(stale)


def incomplete_turns(spans: list[Span]) -> list[Turn]:
    """Waiting spans grouped under the span each group waits for."""
    by_id = {span.span_id: span for span in spans}
    awaited = _resolve(
        by_id,
        lambda _span: None,
        lambda cycle: min(member.span_id for member in cycle),  # no parent is awaited: named by its least id
        lambda top: top.parent_id or top.span_id,
    )
    groups: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        groups[awaited[span.span_id] or span.span_id].append(span)
    trace_id = spans[0].trace_id if spans else ""
    return [
        Turn(f"{trace_id}-{name}", group, None)
        for name, group in groups.items()
        if any(is_generative(span) for span in group)
    ]
