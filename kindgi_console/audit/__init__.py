"""The audit log: `from kindgi_console.audit import log as audit; audit.record(...)`."""
