"""The active API key of a secret's hash, with its tenant: the one query behind every
API-key request, written once so that it is not compiled again for each request."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection
from django.db.models import Field, Model
from django.db.models.expressions import Col

from kindgi_console.tenancy.models import ApiKey, Tenant

TENANT_FIELDS = ("id", "slug", "name", "created_at")


@functools.cache
def _key_fields() -> tuple[str, ...]:
    return tuple(field.attname for field in ApiKey._meta.concrete_fields)


def _column(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.column, name  # a concrete field, not a reverse relation
    return field.column


@functools.cache
def _statement() -> str:
    keys, tenants = ApiKey._meta.db_table, Tenant._meta.db_table
    columns = [f"k.{_column(ApiKey, name)}" for name in _key_fields()]
    columns += [f"t.{_column(Tenant, name)}" for name in TENANT_FIELDS]
    # Table and column names come from the models: no input reaches the statement's text.
    return (
        f"SELECT {', '.join(columns)} FROM {keys} k LEFT JOIN {tenants} t "  # noqa: S608
        "ON t.id = k.tenant_id WHERE k.hash = %s AND k.revoked_at IS NULL"
    )


def active_key(digest: str) -> ApiKey | None:
    """The unrevoked key whose hash is `digest`, its tenant loaded (one indexed query)."""
    with connection.cursor() as cursor:
        cursor.execute(_statement(), [digest])
        row = cursor.fetchone()
    if row is None:
        return None
    names = _key_fields()
    values = _converted(ApiKey, names, row[: len(names)])
    key = ApiKey.from_db(connection.alias, list(names), values)
    tenant = row[len(names) :]
    key.tenant = (
        None
        if tenant[0] is None
        else Tenant.from_db(connection.alias, list(TENANT_FIELDS), _converted(Tenant, TENANT_FIELDS, tenant))
    )
    return key


def _converted(model: Any, names: tuple[str, ...], row: tuple[Any, ...]) -> list[Any]:
    """The row's values as the ORM reads them: each field's and the database backend's
    converters applied (aware datetimes on SQLite, the JSON of scopes)."""
    values = list(row)
    for index, name in enumerate(names):
        field = model._meta.get_field(name)
        column = Col(model._meta.db_table, field)
        for convert in connection.ops.get_db_converters(column) + field.get_db_converters(connection):
            values[index] = convert(values[index], column, connection)
    return values
