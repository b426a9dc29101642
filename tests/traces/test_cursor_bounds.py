"""A cursor that holds a number no key can have (beyond a 64-bit integer, or negative) is a
400 at /cursor, as any cursor the list did not give: never a database error."""

from __future__ import annotations

from typing import Any

import pytest

from kindgi_console import paging
from tests.traces.test_evaluations import run_for, store_traces

HUGE = 10**20


@pytest.mark.parametrize(
    "cursor",
    [
        paging.encode_text(f"fail/{HUGE}", 1),
        paging.encode_text("fail/1", HUGE),
        paging.encode_text("fail/1", -1),
        paging.encode_text("2026-11-29T10:00:00+00:00", HUGE),
    ],
)
def test_a_cursor_beyond_any_key_is_a_400_naming_it(
    api: Any, acme_key: str, acme: Any, guardrails: Any, cursor: str
) -> None:
    store_traces(acme, 2)
    run = run_for(acme)
    for url in (f"/api/v1/evaluations/{run.pk}/results", "/api/v1/traces", "/api/v1/violations"):
        answer = api(acme_key).get(f"{url}?cursor={cursor}")
        assert answer.status_code == 400, (url, answer.status_code)
        assert answer.json()["errors"][0]["path"] == "/cursor"
