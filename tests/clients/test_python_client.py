"""The Python client (`clients/python`, `kindgi`) against a live console over real sockets.

The faults (429, 503, a console down, slow or killed mid-call) are a scripted server in front
of the live console (`tests/clients/stub.py`); deadlines are shown by attempts counted and by
a server that had still not answered, not by timings.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from kindgi import FAIL_CLOSED, AsyncKindgi, GuardrailViolation, Kindgi, Verdict

from guardrails.services import Author, save_guardrail
from tests.clients.loops import run as run_on_a_thread
from tests.clients.stub import DROP, FORWARD, HANG, Answer, serving
from tests.conftest import make_guardrail, make_trace
from tests.traces.workers import ROOT, free_port
from traces.models import EvaluationResult, RunTrace

pytestmark = pytest.mark.django_db(transaction=True)

LOOKUP = {"id": "c1", "name": "lookup_order", "arguments": {"order": "1234"}}
REFUND = {"id": "c2", "name": "issue_refund", "arguments": {"order": "1234"}}


@pytest.fixture
def console(live_server: Any) -> str:
    return str(live_server.url)


@pytest.fixture
def guardrails(db: Any) -> list[Any]:
    """never-call-tool issue_refund (tool-call and output) and a halting must-cite (output)."""
    author = Author(user=None, label="fixture")
    return [
        save_guardrail(make_guardrail(), author),
        save_guardrail(make_guardrail("cites", check="must-cite", config={"min": 1}), author),
    ]


def at_input(trace_id: str = "turn-1") -> dict[str, Any]:
    """The turn before the model runs: its input and the user's message."""
    trace = make_trace(trace_id, messages=[{"role": "user", "content": "Can I get a refund for order 1234?"}])
    for name in ("output", "toolCalls", "usage", "endedAt"):
        trace.pop(name)
    return trace


def answered(trace_id: str = "turn-1", **fields: Any) -> dict[str, Any]:
    """The whole turn: one lookup, a cited answer."""
    done = {**at_input(trace_id), "toolCalls": [{**LOOKUP, "result": {"status": "delivered"}}]}
    done["output"] = "Order 1234 can be refunded within 30 days."
    done["citations"] = [{"source": "policy-refunds"}]
    return {**done, **fields}


def test_it_passes_a_turn_checked_at_input_tool_call_and_output(console, acme_key, guardrails):
    with Kindgi(console, acme_key, timeout=10) as client:
        verdicts = [
            client.check_input(at_input()),
            client.check_tool_call(at_input(), LOOKUP),
            client.check_output(answered()),
        ]
    assert [(v.stage, v.halted, v.error) for v in verdicts] == [
        ("input", False, None),
        ("tool-call", False, None),
        ("output", False, None),
    ]
    assert {r.guardrail: (r.status, r.skip_reason) for r in verdicts[0].results} == {
        "no-refunds": ("skipped", "stage"),
        "cites": ("skipped", "stage"),
    }
    assert [v.trace_status for v in verdicts] == ["created", "updated", "updated"]
    assert RunTrace.objects.get().document["output"] == answered()["output"]


def test_a_tool_call_forbidden_by_never_call_tool_is_halted_before_it_runs(console, acme_key, guardrails):
    with Kindgi(console, acme_key, timeout=10) as client:
        verdict = client.check_tool_call(at_input(), REFUND)
    assert (verdict.halted, verdict.stage, verdict.halted_by, verdict.reason) == (
        True,
        "tool-call",
        "no-refunds",
        "guardrail-violation",
    )
    with pytest.raises(GuardrailViolation) as raised:
        verdict.raise_for_halt()
    assert raised.value.verdict is verdict and "no-refunds" in str(raised.value)
    result = EvaluationResult.objects.get(guardrail__guardrail_id="no-refunds")
    assert (result.stage, result.status) == ("tool-call", "fail")


def test_an_uncited_answer_is_halted_at_output(console, acme_key, guardrails):
    with Kindgi(console, acme_key, timeout=10) as client:
        verdict = client.check_output(answered(citations=[]))
    assert (verdict.halted, verdict.halted_by, verdict.answered) == (True, "cites", True)
    assert verdict.raw is not None and verdict.raw["turn"] == "failed"
    assert {r.guardrail: r.status for r in verdict.results} == {"no-refunds": "pass", "cites": "fail"}


def test_the_async_client_gives_the_same_verdicts(console, acme_key, guardrails):
    async def turn() -> list[Verdict]:
        async with AsyncKindgi(console, acme_key, timeout=10) as client:
            return [
                await client.check_input(at_input()),
                await client.check_tool_call(at_input(), REFUND),
                await client.check_output(answered("turn-2", citations=[])),
            ]

    verdicts = run_on_a_thread(turn())
    assert [(v.stage, v.halted, v.halted_by) for v in verdicts] == [
        ("input", False, None),
        ("tool-call", True, "no-refunds"),
        ("output", True, "cites"),
    ]


@pytest.mark.parametrize("status", [429, 503])
def test_a_429_or_503_is_retried_after_its_retry_after_under_one_idempotency_key(console, acme_key, guardrails, status):
    with serving([Answer(status, {"Retry-After": "1"}), FORWARD], behind=console) as (url, stub):
        verdict = Kindgi(url, acme_key, timeout=10).check_tool_call(at_input(), REFUND)
    assert (verdict.halted, verdict.halted_by, verdict.error) == (True, "no-refunds", None)
    assert len(stub.seen) == 2
    assert stub.keys[0] is not None and stub.keys[0] == stub.keys[1]
    assert stub.seen[1].at - stub.seen[0].at >= 1  # waited the Retry-After


def test_a_retry_after_past_the_deadline_ends_the_call_at_once(acme_key):
    with serving([Answer(429, {"Retry-After": "60"})]) as (url, stub):
        verdict = Kindgi(url, acme_key, timeout=5).check_input(at_input())
    assert len(stub.seen) == 1
    assert (verdict.halted, verdict.status_code, verdict.answered) == (False, 429, False)
    assert verdict.error is not None and "Retry-After 60s is past the deadline" in verdict.error


def test_retries_are_bounded_by_max_attempts(acme_key):
    with serving([Answer(503, {"Retry-After": "0"})]) as (url, stub):
        verdict = Kindgi(url, acme_key, timeout=10, max_attempts=3).check_input(at_input())
    assert len(stub.seen) == 3
    assert verdict.error == "HTTP 503: scripted (fail open)"


def test_a_console_killed_mid_call_is_retried_on_a_new_connection(console, acme_key, guardrails):
    with serving([DROP, FORWARD], behind=console) as (url, stub):
        verdict = Kindgi(url, acme_key, timeout=10).check_tool_call(at_input(), REFUND)
    assert (verdict.halted_by, verdict.error, len(stub.seen)) == ("no-refunds", None, 2)
    assert stub.keys[0] == stub.keys[1]


@pytest.mark.parametrize(("fail_mode", "halted", "reason"), [("open", False, None), ("closed", True, FAIL_CLOSED)])
def test_a_console_that_is_down_gives_the_fail_mode_verdict_saying_so(acme_key, fail_mode, halted, reason):
    closed_port = f"http://127.0.0.1:{free_port()}"
    verdict = Kindgi(closed_port, acme_key, timeout=0.5, fail_mode=fail_mode).check_input(at_input())
    assert (verdict.halted, verdict.reason, verdict.answered) == (halted, reason, False)
    assert verdict.error is not None and "console unreachable: ConnectError" in verdict.error
    assert verdict.error.endswith(f"(fail {fail_mode})")
    if halted:
        with pytest.raises(GuardrailViolation, match="fail-closed"):
            verdict.raise_for_halt()


def test_a_slow_console_is_given_up_at_the_deadline(acme_key):
    with serving([HANG]) as (url, stub):
        verdict = Kindgi(url, acme_key, timeout=0.3, fail_mode="closed").check_input(at_input())
        still_hanging = not stub.released.is_set()
    assert still_hanging and len(stub.seen) == 1  # no attempt started after the deadline
    assert verdict.halted and verdict.error == "no answer within 0.3s (ReadTimeout) (fail closed)"


def test_the_async_client_holds_its_deadline_too(acme_key):
    async def check(url: str) -> Verdict:
        async with AsyncKindgi(url, acme_key, timeout=0.3) as client:
            return await client.check_input(at_input())

    with serving([HANG]) as (url, stub):
        verdict = run_on_a_thread(check(url))
        still_hanging = not stub.released.is_set()
    assert still_hanging and len(stub.seen) == 1
    assert not verdict.halted and verdict.error is not None and verdict.error.startswith("no answer within 0.3s")


def test_another_tenants_key_gets_no_verdict_and_no_data(console, acme_key, charlie_key, guardrails):
    with Kindgi(console, charlie_key, timeout=10) as charlie:
        refused = charlie.check_tool_call({**at_input(), "tenant": "acme"}, REFUND)
    with Kindgi(console, "kg_not-a-key", timeout=10) as stranger:
        unknown = stranger.check_input(at_input())
    assert (refused.status_code, refused.answered, refused.results, refused.halted_by) == (403, False, (), None)
    assert refused.error is not None and refused.error.startswith("HTTP 403: ")
    assert (unknown.status_code, unknown.answered) == (401, False)
    assert not RunTrace.objects.exists()


def test_ingest_sends_batches_in_the_background_and_flush_waits_for_them(console, acme_key):
    with serving([FORWARD], behind=console) as (url, stub), Kindgi(url, acme_key, batch_size=10) as client:
        assert all(client.ingest(answered(f"turn-{n}")) for n in range(25))
        assert client.flush(timeout=30)
        batches = [s for s in stub.seen if s.path == "/api/v1/traces"]
        stats = client.ingest_stats
    assert (stats.queued, stats.sent, stats.dropped, stats.failed) == (25, 25, 0, 0)
    assert len(batches) == 3
    assert RunTrace.objects.count() == 25


def test_a_full_queue_drops_and_counts_without_waiting(console, acme_key):
    with Kindgi(console, acme_key, queue_size=3, batch_size=100, flush_interval=60) as client:
        taken = [client.ingest(answered(f"turn-{n}")) for n in range(5)]
        assert client.flush(timeout=30)
        stats = client.ingest_stats
    assert taken == [True, True, True, False, False]
    assert (stats.queued, stats.dropped, stats.sent) == (3, 2, 3)
    assert RunTrace.objects.count() == 3


def test_traces_refused_or_lost_are_counted_as_failed(acme_key):
    closed_port = f"http://127.0.0.1:{free_port()}"
    with Kindgi(closed_port, acme_key, ingest_timeout=0.5) as client:
        client.ingest(answered())
        assert client.flush(timeout=30)
        stats = client.ingest_stats
    assert (stats.sent, stats.failed) == (0, 1)
    assert stats.last_error is not None and "console unreachable" in stats.last_error


def test_the_async_client_ingests_and_flushes(console, acme_key):
    async def ingest_all() -> tuple[bool, int]:
        async with AsyncKindgi(console, acme_key, batch_size=10) as client:
            for n in range(15):
                client.ingest(answered(f"turn-{n}"))
            flushed = await client.flush(timeout=30)
            return flushed, client.ingest_stats.sent

    assert run_on_a_thread(ingest_all()) == (True, 15)
    assert RunTrace.objects.count() == 15


@pytest.mark.parametrize("client", ["Kindgi", "AsyncKindgi"])
def test_traces_still_queued_are_sent_at_exit(console, acme_key, client):
    script = f"""
        import asyncio, sys
        from kindgi import {client}
        console = {client}(sys.argv[1], sys.argv[2], flush_interval=60)
        traces = [{{"id": f"exit-{{n}}", "input": "hi", "output": "hello"}} for n in range(5)]
        async def main():
            for trace in traces:
                console.ingest(trace)
        asyncio.run(main()) if {client == "AsyncKindgi"} else [console.ingest(t) for t in traces]
    """
    subprocess.run([sys.executable, "-c", textwrap.dedent(script), console, acme_key], cwd=ROOT, check=True, timeout=60)
    assert RunTrace.objects.filter(trace_id__startswith="exit-").count() == 5
