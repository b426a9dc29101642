"""The network allowlist: the kernel cuts the worker off, the pool connects on its behalf.

A worker under `network: allowlist` lives in a network namespace of its own with no
interface up, so no socket it makes can reach anything: that part is the kernel's, and no
code in the handler (ctypes, a subprocess, the raw `_socket` module) gets around it. To reach
a listed host, the worker's `socket.connect` and `socket.getaddrinfo` ask the pool over
their private channel; the pool checks the host against the allowlist, opens the connection
in its own namespace and passes the connected descriptor back (SCM_RIGHTS), which the worker
puts in place of its own socket's. Whatever the handler sends down the channel, the pool
only ever connects to a listed host.

Listed hosts are names (matched exactly, case-insensitively, and resolved by the pool) or IP
addresses. Connected TCP and UDP sockets are brokered; `sendto` without `connect` and any
other family stay cut off.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from guardrails.engine.sandbox.protocol import Channel, Message

_INET = (socket.AF_INET, socket.AF_INET6)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class AllowlistBroker:
    """The pool's side: resolve and connect for a worker, only to listed hosts."""

    def __init__(self, hosts: Sequence[str]) -> None:
        normalized = [host.strip().lower().rstrip(".") for host in hosts]
        self.names = frozenset(host for host in normalized if not _is_ip(host))
        self.addresses = frozenset(str(ipaddress.ip_address(h)) for h in normalized if _is_ip(h))
        self._resolved: frozenset[str] | None = None

    def allows(self, host: str) -> bool:
        host = host.strip().lower().rstrip(".")
        if not _is_ip(host):
            return host in self.names
        address = str(ipaddress.ip_address(host))
        return address in self.addresses or address in self._resolved_names()

    def _resolved_names(self) -> frozenset[str]:
        # Resolved once per worker call at most: a listed name's addresses are allowed too.
        if self._resolved is None:
            found: set[str] = set()
            for name in self.names:
                try:
                    found.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
                except OSError:
                    continue
            self._resolved = frozenset(found)
        return self._resolved

    def handle(self, message: Message, deadline: float) -> tuple[Message, list[int]]:
        """Answer one `resolve` or `connect` request from a worker."""
        host = str(message.get("host") or "")
        if not self.allows(host):
            return _refusal(errno.EACCES, f"the network allowlist does not name {host}"), []
        if message["op"] == "resolve":
            return self._resolve(message, host), []
        return self._connect(message, host, deadline)

    def _resolve(self, message: Message, host: str) -> Message:
        try:
            infos = socket.getaddrinfo(
                host,
                message.get("port"),
                message.get("family", 0),
                message.get("type", 0),
                message.get("proto", 0),
                message.get("flags", 0),
            )
        except socket.gaierror as error:
            return _refusal(error.errno or socket.EAI_NONAME, str(error))
        return {"op": "resolved", "infos": [list(info) for info in infos]}

    def _connect(self, message: Message, host: str, deadline: float) -> tuple[Message, list[int]]:
        family = int(message["family"])
        if family not in _INET:
            return _refusal(errno.EAFNOSUPPORT, "only internet sockets can be brokered"), []
        sock = socket.socket(family, int(message["type"]), int(message.get("proto", 0)))
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            sock.connect((host, int(message["port"])))
        except OSError as error:
            sock.close()
            return _refusal(error.errno or errno.ECONNREFUSED, str(error)), []
        return {"op": "connected"}, [sock.detach()]


def _refusal(code: int, text: str) -> Message:
    return {"op": "refused", "errno": code, "error": text}


def install_brokered_sockets(channel: Channel) -> None:
    """The worker's side: route internet connects and name lookups through the pool."""
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def ask(request: Message) -> tuple[Message, list[int]]:
        channel.send(request)
        return channel.receive()

    def brokered_connect(self: socket.socket, address: Any) -> None:
        if self.family not in _INET:
            real_connect(self, address)
            return
        reply, fds = ask(
            {
                "op": "connect",
                "family": int(self.family),
                "type": int(self.type),
                "proto": self.proto,
                "host": str(address[0]),
                "port": int(address[1]),
            }
        )
        if reply.get("op") != "connected" or not fds:
            raise OSError(int(reply.get("errno") or errno.EACCES), str(reply.get("error")))
        timeout = self.gettimeout()
        os.dup2(fds[0], self.fileno())
        for fd in fds:
            os.close(fd)
        self.settimeout(timeout)

    def brokered_connect_ex(self: socket.socket, address: Any) -> int:
        try:
            brokered_connect(self, address)
        except OSError as error:
            return error.errno or errno.ECONNREFUSED
        return 0

    def brokered_getaddrinfo(
        host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> list[Any]:
        name = host.decode() if isinstance(host, bytes) else host
        if name is None or _is_ip(str(name)):
            return real_getaddrinfo(host, port, family, type, proto, flags)
        reply, _ = ask(
            {
                "op": "resolve",
                "host": str(name),
                "port": port,
                "family": int(family),
                "type": int(type),
                "proto": proto,
                "flags": flags,
            }
        )
        if reply.get("op") != "resolved":
            raise socket.gaierror(socket.EAI_NONAME, str(reply.get("error")))
        return [
            (socket.AddressFamily(f), socket.SocketKind(t), p, c, tuple(a))
            for f, t, p, c, a in reply["infos"]
        ]

    socket.socket.connect = brokered_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = brokered_connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = brokered_getaddrinfo
