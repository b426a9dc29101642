"""The network allowlist: the kernel cuts the worker off, the pool relays bytes for it.

A worker under `network: allowlist` lives in a network namespace of its own with no
interface up, so no socket it makes can reach anything: that part is the kernel's, and no
code in the check (ctypes, a child process, the raw `_socket` module) gets around it. To reach
a listed host, the worker's `socket.connect` and `socket.getaddrinfo` ask the pool over
their channel. The pool checks the host against the allowlist, opens the connection itself
and hands the worker one end of a Unix socket pair, whose other end a relay thread joins to
the connection. The worker never holds a socket of the console's network: it can send only
down that pair, so only to the host the pool connected to. UDP goes the same way (a datagram
pair relayed to a connected UDP socket); `sendto` to any other address fails.

Listed hosts are names (matched exactly, case-insensitively, and resolved by the pool) or IP
addresses.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import selectors
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from guardrails.engine.sandbox.protocol import Channel, Message

_INET = (socket.AF_INET, socket.AF_INET6)
#: Relayed connections a worker may hold open at once.
MAX_RELAYS = 16
_CHUNK = 65536


class Relays:
    """Relay threads copying bytes between a worker's socket pair and real connections.

    They end when both directions are closed, or within half a second of `stop()` (called
    when the worker's sandbox is killed: a datagram pair has no end-of-file to wait for).
    """

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    def active(self) -> int:
        self._threads = [thread for thread in self._threads if thread.is_alive()]
        return len(self._threads)

    def start(self, remote: socket.socket, local: socket.socket) -> None:
        thread = threading.Thread(
            target=_relay, args=(remote, local, self._stop), name="kindgi-sandbox-relay", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def stop(self) -> None:
        self._stop.set()


def _relay(remote: socket.socket, local: socket.socket, stop: threading.Event) -> None:
    """Copy both ways; a stream's end-of-file in one direction is passed on as a shutdown."""
    remote.settimeout(None)
    peers = {remote: local, local: remote}
    stream = remote.type == socket.SOCK_STREAM
    reading = set(peers)
    try:
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while reading and not stop.is_set():
                for key, _ in selector.select(timeout=0.5):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    _copy(source, peers[source], stream, selector, reading)
    except OSError:
        return
    finally:
        remote.close()
        local.close()


def _copy(
    source: socket.socket,
    target: socket.socket,
    stream: bool,
    selector: selectors.BaseSelector,
    reading: set[socket.socket],
) -> None:
    data = source.recv(_CHUNK)
    if not stream:
        target.send(data)
    elif data:
        target.sendall(data)
    else:
        selector.unregister(source)
        reading.discard(source)
        target.shutdown(socket.SHUT_WR)


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
        self.relays = Relays()

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
        family, kind = int(message["family"]), int(message["type"]) & 0xF
        if family not in _INET or kind not in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            return _refusal(errno.EAFNOSUPPORT, "only TCP and UDP can be relayed"), []
        if self.relays.active() >= MAX_RELAYS:
            return _refusal(errno.EMFILE, f"at most {MAX_RELAYS} connections at a time"), []
        remote = socket.socket(family, kind)
        try:
            remote.settimeout(max(0.01, deadline - time.monotonic()))
            remote.connect((host, int(message["port"])))
        except OSError as error:
            remote.close()
            return _refusal(error.errno or errno.ECONNREFUSED, str(error)), []
        ours, theirs = socket.socketpair(socket.AF_UNIX, kind)
        self.relays.start(remote, ours)
        return {"op": "connected"}, [theirs.detach()]


def _refusal(code: int, text: str) -> Message:
    return {"op": "refused", "errno": code, "error": text}


def install_brokered_sockets(channel: Channel) -> None:
    """The worker's side: route internet connects and name lookups through the pool."""
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def ask(request: Message) -> tuple[Message, list[int]]:
        channel.send({**request, "id": channel.call_id})
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
        return [(socket.AddressFamily(f), socket.SocketKind(t), p, c, tuple(a)) for f, t, p, c, a in reply["infos"]]

    socket.socket.connect = brokered_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = brokered_connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = brokered_getaddrinfo
