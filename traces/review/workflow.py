"""Violation review: the states a violation moves through, and the one function that moves it.

A violation is `open` when recorded. Reviewers acknowledge it (seen, being looked at), then
close it as `resolved` (the agent was fixed or the harm handled) or `false-positive` (the
guardrail was wrong). A closed violation can be reopened. Every change is written to the
violation (its current state, who, when, the note), to its `ViolationReview` history and to
the quality roll-up (`traces.store.violation_days`), in one transaction, by `review` below: the
pages and the API both call it.

Who may review: a user with a role in the violation's tenant (reviewer, author or admin),
or an API key with the `review` scope bound to that tenant (`read` alone only reads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from guardrails.engine.types import Issue, IssuesError
from kindgi_console.audit import log as audit
from kindgi_console.tenancy.scoping import Caller
from traces.models import Violation, ViolationReview
from traces.store import signals, violation_days

State = Violation.State
STATES: tuple[str, ...] = tuple(State.values)

#: The states a violation may move to from each state.
TRANSITIONS: dict[str, frozenset[str]] = {
    State.OPEN: frozenset({State.ACKNOWLEDGED, State.RESOLVED, State.FALSE_POSITIVE}),
    State.ACKNOWLEDGED: frozenset({State.OPEN, State.RESOLVED, State.FALSE_POSITIVE}),
    State.RESOLVED: frozenset({State.OPEN}),
    State.FALSE_POSITIVE: frozenset({State.OPEN}),
}

#: How to name each move on a button.
ACTION_LABELS: dict[str, str] = {
    State.OPEN: "Reopen",
    State.ACKNOWLEDGED: "Acknowledge",
    State.RESOLVED: "Resolve",
    State.FALSE_POSITIVE: "Mark false positive",
}

MAX_NOTE = 2000
#: A bulk review acts on at most this many violations: a larger selection is narrowed first.
MAX_BULK = 10_000


class ReviewError(IssuesError):
    """A review that cannot be made: each issue names the field (`/state`, `/note`, `/ids`)."""


def allowed(from_state: str, to_state: str) -> bool:
    return to_state in TRANSITIONS.get(from_state, frozenset())


def refusal(from_state: str, to_state: str) -> str:
    """Why a violation in `from_state` cannot move to `to_state`, in a sentence."""
    if from_state == to_state:
        return f"the violation is already {to_state}"
    targets = ", ".join(sorted(TRANSITIONS.get(from_state, ())))
    return f"a {from_state} violation cannot become {to_state}; it can become {targets}"


def next_states(state: str) -> list[tuple[str, str]]:
    """(state, button label) of the moves a violation in `state` allows, in a fixed order."""
    return [(target, ACTION_LABELS[target]) for target in STATES if allowed(state, target)]


def check_request(state: object, note: object) -> tuple[str, str]:
    """The requested state and note, or ReviewError naming the field that is wrong."""
    issues = []
    if not isinstance(state, str) or state not in STATES:
        issues.append(Issue("/state", f"state is one of {', '.join(STATES)}"))
    if note is None:
        note = ""
    if not isinstance(note, str):
        issues.append(Issue("/note", "note is a string"))
    elif len(note) > MAX_NOTE:
        issues.append(Issue("/note", f"a note has at most {MAX_NOTE} characters"))
    elif "\x00" in note:
        issues.append(Issue("/note", "a note cannot hold the NUL character"))
    if issues:
        raise ReviewError(issues)
    return str(state), str(note).strip()


@dataclass
class Outcome:
    """What a review did: the violations it moved, and those it left with the reason."""

    state: str
    reviewed: list[int] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reviewed": self.reviewed,
            "refused": [{"id": pk, "message": message} for pk, message in self.refused],
        }


def reviewable(caller: Caller) -> QuerySet[Violation]:
    """The violations the caller may review (none for a key without the `review` scope)."""
    return Violation.objects.for_caller(caller, "review")


def review(selection: QuerySet[Violation], state: str, note: str, caller: Caller) -> Outcome:
    """Move every violation of `selection` that may go to `state` there; record each change.

    `selection` must already be narrowed to what the caller may review (`reviewable`).
    A violation whose state does not allow the move is left as it is and listed in
    `refused` with the reason. A fixed number of queries whatever the selection's size.
    """
    outcome = Outcome(state=state)
    now = timezone.now()
    user = caller.user_or_none
    with transaction.atomic():
        locked = list(
            selection.select_for_update()
            .order_by("pk")
            .values_list("pk", "state", "tenant_id", "guardrail_id", "revision_id", "severity", "created_at")[
                : MAX_BULK + 1
            ]
        )
        if len(locked) > MAX_BULK:
            raise ReviewError([Issue("/ids", f"a review acts on at most {MAX_BULK} violations: narrow the filter")])
        current = [(pk, old, tenant) for pk, old, tenant, *_ in locked]
        movable = [(pk, old, tenant) for pk, old, tenant in current if allowed(old, state)]
        outcome.refused = [(pk, refusal(old, state)) for pk, old, _ in current if not allowed(old, state)]
        # The quality roll-up moves with the states, in this transaction.
        violation_days.count_reviews(
            (violation_days.key_of(tenant, guardrail, revision, severity, created), old, state)
            for _, old, tenant, guardrail, revision, severity, created in locked
            if allowed(old, state)
        )
        if movable:
            Violation.objects.filter(pk__in=[pk for pk, _, _ in movable]).update(
                state=state, reviewed_by=user, reviewed_by_label=caller.label, reviewed_at=now, review_note=note
            )
            ViolationReview.objects.bulk_create(
                ViolationReview(
                    tenant_id=tenant,
                    violation_id=pk,
                    reviewer=user,
                    reviewer_label=caller.label,
                    from_state=old,
                    to_state=state,
                    note=note,
                    created_at=now,
                )
                for pk, old, tenant in movable
            )
            audit.record_many(
                "violation.review",
                [
                    audit.Change(tenant, str(pk), f"violation {pk}", {"state": old}, {"state": state, "note": note})
                    for pk, old, tenant in movable
                ],
                actor=caller,
            )
            signals.violations_reviewed.send(
                Violation, tenant_ids=sorted({t for _, _, t in movable}), violation_ids=[pk for pk, _, _ in movable]
            )
        outcome.reviewed = [pk for pk, _, _ in movable]
    return outcome


def review_one(violation_pk: int, state: str, note: str, caller: Caller) -> Outcome:
    """Review one violation; ReviewError when its state does not allow the move.

    The caller must be able to see it (else Violation.DoesNotExist: the views answer 404).
    """
    selection = reviewable(caller).filter(pk=violation_pk)
    outcome = review(selection, state, note, caller)
    if outcome.refused:
        raise ReviewError([Issue("/state", outcome.refused[0][1])])
    if not outcome.reviewed:
        raise Violation.DoesNotExist(violation_pk)
    return outcome
