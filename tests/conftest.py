"""Shared fixtures for the whole suite."""

from collections.abc import Iterator

import pytest

from tests.fakeproviders import FakeProvider


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A judge provider on 127.0.0.1 speaking the OpenAI and Anthropic protocols."""
    with FakeProvider(no_temperature_models=["fake-reasoner"]) as provider:
        yield provider
