"""Evaluating trace files in batches, in this process or, with `--jobs N`, in N processes.

Each trace is parsed once (orjson), validated, and evaluated through the engine's Plan for
its (tenant, agent, flow), resolved once per distinct triple; its results are rendered into
the batch at once. Batches come back in the order of the file whatever the number of
processes, so that the report is the same, byte for byte, with or without `--jobs`.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from orjson import JSONDecodeError, loads

from guardrails.engine.cli.files import BadInput, Entry, parse_entry
from guardrails.engine.cli.reports import Batch, Renderer
from guardrails.engine.evaluate import Engine, Plan
from guardrails.engine.schema import bracket_count, runtrace_line_validator, validate_runtrace
from guardrails.engine.types import Context, Guardrail, Issue

if TYPE_CHECKING:  # multiprocessing is imported for --jobs only
    from concurrent.futures import Future

#: Traces per batch sent to a worker process (--jobs), and the bytes of trace text after
#: which a batch is closed: enough to amortise sending it, and a bound on what is in flight
#: whatever the size of the traces (a count alone would put 1,000 traces of the 1 MiB
#: limit, a GB, in each batch). Its bytes are weighed every BATCH_STEP traces.
BATCH_SIZE = 1000
BATCH_BYTES = 1 << 20
BATCH_STEP = 2
#: The same for a batch evaluated in this process: a batch's lines and rendered results are
#: alive together, and smaller batches keep the peak lower (by 2 MB of the command's 30)
#: at no cost in speed.
LOCAL_BATCH_SIZE = 32
LOCAL_BATCH_BYTES = 256 << 10
LOCAL_BATCH_STEP = 8
_MAX_PLANS = 4096
_raw = itemgetter(1)


class Evaluator:
    """Everything evaluating a batch needs; a worker process inherits it when forked."""

    def __init__(
        self,
        engine: Engine,
        guardrails: Sequence[Guardrail],
        services: Mapping[str, Any],
        fmt: str,
        limits: tuple[int, int],
        collect: bool = False,
    ) -> None:
        self.engine = engine
        #: Each batch lists its fails and errors too (a summary, annotations, a baseline).
        self.collect = collect
        self.guardrails = guardrails
        self.services = services
        self.fmt = fmt
        self.max_bytes, self.max_depth = limits
        self._plans: dict[tuple[str | None, str | None, str | None], Plan] = {}
        self._renderer: Renderer | None = None
        self._validate = runtrace_line_validator(self.max_depth, json_values=True)  # (parsed by orjson)

    def plan(self, tenant: str | None, agent: str | None, flow: str | None) -> Plan:
        """The guardrails resolved for traces of this tenant, agent and flow in mode ci."""
        key = (tenant, agent, flow)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            context = Context(mode="ci", tenant=tenant, agent=agent, flow=flow, services=self.services)
            plan = self._plans[key] = self.engine.plan(self.guardrails, context)
        return plan

    def run(self, path: str, entries: Sequence[Entry]) -> Batch:
        """Parse, validate, evaluate and render a batch of one file's entries."""
        renderer = self._renderer
        if renderer is None or renderer.path != path:  # one renderer for a file's batches
            renderer = self._renderer = Renderer(self.guardrails, self.fmt, path, self.collect)
        add, plans, plan_of, max_depth, validate = renderer.add, self._plans, self.plan, self.max_depth, self._validate
        bad_input: list[str] = []
        for line, raw, item in entries:
            if raw is not None:
                # The brackets, counted once: too few to nest too deep, the text is parsed
                # straight away (parse_entry's checks otherwise, and its message).
                brackets = bracket_count(raw)
                try:
                    item = loads(raw) if brackets <= max_depth else parse_entry(raw, max_depth)
                except JSONDecodeError:
                    item = parse_entry(raw, max_depth)
            if isinstance(item, Issue):
                bad_input.append(_where(path, line, item))
                continue
            if raw is None:
                issues = validate_runtrace(item, max_depth=max_depth, json_values=True)
            else:
                issues = validate(raw, item, brackets)
            if issues or not (type(item) is dict or isinstance(item, Mapping)):
                bad_input.extend(_where(path, line, issue) for issue in issues)
                continue
            get = item.get
            scope = (get("tenant"), get("agent"), get("flow"))
            add(item["id"], line, (plans.get(scope) or plan_of(*scope)).verdicts(item))
        batch = renderer.take()
        batch.bad_input = bad_input
        return batch


def _where(path: str, line: int, issue: Issue) -> str:
    field_path = f" {issue.path}:" if issue.path else ""
    return f"{path}:{line}:{field_path} {issue.message}"


def batches(entries: Iterable[Entry], size: int, max_bytes: int, step: int) -> Iterator[list[Entry]]:
    """The entries in lists of at most `size`, each closed once its trace text reaches
    `max_bytes`, weighed every `step` entries: a batch holds under `max_bytes` and the bytes
    of `step` traces (a loop in Python at each trace costs 1.5% of a run, with 32 traces a
    batch). When the file cannot be read further (BadInput), the traces read before it are
    a last batch, then the error follows."""
    iterator = iter(entries)
    batch: list[Entry] = []
    try:
        # (list.extend keeps what it took before the iterator raised: a last batch)
        while True:
            batch.extend(islice(iterator, step))
            if not batch:
                return
            held = _bytes(batch)
            while held < max_bytes and len(batch) < size:
                taken = len(batch)
                batch.extend(islice(iterator, min(step, size - taken)))
                if len(batch) == taken:
                    break
                held += _bytes(batch[taken:])
            yield batch
            batch = []
    except BadInput:
        if batch:
            yield batch
        raise


def _bytes(entries: list[Entry]) -> int:
    """The bytes of the entries' trace text (a refused line has none)."""
    return sum(map(len, filter(None, map(_raw, entries))))


# --- --jobs: worker processes ------------------------------------------------------------

_WORKER: Evaluator | None = None  # set before the pool forks, so each worker inherits it


def _run_in_worker(path: str, entries: list[Entry]) -> Batch:
    assert _WORKER is not None
    return _WORKER.run(path, entries)


class Workers:
    """A pool of `jobs` forked processes evaluating the batches of trace files (a JSON
    array's elements as a JSON Lines file's lines: the reader here splits them)."""

    def __init__(self, evaluator: Evaluator, jobs: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        global _WORKER
        _WORKER = evaluator
        self.jobs = jobs
        _keep_freed_blocks()  # before the fork: the workers inherit it
        _close_the_queue_of_a_broken_pool()
        self._pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"))
        # Fork every worker now, before the report has written anything: a worker flushes
        # the standard streams it inherited when it exits, and must find them empty.
        sys.stdout.flush()
        sys.stderr.flush()
        self._pool.submit(int).result()

    def map(self, path: str, entries: Iterable[Entry]) -> Iterator[Batch]:
        """Each batch's result in the order of the file, with a bounded number in flight.
        A worker that dies (killed, out of memory) makes the rest of the file, and of any
        file after it, bad input that says so: never a run that hangs or a report cut off."""
        from concurrent.futures.process import BrokenProcessPool

        # Each batch with its first line; one leaves only once its result has been given.
        pending: deque[tuple[int, Future[Batch]]] = deque()
        broken: BadInput | None = None
        line = 0
        try:
            try:
                for batch in batches(entries, BATCH_SIZE, BATCH_BYTES, BATCH_STEP):
                    line = batch[0][0]
                    pending.append((line, self._pool.submit(_run_in_worker, path, batch)))
                    if len(pending) >= 2 * self.jobs:
                        yield pending[0][1].result()
                        pending.popleft()
            except BadInput as exc:  # the file cannot be read further: what was read comes first
                broken = exc
            while pending:
                yield pending[0][1].result()
                pending.popleft()
        except BrokenProcessPool:
            first = pending[0][0] if pending else line
            raise BadInput(
                f"{path}: a worker process of --jobs ended abruptly (killed, or out of memory): "
                f"the traces from line {first} on were not evaluated"
            ) from None
        if broken is not None:
            raise broken

    def close(self) -> None:
        global _WORKER
        self._pool.shutdown(cancel_futures=True)
        _WORKER = None


def _close_the_queue_of_a_broken_pool() -> None:
    """CPython 3.12's fix of gh-94777, for 3.11: when a worker dies while the pool's feeder
    thread is writing a batch (a megabyte: more than the pipe holds) to the queue, nothing
    reads the pipe any more and the pool's clean-up waits for that write forever, the run
    with it. The fix closes the queue's reading end first, so that the write fails."""
    if sys.version_info >= (3, 12):
        return
    from concurrent.futures import process

    stdlib = process._ExecutorManagerThread
    if getattr(stdlib, "closes_its_queue", False):
        return

    class ManagerThread(stdlib):  # type: ignore[misc, valid-type]
        closes_its_queue = True

        def terminate_broken(self, cause: Any) -> None:
            self.call_queue._reader.close()
            super().terminate_broken(cause)

    process._ExecutorManagerThread = ManagerThread  # type: ignore[misc]


#: glibc's mallopt parameters (malloc.h) and what _keep_freed_blocks sets them to.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_THRESHOLD, _MMAP_THRESHOLD = 64 << 20, 16 << 20


def _keep_freed_blocks() -> None:
    """Have malloc keep the large blocks a batch passes through (its text, its pickle, the
    pipe's buffer: a megabyte or more each) for the next batch.

    By default glibc maps each such block anew and hands it back to the kernel when it is
    freed, so that every batch faults its memory in again: 230,000 page faults and a tenth
    of the time of a run over 200,000 traces with --jobs 2. Blocks under 16 MB now come
    from the heap, which keeps at most 64 MB free. Set in the command's process and its
    workers only (they are forked after). Elsewhere than glibc (musl's mallopt does
    nothing) nothing changes."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)


def evaluate_file(
    path: str, evaluator: Evaluator, entries: Iterable[Entry], workers: Workers | None
) -> Iterator[Batch]:
    """The batches of one file: in the workers under --jobs, else here."""
    if workers is not None:
        yield from workers.map(path, entries)
        return
    for batch in batches(entries, LOCAL_BATCH_SIZE, LOCAL_BATCH_BYTES, LOCAL_BATCH_STEP):
        yield evaluator.run(path, batch)
