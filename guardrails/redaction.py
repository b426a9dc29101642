"""Every configured secret kept out of what the console stores and shows.

`redact_secrets` is the one redaction of the console: the engine applies it to every error it
produces (guardrails.deployment builds the engine with it), and the judge's ledger to every
call's error before it is written, so that results, the ledger API, its CSV and the pages
never hold a secret a provider or a check echoed back.

The secrets are the values of the variables that hold judge models' API keys (every
registration's `apiKeyEnv`, enabled or not), of the variables named in KINDGI_SECRETS, the
Django SECRET_KEY, and the passwords in the database and broker URLs.
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

from django.conf import settings

from guardrails.engine.redaction import redact

#: How long a process trusts the list of key variables it read from the registrations.
KEY_NAMES_TTL_S = 10.0

_key_names: tuple[float, frozenset[str]] | None = None


def redact_secrets(text: str) -> str:
    """`text` with every configured secret replaced by "[redacted]"."""
    if not text:
        return text
    return redact(text, configured_secrets())


def configured_secrets() -> list[str]:
    """The values of every secret this console is configured with (see the module docstring)."""
    names = _judge_key_names() | frozenset(settings.KINDGI_SECRETS)
    values = [os.environ.get(name) or "" for name in sorted(names)]
    values.append(settings.SECRET_KEY)
    values.append(str(settings.DATABASES["default"].get("PASSWORD") or ""))
    values.append(urlsplit(settings.CELERY_BROKER_URL).password or "")
    return [value for value in values if value]


def forget_key_names() -> None:
    """Read the registrations again at the next redaction (one was saved or deleted)."""
    global _key_names
    _key_names = None


def judge_key_names() -> frozenset[str]:
    """The variables holding registered judge models' API keys (read at most every 10 s)."""
    return _judge_key_names()


def _judge_key_names() -> frozenset[str]:
    global _key_names
    now = time.monotonic()
    if _key_names is None or now - _key_names[0] > KEY_NAMES_TTL_S:
        from guardrails.models import JudgeModelRegistration

        names = JudgeModelRegistration.objects.exclude(api_key_env="").values_list("api_key_env", flat=True)
        _key_names = (now, frozenset(names))
    return _key_names[1]
