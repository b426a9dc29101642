"""Two authors on one guardrail: a change made on an old revision is refused, never applied.

GET answers the current revision as an ETag; a PUT whose If-Match names another revision
answers 412 with the current one and what changed, saving nothing; two PUTs racing on the
same revision (two threads, two real database connections) give one 200 and one 412; the
editor page carries the revision it was opened on, and a save from it after someone else's
is told so.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from guardrails.models import Guardrail, GuardrailRevision
from tests.conftest import make_guardrail, member, signed_in, together

URL = "/api/v1/guardrails"


def api_as(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def first_revision(client: Any) -> dict[str, Any]:
    document = make_guardrail()
    assert client.post(URL, data=document, format="json").status_code == 201
    return document


def put(client: Any, document: dict[str, Any], if_match: str | None = None) -> Any:
    headers = {} if if_match is None else {"HTTP_IF_MATCH": if_match}
    return client.put(f"{URL}/{document['id']}", data=document, format="json", **headers)


def test_a_put_on_a_stale_revision_answers_412_with_the_current_one_and_saves_nothing(api: Any, alice: Any) -> None:
    client = api(alice)
    document = first_revision(client)
    tag = client.get(f"{URL}/{document['id']}")["ETag"]
    assert tag == f'"{document["id"]}@1"'
    theirs = {**document, "severity": "warn"}
    assert put(client, theirs, tag).status_code == 200  # revision 2

    mine = {**document, "name": "Mine, made on revision 1"}
    response = put(client, mine, tag)

    assert response.status_code == 412, response.content
    body = response.json()
    assert response["ETag"] == f'"{document["id"]}@2"'
    assert body["current"]["revision"] == 2 and body["current"]["document"] == theirs
    assert body["current"]["etag"] == response["ETag"] and body["current"]["savedBy"] == "alice"
    assert body["errors"][0]["path"] == "" and "revision 2" in body["errors"][0]["message"]
    changes = body["changes"]
    assert (changes["from"], changes["to"]) == (1, 2)
    assert {(line["kind"], line["text"].strip().rstrip(",")) for line in changes["lines"] if line["kind"] != "ctx"} >= {
        ("del", f'"severity": "{document["severity"]}"'),
        ("add", '"severity": "warn"'),
    }
    assert GuardrailRevision.objects.count() == 2
    assert Guardrail.objects.get().document == theirs


@pytest.mark.parametrize(
    ("if_match", "code"),
    [
        ('"{id}@2"', 200),
        ('"{id}@1", "{id}@2"', 200),
        ("*", 200),
        ('W/"{id}@2"', 412),  # If-Match compares strongly
        ('"another@2"', 412),
        ("2", 412),
    ],
)
def test_if_match_names_the_current_revision_or_is_refused(api: Any, alice: Any, if_match: str, code: int) -> None:
    client = api(alice)
    document = first_revision(client)
    assert put(client, {**document, "severity": "warn"}).status_code == 200  # no If-Match: applied
    response = put(client, {**document, "name": "n"}, if_match.format(id=document["id"]))
    assert response.status_code == code, response.content
    assert Guardrail.objects.get().revision == (3 if code == 200 else 2)


@pytest.mark.postgresql("row locks across connections: PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_of_two_racing_puts_on_one_revision_exactly_one_is_applied(alice: Any) -> None:
    document = first_revision(api_as(alice))
    for round_ in range(5):
        current = Guardrail.objects.get().revision
        tag = f'"{document["id"]}@{current}"'
        start = threading.Barrier(2)
        codes: list[int] = []
        names = iter(["first", "second"])
        lock = threading.Lock()

        def send() -> None:
            with lock:
                name = f"{next(names)} of round {round_}"
            client = api_as(alice)
            try:
                start.wait()
                codes.append(put(client, {**document, "name": name}, tag).status_code)
            finally:
                connection.close()

        together(send)
        assert sorted(codes) == [200, 412], codes
        assert Guardrail.objects.get().revision == current + 1
    assert GuardrailRevision.objects.count() == 6


def test_an_author_saving_from_an_editor_opened_before_anothers_save_is_told_so(alice: Any, acme: Any) -> None:
    carol = member("carol", acme, "author")
    document = first_revision(api_as(alice))
    page = signed_in(alice).get(f"/guardrails/{document['id']}/edit/").content.decode()
    base = re.search(r'data-base-revision="(\d+)"', page)
    assert base is not None and base.group(1) == "1", "the editor carries the revision it was opened on"
    if_match = re.search(r'data-if-match="([^"]+)"', page)
    assert if_match is not None and if_match.group(1) == f"&quot;{document['id']}@1&quot;"
    assert 'data-diff-url="/guardrails/' in page

    # carol saves from her own editor, opened on revision 1 too
    carols = {**document, "name": "Carol's"}
    assert put(api_as(carol), carols, f'"{document["id"]}@1"').status_code == 200
    # alice's editor sends what its page carries
    response = put(api_as(alice), {**document, "name": "Alice's"}, f'"{document["id"]}@{base.group(1)}"')
    assert response.status_code == 412
    body = response.json()
    assert body["current"]["savedBy"] == "carol" and body["current"]["document"] == carols
    assert any(line["kind"] == "add" and "Carol's" in line["text"] for line in body["changes"]["lines"])
    assert Guardrail.objects.get().document == carols
