"""The upload page as each person meets it: shown to those who may upload (the others read
why), the tenant chosen when there is one to choose, and a refused try's file kept on the
server for the retry, in that person's session only."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import make_trace, member
from traces.ingest.views import HELD_UPLOAD, HeldFile
from traces.models import Upload

pytestmark = pytest.mark.django_db

NAV_UPLOADS = 'class="nav__link" href="/uploads/"'


def trace_file(name: str = "traces.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, (json.dumps(make_trace("run-held")) + "\n").encode())


def test_a_reviewer_reads_why_there_is_no_upload_and_has_no_uploads_in_the_navigation(
    client: Any, bob: Any, alice: Any
) -> None:
    client.force_login(bob)
    assert NAV_UPLOADS not in client.get("/traces/").content.decode()
    answer = client.get("/uploads/new/")
    page = answer.content.decode()
    assert answer.status_code == 403
    assert "needs the author or admin role" in page and "you are reviewer in Acme" in page
    assert 'type="file"' not in page
    assert client.post("/uploads/new/", {"file": trace_file(), "tenant": "acme"}).status_code == 403
    assert not Upload.objects.exists()
    client.force_login(alice)
    assert NAV_UPLOADS in client.get("/traces/").content.decode()


def test_the_tenant_is_chosen_when_there_is_one(client: Any, acme: Any, globex: Any) -> None:
    # A reviewer of acme who authors globex: globex, the one tenant to upload to, is chosen.
    dora = member("dora", globex, "author")
    dora.memberships.create(tenant=acme, role="reviewer")
    client.force_login(dora)
    page = client.get("/uploads/new/").content.decode()
    form_select = page[page.index('name="tenant" id="id_tenant"') :].split("</select>")[0]
    assert '<option value="globex" selected>' in form_select and 'value="acme"' not in form_select


def test_a_refused_try_keeps_its_file_for_the_retry(client: Any, alice: Any, acme: Any) -> None:
    client.force_login(alice)
    refused = client.post("/uploads/new/", {"file": trace_file(), "tenant": "globex"})
    page = refused.content.decode()
    assert refused.status_code == 200 and "Select a valid choice" in page
    assert "Kept from your last try: <strong>traces.jsonl</strong>" in page
    assert 'accept=".json,.jsonl,.ndjson,.gz" required' not in page  # no new choice needed
    stored = client.session[HELD_UPLOAD]["stored"]
    assert HeldFile.storage().exists(stored)
    # The retry sends no file: the kept one is uploaded, then let go.
    retried = client.post("/uploads/new/", {"tenant": "acme"})
    upload = Upload.objects.get()
    assert retried.status_code == 302 and retried["Location"] == f"/uploads/{upload.pk}/"
    assert upload.original_name == "traces.jsonl" and upload.tenant == acme
    with upload.file.open("rb") as kept:
        assert json.loads(kept.read())["id"] == "run-held"
    assert HELD_UPLOAD not in client.session and not HeldFile.storage().exists(stored)


def test_a_file_that_is_itself_refused_is_not_kept_and_a_new_choice_replaces_a_kept_one(
    client: Any, alice: Any
) -> None:
    client.force_login(alice)
    page = client.post("/uploads/new/", {"file": trace_file("notes.txt"), "tenant": "acme"}).content.decode()
    assert "Upload a .json, .jsonl or .gz file" in page and "Kept from your last try" not in page
    assert client.post("/uploads/new/", {"tenant": "acme"}).content.decode().count("Choose a file of traces.") == 1
    client.post("/uploads/new/", {"file": trace_file("first.jsonl"), "tenant": "nowhere"})
    first = client.session[HELD_UPLOAD]["stored"]
    client.post("/uploads/new/", {"file": trace_file("second.jsonl"), "tenant": "nowhere"})
    assert not HeldFile.storage().exists(first)
    assert client.session[HELD_UPLOAD]["name"] == "second.jsonl"


def test_a_kept_file_is_its_uploaders_alone(client: Any, alice: Any, charlie: Any) -> None:
    client.force_login(alice)
    client.post("/uploads/new/", {"file": trace_file(), "tenant": "nowhere"})
    stored = client.session[HELD_UPLOAD]["stored"]
    client.force_login(charlie)  # another tenant's author, another session
    answer = client.post("/uploads/new/", {"tenant": "globex"})
    assert answer.status_code == 200 and "Choose a file of traces." in answer.content.decode()
    assert "Kept from your last try" not in client.get("/uploads/new/").content.decode()
    assert not Upload.objects.exists() and HeldFile.storage().exists(stored)


def test_a_file_kept_over_a_day_is_let_go_when_another_is_kept(client: Any, alice: Any, charlie: Any) -> None:
    client.force_login(alice)
    client.post("/uploads/new/", {"file": trace_file(), "tenant": "nowhere"})
    old = client.session[HELD_UPLOAD]["stored"]
    path = HeldFile.storage().path(old)
    day_ago = time.time() - 25 * 3600
    os.utime(path, (day_ago, day_ago))
    client.force_login(charlie)
    client.post("/uploads/new/", {"file": trace_file(), "tenant": "nowhere"})
    assert not HeldFile.storage().exists(old) and HeldFile.storage().exists(client.session[HELD_UPLOAD]["stored"])
