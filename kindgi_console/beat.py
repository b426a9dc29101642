"""Beat's scheduler (`CELERY_BEAT_SCHEDULER`): Celery's persistent one, which a schedule
file that cannot be written (a full disk, a read-only folder) does not stop.

The file (`CELERY_BEAT_SCHEDULE_FILENAME`, under KINDGI_VAR_DIR) keeps when each periodic
check last ran, so that one with a long interval (retention, hourly) still runs when beat
is restarted more often than that. Beat only needs it across restarts: when it cannot be
opened or written, beat says so in its log and keeps the schedule in memory until it is
started again, sending every check on time meanwhile.
"""

from __future__ import annotations

import contextlib
import dbm
import errno
import logging
from typing import Any

from celery.beat import PersistentScheduler

logger = logging.getLogger(__name__)

#: What a schedule file that cannot be written raises (ENOSPC, EROFS, a dbm's own errors).
FILE_ERRORS = (OSError, *dbm.error)
#: The errors that say the file cannot be written (rather than that it is corrupted, which
#: Celery handles by making a new one).
CANNOT_WRITE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


class MemoryStore(dict[str, Any]):
    """The schedule in memory, in the place of the shelve file."""

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass


class Scheduler(PersistentScheduler):  # type: ignore[misc]
    """PersistentScheduler, going on from a schedule in memory when its file fails."""

    in_memory = False

    def _open_schedule(self) -> Any:
        if self.in_memory:
            return MemoryStore()
        try:
            return super()._open_schedule()
        except FILE_ERRORS as error:
            if getattr(error, "errno", None) not in CANNOT_WRITE:
                raise  # a corrupted file: Celery removes it and makes a new one
            return self._in_memory_from_now(error)

    def _destroy_open_corrupted_schedule(self, exc: BaseException) -> Any:
        if getattr(exc, "errno", None) in CANNOT_WRITE:
            return self._in_memory_from_now(exc)  # opening it again would wait on its lock
        return super()._destroy_open_corrupted_schedule(exc)

    def setup_schedule(self) -> None:
        try:
            super().setup_schedule()
        except FILE_ERRORS as error:
            self._store = self._in_memory_from_now(error)
            super().setup_schedule()

    def sync(self) -> None:
        if self.in_memory:
            return
        entries = self.schedule  # the shelve's cached entries: what a failed write leaves behind
        try:
            super().sync()
        except FILE_ERRORS as error:
            self._store = self._in_memory_from_now(error)
            self._store["entries"] = entries

    def close(self) -> None:
        try:
            super().close()
        except FILE_ERRORS as error:
            logger.error("beat could not write its schedule as it stopped: %s", error)

    def _in_memory_from_now(self, error: BaseException) -> MemoryStore:
        """Leave the file (closed, errors ignored) for a schedule in memory, saying so once."""
        if not self.in_memory:
            logger.error(
                "beat cannot write its schedule to %s (%s): it keeps the schedule in memory "
                "and goes on sending the periodic checks; it uses the file again once restarted",
                self.schedule_filename,
                error,
            )
        self.in_memory = True
        if self._store is not None and not isinstance(self._store, MemoryStore):
            with contextlib.suppress(*FILE_ERRORS):
                self._store.close()
        return MemoryStore()
