"""KINDGI_LOG_FORMAT=json: one JSON object per record, a line per request with its request
id (the client's when it is a short token), and the probes kept out of INFO."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest
from django.test import Client, override_settings

from kindgi_console.log_format import JsonLines


def test_a_record_is_one_json_line_with_its_fields_and_traceback() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.LogRecord("kindgi.x", logging.ERROR, __file__, 1, "failed %s", ("here",), exc_info=None)
        record.exc_info = sys.exc_info()
    record.kindgi = {"request_id": "r1"}

    line = JsonLines().format(record)

    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "failed here"
    assert parsed["level"] == "ERROR"
    assert parsed["request_id"] == "r1"
    assert "ValueError: bad" in parsed["exception"]


@pytest.mark.django_db
@override_settings(KINDGI_LOG_FORMAT="json")
def test_each_request_logs_one_line_naming_its_tenant_and_key(
    client: Client, acme_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="kindgi.access"):
        client.get("/api/v1/traces", HTTP_AUTHORIZATION=f"Bearer {acme_key}", HTTP_X_REQUEST_ID="abc-123")
        forged = client.get("/api/v1/traces", HTTP_X_REQUEST_ID='x" "level": "ERROR')
        client.get("/healthz")

    lines: list[Any] = [getattr(record, "kindgi") for record in caplog.records if record.name == "kindgi.access"]
    assert [line["route"] for line in lines] == ["api-traces", "api-traces", "healthz"]
    first = lines[0]
    assert first["request_id"] == "abc-123"
    assert first["tenant"] == "acme"
    assert first["key_prefix"] == acme_key[:12]
    assert first["status"] == 200
    assert lines[1]["request_id"] == forged["X-Request-ID"] != 'x" "level": "ERROR'
    assert lines[1]["status"] == 401 and lines[1]["key_prefix"] is None
    levels = [record.levelname for record in caplog.records if record.name == "kindgi.access"]
    assert levels == ["INFO", "INFO", "DEBUG"]
