"""Credentials in URLs are masked before they enter the audit log.

A webhook's URL is often its credential: Slack's and Discord's carry the secret in the path
(`/services/T…/B…/<token>`, `/api/webhooks/<id>/<token>`), others in the query (`?token=`)
or the user info (`https://user:password@host`). The log is read with the `audit` scope and
exported as CSV, and kept for years: what it keeps of a URL is where it points, never what
opens it. Whatever the service, the same rule: the scheme, the host and port, and the
first segment of the path are kept; the user info, every later segment, every query value
and the fragment become `***` (query names stay, to tell one change from another).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"
#: A value that is a URL and nothing else (a scheme, `://`, no white space).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")


def redact_url(text: str) -> str:
    """`text` with its credentials masked, when it is an absolute URL with a host; else as is."""
    if not _URL.fullmatch(text):
        return text
    try:
        parts = urlsplit(text)
    except ValueError:  # an unbalanced [ in the host: keep only the scheme
        return f"{text.partition('://')[0]}://{MASK}"
    if not parts.netloc:
        return text
    _, at, host = parts.netloc.rpartition("@")
    netloc = f"{MASK}@{host}" if at else host
    segments = parts.path.split("/")
    path = "/".join(segments[:2] + [MASK if segment else segment for segment in segments[2:]])
    return urlunsplit((parts.scheme, netloc, path, _masked_query(parts.query), MASK if parts.fragment else ""))


def _masked_query(query: str) -> str:
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    if not pairs:
        return MASK
    return "&".join(f"{name}={MASK}" if value else name for name, value in pairs)


def redacted(value: Any) -> Any:
    """A JSON value with every URL string in it redacted (`redact_url`), at any depth."""
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, list):
        return [redacted(item) for item in value]
    if isinstance(value, dict):
        return {key: redacted(item) for key, item in value.items()}
    return value
