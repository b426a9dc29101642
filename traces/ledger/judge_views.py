"""The judge models page: the registry for everyone signed in, its editing for superusers,
and the current tenant's judge policy for that tenant's admins.

Registrations are the whole console's (see traces/ledger/judge_api.py for who may write them
and why); the registry is small (a handful of models), so the page lists it whole in one
query, plus one for the tenant's policy and one for the reader's role.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views import View

from guardrails.models import JudgeModelRegistration, TenantJudgePolicy
from kindgi_console.tenancy.scoping import current_tenant, is_admin_of
from traces.judge.circuit import circuits_of
from traces.judge.registry import (
    api_key_set,
    delete_registration,
    judge_model_of,
    registration_doc,
    save_policy,
    save_registration,
    validate_policy,
    validate_registration,
)

THINKING_CHOICES = [
    ("", "Does not think"),
    ("effort", "Lowest reasoning effort (OpenAI)"),
    ("budgetTokens", "Minimum thinking budget in tokens (Anthropic)"),
]


class JudgeModelForm(forms.Form):
    """A registration as a form; checked by validate_registration, errors on their fields."""

    id = forms.CharField(label="Id", max_length=100, help_text="The console's id for this model.")
    provider = forms.ChoiceField(
        choices=[
            ("openai", "OpenAI Chat Completions (also vLLM, Ollama, llama.cpp)"),
            ("anthropic", "Anthropic Messages"),
        ]
    )
    model = forms.CharField(label="Provider's model name", max_length=200)
    base_url = forms.CharField(label="Base URL", max_length=500)
    api_key_env = forms.CharField(
        label="API key variable",
        max_length=128,
        required=False,
        help_text="The NAME of the environment variable holding the key (the key never enters "
        "the console). Empty for a server that takes no key.",
    )
    input_price = forms.CharField(label="Input, USD per million tokens", max_length=40)
    output_price = forms.CharField(label="Output, USD per million tokens", max_length=40)
    capabilities = forms.CharField(
        label="Capabilities", required=False, help_text="Comma-separated, such as json, reasoning, long-context."
    )
    thinking = forms.ChoiceField(choices=THINKING_CHOICES, required=False)
    thinking_value = forms.CharField(
        label="Least thinking",
        required=False,
        max_length=32,
        help_text="minimal, low… (OpenAI) or 1024 to 2048 tokens (Anthropic).",
    )
    sampling = forms.BooleanField(
        required=False, initial=True, label="Takes a temperature (uncheck for reasoning models)"
    )
    enabled = forms.BooleanField(required=False, initial=True, label="Enabled (routed to)")

    FIELD_OF_POINTER = {
        "/id": "id",
        "/provider": "provider",
        "/model": "model",
        "/baseUrl": "base_url",
        "/apiKeyEnv": "api_key_env",
        "/pricing/inputUsdPerMTok": "input_price",
        "/pricing/outputUsdPerMTok": "output_price",
        "/capabilities": "capabilities",
        "/thinking": "thinking_value",
        "/sampling": "sampling",
        "/enabled": "enabled",
    }

    @classmethod
    def of(cls, row: JudgeModelRegistration) -> JudgeModelForm:
        doc = registration_doc(row)
        thinking = doc.get("thinking") or {}
        kind = next(iter(thinking), "")
        return cls(
            initial={
                "id": doc["id"],
                "provider": doc["provider"],
                "model": doc["model"],
                "base_url": doc["baseUrl"],
                "api_key_env": doc["apiKeyEnv"] or "",
                "input_price": doc["pricing"]["inputUsdPerMTok"],
                "output_price": doc["pricing"]["outputUsdPerMTok"],
                "capabilities": ", ".join(doc["capabilities"]),
                "thinking": kind,
                "thinking_value": thinking.get(kind, ""),
                "sampling": doc["sampling"],
                "enabled": doc["enabled"],
            }
        )

    def document(self) -> dict[str, Any]:
        data = self.cleaned_data
        doc: dict[str, Any] = {
            "id": data["id"].strip(),
            "provider": data["provider"],
            "model": data["model"].strip(),
            "baseUrl": data["base_url"].strip(),
            "apiKeyEnv": data["api_key_env"].strip() or None,
            "pricing": {
                "inputUsdPerMTok": data["input_price"].strip(),
                "outputUsdPerMTok": data["output_price"].strip(),
            },
            "capabilities": [c.strip() for c in data["capabilities"].split(",") if c.strip()],
            "sampling": data["sampling"],
            "enabled": data["enabled"],
        }
        if data["thinking"]:
            value: Any = data["thinking_value"].strip()
            if data["thinking"] == "budgetTokens":
                value = int(value) if value.isdigit() else value
            doc["thinking"] = {data["thinking"]: value}
        return doc

    def checked_document(self) -> dict[str, Any] | None:
        """The registration if the form and the registry's rules accept it; else errors added."""
        if not self.is_valid():
            return None
        doc = self.document()
        for issue in validate_registration(doc):
            field = next(
                (
                    name
                    for pointer, name in self.FIELD_OF_POINTER.items()
                    if issue.path == pointer or issue.path.startswith(pointer + "/")
                ),
                None,
            )
            self.add_error(field, issue.message)
        return None if self.errors else doc


def _superuser(request: HttpRequest) -> None:
    if not request.user.is_superuser:
        raise PermissionDenied("only a superuser registers judge models")


class JudgeModelListView(LoginRequiredMixin, View):
    """`judge-model-list`: the registry, the create form (superusers) and the tenant's policy."""

    def get(self, request: HttpRequest) -> HttpResponse:
        return self.page(request, JudgeModelForm())

    def page(self, request: HttpRequest, form: JudgeModelForm | None, status: int = 200) -> HttpResponse:
        tenant = current_tenant(request)
        rows = list(JudgeModelRegistration.objects.all())
        allowed = None
        if tenant is not None:
            allowed = TenantJudgePolicy.objects.filter(tenant=tenant).values_list("allowed_models", flat=True).first()
        circuits = circuits_of([judge_model_of(row) for row in rows])
        models = [
            {
                "row": row,
                "doc": registration_doc(row, console_fields=False),
                "key_set": api_key_set(row),
                "allowed": allowed is None or row.model_id in allowed,
                "circuit": circuit,
                "circuit_dict": circuit.to_dict(),
            }
            for row, circuit in zip(rows, circuits, strict=True)
        ]
        context = {
            "models": models,
            "form": form if request.user.is_superuser else None,
            "can_register": request.user.is_superuser,
            "can_set_policy": is_admin_of(request.user, tenant),
            "policy_all": allowed is None,
            "nav_active": "judge-models",
        }
        return render(request, "guardrails/judge_models.html", context, status=status)

    def post(self, request: HttpRequest) -> HttpResponse:
        _superuser(request)
        form = JudgeModelForm(request.POST)
        doc = form.checked_document()
        if doc is not None and JudgeModelRegistration.objects.filter(model_id=doc["id"]).exists():
            form.add_error("id", f"judge model {doc['id']!r} is already registered")
            doc = None
        if doc is None:
            return self.page(request, form, status=400)
        save_registration(doc)
        messages.success(request, f"Judge model {doc['id']} registered.")
        return HttpResponseRedirect(reverse("judge-model-list"))


class JudgeModelEditView(LoginRequiredMixin, View):
    """`judge-model-edit`: replace a registration (superusers); its id stays."""

    def row(self, model_id: str) -> JudgeModelRegistration:
        row = JudgeModelRegistration.objects.filter(model_id=model_id).first()
        if row is None:
            raise Http404
        return row

    def get(self, request: HttpRequest, model_id: str) -> HttpResponse:
        _superuser(request)
        return self.page(request, self.row(model_id), None)

    def page(
        self, request: HttpRequest, row: JudgeModelRegistration, form: JudgeModelForm | None, status: int = 200
    ) -> HttpResponse:
        form = form or JudgeModelForm.of(row)
        form.fields["id"].disabled = True
        return render(
            request,
            "guardrails/judge_model_edit.html",
            {"row": row, "form": form, "nav_active": "judge-models"},
            status=status,
        )

    def post(self, request: HttpRequest, model_id: str) -> HttpResponse:
        _superuser(request)
        row = self.row(model_id)
        form = JudgeModelForm({**request.POST.dict(), "id": row.model_id})
        doc = form.checked_document()
        if doc is None:
            return self.page(request, row, form, status=400)
        save_registration(doc, model_id=row.model_id)
        messages.success(request, f"Judge model {row.model_id} saved.")
        return HttpResponseRedirect(reverse("judge-model-list"))


class JudgeModelDeleteView(LoginRequiredMixin, View):
    """`judge-model-delete` (POST, superusers): the ledger keeps naming the model's id."""

    def post(self, request: HttpRequest, model_id: str) -> HttpResponse:
        _superuser(request)
        if not delete_registration(model_id):
            raise Http404
        messages.success(request, f"Judge model {model_id} deleted.")
        return HttpResponseRedirect(reverse("judge-model-list"))


class JudgePolicyView(LoginRequiredMixin, View):
    """`judge-policy-update` (POST): the current tenant's allowed models, by its admins."""

    def post(self, request: HttpRequest) -> HttpResponse:
        tenant = current_tenant(request)
        if tenant is None or not is_admin_of(request.user, tenant):
            raise PermissionDenied("only an admin of this tenant sets its judge policy")
        chosen = request.POST.getlist("allowed")
        doc: dict[str, Any] = {"allowedModels": None if request.POST.get("all") else chosen}
        issues = validate_policy(doc)
        if issues:
            messages.error(request, issues[0].message)
        else:
            save_policy(tenant, doc)
            messages.success(request, f"Judge policy of {tenant.slug} saved.")
        return HttpResponseRedirect(reverse("judge-model-list"))
