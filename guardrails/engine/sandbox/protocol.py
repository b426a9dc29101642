"""The wire between the pool and a sandbox worker: length-prefixed JSON over a Unix socket.

A Unix socket (not a pipe) so that the pool can hand the worker a connected socket
(SCM_RIGHTS) when a network allowlist brokers a connection; see network.py.
"""

from __future__ import annotations

import array
import json
import socket
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

_HEADER = struct.Struct("!I")
#: What the worker accepts from the pool: a trace is at most a few MB (KINDGI_MAX_TRACE_BYTES).
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
#: What the pool accepts from a worker: a verdict, or a broker request. A larger frame is an
#: error and the worker is replaced; reasons are cut to MAX_REASON_CHARS.
MAX_REPLY_BYTES = 64 * 1024
MAX_REASON_CHARS = 4096
_FD_SPACE = socket.CMSG_SPACE(4 * array.array("i").itemsize)

Message = dict[str, Any]


class ChannelClosed(Exception):
    """The other end went away (the worker died or the pool shut down)."""


class MessageTooLarge(ChannelClosed):
    """The other end sent a frame over this end's limit; the channel cannot be trusted."""


def _encode(message: Mapping[str, Any]) -> bytes:
    # repr for what JSON cannot carry (a handler's odd detail values): shown, never read back.
    data = json.dumps(message, default=repr, separators=(",", ":")).encode()
    return _HEADER.pack(len(data)) + data


class Channel:
    """One end of the pool-worker socket: send and receive whole messages, with deadlines."""

    def __init__(self, sock: socket.socket, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.sock = sock
        self.max_bytes = max_bytes
        #: The call this end is serving; a worker tags its broker requests with it.
        self.call_id: object = None
        self._buffer = bytearray()
        self._fds: list[int] = []

    def send(self, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        payload = _encode(message)
        self.sock.settimeout(None)
        try:
            if fds:
                sent = socket.send_fds(self.sock, [payload], list(fds))
                payload = payload[sent:]
            self.sock.sendall(payload)
        except OSError as error:
            raise ChannelClosed(str(error)) from error

    def receive(self, deadline: float | None = None) -> tuple[Message, list[int]]:
        """The next message and the descriptors sent with it; TimeoutError past `deadline`."""
        while True:
            message = self._take_message()
            if message is not None:
                fds, self._fds = self._fds, []
                return message, fds
            self._read_more(deadline)

    def _take_message(self) -> Message | None:
        if len(self._buffer) < _HEADER.size:
            return None
        (length,) = _HEADER.unpack_from(self._buffer)
        if length > self.max_bytes:
            raise MessageTooLarge(f"a message of {length} bytes is over the limit of {self.max_bytes} bytes")
        end = _HEADER.size + length
        if len(self._buffer) < end:
            return None
        data = bytes(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        try:
            decoded = json.loads(data)
        except ValueError as error:
            raise ChannelClosed(f"a message is not JSON: {error}") from None
        if not isinstance(decoded, dict):
            raise ChannelClosed("a message is not a JSON object")
        return decoded

    def _read_more(self, deadline: float | None) -> None:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
        else:
            self.sock.settimeout(None)
        try:
            data, ancdata, _flags, _addr = self.sock.recvmsg(1 << 16, _FD_SPACE)
        except TimeoutError:
            raise
        except OSError as error:
            raise ChannelClosed(str(error)) from error
        if not data:
            raise ChannelClosed("the other end closed the channel")
        self._buffer += data
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                self._fds.extend(fds)

    def close(self) -> None:
        self.sock.close()
