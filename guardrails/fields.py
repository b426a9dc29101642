"""A JSON field that gives back the document as it was written, keys in their order."""

from __future__ import annotations

import json
from typing import Any

from django.db import models


class AuthoredJSONField(models.JSONField):
    """JSON stored as written: on PostgreSQL the `json` type, which keeps the text.

    `jsonb` would sort the keys of a guardrail document, and the console promises that an
    export gives back exactly what was authored. Nothing queries inside these documents
    (the filter columns are copied out), so `jsonb`'s operators are not missed.
    """

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor == "postgresql" and value is not None and not hasattr(value, "as_sql"):
            from psycopg.types.json import Json

            return Json(value, dumps=lambda obj: json.dumps(obj, ensure_ascii=False))
        return super().get_db_prep_value(value, connection, prepared)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None or not isinstance(value, str):  # psycopg already parsed `json`
            return value
        return super().from_db_value(value, expression, connection)
