"""Judge models and tenant judge policies, in the wire shape of the judge-model registry.

A registration (what `POST /api/v1/judge-models` takes and `GET` gives back)::

    {
      "id": "gpt-judge",                     # the console's id for this registration
      "provider": "openai",                  # "openai": Chat Completions (also vLLM, Ollama,
                                             #   llama.cpp); "anthropic": Messages
      "model": "gpt-4.1-mini",               # the provider's model name
      "baseUrl": "https://api.openai.com/v1",
      "apiKeyEnv": "OPENAI_API_KEY",         # name of the environment variable holding the key;
                                             #   absent or null for a server that takes no key
      "pricing": {"inputUsdPerMTok": "0.40", "outputUsdPerMTok": "1.60"},
      "capabilities": ["json", "long-context"],
      "thinking": {"effort": "minimal"},     # absent for a model that does not think;
                                             #   {"budgetTokens": 1024} for an anthropic model
      "sampling": true                       # false: the model takes no temperature
    }

Prices are read as exact decimals (a JSON number or a decimal string) and written back as
decimal strings, so that the ledger's arithmetic never goes through binary floating point.
The key itself never enters a registration: only the name of the variable that holds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from ..environment import ENGINE
from ..schema import validate_against
from ..types import Issue, IssuesError

Provider = Literal["openai", "anthropic"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic")

_PRICE = {
    # `minimum` applies to a number, `pattern` to a string: one schema, plain error messages.
    "type": ["number", "string"],
    "minimum": 0,
    "pattern": r"^(0|[1-9][0-9]*)(\.[0-9]+)?$",
    "description": "USD per million tokens: a number, or a decimal string for exactness.",
}

CAPABILITY_NAME_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": r"^[a-z0-9][a-z0-9._-]{0,63}$",
    "description": "A capability name, such as json, reasoning or long-context.",
}

JUDGE_MODEL_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Judge model registration",
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "provider", "model", "baseUrl", "pricing"],
    "properties": {
        "id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$"},
        "provider": {"enum": list(PROVIDERS)},
        "model": {"type": "string", "minLength": 1, "maxLength": 200},
        "baseUrl": {"type": "string", "format": "uri", "pattern": r"^https?://[^\s]+$"},
        "apiKeyEnv": {"type": ["string", "null"], "pattern": r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"},
        "pricing": {
            "type": "object",
            "additionalProperties": False,
            "required": ["inputUsdPerMTok", "outputUsdPerMTok"],
            "properties": {"inputUsdPerMTok": _PRICE, "outputUsdPerMTok": _PRICE},
        },
        "capabilities": {"type": "array", "uniqueItems": True, "items": CAPABILITY_NAME_SCHEMA},
        "thinking": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "minProperties": 1,
            "maxProperties": 1,
            "properties": {
                # Anthropic: the smallest budget_tokens the model accepts. The Messages API
                # refuses a budget under 1,024; the budget must leave the 256 answer tokens
                # inside the 2,048 the judge adds for thinking.
                "budgetTokens": {"type": "integer", "minimum": 1024, "maximum": 2048},
                # OpenAI: the lowest reasoning_effort the model accepts (minimal, low, ...).
                "effort": {"type": "string", "pattern": r"^[a-z][a-z_-]{0,31}$"},
            },
        },
        "sampling": {"type": "boolean", "default": True},
    },
    "allOf": [
        {
            "if": {
                "properties": {"provider": {"const": "anthropic"}, "thinking": {"type": "object"}},
                "required": ["provider", "thinking"],
            },
            "then": {"properties": {"thinking": {"required": ["budgetTokens"]}}},
        },
        {
            "if": {
                "properties": {"provider": {"const": "openai"}, "thinking": {"type": "object"}},
                "required": ["provider", "thinking"],
            },
            "then": {"properties": {"thinking": {"required": ["effort"]}}},
        },
    ],
}


class InvalidJudgeModel(IssuesError, ValueError):
    """A registration that does not match JUDGE_MODEL_SCHEMA; `issues` point at the fields."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__(issues)
        self.args = ("; ".join(f"{issue.path or '/'}: {issue.message}" for issue in issues),)


def validate_judge_model(doc: object, *, base_path: str = "") -> list[Issue]:
    """Every error of a judge-model registration, with JSON pointers under `base_path`."""
    return validate_against(JUDGE_MODEL_SCHEMA, doc, base_path=base_path)


#: The console's own settings, which a judge model's `apiKeyEnv` may not name: that variable's
#: value is sent to the model's URL as its key. Every name under the console's prefixes (which
#: hold all but two of the variables kindgi_console/env.py declares: DATABASE_URL,
#: DJANGO_SECRET_KEY, EMAIL_HOST_PASSWORD, KINDGI_API_KEY, ...), those two, every variable the
#: engine declares, and the other names of the secrets Django and PostgreSQL clients read.
#: Any other name holds a provider's key (tests/traces/test_judge_key_env.py checks that
#: every declared variable is refused).
CONSOLE_SETTING_PREFIXES = ("DJANGO_", "KINDGI_", "CELERY_", "DATABASE_", "REDIS_", "EMAIL_")
CONSOLE_SETTING_NAMES = frozenset(
    {variable.name for variable in ENGINE.variables}
    | {"DEFAULT_FROM_EMAIL", "PYTEST_XDIST_WORKER", "SECRET_KEY", "PGPASSWORD"}
)


def is_console_setting(name: str) -> bool:
    """Whether `name` is one of the console's own settings (never a judge model's key)."""
    return name.upper() in CONSOLE_SETTING_NAMES or name.upper().startswith(CONSOLE_SETTING_PREFIXES)


def api_key_env_issues(doc: object, *, base_path: str = "") -> list[Issue]:
    """The refusal of an `apiKeyEnv` that names one of the console's own settings, whose
    value would be sent to the model's URL as a Bearer token."""
    name = doc.get("apiKeyEnv") if isinstance(doc, Mapping) else None
    if not isinstance(name, str) or not is_console_setting(name):
        return []
    return [
        Issue(
            f"{base_path}/apiKeyEnv",
            f"{name} is one of the console's own settings, not a judge model's key: its value would be "
            f"sent to the model's URL. Name a variable that holds only this provider's key (not one of "
            f"the console's settings nor under {', '.join(CONSOLE_SETTING_PREFIXES)})",
        )
    ]


def exact_price(value: object) -> Decimal:
    """A price as an exact Decimal: a float goes through its shortest repr (0.1 -> 0.1)."""
    try:
        return Decimal(str(value))
    except InvalidOperation as error:
        raise ValueError(f"{value!r} is not a decimal price") from error


@dataclass(frozen=True, slots=True)
class Thinking:
    """How the least thinking is asked of a model that thinks: one of the two is set."""

    budget_tokens: int | None = None
    effort: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.budget_tokens is not None:
            return {"budgetTokens": self.budget_tokens}
        return {"effort": self.effort}


@dataclass(frozen=True, slots=True)
class JudgeModel:
    """A registered judge model: where it is, how it is priced and what it can do."""

    id: str
    provider: Provider
    model: str
    base_url: str
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    api_key_env: str | None = None
    capabilities: frozenset[str] = field(default_factory=frozenset)
    thinking: Thinking | None = None
    sampling: bool = True
    #: A disabled registration is never routed to; a guardrail pinned to it gets an error.
    enabled: bool = True

    @property
    def price_per_mtok(self) -> Decimal:
        """What routing ranks models by: the input and output prices added."""
        return self.input_usd_per_mtok + self.output_usd_per_mtok

    def cost_usd(self, input_tokens: int, output_tokens: int) -> Decimal:
        """The exact cost of a call that used these tokens, at this registration's prices."""
        return (
            Decimal(input_tokens) * self.input_usd_per_mtok + Decimal(output_tokens) * self.output_usd_per_mtok
        ) / Decimal(1_000_000)

    @classmethod
    def from_dict(cls, doc: object) -> JudgeModel:
        """A model from its registration; raises InvalidJudgeModel naming every bad field."""
        issues = validate_judge_model(doc)
        if issues:
            raise InvalidJudgeModel(issues)
        assert isinstance(doc, Mapping)  # the schema guarantees an object
        thinking = doc.get("thinking")
        return cls(
            id=doc["id"],
            provider=doc["provider"],
            model=doc["model"],
            base_url=str(doc["baseUrl"]).rstrip("/"),
            input_usd_per_mtok=exact_price(doc["pricing"]["inputUsdPerMTok"]),
            output_usd_per_mtok=exact_price(doc["pricing"]["outputUsdPerMTok"]),
            api_key_env=doc.get("apiKeyEnv"),
            capabilities=frozenset(doc.get("capabilities", ())),
            thinking=None
            if thinking is None
            else Thinking(budget_tokens=thinking.get("budgetTokens"), effort=thinking.get("effort")),
            sampling=bool(doc.get("sampling", True)),
        )

    def to_dict(self) -> dict[str, Any]:
        """The registration in its wire shape (prices as decimal strings)."""
        doc: dict[str, Any] = {
            "id": self.id,
            "provider": self.provider,
            "model": self.model,
            "baseUrl": self.base_url,
            "apiKeyEnv": self.api_key_env,
            "pricing": {
                "inputUsdPerMTok": str(self.input_usd_per_mtok),
                "outputUsdPerMTok": str(self.output_usd_per_mtok),
            },
            "capabilities": sorted(self.capabilities),
            "sampling": self.sampling,
        }
        if self.thinking is not None:
            doc["thinking"] = self.thinking.to_dict()
        return doc


#: The console's own fields of a registration as `GET /api/v1/judge-models` answers it.
_CONSOLE_FIELDS: dict[str, Any] = {
    "enabled": {"type": "boolean"},
    "apiKeySet": {"type": ["boolean", "null"]},
    "circuit": {"type": "object"},
}


def judge_models_of_export(doc: object) -> list[JudgeModel]:
    """The judge models of the console's `GET /api/v1/judge-models` answer, taken as it is.

    `doc` is the JSON array of registrations, or a page of it (``{"results": [...], "next":
    null}``). Each registration may carry the console's `enabled` (false: the model is never
    routed to, as in production), `apiKeySet` (ignored: the key is read here, from the
    variable the registration names) and `circuit` (ignored: the console's breaker state).
    Raises InvalidJudgeModel naming every bad field.
    """
    items, issues = _export_items(doc)
    for index, item in enumerate(items):
        base = f"/results/{index}" if isinstance(doc, Mapping) else f"/{index}"
        issues.extend(_export_item_issues(item, base))
    ids = [item.get("id") for item in items if isinstance(item, Mapping)]
    repeated = sorted({str(model_id) for model_id in ids if ids.count(model_id) > 1})
    if repeated:
        issues.append(Issue("", f"judge model {repeated[0]!r} is registered twice"))
    if issues:
        raise InvalidJudgeModel(issues)
    return [_exported_model(item) for item in items]


def _export_items(doc: object) -> tuple[list[Any], list[Issue]]:
    """The registrations of an export: the array itself, or a page's `results`."""
    if isinstance(doc, list):
        return doc, []
    if isinstance(doc, Mapping) and isinstance(doc.get("results"), list):
        if doc.get("next") is not None:
            return [], [Issue("/next", "this is one page of the list: save every page's results in one array")]
        return list(doc["results"]), []
    return [], [Issue("", "judge models are a JSON array of registrations (the answer of GET judge-models)")]


def _export_item_issues(item: object, base: str) -> list[Issue]:
    if not isinstance(item, Mapping):
        return [Issue(base, "a judge model registration is a JSON object")]
    issues = [
        issue
        for name, schema in _CONSOLE_FIELDS.items()
        if name in item
        for issue in validate_against(schema, item[name], base_path=f"{base}/{name}")
    ]
    return issues + validate_judge_model(_wire(item), base_path=base) + api_key_env_issues(item, base_path=base)


def _wire(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in item.items() if name not in _CONSOLE_FIELDS}


def _exported_model(item: Mapping[str, Any]) -> JudgeModel:
    model = JudgeModel.from_dict(_wire(item))
    return replace(model, enabled=bool(item.get("enabled", True)))


JUDGE_POLICY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Tenant judge policy",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "allowedModels": {
            "description": "Ids of the judge models the tenant's evaluations may use; null = all.",
            "type": ["array", "null"],
            "uniqueItems": True,
            "items": {"type": "string", "minLength": 1},
        }
    },
}


@dataclass(frozen=True, slots=True)
class JudgePolicy:
    """Which registered judge models a tenant's evaluations may use (`allowed` None = all)."""

    tenant: str | None = None
    allowed: frozenset[str] | None = None

    @classmethod
    def allowing(cls, model_ids: Iterable[str] | None, *, tenant: str | None = None) -> JudgePolicy:
        return cls(tenant=tenant, allowed=None if model_ids is None else frozenset(model_ids))

    def allows(self, model_id: str) -> bool:
        return self.allowed is None or model_id in self.allowed

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, tenant: str | None = None) -> JudgePolicy:
        return cls.allowing(doc.get("allowedModels"), tenant=tenant)

    def to_dict(self) -> dict[str, Any]:
        return {"allowedModels": None if self.allowed is None else sorted(self.allowed)}
