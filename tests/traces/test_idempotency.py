"""`Idempotency-Key` on POST evaluations: a retried request starts nothing twice."""

from __future__ import annotations

from typing import Any

import pytest
from kombu.exceptions import OperationalError

from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail
from traces.models import Evaluation
from traces.runs import evaluations

URL = "/api/v1/evaluations"


@pytest.fixture
def guardrail(db: Any) -> Any:
    return save_guardrail(make_guardrail(), Author(user=None, label="fixture"))


def start(client: Any, body: dict[str, Any], key: str | None) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(URL, body, format="json", **headers)


def test_the_same_key_and_body_answer_the_same_and_start_one_run(api: Any, alice: Any, guardrail: Any) -> None:
    client = api(alice)
    first = start(client, {"tenant": "acme"}, "retry-1")
    again = start(client, {"tenant": "acme"}, "retry-1")
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert Evaluation.objects.count() == 1


def test_the_same_key_with_another_body_is_a_422(api: Any, alice: Any, guardrail: Any) -> None:
    client = api(alice)
    start(client, {"tenant": "acme"}, "retry-1")
    other = start(client, {"tenant": "acme", "mode": "runtime"}, "retry-1")
    assert other.status_code == 422
    assert other.json()["errors"][0]["path"] == "/Idempotency-Key"
    assert Evaluation.objects.count() == 1


def test_keys_are_the_callers_own_and_optional(api: Any, alice: Any, acme_key: str, guardrail: Any) -> None:
    start(api(alice), {"tenant": "acme"}, "k")
    start(api(acme_key), {"tenant": "acme"}, "k")
    start(api(alice), {"tenant": "acme"}, None)
    start(api(alice), {"tenant": "acme"}, None)
    assert Evaluation.objects.count() == 4


def test_a_bad_key_is_a_400(api: Any, alice: Any, guardrail: Any) -> None:
    response = start(api(alice), {"tenant": "acme"}, "x" * 256)
    assert response.status_code == 400 and not Evaluation.objects.exists()


def test_a_refused_request_can_be_retried_with_its_key(api: Any, alice: Any, guardrail: Any) -> None:
    client = api(alice)
    assert start(client, {"tenant": "acme", "mode": "later"}, "k").status_code == 400
    assert start(client, {"tenant": "acme", "mode": "later"}, "k").status_code == 400
    assert not Evaluation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_retry_after_the_broker_failed_gets_the_run_and_no_second(
    api: Any, alice: Any, guardrail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker was down when the run was to be sent: 500, but the run was stored. The
    client retries with its key: the same run, not a second one."""

    def broker_down(evaluation_id: int) -> None:
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(evaluations, "send_start", broker_down)
    client = api(alice)
    client.raise_request_exception = False
    failed = start(client, {"tenant": "acme"}, "retry-1")
    assert failed.status_code == 500 and "errors" in failed.json()
    retried = start(client, {"tenant": "acme"}, "retry-1")
    assert retried.status_code == 202
    assert retried.json()["id"] == Evaluation.objects.get().pk
