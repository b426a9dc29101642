"""How `make test` (`-n 2 --dist loadgroup`) hands tests to its processes.

pytest-xdist's own loadgroup reads a group from a suffix it writes into each test's node id,
which pytest 9 no longer lets it write; it also keeps one test of several that share a node
id (schemathesis gives every operation of a schema the function's id). This scheduler, given
to pytest-xdist through its `pytest_xdist_make_scheduler` hook, groups by module instead:
the modules whose tests bound wall-clock or CPU time run one after another in one process,
never against each other; each module whose tests share a costly module fixture (an install,
a server) is one unit, so that the fixture is made once; every other test is a unit of its
own, in collection order (tests/conftest.py puts the longest modules first).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

TIMED_GROUP = "timed"


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def distinct(nodeids: Sequence[str]) -> list[str]:
    """The node ids, the second and later of a repeated id told apart by its position."""
    seen: Counter[str] = Counter()
    unique = []
    for nodeid in nodeids:
        seen[nodeid] += 1
        unique.append(nodeid if seen[nodeid] == 1 else f"{nodeid} (#{seen[nodeid]})")
    return unique


class TimedModulesTogether(LoadScopeScheduling):  # type: ignore[misc]
    """LoadScopeScheduling whose scopes are `TIMED_GROUP` for the timed modules, the module for
    the shared ones, else the test."""

    def __init__(
        self,
        config: pytest.Config,
        log: Producer | None,
        timed_modules: Sequence[str],
        shared_modules: Sequence[str] = (),
    ) -> None:
        super().__init__(config, log)
        self.timed_modules = frozenset(timed_modules)
        self.shared_modules = frozenset(shared_modules)

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        super().add_node_collection(node, distinct(collection))

    def _split_scope(self, nodeid: str) -> str:
        module = module_of(nodeid)
        if module in self.timed_modules:
            return TIMED_GROUP
        return module if module in self.shared_modules else nodeid
