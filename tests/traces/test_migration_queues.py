"""Migration traces 0030 puts the violations stored before it in their review queue, from the
revision each was found by: an escalate revision's `escalateTo` (or the default queue), no
queue for any other action, whatever the guardrail's current revision says. Unapplied, it
leaves the table as it was; applied again, the same queues and indexes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail
from tests.traces import seed
from traces.models import DEFAULT_QUEUE, Violation

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = "0029_status_indexes_for_metrics"
INDEXES = {"violation_queue_time", "violation_queue_state", "violation_assignee"}


def migrate(*target: str) -> None:
    call_command("migrate", *target, verbosity=0)


def columns_and_indexes() -> tuple[set[str], set[str]]:
    with connection.cursor() as cursor:
        description = connection.introspection.get_table_description(cursor, "traces_violation")
        constraints = connection.introspection.get_constraints(cursor, "traces_violation")
    return {column.name for column in description}, set(constraints)


def test_it_fills_the_queue_of_every_violation_from_its_revision(acme: Any) -> None:
    author = Author(user=None, label="fixture")
    escalate = {"on-violation": "escalate", "escalateTo": "research-leads"}
    save_guardrail(make_guardrail("leads", action=escalate), author, owner=acme)
    save_guardrail(make_guardrail("unnamed", action={"on-violation": "escalate"}), author, owner=acme)
    save_guardrail(make_guardrail("logs", action={"on-violation": "log-only"}), author, owner=acme)
    seed.traces(acme, 2, prefix="first")
    # Revision 2 of `leads` halts instead: its violations, and only they, have no queue.
    save_guardrail(make_guardrail("leads", action={"on-violation": "halt"}), author, owner=acme)
    seed.traces(acme, 1, prefix="later")
    expected = sorted(Violation.objects.values_list("pk", "guardrail__guardrail_id", "revision__number", "queue"))
    assert Counter(row[1:] for row in expected) == {
        ("leads", 1, "research-leads"): 2,
        ("leads", 2, None): 1,
        ("unnamed", 1, DEFAULT_QUEUE): 3,
        ("logs", 1, None): 3,
    }
    migrated = columns_and_indexes()
    assert {"queue", "assignee", "assigned_at"} <= migrated[0] and migrated[1] >= INDEXES

    try:
        migrate("traces", BEFORE)
        columns, indexes = columns_and_indexes()
        assert not {"queue", "assignee", "assigned_at"} & columns and not INDEXES & indexes
    finally:
        migrate()

    assert columns_and_indexes() == migrated
    stored = sorted(Violation.objects.values_list("pk", "guardrail__guardrail_id", "revision__number", "queue"))
    assert stored == expected
    assert not Violation.objects.filter(assignee__isnull=False).exists()
