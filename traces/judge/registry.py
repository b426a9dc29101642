"""The judge models the console routes to, and each tenant's judge policy.

Registrations (JudgeModelRegistration) are the whole console's; a tenant's policy
(TenantJudgePolicy) narrows which of them judge its traces. Both are validated here as the
API, the pages and the admin take them, and every change is audited.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from guardrails.engine.judge import JudgeModel, JudgePolicy, validate_judge_model
from guardrails.engine.judge.models import api_key_env_issues, exact_price
from guardrails.engine.types import Issue
from guardrails.models import JudgeModelRegistration, TenantJudgePolicy
from guardrails.redaction import forget_key_names
from kindgi_console.audit import log as audit

#: Prices are kept with six decimal places, so that a call's cost is exact at twelve.
PRICE_PLACES = 6
PRICE_MAX = Decimal("1000000")


def validate_registration(doc: object) -> list[Issue]:
    """Every error of a registration as the API and pages take it (the wire shape, plus
    `enabled`), with JSON pointers; prices with at most six decimal places."""
    if not isinstance(doc, dict):
        return [Issue("", "a judge model registration is a JSON object")]
    issues: list[Issue] = []
    if "enabled" in doc and not isinstance(doc["enabled"], bool):
        issues.append(Issue("/enabled", "enabled is true or false"))
    issues.extend(validate_judge_model(wire_part(doc)))
    issues.extend(api_key_env_issues(doc))
    if issues:
        return issues
    for name in ("inputUsdPerMTok", "outputUsdPerMTok"):
        price = exact_price(doc["pricing"][name])
        exponent = price.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -PRICE_PLACES:
            issues.append(Issue(f"/pricing/{name}", "a price has at most six decimal places"))
        elif price >= PRICE_MAX:
            issues.append(Issue(f"/pricing/{name}", "a price is below 1,000,000 USD per million tokens"))
    return issues


def wire_part(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The registration without the console's own fields (`enabled`, and the read-only
    `apiKeySet` and `circuit` a client may send back as it read them)."""
    return {name: value for name, value in doc.items() if name not in ("enabled", "apiKeySet", "circuit")}


def judge_model_of(row: JudgeModelRegistration) -> JudgeModel:
    """The engine's JudgeModel of a registration row (a disabled one is never routed to)."""
    model = JudgeModel.from_dict(registration_doc(row, console_fields=False))
    return model if row.enabled else replace(model, enabled=False)


def registration_doc(row: JudgeModelRegistration, *, console_fields: bool = True) -> dict[str, Any]:
    """A registration row in the wire shape (prices as decimal strings); with
    `console_fields`, also `enabled` and `apiKeySet` (whether its variable is set here)."""
    doc: dict[str, Any] = {
        "id": row.model_id,
        "provider": row.provider,
        "model": row.model,
        "baseUrl": row.base_url,
        "apiKeyEnv": row.api_key_env or None,
        "pricing": {
            "inputUsdPerMTok": _price_text(row.input_usd_per_mtok),
            "outputUsdPerMTok": _price_text(row.output_usd_per_mtok),
        },
        "capabilities": list(row.capabilities or []),
        "sampling": row.sampling,
    }
    if row.thinking:
        doc["thinking"] = dict(row.thinking)
    if console_fields:
        doc["enabled"] = row.enabled
        doc["apiKeySet"] = api_key_set(row)
    return doc


def api_key_set(row: JudgeModelRegistration) -> bool | None:
    """Whether the variable holding the key is set here; None for a model that takes none."""
    if not row.api_key_env:
        return None
    return bool(os.environ.get(row.api_key_env))


def _price_text(value: Decimal) -> str:
    text = format(Decimal(value), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@transaction.atomic
@transaction.atomic
def save_registration(doc: Mapping[str, Any], *, model_id: str | None = None) -> JudgeModelRegistration:
    """Create or replace the registration of `doc["id"]` (validated by validate_registration).

    `model_id`, for a replacement, is the id in the URL: the document may not rename it.
    """
    wanted = model_id or str(doc["id"])
    row = JudgeModelRegistration.objects.select_for_update().filter(model_id=wanted).first()
    before = _audited(row) if row else None
    row = row or JudgeModelRegistration(model_id=wanted)
    model = JudgeModel.from_dict(wire_part(doc))
    row.provider = model.provider
    row.model = model.model
    row.base_url = model.base_url
    row.api_key_env = model.api_key_env or ""
    row.input_usd_per_mtok = model.input_usd_per_mtok
    row.output_usd_per_mtok = model.output_usd_per_mtok
    row.capabilities = sorted(model.capabilities)
    row.thinking = None if model.thinking is None else model.thinking.to_dict()
    row.sampling = model.sampling
    if "enabled" in doc:
        row.enabled = bool(doc["enabled"])
    row.updated_at = timezone.now()
    row.save()
    forget_key_names()
    audit.record(
        "judgemodel.update" if before else "judgemodel.create",
        row,
        before=before,
        after=_audited(row),
        tenant=None,
        object_id=row.model_id,
    )
    return row


def _audited(row: JudgeModelRegistration) -> dict[str, Any]:
    return {**registration_doc(row, console_fields=False), "enabled": row.enabled}


@transaction.atomic
def delete_registration(model_id: str) -> bool:
    """Delete a registration (the ledger keeps naming its id); whether there was one."""
    row = JudgeModelRegistration.objects.select_for_update().filter(model_id=model_id).first()
    if row is None:
        return False
    audit.record("judgemodel.delete", row, before=_audited(row), tenant=None, object_id=model_id)
    row.delete()
    forget_key_names()
    return True


def registered_models() -> list[JudgeModel]:
    """Every registration as the engine's JudgeModel, in one query: routing skips the
    disabled ones, and tells a guardrail pinned to one that it is disabled."""
    return [judge_model_of(row) for row in JudgeModelRegistration.objects.all()]


def policy_of(tenant: Any) -> JudgePolicy:
    """A tenant's judge policy (every model, when it has none), in one query."""
    if tenant is None:
        return JudgePolicy()
    allowed = TenantJudgePolicy.objects.filter(tenant=tenant).values_list("allowed_models", flat=True).first()
    return JudgePolicy.allowing(allowed, tenant=tenant.slug)


def validate_policy(doc: object) -> list[Issue]:
    """Errors of a tenant judge policy `{"allowedModels": [...] | null}`; every id registered."""
    from guardrails.engine.judge import JUDGE_POLICY_SCHEMA
    from guardrails.engine.schema import validate_against

    issues = validate_against(JUDGE_POLICY_SCHEMA, doc)
    if issues or not isinstance(doc, dict) or doc.get("allowedModels") is None:
        return issues
    wanted = list(doc["allowedModels"])
    known = set(JudgeModelRegistration.objects.filter(model_id__in=wanted).values_list("model_id", flat=True))
    return [
        Issue(f"/allowedModels/{index}", f"no judge model {model_id!r} is registered")
        for index, model_id in enumerate(wanted)
        if model_id not in known
    ]


@transaction.atomic
def save_policy(tenant: Any, doc: Mapping[str, Any]) -> TenantJudgePolicy:
    """Set a tenant's policy (validated by validate_policy)."""
    allowed = doc.get("allowedModels")
    before = TenantJudgePolicy.objects.filter(tenant=tenant).values_list("allowed_models", flat=True).first()
    policy, _ = TenantJudgePolicy.objects.update_or_create(
        tenant=tenant,
        defaults={"allowed_models": None if allowed is None else sorted(allowed), "updated_at": timezone.now()},
    )
    audit.record(
        "judgepolicy.update",
        policy,
        before={"allowedModels": before},
        after={"allowedModels": policy.allowed_models},
        object_id=tenant.slug,
        object_repr=str(tenant),
    )
    return policy
