"""The background work of traces, for Celery's autodiscovery, which imports `<app>.tasks`:
each context keeps its own tasks (`traces.ingest.tasks`, `traces.runs.tasks`,
`traces.store.tasks`), registered under the names `traces.tasks.*` that they had when they
all lived here, so that messages already queued still route.
"""

from traces.ingest import tasks as ingest_tasks
from traces.runs import tasks as runs_tasks
from traces.store import tasks as store_tasks

__all__ = ["ingest_tasks", "runs_tasks", "store_tasks"]
