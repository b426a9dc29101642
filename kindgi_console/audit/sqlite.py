"""The append-only triggers of the audit table on SQLite (PostgreSQL's are in migration 0002)."""

CREATE_UPDATE_TRIGGER = """
CREATE TRIGGER IF NOT EXISTS audit_entry_no_update BEFORE UPDATE ON audit_auditentry
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: UPDATE of an entry refused'); END
"""
CREATE_DELETE_TRIGGER = """
CREATE TRIGGER IF NOT EXISTS audit_entry_no_delete BEFORE DELETE ON audit_auditentry
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only: DELETE of an entry refused'); END
"""
DROP_DELETE_TRIGGER = "DROP TRIGGER IF EXISTS audit_entry_no_delete"
DROP_TRIGGERS = ("DROP TRIGGER IF EXISTS audit_entry_no_update", DROP_DELETE_TRIGGER)
