"""What the sync and async clients share: the request, the retry policy, the answer read.

The I/O itself (httpx.Client or httpx.AsyncClient, time.sleep or asyncio.sleep) is each
client's; everything that decides is here, so that the two cannot drift.

A call has one deadline, `timeout` seconds after it starts: each attempt is given what is
left of it, a retry that would start after it is not made, and a `Retry-After` longer than
what is left ends the call at once rather than sleeping past it. (`Kindgi` gives an attempt
what is left as httpx's connect, write and read timeouts, each of which bounds one wait: a
server that trickles its answer byte by byte could hold it longer. `AsyncKindgi` also wraps
the call in `asyncio.timeout`, which holds whatever the server does.) The retried answers are 429,
502, 503 and 504, and a request that never got an answer (refused, reset, timed out).
Retrying `POST evaluate` and `POST traces` is safe: the trace id is the console's key (a stage
checked again keeps its first results; a trace sent again is a `duplicate`). Each call's
attempts also carry one `Idempotency-Key`, which the console's endpoints that start work
honour (today `POST evaluations`), and a proxy or a future endpoint may.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from kindgi.verdict import FailMode, Stage, Verdict

VERSION = "0.1.0"
EVALUATE_PATH = "/api/v1/evaluate"
TRACES_PATH = "/api/v1/traces"
RETRIED_STATUSES = frozenset({429, 502, 503, 504})
#: The console's limit on a batch (KINDGI_MAX_BATCH's default).
MAX_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Policy:
    """How long a call may take, and how its attempts are spaced."""

    timeout: float
    max_attempts: int = 4
    backoff_s: float = 0.05
    max_backoff_s: float = 2.0

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.max_attempts < 1:
            raise ValueError("timeout must be positive and max_attempts at least 1")


@dataclass(slots=True)
class Attempts:
    """One call's attempts under its deadline: what each may take, and whether to go on."""

    policy: Policy
    until: float = 0.0
    made: int = 0
    error: str | None = None
    last: httpx.Response | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.until = time.monotonic() + self.policy.timeout
        self.headers = {"Idempotency-Key": uuid.uuid4().hex}

    def next_timeout(self) -> float | None:
        """The time the next attempt may take; None when the deadline has passed."""
        left = self.until - time.monotonic()
        if left <= 0:
            self.error = self.error or f"no answer within {self.policy.timeout:g}s"
            return None
        self.made += 1
        return left

    def answered(self, response: httpx.Response) -> bool:
        """Whether `response` ends the call (anything but a retried status)."""
        self.last = response
        if response.status_code not in RETRIED_STATUSES:
            return True
        self.error = describe(response)
        return False

    def failed(self, exc: httpx.TransportError) -> None:
        self.last = None
        if isinstance(exc, httpx.TimeoutException):
            self.error = f"no answer within {self.policy.timeout:g}s ({type(exc).__name__})"
        else:
            self.error = f"console unreachable: {type(exc).__name__}: {exc}"

    def pause(self) -> float | None:
        """Seconds to wait before the next attempt, or None: stop here."""
        if self.made >= self.policy.max_attempts:
            return None
        wait = retry_after(self.last) if self.last is not None else None
        if wait is None:
            backoff = min(self.policy.max_backoff_s, self.policy.backoff_s * 2 ** (self.made - 1))
            wait = backoff * (0.5 + random.random() / 2)  # jitter: a fleet does not retry in step
        if time.monotonic() + wait >= self.until:
            if self.last is not None:
                self.error = f"{self.error}; Retry-After {wait:g}s is past the deadline"
            return None
        return wait


def retry_after(response: httpx.Response) -> float | None:
    """The response's `Retry-After` in seconds (a number or an HTTP date), if it has one."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def describe(response: httpx.Response) -> str:
    """An error answer in a line: its status and the console's first error message."""
    message = response.reason_phrase
    try:
        errors = response.json().get("errors")
        message = errors[0]["message"]
    except (ValueError, AttributeError, LookupError, TypeError):
        pass
    return f"HTTP {response.status_code}: {message}"


def client_headers(api_key: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {api_key}",
        "Content-Type": "application/json",
        "User-Agent": f"kindgi-python/{VERSION}",
    }


def encode(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def with_proposed_call(trace: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
    """The turn so far with `call` appended as the last of `toolCalls` (what stage tool-call reads)."""
    return {**trace, "toolCalls": [*trace.get("toolCalls", ()), dict(call)]}


def evaluate_params(stage: Stage, store: bool) -> dict[str, str]:
    return {"stage": stage} if store else {"stage": stage, "store": "false"}


def verdict_of(attempts: Attempts, stage: Stage, fail_mode: FailMode) -> Verdict:
    """The console's verdict if it gave one, else the one `fail_mode` gives, saying why."""
    response = attempts.last
    if response is None or response.status_code in RETRIED_STATUSES:
        return Verdict.unanswered(stage, fail_mode, attempts.error or "no answer", _status(response))
    if response.status_code != 200:
        return Verdict.unanswered(stage, fail_mode, describe(response), response.status_code)
    try:
        raw = response.json()
    except ValueError:
        return Verdict.unanswered(stage, fail_mode, "the console's answer is not JSON", 200)
    if not isinstance(raw, dict) or "turn" not in raw:
        return Verdict.unanswered(stage, fail_mode, "the console's answer is not a verdict", 200)
    return Verdict.from_answer(stage, 200, raw)


def _status(response: httpx.Response | None) -> int | None:
    return None if response is None else response.status_code


@dataclass(slots=True)
class IngestStats:
    """What `ingest()` did with the traces it was given."""

    queued: int = 0
    #: Not queued: the queue was full (the agent is never made to wait).
    dropped: int = 0
    #: Stored by the console (created, updated or already stored).
    sent: int = 0
    #: Refused by the console (invalid, conflict) or lost with their batch (unreachable in time).
    failed: int = 0
    last_error: str | None = None

    def count(self, batch_size: int, attempts: Attempts) -> None:
        """Count a batch's outcome from the console's per-trace answers."""
        response = attempts.last
        if response is None or response.status_code != 207:
            self.failed += batch_size
            self.last_error = attempts.error or (describe(response) if response is not None else "no answer")
            return
        stored = sum(1 for item in response.json().get("results", ()) if item.get("status") in STORED)
        self.sent += stored
        self.failed += batch_size - stored
        if stored < batch_size:
            self.last_error = "some traces were refused (invalid or conflict)"


STORED = frozenset({"created", "duplicate", "updated"})
