"""Sending a delivery: claim it, send it once within a total deadline, record the answer.

A delivery is claimed as every leased job is (`kindgi_console.jobs.claim`: state pending,
due, no live lease), so two workers never send it at once; the attempt number comes with
the claim. A failed
attempt is tried again after an exponential backoff, up to KINDGI_ALERT_MAX_ATTEMPTS; a
worker killed mid-send leaves a lease that runs out, and the periodic check sends the
delivery again. Webhooks are signed as Standard Webhooks prescribes.

The messages of one rule to one channel are sent in the order of their `sequence`: a
delivery is claimed only when every earlier one is done (delivered, or failed for good),
and the one that finishes sends the next. A receiver gets a rule's `resolved` after its
`fired`, whatever the retries, and can check the order by `data.sequence`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from collections.abc import Coroutine
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache, partial
from typing import Any, TypeVar

import httpx
import orjson
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from alerts.messages import payload, text_of
from alerts.models import Channel, Delivery, DeliveryAttempt
from kindgi_console import jobs, tasking

T = TypeVar("T")

ANSWER_CHARS = 500
#: Connecting may take this much of an attempt's deadline (KINDGI_ALERT_SEND_TIMEOUT_S).
CONNECT_TIMEOUT_S = 5.0
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: `::a.b.c.d`: no stack should send it anywhere but where a.b.c.d goes (RFC 4291, 2.5.5.1).
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
#: IPv6 prefixes whose last 32 bits are an IPv4 address that the packet reaches.
IPV4_IN_LAST_32_BITS = (
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # SIIT, IPv4-translated (RFC 2765)
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64, the well-known prefix (RFC 6052)
)
#: A retry sent with a countdown may arrive a moment before its row says it is due.
DUE_SLACK = timedelta(milliseconds=500)


@dataclass(frozen=True)
class Answer:
    """What the receiver said: success, its HTTP status (if any) and the start of its text."""

    ok: bool
    status: int | None
    text: str


def lease() -> timedelta:
    """How long a claim is trusted: twice the send deadline and 5 s (recording the answer)."""
    return timedelta(seconds=2 * settings.KINDGI_ALERT_SEND_TIMEOUT_S + 5)


def backoff(attempt: int) -> float:
    """Seconds before the attempt after `attempt`: base x 2^(attempt-1), capped."""
    return float(min(settings.KINDGI_ALERT_RETRY_BASE_S * 2 ** (attempt - 1), settings.KINDGI_ALERT_RETRY_MAX_S))


def deliver(delivery_id: int) -> str:
    """Try the delivery once if it is due and unclaimed; its state afterwards."""
    delivery = claim(delivery_id)
    if delivery is None:
        return "skipped"
    started = timezone.now()
    clock = time.monotonic()
    answer = send(delivery, started)
    return finish(delivery, answer, started, int((time.monotonic() - clock) * 1000))


def claim(delivery_id: int) -> Delivery | None:
    """The delivery, claimed for one attempt; None when it is not due, claimed by another
    worker, done, or waits for an earlier message of its rule to its channel (which sends
    it once it is done: `finish`)."""
    now = timezone.now()
    place = Delivery.objects.filter(pk=delivery_id).values("firing__rule_id", "channel_id", "sequence").first()
    if place is None or earlier_pending(delivery_id, **place).exists():
        return None
    # An earlier message cannot appear after this check (numbers only grow), so the check
    # holds until the claim below.
    due = Delivery.objects.filter(pk=delivery_id, state=Delivery.State.PENDING, next_attempt_at__lte=now + DUE_SLACK)
    if not jobs.claim(due, lease=lease()):
        return None
    return Delivery.objects.select_related("channel", "firing__rule", "tenant").get(pk=delivery_id)


def earlier_pending(pk: int, firing__rule_id: int, channel_id: int, sequence: int) -> QuerySet[Delivery]:
    """The messages of the same rule to the same channel before this one that are not done."""
    return Delivery.objects.filter(
        Q(sequence__lt=sequence) | Q(sequence=sequence, pk__lt=pk),
        firing__rule_id=firing__rule_id,
        channel_id=channel_id,
        state=Delivery.State.PENDING,
    )


def send(delivery: Delivery, at: datetime) -> Answer:
    channel = delivery.channel
    if channel.kind == Channel.Kind.EMAIL:
        return send_email(delivery)
    if channel.kind == Channel.Kind.SLACK:
        return post(channel.url, orjson.dumps({"text": text_of(delivery)}), {})
    body = orjson.dumps(payload(delivery, at))
    return post(channel.url, body, signed_headers(channel.secret, delivery.msg_id, at, body))


def send_test(channel: Channel, by: str) -> Answer:
    """One test message to `channel` now, sent as its alerts are (the same signing, address
    checks and deadline), recorded nowhere: a webhook gets `{"type": "alert.test"}`, signed
    with the channel's secret, Slack and e-mail a line of text."""
    at = timezone.now()
    tenant = channel.tenant.slug
    text = f"Test message from Kindgi Console ({tenant}), sent by {by} to channel {channel.name}"
    if channel.kind == Channel.Kind.EMAIL:
        try:
            sent = send_mail(f"[Kindgi] {text}"[:150], text, None, channel.emails)
        except Exception as error:  # the e-mail backend's own errors (SMTP, sockets) vary
            return Answer(False, None, f"{type(error).__name__}: {error}"[:ANSWER_CHARS])
        return Answer(bool(sent), None, f"sent to {len(channel.emails)} address(es)")
    if channel.kind == Channel.Kind.SLACK:
        return post(channel.url, orjson.dumps({"text": text}), {})
    body = orjson.dumps(
        {
            "type": "alert.test",
            "timestamp": at.isoformat(),
            "data": {"tenant": tenant, "channel": {"id": channel.pk, "name": channel.name}, "sentBy": by},
        }
    )
    msg_id = f"msg_test_{channel.pk}_{int(at.timestamp() * 1000)}"
    return post(channel.url, body, signed_headers(channel.secret, msg_id, at, body))


def signed_headers(secret: str, msg_id: str, at: datetime, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers: id, timestamp and `v1,<base64 HMAC-SHA256>`."""
    signature = Webhook(secret).sign(msg_id, at, body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())), "webhook-signature": signature}


def run_alone(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coroutine)`, on a thread of its own when this thread already runs an event
    loop (a caller inside an async server, or a browser driver's loop in the same process),
    where asyncio.run refuses to start."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kindgi-webhook") as alone:
        return alone.submit(asyncio.run, coroutine).result()


def post(url: str, body: bytes, headers: dict[str, str]) -> Answer:
    """POST within KINDGI_ALERT_SEND_TIMEOUT_S in all (resolving, connecting, sending, the
    answer), connecting within CONNECT_TIMEOUT_S of it."""
    deadline = float(settings.KINDGI_ALERT_SEND_TIMEOUT_S)
    headers = {**headers, "content-type": "application/json", "user-agent": "kindgi-console-alerts"}
    # The resolver runs in a thread of its own, left behind (not waited for) when the
    # deadline passes: a resolver that hangs does not hold the delivery past it.
    resolver = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kindgi-webhook-dns")
    try:
        return run_alone(asyncio.wait_for(_post(url, body, headers, deadline, resolver), deadline))
    except TimeoutError:
        return Answer(False, None, f"no answer within {deadline:g} s")
    except httpx.HTTPError as error:
        return Answer(False, None, f"{type(error).__name__}: {error}"[:ANSWER_CHARS])
    finally:
        resolver.shutdown(wait=False, cancel_futures=True)


async def _post(url: str, body: bytes, headers: dict[str, str], deadline: float, resolver: Executor) -> Answer:
    target = httpx.URL(url)
    addresses = await _resolve(target, resolver)
    if isinstance(addresses, str):
        return Answer(False, None, addresses)
    timeout = httpx.Timeout(deadline, connect=min(deadline, CONNECT_TIMEOUT_S))
    client = httpx.AsyncClient(verify=tls_context(), timeout=timeout, follow_redirects=False, trust_env=False)
    async with client:
        for index, address in enumerate(addresses):
            try:
                return await _post_to(client, target, address, body, headers)
            except httpx.ConnectError:
                if index == len(addresses) - 1:
                    raise
    raise AssertionError("unreachable: _resolve answers at least one address")


@cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings and certificate authorities (httpx's, from certifi) that webhooks
    are verified with, loaded once per process: loading them takes a good part of a short
    deadline."""
    return httpx.create_ssl_context(trust_env=False)


async def _post_to(
    client: httpx.AsyncClient, target: httpx.URL, address: IPAddress, body: bytes, headers: dict[str, str]
) -> Answer:
    """POST to `address`, the one that was checked, as `target`: its Host header and, for
    HTTPS, its name in the TLS handshake (SNI), against which the certificate is verified."""
    pinned = target.copy_with(host=str(address))
    host = target.raw_host.decode("ascii")
    extensions = {} if _literal(host) else {"sni_hostname": host}
    headers = {**headers, "host": target.netloc.decode("ascii")}
    async with client.stream("POST", pinned, content=body, headers=headers, extensions=extensions) as response:
        text = b""
        async for chunk in response.aiter_bytes():
            text += chunk
            if len(text) >= ANSWER_CHARS:
                break
        ok = 200 <= response.status_code < 300
        return Answer(ok, response.status_code, text[:ANSWER_CHARS].decode("utf-8", "replace"))


async def _resolve(target: httpx.URL, resolver: Executor) -> list[IPAddress] | str:
    """The addresses to connect to, resolved once, or why the URL may not be sent to.

    The connection goes to these very addresses (never resolved again), so a name that
    resolves to a public address for the check and to loopback a moment later reaches
    nothing but the public one. An author could otherwise point a webhook at the console's
    own network and read the answers in the delivery log; KINDGI_ALERT_PRIVATE_URLS allows
    it (local use, tests).
    """
    host = target.raw_host.decode("ascii")
    port = target.port or (443 if target.scheme == "https" else 80)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.run_in_executor(resolver, partial(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM))
    except OSError as error:
        return f"cannot resolve {host}: {error}"
    addresses = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))
    if not addresses:
        return f"cannot resolve {host}: no address"
    if not settings.KINDGI_ALERT_PRIVATE_URLS:
        for address in addresses:
            refused = refusal(address)
            if refused:
                return f"refused: {host} is {address}, {refused}"
    return addresses


def refusal(address: IPAddress) -> str | None:
    """Why a webhook may not connect to `address` (None: a public address).

    IPv6 forms that carry an IPv4 address (IPv4-mapped `::ffff:127.0.0.1`, IPv4-compatible
    `::127.0.0.1`, SIIT `::ffff:0:127.0.0.1`, NAT64 `64:ff9b::127.0.0.1`, 6to4 `2002:7f00:1::`,
    Teredo) are judged by that IPv4 address too: a host's stack or a gateway delivers them
    to it.
    """
    if isinstance(address, ipaddress.IPv6Address):
        if address in IPV4_COMPATIBLE and int(address) > 1:  # :: and ::1 are judged below
            return "an IPv4-compatible IPv6 address (deprecated), not a public address"
        for embedded in _embedded_ipv4(address):
            if refusal(embedded):
                return f"which carries {embedded}, not a public address"
    if not address.is_global or address.is_multicast:
        return "not a public address"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if any(address in network for network in IPV4_IN_LAST_32_BITS):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [embedded for embedded in found if embedded is not None]


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def send_email(delivery: Delivery) -> Answer:
    text = text_of(delivery)
    try:
        sent = send_mail(f"[Kindgi] {text.splitlines()[0][:150]}", text, None, delivery.channel.emails)
    except Exception as error:  # the e-mail backend's own errors (SMTP, sockets) vary
        return Answer(False, None, f"{type(error).__name__}: {error}"[:ANSWER_CHARS])
    return Answer(bool(sent), None, f"sent to {len(delivery.channel.emails)} address(es)")


def finish(delivery: Delivery, answer: Answer, started: datetime, duration_ms: int) -> str:
    """Record the attempt; delivered, failed for good, or due again after the backoff."""
    now = timezone.now()
    with transaction.atomic():
        if not Delivery.objects.select_for_update().filter(pk=delivery.pk).exists():
            return "gone"  # its rule or channel was deleted meanwhile: nothing left to record
        DeliveryAttempt.objects.create(
            delivery=delivery,
            number=delivery.attempts,
            started_at=started,
            duration_ms=duration_ms,
            status_code=answer.status,
            ok=answer.ok,
            answer=answer.text[:ANSWER_CHARS],
        )
        delivery.lease_until = None
        if answer.ok:
            delivery.state, delivery.delivered_at, delivery.last_error = Delivery.State.DELIVERED, now, ""
        else:
            delivery.last_error = (f"HTTP {answer.status}: " if answer.status else "") + answer.text[:900]
            _after_failure(delivery, now)
        delivery.save(update_fields=["state", "delivered_at", "last_error", "lease_until", "next_attempt_at"])
        if delivery.state != Delivery.State.PENDING:
            _send_next(delivery, now)
    return delivery.state


def _send_next(delivery: Delivery, now: datetime) -> None:
    """Send the next message of the rule to the channel, which waited for this one, once
    this transaction commits (if it is due; one that is not has its retry queued)."""
    following = (
        Delivery.objects.filter(
            firing__rule_id=delivery.firing.rule_id,
            channel_id=delivery.channel_id,
            state=Delivery.State.PENDING,
            next_attempt_at__lte=now + DUE_SLACK,
        )
        .order_by("sequence", "pk")
        .values_list("pk", flat=True)
        .first()
    )
    if following is None:
        return

    def send_it() -> None:
        tasking.send("alerts.tasks.deliver", following)

    transaction.on_commit(send_it, robust=True)


def _after_failure(delivery: Delivery, now: datetime) -> None:
    if delivery.attempts >= settings.KINDGI_ALERT_MAX_ATTEMPTS:
        delivery.state = Delivery.State.FAILED
        return
    wait = backoff(delivery.attempts)
    delivery.next_attempt_at = now + timedelta(seconds=wait)
    pk = delivery.pk

    def again() -> None:
        tasking.send("alerts.tasks.deliver", pk, countdown=wait)

    transaction.on_commit(again, robust=True)


@jobs.recoverer("alert deliveries")
def resend_due(lost_before: datetime | None = None) -> int:
    """Queue every pending delivery that is due and unclaimed (lost messages, killed workers)
    and is the first of its rule's messages to its channel that is not done.

    A delivery's message holds no lease (only its worker's claim does): one that is due and
    unclaimed is sent again whenever this runs, whatever `lost_before` says, and the
    claim makes a second message for it harmless.
    """
    now = timezone.now()
    earlier = Delivery.objects.filter(
        Q(sequence__lt=OuterRef("sequence")) | Q(sequence=OuterRef("sequence"), pk__lt=OuterRef("pk")),
        firing__rule_id=OuterRef("firing__rule_id"),
        channel_id=OuterRef("channel_id"),
        state=Delivery.State.PENDING,
    )
    due = list(
        Delivery.objects.filter(Delivery.claimable(now), state=Delivery.State.PENDING, next_attempt_at__lte=now)
        .filter(~Exists(earlier))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:1000]
    )
    for pk in due:
        tasking.send("alerts.tasks.deliver", pk)
    return len(due)
