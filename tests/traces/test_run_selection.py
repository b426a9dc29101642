"""A run's trace selection means the same on the new-run page and in `POST evaluations`: both
go through `RunTraceFilter` (traces/store/filters.py), so they accept and refuse the same
selections, with the same message at the same field, and store the same filters."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import signed_in
from tests.traces.test_evaluations import store_traces
from traces.models import Evaluation, Upload

URL = "/api/v1/evaluations"
TIME = "an RFC 3339 date-time with a time zone, from year 1 to 9999 in UTC"

# (the selection as the page's fields give it, {field: message} refused, or None: accepted)
SELECTIONS: list[tuple[dict[str, str], dict[str, str] | None]] = [
    ({}, None),
    ({"agent": "support-bot", "flow": "refunds"}, None),
    ({"since": "2026-11-29T10:00:00+02:00", "until": "2026-11-30T00:00:00Z"}, None),
    ({"upload": "OWN"}, None),
    ({"agent": "x" * 201}, {"agent": "agent is a string of at most 200 characters"}),
    ({"flow": "y" * 201}, {"flow": "flow is a string of at most 200 characters"}),
    ({"since": "yesterday"}, {"since": f"since is {TIME}"}),
    ({"since": "2026-11-29 10:00"}, {"since": f"since is {TIME}"}),  # no zone: refused on both
    ({"since": "9999-12-31T23:59:59-23:59"}, {"since": f"since is {TIME}"}),
    ({"until": "0001-01-01T00:00:00+23:59"}, {"until": f"until is {TIME}"}),
    ({"since": "2026-11-29T10:00:00Z", "until": "2026-11-29T09:00:00Z"}, {"until": "until must be after since"}),
    ({"upload": "OTHER"}, {"upload": "no upload of this tenant has this id"}),
    ({"upload": "99999999"}, {"upload": "no upload of this tenant has this id"}),
    (
        {"since": "soon", "agent": "z" * 300},
        {"agent": "agent is a string of at most 200 characters", "since": f"since is {TIME}"},
    ),
]


@pytest.fixture
def uploads(alice: Any, acme: Any, charlie: Any, globex: Any) -> dict[str, str]:
    own = Upload.objects.create(tenant=acme, uploaded_by=alice, original_name="a.jsonl", file="x")
    other = Upload.objects.create(tenant=globex, uploaded_by=charlie, original_name="g.jsonl", file="x")
    return {"OWN": str(own.pk), "OTHER": str(other.pk)}


def _given(selection: dict[str, str], uploads: dict[str, str]) -> dict[str, str]:
    return {name: uploads.get(value, value) for name, value in selection.items()}


def _by_api(api: Any, alice: Any, selection: dict[str, str]) -> tuple[dict[str, str] | None, dict[str, Any]]:
    wire: dict[str, Any] = {name: int(v) if name == "upload" else v for name, v in selection.items()}
    response = api(alice).post(URL, {"tenant": "acme", "guardrails": ["no-refunds"], "filters": wire}, format="json")
    if response.status_code == 202:
        return None, Evaluation.objects.get(pk=response.json()["id"]).trace_filters
    assert response.status_code == 400, response.content
    return {error["path"].removeprefix("/filters/"): error["message"] for error in response.json()["errors"]}, {}


def _by_page(alice: Any, selection: dict[str, str]) -> tuple[dict[str, str] | None, dict[str, Any]]:
    before = set(Evaluation.objects.values_list("pk", flat=True))
    response = signed_in(alice).post("/evaluations/new/", {"guardrails": ["no-refunds"], "mode": "ci", **selection})
    if response.status_code == 302:
        (run,) = Evaluation.objects.exclude(pk__in=before)
        return None, run.trace_filters
    assert response.status_code == 200
    errors = response.context["form"].selection.form.errors
    assert not response.context["form"].errors  # the selection's refusals stand at its fields
    html = response.content.decode()
    for messages in errors.values():
        assert all(str(message) in html for message in messages)  # shown on the page
    return {name: str(messages[0]) for name, messages in errors.items()}, {}


@pytest.mark.parametrize(("selection", "refused"), SELECTIONS)
def test_the_page_and_the_api_accept_and_refuse_the_same_selections(
    api: Any, alice: Any, acme: Any, halt_guardrail: Any, uploads: dict[str, str], selection: Any, refused: Any
) -> None:
    given = _given(selection, uploads)
    api_refused, api_filters = _by_api(api, alice, given)
    page_refused, page_filters = _by_page(alice, given)
    assert api_refused == page_refused == refused
    assert api_filters == page_filters  # stored alike, too


def test_the_page_counts_what_the_api_run_selects(alice: Any, acme: Any, halt_guardrail: Any) -> None:
    store_traces(acme, 3)
    page = signed_in(alice).get("/evaluations/new/?agent=nobody")
    assert page.context["selected_traces"] == 0
    refused = signed_in(alice).get("/evaluations/new/?since=2026-11-29%2010:00")
    assert "since is an RFC 3339 date-time" in refused.content.decode()
    assert refused.context["selected_traces"] == 3  # the refused filter selects by nothing
