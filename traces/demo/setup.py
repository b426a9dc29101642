"""The demo's tenants and people, guardrails and judge models: each made when missing."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User

from guardrails.models import Guardrail, JudgeModelRegistration
from guardrails.services import Author, register_document, save_guardrail, set_shadow
from kindgi_console.tenancy import changes
from kindgi_console.tenancy.models import Membership, Tenant
from traces.demo.catalogue import (
    DEMO_JUDGE_MODELS,
    EXAMPLES,
    EXTRA_GUARDRAILS,
    OLD_DEMO_JUDGE_BASE_URL,
    PASSWORD,
    PEOPLE,
    TENANTS,
)
from traces.demo.judge_endpoint import PATH as DEMO_JUDGE_PATH
from traces.judge.registry import registration_doc, save_registration, validate_registration


def ensure_people() -> dict[str, User]:
    """The demo's tenants, people and roles; what is missing is made through the services
    that write the audit log, like any other tenant and member."""
    tenants = {
        slug: Tenant.objects.filter(slug=slug).first() or changes.create_tenant(slug, name)
        for slug, name in TENANTS.items()
    }
    users = {}
    for username, (superuser, roles) in PEOPLE.items():
        user, created = User.objects.get_or_create(
            username=username,
            defaults={"email": f"{username}@demo.kindgi.test", "is_superuser": superuser, "is_staff": superuser},
        )
        if created:
            user.set_password(PASSWORD)
            user.save(update_fields=["password"])
        for slug, role in roles.items():
            if not Membership.objects.filter(user=user, tenant=tenants[slug]).exists():
                changes.add_member(user, tenants[slug], role)
        users[username] = user
    return users


def demo_guardrails() -> list[dict[str, Any]]:
    documents = [json.loads(path.read_text()) for path in sorted(EXAMPLES.glob("*.json"))]
    return documents + EXTRA_GUARDRAILS


def ensure_guardrails(author: User) -> int:
    """Save each demo guardrail that is missing; an existing one is left as it is."""
    existing = set(Guardrail.objects.values_list("guardrail_id", flat=True))
    saved = 0
    for document in demo_guardrails():
        if document["id"] in existing:
            continue
        registration = register_document(document)
        if not registration.valid:
            problems = "; ".join(f"{i.path}: {i.message}" for i in registration.errors)
            raise ValueError(f"demo guardrail {document['id']} does not register: {problems}")
        save_guardrail(document, Author(user=author, label=author.username))
        saved += 1
    # A judge in shadow, so that its page shows what shadow is: judged and recorded, never a
    # violation, until an author promotes it.
    judge = Guardrail.objects.filter(guardrail_id="research-grounded-judge").first()
    if "research-grounded-judge" not in existing and judge is not None:
        set_shadow(judge, True, None)
    return saved


def ensure_judge_models() -> dict[str, JudgeModelRegistration]:
    """Register each demo judge model that is missing; an existing one is left as it is."""
    existing = set(JudgeModelRegistration.objects.values_list("model_id", flat=True))
    for doc in DEMO_JUDGE_MODELS:
        if doc["id"] in existing:
            continue
        problems = validate_registration(doc)
        if problems:
            raise ValueError(
                f"demo judge model {doc['id']} does not register: "
                + "; ".join(f"{i.path}: {i.message}" for i in problems)
            )
        save_registration(doc)
    ids = [doc["id"] for doc in DEMO_JUDGE_MODELS]
    return {row.model_id: row for row in JudgeModelRegistration.objects.filter(model_id__in=ids)}


def point_judges_at(console_url: str) -> list[str]:
    """Point the demo's judge models at the demo judge of the console serving at `console_url`.

    Only a demo model still served by a demo judge (or by the Ollama address of demos loaded
    before) moves; one an admin pointed elsewhere is left alone. Returns the ids moved; each
    move is a registration change in the audit log.
    """
    wanted = f"{console_url.rstrip('/')}/{DEMO_JUDGE_PATH}"
    moved = []
    rows = JudgeModelRegistration.objects.filter(model_id__in=[doc["id"] for doc in DEMO_JUDGE_MODELS])
    for row in rows:
        demo_served = row.base_url == OLD_DEMO_JUDGE_BASE_URL or row.base_url.endswith(f"/{DEMO_JUDGE_PATH}")
        if demo_served and row.base_url != wanted:
            save_registration({**registration_doc(row, console_fields=False), "baseUrl": wanted})
            moved.append(row.model_id)
    return sorted(moved)
