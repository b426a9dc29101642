"""The client's address: the peer's, or the one a trusted proxy forwarded.

Behind a TLS proxy every request comes from the proxy's address, so counting sign-in
failures by `REMOTE_ADDR` counts everyone as one client. The proxy names the client in
`X-Forwarded-For`, but any client can send that header too: it is read only when the peer
is one of `KINDGI_TRUSTED_PROXIES`, and then from the right, each hop written by the proxy
to its right, skipping the trusted proxies; the first other hop is the client (what a
client writes itself stands to the left of it and is never read).
"""

from __future__ import annotations

import functools
import ipaddress

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@functools.cache
def networks(declared: tuple[str, ...]) -> tuple[Network, ...]:
    """The declared proxies as networks (an address is a network of one)."""
    try:
        return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in declared)
    except ValueError as error:
        raise ImproperlyConfigured(f"KINDGI_TRUSTED_PROXIES: {error}") from None


def trusted_proxies() -> tuple[Network, ...]:
    return networks(tuple(settings.KINDGI_TRUSTED_PROXIES))


def parse(hop: str) -> Address | None:
    """An address of a header's hop: `1.2.3.4`, `1.2.3.4:5678`, `::1` or `[::1]:80`."""
    text = hop.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def is_trusted(address: Address, proxies: tuple[Network, ...]) -> bool:
    return any(address.version == network.version and address in network for network in proxies)


def client_address(request: HttpRequest) -> str:
    """The client's address as text (the peer's when no trusted proxy forwarded the request)."""
    peer = str(request.META.get("REMOTE_ADDR", ""))
    proxies = trusted_proxies()
    nearest = parse(peer)
    if not proxies or nearest is None or not is_trusted(nearest, proxies):
        return peer
    for hop in reversed(str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")):
        address = parse(hop)
        if address is None:  # a hop no proxy writes: keep the last one a proxy vouched for
            break
        nearest = address
        if not is_trusted(address, proxies):
            break
    return str(nearest)
