"""What several benchmarks share: a fresh, migrated PostgreSQL database and a free port."""

from __future__ import annotations

import os
import socket


def setup_django(database: str) -> None:
    """(Re)create `database` on BENCH_POSTGRES's server, point Django at it and migrate it."""
    server = os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432")
    os.environ["DATABASE_URL"] = f"{server}/{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kindgi_console.settings")
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{database}"')
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
