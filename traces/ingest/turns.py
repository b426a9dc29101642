"""One turn, checked at its stages: a later document for a stored id that extends it.

A runtime checks a turn at its input, before each tool call and with its answer
(`POST evaluate?stage=`), each time with the turn so far under the same id. The stored
trace is the turn's latest state: a document that extends the stored one replaces it (no
conflict); one that rewrites what was stored is a conflict, as for any other id.
"""

from __future__ import annotations

from typing import Any

from traces.ingest import documents
from traces.models import RunTrace

#: Grown item by item: the stored items are the later document's first ones.
APPENDED = ("messages", "toolCalls")
#: What a turn measures as it goes on: the later document's value stands.
GROWING = ("usage", "endedAt")
UPDATED = "updated"


def extends(stored: dict[str, Any], later: dict[str, Any]) -> bool:
    """Whether `later` is `stored` carried further: every stored field kept as it was, except
    messages and tool calls appended (the last stored message may be completed; any stored
    call may gain its result or error: calls run side by side, as LangGraph runs them, finish
    in any order, so an earlier call's result can come after a later call was proposed) and
    usage and end time updated; new fields (the output) added."""
    for name, value in stored.items():
        if name in GROWING:
            continue
        if name == "toolCalls":
            if not _appended(value, later.get(name), every_item_grows=True):
                return False
        elif name in APPENDED:
            if not _appended(value, later.get(name)):
                return False
        elif later.get(name, _ABSENT) != value:
            return False
    return True


_ABSENT = object()


def _appended(stored: object, later: object, every_item_grows: bool = False) -> bool:
    """`later` holds `stored`'s items first, each kept; the last (with `every_item_grows`,
    every one) may gain keys, never change or lose one."""
    if not isinstance(stored, list) or not isinstance(later, list) or len(later) < len(stored):
        return False
    if not stored:
        return True
    if not every_item_grows:
        *kept, last = stored
        if later[: len(kept)] != kept:
            return False
        return _grown(last, later[len(kept)])
    return all(_grown(item, carried) for item, carried in zip(stored, later, strict=False))


def _grown(item: object, carried: object) -> bool:
    """`carried` is `item` with, at most, keys added."""
    if item == carried:
        return True
    return (
        isinstance(item, dict)
        and isinstance(carried, dict)
        and all(carried.get(key, _ABSENT) == value for key, value in item.items())
    )


def extend_stored(item: documents.Item) -> bool:
    """In the caller's transaction: when the item's document extends the trace stored under
    its id (item.row_id, a conflict so far), store it in its place and mark the item
    `updated`; False (a conflict stays one) otherwise. The row is locked while it is read,
    so that two later documents do not both extend the same state."""
    assert item.document is not None and item.row_id is not None
    stored = RunTrace.objects.select_for_update().filter(pk=item.row_id).values_list("document", flat=True).first()
    if stored is None or not extends(stored, item.document):
        return False
    moment = documents._moment
    RunTrace.objects.filter(pk=item.row_id).update(
        document=item.document,
        content_hash=item.content_hash,
        withheld=item.withheld,
        agent=item.document.get("agent") or "",
        flow=item.document.get("flow") or "",
        started_at=moment(item.document.get("startedAt")),
        ended_at=moment(item.document.get("endedAt")),
    )
    item.status, item.errors, item.stored_hash = UPDATED, [], ""
    return True
