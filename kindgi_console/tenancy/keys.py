"""The active API key of a secret's hash, with its tenant: the one query behind every
API-key request, written once so that it is not compiled again for each request."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection
from django.db.models import Field, Model
from django.db.models.expressions import Col

from kindgi_console.db import repeated_cursor
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
def _statement(rider: str | None = None) -> str:
    keys, tenants = ApiKey._meta.db_table, Tenant._meta.db_table
    columns = [f"k.{_column(ApiKey, name)}" for name in _key_fields()]
    columns += [f"t.{_column(Tenant, name)}" for name in TENANT_FIELDS]
    if rider is not None:
        columns.append(f"({rider})")
    # Table and column names come from the models, a rider is a constant of the code: no
    # input reaches the statement's text.
    return (
        f"SELECT {', '.join(columns)} FROM {keys} k LEFT JOIN {tenants} t "  # noqa: S608
        "ON t.id = k.tenant_id WHERE k.hash = %s AND k.revoked_at IS NULL"
    )


def active_key(digest: str) -> ApiKey | None:
    """The unrevoked key whose hash is `digest`, its tenant loaded (one indexed query, prepared)."""
    return active_key_with(digest, None)[0]


def active_key_with(digest: str, rider: str | None) -> tuple[ApiKey | None, Any]:
    """`active_key`, and the value of `rider` (a scalar SQL subquery that takes no
    parameter) read in the same statement: what a view reads on every request saves a
    round trip to the database. The value is None when no key has the hash."""
    with repeated_cursor() as cursor:
        cursor.execute(_statement(rider), [digest])
        row = cursor.fetchone()
    if row is None:
        return None, None
    names = _key_fields()
    values = _converted(ApiKey, names, row[: len(names)])
    key = ApiKey.from_db(connection.alias, list(names), values)
    tenant = row[len(names) : len(names) + len(TENANT_FIELDS)]
    key.tenant = (
        None
        if tenant[0] is None
        else Tenant.from_db(connection.alias, list(TENANT_FIELDS), _converted(Tenant, TENANT_FIELDS, tenant))
    )
    return key, row[-1] if rider is not None else None


def _converted(model: Any, names: tuple[str, ...], row: tuple[Any, ...]) -> list[Any]:
    """The row's values as the ORM reads them: each field's and the database backend's
    converters applied (aware datetimes on SQLite, the JSON of scopes)."""
    values = list(row)
    for index, column, converters in _converters(model, names, connection.vendor):
        for convert in converters:
            values[index] = convert(values[index], column, connection)
    return values


@functools.cache
def _converters(model: Any, names: tuple[str, ...], vendor: str) -> list[tuple[int, Col, list[Any]]]:
    """The columns of `names` that have converters on the `vendor`'s backend, with them (found once)."""
    found = []
    for index, name in enumerate(names):
        field = model._meta.get_field(name)
        column = Col(model._meta.db_table, field)
        converters = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        if converters:
            found.append((index, column, converters))
    return found
