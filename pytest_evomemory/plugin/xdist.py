"""pytest-xdist integration: one stream, one worker, tasks in stream order.

Streams are independent, so they run in parallel; the tasks of a stream share a
memory system and must run in order on one worker. We give xdist a scheduler that
groups benchmark items by stream (larger streams first), whatever ``--dist`` load
mode was chosen: splitting a stream across workers would break the protocol. Our
own scheduler is used rather than ``--dist loadgroup`` because that mode relies on
rewriting node ids, which newer pytest versions no longer allow.

The one exception is a stream without memory (``memory_strategy: none``, the
control arm): the reset clears everything between its tasks, so they are
independent and each task is its own unit of work, spread over all workers.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from .items import stream_of_nodeid

LOAD_MODES = {"load", "loadscope", "loadfile", "loadgroup", "worksteal"}


class StreamScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """LoadScope scheduling whose scope for a benchmark item is its stream (or, in a
    stream whose tasks are independent, the task itself)."""

    def __init__(self, config: pytest.Config, log: Any, independent: frozenset[str] = frozenset()) -> None:
        super().__init__(config, log)
        self.independent = independent

    def _split_scope(self, nodeid: str) -> str:
        stream = stream_of_nodeid(nodeid)
        if stream is not None and stream in self.independent:
            return f"evomemory-task:{nodeid}"
        if stream is not None:
            return f"evomemory-stream:{stream}"
        scope: str = super()._split_scope(nodeid)
        return scope

    def remove_node(self, node: Any) -> str | None:
        """After a worker crash, hand the rest of its stream to another worker.

        Unlike xdist's own loadscope scheduler, the task that was running when the
        worker died is not sent again: it is reported as failed (a task that kills
        its worker would otherwise kill every replacement too). The new worker
        restores the stream's memory from the artefacts (see runtime/driver.py).
        """
        workload = self.assigned_work.pop(node)
        if not self._pending_of(workload):
            return None
        crashitem: str = next(
            nodeid for unit in workload.values() for nodeid, completed in unit.items() if not completed
        )
        for unit in workload.values():
            if crashitem in unit:
                unit[crashitem] = True
        self.workqueue.update({scope: unit for scope, unit in workload.items() if not all(unit.values())})
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem
