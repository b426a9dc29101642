"""Where a webhook may connect: public addresses only, in every spelling, and exactly the
address that was checked (the name is resolved once), with the certificate still verified
against the name. Real sockets on the loopback range; no traffic leaves the machine."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import certifi
import pytest

from alerts.delivery import post, refusal, tls_context
from tests.alerts.receiver import Receiver

BODY = b'{"type": "alert.fired"}'


@pytest.fixture
def public_only(settings: Any) -> None:
    settings.KINDGI_ALERT_PRIVATE_URLS = False
    settings.KINDGI_ALERT_SEND_TIMEOUT_S = 3


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "[::1]",
        "[::ffff:127.0.0.1]",  # IPv4-mapped
        "[::127.0.0.1]",  # IPv4-compatible
        "[::ffff:0:127.0.0.1]",  # IPv4-translated (SIIT)
        "[64:ff9b::127.0.0.1]",  # NAT64
        "[64:ff9b::10.0.0.1]",
        "[2002:7f00:1::1]",  # 6to4 of 127.0.0.1
        "[::169.254.169.254]",
        "2130706433",  # 127.0.0.1 as one number
        "[::]",
    ],
)
def test_every_spelling_of_a_non_public_address_is_refused(host: str, public_only: None) -> None:
    with Receiver() as receiver:
        answer = post(f"http://{host}:{receiver.bound_port}/hook", BODY, {})
        assert not answer.ok and answer.status is None
        assert answer.text.startswith("refused: "), answer.text
        assert receiver.requests == []


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("8.8.8.8", False),
        ("2606:4700:4700::1111", False),
        ("64:ff9b::8.8.8.8", False),  # NAT64 to a public address
        ("::8.8.8.8", True),  # deprecated: nothing sends it anywhere
        ("::ffff:10.1.2.3", True),
        ("64:ff9b::192.168.1.1", True),
        ("2002:c0a8:0101::1", True),  # 6to4 of 192.168.1.1
        ("224.0.0.251", True),  # multicast
        ("ff0e::1", True),
        ("100.64.0.1", True),  # shared address space (carrier-grade NAT)
    ],
)
def test_the_address_rule(address: str, refused: bool) -> None:
    assert (refusal(ipaddress.ip_address(address)) is not None) is refused


@pytest.fixture
def rebinding_name(monkeypatch: Any) -> Iterator[list[str]]:
    """`hooks.rebind.test` resolves to 127.0.0.2 (taken as a public address here) once, and
    to 127.0.0.1 ever after, as a DNS server of an attacker's answers with a zero TTL."""
    real_getaddrinfo = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        host = host.decode() if isinstance(host, bytes) else host  # anyio asks in IDNA bytes
        if host != "hooks.rebind.test":
            return real_getaddrinfo(host, port, *args, **kwargs)
        asked.append(host)
        address = "127.0.0.2" if len(asked) == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 80)))]

    real_is_global = ipaddress.IPv4Address.is_global

    def is_global(self: ipaddress.IPv4Address) -> bool:
        return self == ipaddress.IPv4Address("127.0.0.2") or bool(real_is_global.fget(self))  # type: ignore[attr-defined]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(ipaddress.IPv4Address, "is_global", property(is_global))
    yield asked


def test_a_name_that_resolves_elsewhere_after_the_check_reaches_only_the_checked_address(
    public_only: None, rebinding_name: list[str]
) -> None:
    with Receiver() as loopback, Receiver(host="127.0.0.2", port=loopback.bound_port) as checked:
        answer = post(f"http://hooks.rebind.test:{loopback.bound_port}/hook", BODY, {})
        assert answer.ok, answer.text
        assert loopback.requests == []
        (request,) = checked.requests
        assert request.headers["host"] == f"hooks.rebind.test:{loopback.bound_port}"
        assert request.body == BODY
        assert rebinding_name == ["hooks.rebind.test"]  # resolved once, for the check and the connection


@pytest.fixture
def certificate(tmp_path: Path, monkeypatch: Any, request: Any) -> Path:
    """A self-signed certificate (and its key) for hooks.tls.test, the only authority trusted."""
    pem = tmp_path / "hooks.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-days", "1", "-subj", "/CN=hooks.tls.test", "-addext", "subjectAltName=DNS:hooks.tls.test",
            "-keyout", str(pem), "-out", str(tmp_path / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (tmp_path / "authority.pem").write_bytes((tmp_path / "cert.pem").read_bytes())
    pem.write_bytes(pem.read_bytes() + (tmp_path / "cert.pem").read_bytes())
    monkeypatch.setattr(certifi, "where", lambda: str(tmp_path / "authority.pem"))
    tls_context.cache_clear()
    request.addfinalizer(tls_context.cache_clear)
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        host = host.decode() if isinstance(host, bytes) else host
        if host in ("hooks.tls.test", "impostor.tls.test"):
            host = "127.0.0.1"
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return pem


def test_https_to_the_checked_address_still_verifies_the_certificate_against_the_name(
    certificate: Path, settings: Any
) -> None:
    with Receiver(tls=str(certificate)) as receiver:
        answer = post(f"https://hooks.tls.test:{receiver.bound_port}/hook", BODY, {})
        assert answer.ok, answer.text
        assert receiver.requests[0].headers["host"] == f"hooks.tls.test:{receiver.bound_port}"
        # The same server under a name its certificate does not carry is refused by TLS.
        answer = post(f"https://impostor.tls.test:{receiver.bound_port}/hook", BODY, {})
        assert not answer.ok and "CERTIFICATE_VERIFY_FAILED" in answer.text, answer.text
        assert len(receiver.requests) == 1


def test_a_delivery_runs_where_an_event_loop_already_runs() -> None:
    """A worker thread that already runs a loop (an async server, a browser driver) still sends."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from alerts.delivery import run_alone

    async def answer() -> str:
        await asyncio.sleep(0)
        return "sent"

    async def inside() -> str:
        return run_alone(answer())

    # On a thread of its own: the test's thread may run a loop already (a browser driver's).
    with ThreadPoolExecutor(max_workers=1) as thread:
        assert thread.submit(asyncio.run, inside()).result() == "sent"
        assert thread.submit(run_alone, answer()).result() == "sent"
    assert run_alone(answer()) == "sent"
