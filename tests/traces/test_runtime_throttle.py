"""The runtime path's throttle: POST evaluate and ingestion have a limit of their own, per key,
apart from the API's other requests, and a key may have its own rate."""

from __future__ import annotations

from typing import Any

import pytest

from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import make_trace


@pytest.fixture(autouse=True)
def _small_limits(settings: Any) -> None:
    settings.KINDGI_RUNTIME_RATE = "3/minute"
    settings.KINDGI_API_RATE = "2/minute"


def evaluate(api: Any, key: str, n: int) -> Any:
    return api(key).post("/api/v1/evaluate?store=false", data=make_trace(f"t-{n}"), format="json")


def test_verdicts_have_their_own_limit_apart_from_the_apis(api: Any, acme_key: str) -> None:
    assert [evaluate(api, acme_key, n).status_code for n in range(3)] == [200, 200, 200]  # above the API's 2
    refused = evaluate(api, acme_key, 3)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert api(acme_key).get("/api/v1/traces").status_code == 200  # the API's own count is untouched


def test_ingestion_shares_the_runtime_limit(api: Any, acme_key: str) -> None:
    statuses = [
        api(acme_key).post("/api/v1/traces", data=make_trace(f"i-{n}"), format="json").status_code for n in range(4)
    ]
    assert statuses[:3] == [201, 201, 201] and statuses[3] == 429


def test_a_key_with_a_rate_of_its_own_gets_it(api: Any, acme: Tenant) -> None:
    key, secret = ApiKey.issue(scopes=["evaluate", "ingest", "read"], tenant=acme, name="fleet")
    key.runtime_rate = "5/minute"
    key.full_clean()
    key.save()
    assert [evaluate(api, secret, n).status_code for n in range(6)] == [200] * 5 + [429]


def test_a_malformed_rate_is_refused_naming_the_field(acme: Tenant) -> None:
    from django.core.exceptions import ValidationError

    key, _ = ApiKey.issue(scopes=["evaluate"], tenant=acme, name="fleet")
    key.runtime_rate = "fast"
    with pytest.raises(ValidationError) as refused:
        key.full_clean()
    assert "runtime_rate" in refused.value.message_dict
