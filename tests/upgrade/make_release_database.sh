#!/usr/bin/env bash
# Makes the databases that tests/upgrade/test_upgrade.py upgrades: the given released commit's
# own code, in its own virtual environment with its own pinned dependencies, migrates an empty
# PostgreSQL database and an empty SQLite file and loads its demo (tenants, guardrails, traces,
# results, violations, reviews, the judge ledger and evaluation runs), and both are kept
# compressed under tests/upgrade/releases/. Run it once for a new release:
#   bash tests/upgrade/make_release_database.sh COMMIT
# It needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust) and Debian's python3.11.
set -euo pipefail
commit="$(git rev-parse --short=7 "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'git worktree remove --force "$work/src" >/dev/null 2>&1 || true; rm -rf "$work"; psql -h 127.0.0.1 -U postgres -q -c "DROP DATABASE IF EXISTS release_$commit" >/dev/null 2>&1 || true' EXIT
git worktree add --quiet --detach "$work/src" "$commit"
/usr/bin/python3.11 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "$work/src"
psql -h 127.0.0.1 -U postgres -q -c "DROP DATABASE IF EXISTS release_$commit" -c "CREATE DATABASE release_$commit"
load() {
  (cd "$work/src" && env -i PATH="$PATH" HOME="$work" PYTHONPATH="$work/src" CELERY_TASK_ALWAYS_EAGER=1 \
    KINDGI_VAR_DIR="$work/var" DATABASE_URL="$1" \
    sh -c '"$0/bin/python" manage.py migrate --noinput >/dev/null && "$0/bin/python" manage.py load_demo' "$work/venv")
}
load "postgres://postgres@127.0.0.1:5432/release_$commit"
pg_dump -h 127.0.0.1 -U postgres --no-owner --no-privileges "release_$commit" | gzip -9n > "$here/releases/$commit.postgresql.sql.gz"
load "sqlite:///$work/release.sqlite3"
# SQLite as SQL text too: it compresses to half the file's size, and a later SQLite reads it.
"$work/venv/bin/python" -c 'import sqlite3, sys; sys.stdout.writelines(l + "\n" for l in sqlite3.connect(sys.argv[1]).iterdump())' \
  "$work/release.sqlite3" | gzip -9n > "$here/releases/$commit.sqlite3.sql.gz"
ls -l "$here/releases/$commit".*
