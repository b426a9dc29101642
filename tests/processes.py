"""Each pytest-xdist process (gw0, gw1, ...) its own var/ folder, Celery queues and cache keys.

Loaded with `-p tests.processes` (pyproject's addopts), so before pytest-django reads the
settings: the SQLite test database, the filesystem broker, the queues and the cache keys
(throttle counters) of one process are not another's. The real workers and servers a test
starts inherit these variables, so they serve the queues of the test that started them.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("KINDGI_VAR_DIR", str(ROOT / "var" / worker))
    os.environ.setdefault("KINDGI_PREFIX", f"kindgi-{worker}")
