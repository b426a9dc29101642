"""Claiming a violation: one reviewer handles it, and the others see who and since when.

Violations of an `escalate` guardrail land in the review queue its `escalateTo` names
(`Violation.queue`); a reviewer takes one by claiming it. Who may claim is who may review
(`workflow.reviewable`: a role in the violation's tenant, or a key with the `review` scope
bound to it); the holder is named by the caller's label (a user name, or `key:<prefix>`).

- Claiming a violation nobody holds makes it the caller's (`assignee`, `assigned_at`);
  claiming one's own again changes nothing. One that someone else holds is refused (409,
  naming who and since when) until they release it. A closed violation (resolved, false
  positive) is not claimed: nothing is left to handle; reopen it first.
- Releasing (unclaiming) is the holder's; an admin of the tenant may release anyone's
  claim (a reviewer who is away). Releasing an unclaimed violation changes nothing.

The claim is one conditional UPDATE (`assignee IS NULL`), so two reviewers claiming at once
on either database get one claim and one refusal. Each claim and release is audited
(`violation.claim`, `violation.unclaim`) in the transaction of its change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from guardrails.engine.types import Issue, IssuesError
from kindgi_console.audit import log as audit
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller, is_admin_of
from traces.models import Violation
from traces.review.workflow import reviewable

State = Violation.State
#: A violation in these states is closed: it cannot be claimed.
CLOSED = frozenset({State.RESOLVED, State.FALSE_POSITIVE})


class ClaimError(IssuesError):
    """A claim or release refused: held by someone else (409), or closed (409)."""


@dataclass(frozen=True)
class Claim:
    """Who holds a violation now (None: nobody), and since when."""

    violation: int
    assignee: str | None
    assigned_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.violation,
            "assignee": self.assignee,
            "assignedAt": self.assigned_at.isoformat().replace("+00:00", "Z") if self.assigned_at else None,
        }


def _current(violation_pk: int, caller: Caller) -> Violation:
    """The violation as the caller may review it; Violation.DoesNotExist when they cannot."""
    found = (
        reviewable(caller)
        .filter(pk=violation_pk)
        .only("pk", "tenant_id", "state", "assignee", "assigned_at", "queue")
        .first()
    )
    if found is None:
        raise Violation.DoesNotExist(violation_pk)
    return found


def held_by(violation: Violation) -> str:
    """Who holds the violation and since when, in a sentence's words."""
    since = f" since {violation.assigned_at:%Y-%m-%d %H:%M} UTC" if violation.assigned_at else ""
    return f"{violation.assignee} holds violation {violation.pk}{since}"


def claim(violation_pk: int, caller: Caller) -> Claim:
    """Make the violation the caller's (see the module); ClaimError 409 when someone else
    holds it or it is closed, Violation.DoesNotExist when the caller cannot review it."""
    with transaction.atomic():
        violation = _current(violation_pk, caller)
        if violation.assignee == caller.label:
            return Claim(violation.pk, violation.assignee, violation.assigned_at)
        if violation.state in CLOSED:
            raise ClaimError(
                [Issue("/state", f"a {violation.state} violation is closed: reopen it to claim it")], status=409
            )
        now = timezone.now()
        taken = (
            Violation.objects.filter(pk=violation.pk, assignee__isnull=True)
            .exclude(state__in=CLOSED)
            .update(assignee=caller.label, assigned_at=now)
        )
        if not taken:
            raise ClaimError([Issue("/assignee", _refusal(violation_pk, caller))], status=409)
        _audit("violation.claim", violation, None, caller.label, caller)
    return Claim(violation.pk, caller.label, now)


def _refusal(violation_pk: int, caller: Caller) -> str:
    """Why a claim found the violation taken (read again: another claim was just made)."""
    holder = _current(violation_pk, caller)
    if holder.assignee is None and holder.state in CLOSED:  # closed meanwhile
        return f"violation {violation_pk} is {holder.state}: reopen it to claim it"
    if holder.assignee is None:  # claimed and released meanwhile
        return f"violation {violation_pk} changed hands meanwhile: claim it again"
    return f"{held_by(holder)}: they, or an admin of the tenant, release it first"


def unclaim(violation_pk: int, caller: Caller) -> Claim:
    """Release the violation (its holder, or an admin of its tenant); ClaimError 409 when
    someone else holds it and the caller may not release it."""
    with transaction.atomic():
        violation = _current(violation_pk, caller)
        holder = violation.assignee
        if holder is None:
            return Claim(violation.pk, None, None)
        if holder != caller.label and not may_release_others(caller, violation.tenant_id):
            raise ClaimError(
                [Issue("/assignee", f"{held_by(violation)}: only they, or an admin of the tenant, release it")],
                status=409,
            )
        released = Violation.objects.filter(pk=violation.pk, assignee=holder).update(assignee=None, assigned_at=None)
        if released:
            _audit("violation.unclaim", violation, holder, None, caller)
    return Claim(violation.pk, None, None)


def may_release_others(caller: Caller, tenant_id: int) -> bool:
    """Whether the caller may release a claim that is not theirs: an admin of the tenant."""
    user = caller.user_or_none
    return user is not None and is_admin_of(user, Tenant.objects.filter(pk=tenant_id).first())


def _audit(action: str, violation: Violation, before: str | None, after: str | None, caller: Caller) -> None:
    audit.record(
        action,
        tenant=violation.tenant_id,
        object_id=str(violation.pk),
        object_repr=f"violation {violation.pk}",
        before={"assignee": before},
        after={"assignee": after},
        actor=caller,
    )
