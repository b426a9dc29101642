"""Running a client's coroutine from a test: on a thread of its own, since a test process may
already run an event loop on its main thread (Playwright's sync API, started by a browser test
earlier in the same pytest-xdist process), where asyncio.run refuses to start another."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
