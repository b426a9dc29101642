"""Statements that PostgreSQL prepares once per connection: the runtime path's few queries.

Django's cursors bind parameters on the client, so PostgreSQL parses and plans each of their
statements again on every request; for the runtime verdict's small, repeated statements (the
API key, the enforced guardrails' stamp, the verdict's one write) planning costs as much as
running them.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection


def prepared_cursor() -> Any:
    """A cursor of the connection whose statements PostgreSQL prepares (psycopg binds their
    parameters on the server and keeps the statements prepared on the connection): the
    first run parses and plans a statement, the next ones only execute it (planning the
    verdict's statement costs as much as running it). Django's own cursors bind on the
    client and prepare nothing. `DATABASE_PREPARED_STATEMENTS=false` (the connection's
    `prepare_threshold` None) prepares nothing here either. PostgreSQL only."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw = _prepared_cursor_class()(connection.connection)
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


def repeated_cursor() -> Any:
    """A cursor for a statement run on every request: `prepared_cursor` on PostgreSQL,
    Django's own elsewhere."""
    return prepared_cursor() if connection.vendor == "postgresql" else connection.cursor()


@functools.cache
def _prepared_cursor_class() -> Any:
    from django.db.backends.postgresql.base import ServerBindingCursor

    # psycopg's server-binding cursor, which django-stubs leave untyped.
    server_binding: Any = ServerBindingCursor

    class PreparedCursor(server_binding):  # type: ignore[misc]
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            done = super().execute(query, params, prepare=True, **options)
            if self._query is None and connection.queries_logged:  # type: ignore[has-type]  # what Django logs (tests, DEBUG)
                self._query = self._convert_query(query, params)
            return done

    return PreparedCursor
