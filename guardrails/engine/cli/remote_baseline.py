"""`--baseline console`: the console's last finished run of the same guardrails as a baseline.

The console's API has what it takes, scoped to the key's tenant like every endpoint:
`GET evaluations` (the runs, newest first) gives the newest finished run in mode ci that
evaluated a guardrail of this run, and `GET evaluations/{id}/results?status=fail` (then
`error`), cursor-paged, its failing traces. A guardrail that run did not evaluate has no
baseline: its failing traces are all newly failing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import httpx
import orjson

from guardrails.engine import environment
from guardrails.engine.cli.files import BadInput
from guardrails.engine.cli.outcome import Baseline

RUNS_PATH = "/api/v1/evaluations"
#: The newest runs looked through for one of these guardrails (pages of 50).
MAX_RUN_PAGES = 20
#: A run's failing results read at most (pages of RESULTS_PAGE): 1,000,000.
RESULTS_PAGE = 500
MAX_RESULT_PAGES = 2000


def console_baseline(url: str, guardrail_ids: Iterable[str]) -> Baseline:
    """The failing (guardrail, trace) pairs of the console's last finished ci run of any of
    `guardrail_ids`; BadInput when there is none or the console refuses."""
    key = environment.ENGINE.text("KINDGI_API_KEY").strip()
    if not key:
        raise BadInput("--baseline console needs the API key in the environment variable KINDGI_API_KEY")
    base = url.rstrip("/")
    wanted = set(guardrail_ids)
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30.0) as client:
        run = _last_run(client, wanted)
        failing: dict[str, set[str]] = {}
        for status in ("fail", "error"):
            query = {"status": status, "limit": str(RESULTS_PAGE)}
            for row in _rows(client, f"{RUNS_PATH}/{run}/results", query, MAX_RESULT_PAGES):
                failing.setdefault(_text(row, "guardrail"), set()).add(_text(row, "trace"))
    return Baseline(f"{base}{RUNS_PATH}/{run}", failing)


def _last_run(client: httpx.Client, wanted: set[str]) -> int:
    for run in _rows(client, RUNS_PATH, {}, MAX_RUN_PAGES, exhaustible=True):
        evaluated = {g.get("id") for g in run.get("guardrails") or [] if isinstance(g, Mapping)}
        if run.get("status") == "succeeded" and run.get("mode") == "ci" and wanted & evaluated:
            run_id = run.get("id")
            if isinstance(run_id, int):
                return run_id
    raise BadInput(f"{client.base_url}: the console has no finished ci run of these guardrails to compare with")


def _rows(
    client: httpx.Client, path: str, query: dict[str, str], max_pages: int, *, exhaustible: bool = False
) -> Iterator[Mapping[str, Any]]:
    """The rows of a cursor-paged list, following `next`, at most `max_pages` pages."""
    url: str | None = path
    params: dict[str, str] | None = query
    for _ in range(max_pages):
        assert url is not None
        body = _get(client, url, params)
        yield from body["results"]
        url, params = body.get("next"), None
        if not url:
            return
    if not exhaustible:
        raise BadInput(f"{client.base_url}{path}: more than {max_pages} pages")


def _get(client: httpx.Client, url: str, params: dict[str, str] | None) -> dict[str, Any]:
    try:
        response = client.get(url, params=params)
    except httpx.HTTPError as exc:
        raise BadInput(f"{client.base_url}{url}: cannot download: {exc}") from exc
    if response.status_code != 200:
        raise BadInput(f"{response.url}: the console answered {response.status_code}")
    try:
        body: object = orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{response.url}: not valid JSON: {exc.msg}") from exc
    if not isinstance(body, dict):
        raise BadInput(f"{response.url}: must be a JSON object")
    results = body.get("results")
    if not isinstance(results, list) or not all(isinstance(row, Mapping) for row in results):
        raise BadInput(f"{response.url}: /results: must be an array of objects")
    next_url = body.get("next")
    if next_url is not None and not isinstance(next_url, str):
        raise BadInput(f"{response.url}: /next: must be a string or null")
    return body


def _text(row: Mapping[str, Any], name: str) -> str:
    value = row.get(name)
    if not isinstance(value, str):
        raise BadInput(f"a result of the console: /{name}: must be a string")
    return value
