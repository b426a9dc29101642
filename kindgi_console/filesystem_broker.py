"""The broker of the embedded default (`filesystem://`): kombu's filesystem transport, which
a full disk does not leave with half-written files.

kombu writes a message straight into the queue folder, and an exchange's bindings straight
into its file: a write cut short by a full disk leaves an empty or truncated file there,
which every worker then fails to read (`JSONDecodeError`, an unrecoverable error) long after
the disk has room again; and two workers that start at once race on a bindings file (one
creates it empty, the other reads it before it is written). Here a message is written under a
name the readers skip and renamed into the queue once whole; a bindings file is read, changed
and replaced whole under a lock of its own, so that readers and binders never see it
half-written; and a
message that cannot be read (left by an older writer) is dropped with an error in the log,
never the end of the worker. The work it carried is sent again by the recovery check.
"""

# kombu's transport is untyped: its helpers are called as they are.
# mypy: allow-untyped-calls

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Put the message in the queue whole, or not at all."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.part"  # not `QUEUE.msg`: readers skip it
        try:
            with open(partial, "wb", buffering=0) as out:
                out.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        """Add the binding to the exchange's file: read, changed and replaced whole, one binder
        at a time (a lock file beside it), so that no reader sees an empty or partial table."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        partial = file.with_name(f"{file.name}.{uuid.uuid4()}.part")
        try:
            with open(file.with_name(f"{file.name}.lock"), "ab") as guard:
                fcntl.flock(guard, fcntl.LOCK_EX)
                try:
                    table = [filesystem.exchange_queue_t(*row) for row in loads(file.read_bytes() or b"[]")]
                except FileNotFoundError:
                    table = []
                except ValueError:  # left half-written by an older writer: bound again from here
                    table = []
                if binding in table:
                    return
                with open(partial, "wb", buffering=0) as out:
                    out.write(str_to_bytes(dumps([binding, *table])))
                os.replace(partial, file)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot open {file}") from exc

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        while True:
            try:
                return super()._get(queue)
            except ValueError as error:  # the file was taken off the queue: the next one
                logger.error("a message of the queue %s could not be read and was dropped: %s", queue, error)


class Transport(filesystem.Transport):
    Channel = Channel
