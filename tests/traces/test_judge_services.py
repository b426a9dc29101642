"""The Context services of an evaluation: opened by `evaluation_services`, closed by `with`."""

from __future__ import annotations

from typing import Any

import pytest

from kindgi_console.tenancy.models import Tenant
from traces.judge.services import EvaluationServices, evaluation_services


def test_leaving_the_block_closes_the_judges_connections_even_on_error(db: Any, acme: Tenant) -> None:
    with pytest.raises(RuntimeError), evaluation_services(acme) as services:
        assert services.judge is not None
        client = services.judge.http_client()
        raise RuntimeError("the evaluation failed")
    assert client.is_closed
    assert services.judge._client is None


def test_the_services_charge_the_run_or_the_preview_they_are_opened_for(db: Any, acme: Tenant) -> None:
    run, preview = object(), object()
    with evaluation_services(acme, evaluation=run) as services:
        assert services.judge is not None
        assert (services.judge.tenant, services.judge.evaluation, services.judge.preview) == (acme, run, None)
    with evaluation_services(acme, preview=preview) as services:
        assert services.judge is not None
        assert (services.judge.evaluation, services.judge.preview) == (None, preview)


def test_the_context_binds_only_the_services_there_are() -> None:
    trace = {"id": "t1", "tenant": "acme", "agent": "a", "flow": "f"}
    context = EvaluationServices().context(trace, "runtime")
    assert (context.mode, context.tenant, context.agent, context.flow) == ("runtime", "acme", "a", "f")
    assert dict(context.services) == {}
