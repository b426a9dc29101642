"""Workers that start at once bind their queues to the same exchange file of the embedded
broker: every binding is kept, and a reader never meets an empty or half-written table (kombu's
own bind creates the file empty before writing it, which a second worker read as JSON)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kindgi_console.filesystem_broker import Channel


def binder(folder: Path) -> Any:
    return SimpleNamespace(control_folder=folder, _exchange_file=lambda exchange: folder / f"{exchange}.exchange")


def test_bindings_made_at_once_are_all_kept_and_always_readable(tmp_path: Path) -> None:
    table = tmp_path / "celery.pidbox.exchange"
    unreadable: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            if table.exists():
                try:
                    json.loads(table.read_bytes())
                except ValueError as error:
                    unreadable.append(str(error))

    def bind(worker: int) -> None:
        for queue in range(25):
            Channel._queue_bind(binder(tmp_path), "celery.pidbox", "", "", f"w{worker}-q{queue}")

    reader = threading.Thread(target=read)
    reader.start()
    workers = [threading.Thread(target=bind, args=(n,)) for n in range(4)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    done.set()
    reader.join()
    assert unreadable == []
    queues = {row[2] for row in json.loads(table.read_bytes())}
    assert queues == {f"w{n}-q{q}" for n in range(4) for q in range(25)}


def test_a_binding_made_twice_is_kept_once(tmp_path: Path) -> None:
    for _ in range(2):
        Channel._queue_bind(binder(tmp_path), "tasks", "runs", "", "kindgi-runs")
    assert json.loads((tmp_path / "tasks.exchange").read_bytes()) == [["runs", "", "kindgi-runs"]]
