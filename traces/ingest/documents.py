"""Storing RunTraces: the fast path behind `POST /api/v1/traces` and `POST /api/v1/evaluate`.

Parse once (the view), validate each trace with the engine's compiled validator, hash the
canonical JSON, and write the rows in one transaction: on PostgreSQL one COPY straight into
the table (a batch of new traces, the common case), or, when the unique (tenant, trace id)
key refuses it, a COPY into a temporary table and one insert from there; multi-row INSERTs
on SQLite. Concurrent retries store nothing twice: the insert skips rows that the unique
key refuses and returns the rows it created; the skipped ones are read to tell duplicates
from conflicts.
"""

from __future__ import annotations

import functools
import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from guardrails.engine.schema import validate_runtrace, validate_runtrace_line
from guardrails.engine.types import Issue
from kindgi_console import deadline
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller, TenantDenied
from traces.models import RunTrace
from traces.store import bulk_sqlite
from traces.store.bulk_postgres import copy_with_new_keys
from traces.store.columns import TRACE, names

CREATED, DUPLICATE, CONFLICT, INVALID = "created", "duplicate", "conflict", "invalid"


@dataclass
class Item:
    """One trace of a request and what became of it."""

    index: int
    id: str | None
    status: str = INVALID
    errors: list[Issue] = field(default_factory=list)
    tenant: Tenant | None = None
    document: dict[str, Any] | None = None
    canonical: bytes = b""
    content_hash: str = ""
    withheld: bool = False
    row_id: int | None = None
    stored_hash: str = ""  # the hash of the row already stored under this id, when it differs

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.id,
            "status": self.status,
            "errors": [issue.as_dict() for issue in self.errors],
        }


def content_hash(document: dict[str, Any]) -> str:
    """The sha256 of the document's canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def prepare(caller: Caller, document: object, index: int, scope: str = "ingest") -> Item:
    """Validate one trace and settle its tenant; raises TenantDenied for another's tenant.

    The stored document always names its tenant, so that evaluation contexts and hashes
    do not depend on whether the runtime sent it.
    """
    trace_id = document.get("id") if isinstance(document, dict) else None
    item = Item(index=index, id=trace_id if isinstance(trace_id, str) else None)
    settled = _settled(caller, document, scope)
    issues = validate(document, settled[2] if settled is not None else None)
    if issues:
        item.errors = issues
        return item
    assert isinstance(document, dict)
    if settled is None:
        try:
            tenant = caller.tenant_for_write(document.get("tenant"), scope)
        except TenantDenied as denied:
            if denied.status == 403:
                raise
            item.errors = [Issue("/tenant", str(denied))]
            return item
        stored = dict(document)
        stored["tenant"] = tenant.slug
        settled = tenant, stored, orjson.dumps(stored, option=orjson.OPT_SORT_KEYS)
    item.tenant, stored, canonical = settled
    item.errors = size_issues(canonical)
    if item.errors:
        return item
    item.document = stored
    item.canonical = canonical
    item.content_hash = hashlib.sha256(canonical).hexdigest()
    item.status = CREATED
    return item


def size_issues(canonical: bytes) -> list[Issue]:
    """The error of a trace whose canonical JSON is over KINDGI_MAX_TRACE_BYTES, if it is."""
    if len(canonical) <= settings.KINDGI_MAX_TRACE_BYTES:
        return []
    return [
        Issue("", f"the trace is {len(canonical)} bytes of JSON, over the limit of {settings.KINDGI_MAX_TRACE_BYTES}")
    ]


def _settled(caller: Caller, document: object, scope: str) -> tuple[Tenant, dict[str, Any], bytes] | None:
    """The tenant, stored document and canonical JSON of a trace whose tenant settles before
    it is validated: an object that names no tenant, or one the caller may write to (the
    common case, and a look-up the caller keeps). None for any other, whose errors then
    speak first, as they always have.

    Its canonical JSON stands in for the text that validation counts brackets and escapes in
    (one serialisation of each trace instead of two): the tenant's name adds neither."""
    if type(document) is not dict:
        return None
    slug = document.get("tenant")
    if slug is not None and not isinstance(slug, str):
        return None
    try:
        tenant = caller.tenant_for_write(slug, scope)
    except TenantDenied:
        return None
    if "[" in tenant.slug or "{" in tenant.slug or "\\" in tenant.slug:
        return None
    stored = dict(document)
    stored["tenant"] = tenant.slug
    try:
        return tenant, stored, orjson.dumps(stored, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # nested too deep for orjson: validation says where
        return None


def validate(document: object, raw: bytes | None = None) -> list[Issue]:
    """The engine's RunTrace validation, skipping its walk over every value when the
    serialised trace (`raw`, else serialised here) shows no NUL and too few brackets to be
    too deep."""
    max_depth = settings.KINDGI_MAX_DEPTH
    if isinstance(document, dict):
        if raw is None:
            try:
                raw = orjson.dumps(document)
            except orjson.JSONEncodeError:  # nested too deep for orjson: the walk says where
                return validate_runtrace(document, max_depth=max_depth)
        return validate_runtrace_line(raw, document, max_depth=max_depth)
    return validate_runtrace(document, max_depth=max_depth)


def prepare_all(caller: Caller, documents: Sequence[object], scope: str = "ingest") -> list[Item]:
    items = []
    for index, document in enumerate(documents):
        deadline.check("validating the traces")
        items.append(prepare(caller, document, index, scope))
    return items


def withhold_output(item: Item) -> None:
    """Keep the trace without its response: a halt guardrail failed (the hash stays)."""
    assert item.document is not None
    item.document = {key: value for key, value in item.document.items() if key != "output"}
    item.canonical = orjson.dumps(item.document, option=orjson.OPT_SORT_KEYS)
    item.withheld = True


def store(items: Iterable[Item], on_created: Callable[[list[int]], None] | None = None) -> None:
    """Store the valid items, setting each one's status: created, duplicate or conflict."""
    pending = [item for item in items if item.status == CREATED]
    if not pending:
        return
    pending, repeats = _split_repeats_within(pending)
    write = _write_with_copy if connection.vendor == "postgresql" else _write_with_inserts
    with deadline.atomic("storing the traces"):  # a request's: its statements end at its deadline
        write(pending)
        _settle_repeats(repeats)
        created = [item.row_id for item in pending if item.status == CREATED and item.row_id]
        if created and on_created is not None:
            on_created(created)


def _write_with_inserts(items: list[Item]) -> None:
    """SQLite: multi-row INSERTs … ON CONFLICT DO NOTHING that return the rows they created
    (as many rows a statement as SQLite's limits allow), then one read per tenant of the
    rows skipped (stored before, or by a concurrent retry), as on PostgreSQL."""
    now = timezone.now()
    adapt = connection.ops.adapt_datetimefield_value
    by_key = {(item.tenant.pk, item.id): item for item in items if item.tenant is not None}
    defaults = TRACE.default_values
    rows = [
        (tenant, trace_id, agent, flow, adapt(started), adapt(ended), document, digest, withheld, adapt(at), *defaults)
        for tenant, trace_id, agent, flow, started, ended, document, digest, withheld, at in (
            _copy_row(item, now) for item in items
        )
    ]
    for pk, tenant_id, trace_id in bulk_sqlite.insert_rows(INSERT_MANY, rows, width=len(TRACE.columns)):
        by_key.pop((tenant_id, trace_id)).row_id = pk
    if by_key:
        _settle_already_stored(list(by_key.values()))


LOAD_TABLE = "kindgi_trace_load"
# Table and column names come from the model (`traces.store.columns`): no input reaches these statements.
INSERT_LOADED = (
    f"INSERT INTO {TRACE.table} ({names(TRACE.columns)}) "  # noqa: S608
    f"SELECT {TRACE.values(TRACE.written)} FROM {LOAD_TABLE} "
    "ON CONFLICT (tenant_id, trace_id) DO NOTHING RETURNING id, tenant_id, trace_id"
)
INSERT_MANY = (
    f"INSERT INTO {TRACE.table} ({names(TRACE.columns)}) VALUES {{values}} "  # noqa: S608
    "ON CONFLICT (tenant_id, trace_id) DO NOTHING RETURNING id, tenant_id, trace_id"
)
SELECT_SKIPPED = (
    "SELECT t.id, t.tenant_id, t.trace_id, t.content_hash "  # noqa: S608
    f"FROM {TRACE.table} t JOIN {LOAD_TABLE} l USING (tenant_id, trace_id)"
)
COPY_LOAD = f"COPY {LOAD_TABLE} ({names(TRACE.written)}) FROM STDIN"


@functools.cache
def create_load() -> str:
    """The temporary table that a batch is copied into, typed as the traces' own columns (on first use)."""
    definitions = ", ".join(f"{column} {TRACE.db_type(column, connection)}" for column in TRACE.written)
    return f"CREATE TEMPORARY TABLE IF NOT EXISTS {LOAD_TABLE} ({definitions}) ON COMMIT DELETE ROWS"


@functools.cache
def insert_one() -> str:
    """One trace as parameters, each cast to its column's type (the document's text to jsonb)."""
    values = [f"%s::{TRACE.db_type(column, connection)}" for column in TRACE.written]
    return (
        f"INSERT INTO {TRACE.table} ({names(TRACE.columns)}) VALUES ({TRACE.values(values)}) "  # noqa: S608
        "ON CONFLICT (tenant_id, trace_id) DO NOTHING RETURNING id"
    )


@functools.cache
def copy_fresh() -> tuple[str, tuple[str, ...]]:
    """The binary COPY of new traces with their keys, and its columns' types (on first use)."""
    types = ("int8", *TRACE.copy_types(connection))
    return f"COPY {TRACE.table} (id, {names(TRACE.columns)}) FROM STDIN (FORMAT BINARY)", types


def _write_with_copy(items: list[Item]) -> None:
    """PostgreSQL: the batch copied straight into the traces' table, with keys taken from
    its sequence (`copy_with_new_keys`: half the writing of the other way); when one of its
    ids is stored already (a retry, a concurrent request), as the COPY's unique violation
    says, through a temporary table instead. A retry thus pays a refused COPY first."""
    now = timezone.now()
    sql, types = copy_fresh()
    keys = copy_with_new_keys(TRACE.table, sql, types, len(items), (_copy_row(item, now) for item in items))
    if keys is None:
        _copy_through_load(items, now)
        return
    for key, item in zip(keys, items, strict=True):
        item.row_id = key


def _copy_through_load(items: list[Item], now: datetime) -> None:
    """COPY into a temporary table, then one INSERT … ON CONFLICT DO NOTHING: its
    RETURNING names the rows this request created, and the rows it skipped (stored before,
    or by a concurrent retry) are read back with one query joined to the loaded rows."""
    by_key = {(item.tenant.pk, item.id): item for item in items if item.tenant is not None}
    with connection.cursor() as cursor:
        cursor.execute(create_load())
        with connection.wrap_database_errors, cursor.cursor.copy(COPY_LOAD) as copy:
            for item in items:
                copy.write_row(_copy_row(item, now))
        cursor.execute(INSERT_LOADED)
        inserted = cursor.fetchall()
        for pk, tenant_id, trace_id in inserted:
            by_key.pop((tenant_id, trace_id)).row_id = pk
        if by_key:
            cursor.execute(SELECT_SKIPPED)
            for pk, tenant_id, trace_id, digest in cursor.fetchall():
                skipped = by_key.get((tenant_id, trace_id))
                if skipped is not None:
                    skipped.row_id = pk
                    _compare(skipped, digest)
        cursor.execute(f"TRUNCATE {LOAD_TABLE}")


SELECT_ONE = f"SELECT id, content_hash FROM {TRACE.table} WHERE tenant_id = %s AND trace_id = %s"  # noqa: S608


def store_one(item: Item) -> None:
    """Store one valid item (`POST evaluate`) in the caller's transaction, setting its status.

    On PostgreSQL one INSERT … ON CONFLICT DO NOTHING, and only when the id was already
    stored a read of that row's hash; no temporary table, no savepoint. Else as `store`.
    """
    if item.status != CREATED:
        return
    if connection.vendor != "postgresql":
        store([item])
        return
    assert item.tenant is not None
    with connection.cursor() as cursor:
        cursor.execute(insert_one(), _copy_row(item, timezone.now()))
        inserted = cursor.fetchone()
        if inserted is not None:
            item.row_id = inserted[0]
            return
        cursor.execute(SELECT_ONE, [item.tenant.pk, item.id])
        item.row_id, digest = cursor.fetchone()
        _compare(item, digest)


def _copy_row(item: Item, now: datetime) -> tuple[Any, ...]:
    doc = item.document
    assert doc is not None and item.tenant is not None
    return (
        item.tenant.pk,
        item.id,
        doc.get("agent") or "",
        doc.get("flow") or "",
        _moment(doc.get("startedAt")),
        _moment(doc.get("endedAt")),
        item.canonical.decode(),
        item.content_hash,
        item.withheld,
        now,
    )


def _split_repeats_within(items: list[Item]) -> tuple[list[Item], list[tuple[Item, Item]]]:
    """The same id twice in one batch: the first one is written, the others (each with
    that first one) are settled once it is, against what is then stored."""
    first: dict[tuple[int, str], Item] = {}
    fresh, repeats = [], []
    for item in items:
        assert item.tenant is not None and item.id is not None
        earlier = first.setdefault((item.tenant.pk, item.id), item)
        if earlier is item:
            fresh.append(item)
        else:
            repeats.append((item, earlier))
    return fresh, repeats


def _settle_repeats(repeats: list[tuple[Item, Item]]) -> None:
    """A repeat matches the stored row (stored now or before), not the first of its batch."""
    for item, earlier in repeats:
        item.row_id = earlier.row_id
        _compare(item, earlier.stored_hash or earlier.content_hash)


def _stored_by_tenant(items: list[Item]) -> Iterator[tuple[list[Item], dict[str, tuple[int, str]]]]:
    """The items by tenant, each group with the (key, content hash) of the rows stored under
    its trace ids: one query a tenant."""
    by_tenant: dict[int, list[Item]] = defaultdict(list)
    for item in items:
        assert item.tenant is not None
        by_tenant[item.tenant.pk].append(item)
    for tenant_id, group in by_tenant.items():
        stored = {
            trace_id: (pk, digest)
            for pk, trace_id, digest in RunTrace.objects.filter(
                tenant_id=tenant_id, trace_id__in=[item.id for item in group]
            ).values_list("pk", "trace_id", "content_hash")
        }
        yield group, stored


def _settle_already_stored(items: list[Item]) -> list[Item]:
    fresh = []
    for group, stored in _stored_by_tenant(items):
        for item in group:
            if item.id in stored:
                item.row_id, digest = stored[item.id]
                _compare(item, digest)
            else:
                fresh.append(item)
    return fresh


def _compare(item: Item, stored_hash: str) -> None:
    item.stored_hash = stored_hash
    if stored_hash == item.content_hash:
        item.status = DUPLICATE
    else:
        item.status = CONFLICT
        item.errors = [Issue("/id", f"a different trace with id {item.id!r} is already stored")]


def _moment(value: Any) -> datetime | None:
    """The column value of an RFC 3339 time, in UTC.

    RFC 3339 allows offsets up to 23:59, PostgreSQL only up to 15:59; a time that UTC
    cannot hold (year 10000) leaves the column empty (the document keeps it as sent).
    """
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is None:
        return None
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None
