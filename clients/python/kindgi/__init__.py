"""Kindgi Console's Python client: a verdict at each stage of an agent turn, and trace ingestion.

from kindgi import Kindgi
console = Kindgi("https://kindgi.example", api_key, timeout=0.5, fail_mode="closed")
console.check_tool_call(turn, proposed_call).raise_for_halt()
"""

from kindgi._http import IngestStats
from kindgi.aio import AsyncKindgi
from kindgi.client import Kindgi
from kindgi.verdict import FAIL_CLOSED, FailMode, GuardrailViolation, Result, Stage, Verdict

__all__ = [
    "FAIL_CLOSED",
    "AsyncKindgi",
    "FailMode",
    "GuardrailViolation",
    "IngestStats",
    "Kindgi",
    "Result",
    "Stage",
    "Verdict",
]
