"""The append-only trigger of the audit table on SQLite (PostgreSQL's are in migration 0002).

SQLite, the embedded default for local use, refuses UPDATE only: its `flush` (the test
database's reset) empties tables with DELETE, which a row trigger cannot tell from tampering.
"""

CREATE_UPDATE_TRIGGER = """
CREATE TRIGGER IF NOT EXISTS audit_entry_no_update BEFORE UPDATE ON audit_auditentry
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: UPDATE of an entry refused'); END
"""
DROP_UPDATE_TRIGGER = "DROP TRIGGER IF EXISTS audit_entry_no_update"
