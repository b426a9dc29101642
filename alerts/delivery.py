"""Sending a delivery: claim it, send it once within a total deadline, record the answer.

A delivery is claimed with a conditional UPDATE (state pending, due, no live lease), so
two workers never send it at once; the attempt number comes with the claim. A failed
attempt is tried again after an exponential backoff, up to KINDGI_ALERT_MAX_ATTEMPTS; a
worker killed mid-send leaves a lease that runs out, and the periodic check sends the
delivery again. Webhooks are signed as Standard Webhooks prescribes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
import orjson
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from alerts.messages import payload, text_of
from alerts.models import Channel, Delivery, DeliveryAttempt

ANSWER_CHARS = 500
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
    now = timezone.now()
    claimed = Delivery.objects.filter(
        Q(lease_until__isnull=True) | Q(lease_until__lt=now),
        pk=delivery_id,
        state=Delivery.State.PENDING,
        next_attempt_at__lte=now + DUE_SLACK,
    ).update(lease_until=now + lease(), attempts=F("attempts") + 1)
    if not claimed:
        return None
    return Delivery.objects.select_related("channel", "firing__rule", "tenant").get(pk=delivery_id)


def send(delivery: Delivery, at: datetime) -> Answer:
    channel = delivery.channel
    if channel.kind == Channel.Kind.EMAIL:
        return send_email(delivery)
    if channel.kind == Channel.Kind.SLACK:
        return post(channel.url, orjson.dumps({"text": text_of(delivery)}), {})
    body = orjson.dumps(payload(delivery, at))
    return post(channel.url, body, signed_headers(channel.secret, delivery.msg_id, at, body))


def signed_headers(secret: str, msg_id: str, at: datetime, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers: id, timestamp and `v1,<base64 HMAC-SHA256>`."""
    signature = Webhook(secret).sign(msg_id, at, body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())), "webhook-signature": signature}


def post(url: str, body: bytes, headers: dict[str, str]) -> Answer:
    """POST within KINDGI_ALERT_SEND_TIMEOUT_S in all (connect, send, answer)."""
    deadline = float(settings.KINDGI_ALERT_SEND_TIMEOUT_S)
    headers = {**headers, "content-type": "application/json", "user-agent": "kindgi-console-alerts"}
    try:
        return asyncio.run(asyncio.wait_for(_post(url, body, headers, deadline), deadline))
    except TimeoutError:
        return Answer(False, None, f"no answer within {deadline:g} s")
    except httpx.HTTPError as error:
        return Answer(False, None, f"{type(error).__name__}: {error}"[:ANSWER_CHARS])


async def _post(url: str, body: bytes, headers: dict[str, str], deadline: float) -> Answer:
    refused = await _private_address(url)
    if refused:
        return Answer(False, None, refused)
    async with (
        httpx.AsyncClient(timeout=deadline, follow_redirects=False, trust_env=False) as client,
        client.stream("POST", url, content=body, headers=headers) as response,
    ):
        text = b""
        async for chunk in response.aiter_bytes():
            text += chunk
            if len(text) >= ANSWER_CHARS:
                break
        ok = 200 <= response.status_code < 300
        return Answer(ok, response.status_code, text[:ANSWER_CHARS].decode("utf-8", "replace"))


async def _private_address(url: str) -> str | None:
    """Why `url` may not be sent to: a host that resolves to a non-public address.

    An author could otherwise point a webhook at the console's own network and read the
    answers in the delivery log. KINDGI_ALERT_PRIVATE_URLS allows it (local use, tests).
    The connection may resolve again; a deployment that needs more puts an egress proxy
    in front of the workers.
    """
    if settings.KINDGI_ALERT_PRIVATE_URLS:
        return None
    host = httpx.URL(url).host
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None)
    except OSError as error:
        return f"cannot resolve {host}: {error}"
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            return f"refused: {host} is {address}, not a public address"
    return None


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
    return delivery.state


def _after_failure(delivery: Delivery, now: datetime) -> None:
    if delivery.attempts >= settings.KINDGI_ALERT_MAX_ATTEMPTS:
        delivery.state = Delivery.State.FAILED
        return
    wait = backoff(delivery.attempts)
    delivery.next_attempt_at = now + timedelta(seconds=wait)
    pk = delivery.pk

    def again() -> None:
        from alerts.tasks import deliver as deliver_task

        deliver_task.apply_async((pk,), countdown=wait)

    transaction.on_commit(again, robust=True)


def resend_due(now: datetime | None = None) -> int:
    """Queue every pending delivery that is due and unclaimed (lost messages, killed workers)."""
    from alerts.tasks import deliver as deliver_task

    now = now or timezone.now()
    due = list(
        Delivery.objects.filter(
            Q(lease_until__isnull=True) | Q(lease_until__lt=now), state=Delivery.State.PENDING, next_attempt_at__lte=now
        )
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:1000]
    )
    for pk in due:
        deliver_task.delay(pk)
    return len(due)
