"""One judge call over httpx: request, retries within the deadline, answer, usage and cost.

Transient provider faults are retried with exponential backoff and jitter: timeouts,
connection errors, HTTP 429 (waiting what its Retry-After asks, in seconds or as an HTTP date)
and 5xx. Every wait must end before the evaluation's deadline; a wait that would not is not
started and the call ends in an error. Other 4xx answers are not retried: asking again would
not change them.

The deadline is a total: connecting, sending and reading the whole answer. httpx's timeouts
bound each read, not their sum, so a provider that sends its headers at once and then a few
bytes a second would never time out; each attempt therefore runs on a thread of its own, the
caller waits for it no longer than the attempt's end, and an answer that comes later is
dropped (its thread stops at its next read). An answer over MAX_REPLY_BYTES is an error.

The API key is read from the environment variable the registration names, at call time; it
goes into the request's headers and nowhere else: an error text that echoes it (some
providers quote the key they refused) is redacted before it is kept.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ..redaction import redact
from .circuit import CircuitBreaker
from .models import JudgeModel, is_console_setting
from .parsing import AnswerError, JudgeOutcome, parse_answer
from .prompt import JudgePrompt, Scale
from .providers import ProviderProtocolError, ProviderRequest, build_request, error_message, parse_reply, reply_usage

#: The largest judge answer read: a verdict takes a few hundred bytes.
MAX_REPLY_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently transient provider faults are retried."""

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    #: The longest one attempt may take in all (connect, send, the whole answer), so that a
    #: hung attempt leaves time for another.
    attempt_timeout_s: float = 20.0

    def backoff(self, attempt: int, rng: Callable[[], float]) -> float:
        """The wait after failed attempt `attempt` (1-based): exponential, half of it jittered."""
        delay = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return delay / 2 + rng() * delay / 2


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One judge call as the cost ledger records it.

    Tokens are as the provider reported them (None when it reported none); `cost_usd` is
    exact, from the registration's prices. `billed` is true when the provider reported usage,
    even if its answer was then unusable. `outcome` or `error` says how it ended.
    `over_cost` / `over_latency` flag a call beyond its guardrail's declarative budget.
    """

    model_id: str
    provider: str
    model_name: str
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: Decimal
    latency_ms: int
    outcome: JudgeOutcome | None
    error: str | None
    http_status: int | None
    billed: bool
    attempts: int
    stop_reason: str | None = None
    over_cost: bool = False
    over_latency: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome is not None

    def to_dict(self) -> dict[str, Any]:
        """The call in camelCase, with the cost as an exact decimal string."""
        outcome = self.outcome or JudgeOutcome()
        return {
            "model": self.model_id,
            "provider": self.provider,
            "modelName": self.model_name,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUsd": str(self.cost_usd),
            "latencyMs": self.latency_ms,
            "verdict": outcome.verdict,
            "score": outcome.score,
            "reason": outcome.reason,
            "error": self.error,
            "httpStatus": self.http_status,
            "billed": self.billed,
            "attempts": self.attempts,
            "stopReason": self.stop_reason,
            "overCost": self.over_cost,
            "overLatency": self.over_latency,
        }


class _Transient(Exception):
    """An attempt that may succeed if tried again, after `wait` seconds (None: backoff).

    `down`: it failed as an unavailable provider does (unreachable, timed out, 5xx), which
    the circuit breaker counts; a 429 is a provider that is up and asks to slow down."""

    def __init__(self, message: str, wait: float | None = None, *, down: bool = True) -> None:
        super().__init__(message)
        self.wait = wait
        self.down = down


class _Final(Exception):
    """An attempt whose failure another attempt would not change (`down` as for _Transient)."""

    def __init__(self, message: str, *, down: bool = False) -> None:
        super().__init__(message)
        self.down = down


def call_judge(
    model: JudgeModel,
    prompt: JudgePrompt,
    *,
    http: httpx.Client | Callable[[], httpx.Client],
    deadline: float,
    scale: Scale = "pass-fail",
    retry: RetryPolicy | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
    circuit: CircuitBreaker | None = None,
) -> JudgeCall:
    """Ask `model` to judge `prompt`, retrying transient faults until `deadline`.

    `deadline` is a `clock()` (time.monotonic) instant. Never raises for provider trouble:
    the returned JudgeCall carries the outcome or the error. With a `circuit`, each attempt
    asks it first (an open circuit ends the call at once) and tells it how it went. `http`
    may be a function giving the client, called at the first attempt: a call an open
    circuit refuses then costs no client (making one builds a TLS context, ~20 ms).
    """
    caller = _Caller(model, http, deadline, scale, retry or RetryPolicy(), clock, sleep, rng, circuit)
    return caller.call(prompt)


@dataclass
class _Caller:
    """The state of one judge call across its attempts."""

    model: JudgeModel
    http: httpx.Client | Callable[[], httpx.Client]
    deadline: float
    scale: Scale
    retry: RetryPolicy
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    rng: Callable[[], float]
    circuit: CircuitBreaker | None = None
    started: float = 0.0
    attempts: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    http_status: int | None = None
    stop_reason: str | None = None
    api_key: str | None = None

    def call(self, prompt: JudgePrompt) -> JudgeCall:
        self.started = self.clock()
        try:
            self.api_key = _api_key(self.model)
            request = build_request(self.model, prompt, self.api_key)
            outcome = self._until_answered(request)
        except _Final as error:
            return self._record(None, redact(str(error), [self.api_key]))
        return self._record(outcome, None)

    def _until_answered(self, request: ProviderRequest) -> JudgeOutcome:
        while True:
            remaining = self.deadline - self.clock()
            if remaining <= 0:
                raise _Final("the evaluation's time limit ran out before the judge answered")
            self._refuse_if_open()
            self.attempts += 1
            try:
                outcome = self._attempt(request, min(remaining, self.retry.attempt_timeout_s))
            except _Transient as fault:
                self._tell_circuit(fault)
                self._wait_to_retry(fault)
            except _Final as fault:
                self._tell_circuit(fault)
                raise
            else:
                self._tell_circuit(None)
                return outcome

    def _refuse_if_open(self) -> None:
        refusal = None if self.circuit is None else self.circuit.refusal(self.model)
        if refusal is not None:
            raise _Final(refusal)

    def _tell_circuit(self, fault: _Transient | _Final | None) -> None:
        """Count an attempt that found the provider down; any answer closes the circuit."""
        if self.circuit is None:
            return
        if fault is not None and fault.down:
            self.circuit.failed(self.model, redact(str(fault), [self.api_key]))  # shown on pages
        else:
            self.circuit.succeeded(self.model)

    def _wait_to_retry(self, fault: _Transient) -> None:
        """Sleep before the next attempt, or raise _Final when no attempt may follow."""
        if self.attempts >= self.retry.max_attempts:
            raise _Final(f"{fault} (gave up after {self.attempts} attempts)")
        wait = fault.wait if fault.wait is not None else self.retry.backoff(self.attempts, self.rng)
        if self.clock() + wait >= self.deadline:
            raise _Final(f"{fault}; waiting {wait:.1f}s to try again would pass the evaluation's time limit")
        self.sleep(wait)

    def _attempt(self, request: ProviderRequest, timeout: float) -> JudgeOutcome:
        """One exchange, waited for at most `timeout` seconds in all (see the module docstring)."""
        if not isinstance(self.http, httpx.Client):
            self.http = self.http()
        exchange = _Exchange(self.http, request, self.clock() + timeout, self.clock)
        threading.Thread(target=exchange.run, name="judge-call", daemon=True).start()
        if not exchange.done.wait(timeout):
            if self.clock() >= self.deadline:
                raise _Final(
                    "the judge provider timed out: no whole answer within the evaluation's time limit", down=True
                )
            raise _Transient(f"the judge provider timed out: no whole answer within {timeout:.1f}s")
        if isinstance(exchange.error, _TooLarge):
            raise _Final(f"the judge provider's answer is larger than {MAX_REPLY_BYTES} bytes")
        if isinstance(exchange.error, httpx.TimeoutException | _Late):
            raise _Transient(f"the judge provider timed out ({type(exchange.error).__name__})")
        if isinstance(exchange.error, httpx.TransportError):
            raise _Transient(f"could not reach the judge provider ({type(exchange.error).__name__})")
        if exchange.error is not None:
            raise _Final(f"the judge call failed ({type(exchange.error).__name__})")
        self.http_status = exchange.status
        return self._answer(exchange.status, exchange.headers, _json_or_none(exchange.body))

    def _answer(self, status: int, headers: httpx.Headers, body: object) -> JudgeOutcome:
        if status == 429 or status >= 500:
            raise _Transient(_http_fault(status, body), wait=_retry_after(headers), down=status != 429)
        if status >= 400:
            raise _Final(_http_fault(status, body))
        self.input_tokens, self.output_tokens = _added(
            (self.input_tokens, self.output_tokens), reply_usage(self.model, body)
        )
        try:
            reply = parse_reply(self.model, body)
        except ProviderProtocolError as error:
            raise _Final(str(error)) from None
        self.stop_reason = reply.stop_reason
        if reply.cut_off:
            raise _Final(f"the judge's answer was cut off by the token limit ({reply.stop_reason})")
        try:
            return parse_answer(reply.text, self.scale)
        except AnswerError as error:
            raise _Final(str(error)) from None

    def _record(self, outcome: JudgeOutcome | None, error: str | None) -> JudgeCall:
        billed = self.input_tokens is not None or self.output_tokens is not None
        return JudgeCall(
            model_id=self.model.id,
            provider=self.model.provider,
            model_name=self.model.model,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=self.model.cost_usd(self.input_tokens or 0, self.output_tokens or 0),
            latency_ms=round((self.clock() - self.started) * 1000),
            outcome=outcome,
            error=error,
            http_status=self.http_status,
            billed=billed,
            attempts=self.attempts,
            stop_reason=self.stop_reason,
        )


def _api_key(model: JudgeModel) -> str | None:
    """The key from the environment at call time; None for a server that takes none."""
    if model.api_key_env is None:
        return None
    if is_console_setting(model.api_key_env):  # refused at registration too; never sent
        raise _Final(
            f"judge model {model.id!r}'s apiKeyEnv names {model.api_key_env}, one of the console's own "
            "settings: its value is never sent to a model"
        )
    key = os.environ.get(model.api_key_env)
    if not key:
        raise _Final(
            f"the environment variable {model.api_key_env} holding judge model {model.id!r}'s API key is not set"
        )
    return key


def _added(total: tuple[int | None, int | None], more: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
    """Token counts summed over attempts; None stays None until a count is reported."""
    return (
        total[0] if more[0] is None else (total[0] or 0) + more[0],
        total[1] if more[1] is None else (total[1] or 0) + more[1],
    )


class _TooLarge(Exception):
    """An answer over MAX_REPLY_BYTES."""


class _Late(Exception):
    """An answer still arriving when its attempt ended: nobody waits for it any more."""


@dataclass
class _Exchange:
    """One request and its whole answer, run on a thread of its own (see the module docstring).

    Each read is bounded by httpx's timeout and the loop stops at `until`, so a thread whose
    caller gave up ends at its next read. Never raises: `error` holds what went wrong.
    """

    http: httpx.Client
    request: ProviderRequest
    until: float
    clock: Callable[[], float]
    status: int = 0
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    body: bytes = b""
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        try:
            self._exchange()
        except BaseException as error:  # handed to the caller, which decides
            self.error = error
        finally:
            self.done.set()

    def _exchange(self) -> None:
        timeout = httpx.Timeout(max(0.001, self.until - self.clock()))
        url, headers, body_json = self.request.url, self.request.headers, self.request.body
        with self.http.stream("POST", url, headers=headers, json=body_json, timeout=timeout) as reply:
            self.status, self.headers = reply.status_code, reply.headers
            body = bytearray()
            for chunk in reply.iter_bytes():
                body += chunk
                if len(body) > MAX_REPLY_BYTES:
                    raise _TooLarge
                if self.clock() >= self.until:
                    raise _Late
            self.body = bytes(body)


def _json_or_none(body: bytes) -> object:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _http_fault(status: int, body: object) -> str:
    message = error_message(body)
    return f"the judge provider answered HTTP {status}" + (f": {message}" if message else "")


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait as Retry-After asks: delta-seconds or an HTTP date; None if absent."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
