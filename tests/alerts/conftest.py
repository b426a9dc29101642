"""Fixtures of the alert tests: a rule's channels and the real broker for worker tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kindgi_console.celery import app
from tests.traces.workers import purge_queue, require_broker


@pytest.fixture(autouse=True)
def _loopback_receivers(settings: Any) -> None:
    """The test receivers listen on 127.0.0.1: allow it whatever DJANGO_DEBUG says."""
    settings.KINDGI_ALERT_PRIVATE_URLS = True


@pytest.fixture
def real_broker() -> Iterator[None]:
    """Tasks go to the broker (not run in this process); the queue starts empty."""
    app.conf.task_always_eager = False
    require_broker()
    purge_queue()
    yield
    purge_queue()


def rows_of(model: Any, **filters: Any) -> list[Any]:
    return list(model.objects.filter(**filters).order_by("pk"))
