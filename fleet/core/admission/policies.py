"""Queue policies (`Queue.spec.queuePolicy`): which waiting unit of a queue may go.

`Priority` (default): the first unit in order that fits. `Block`: only the head. `FIFO`
(kube-queue's older policy): as Priority, ordered by submission time alone."""

from __future__ import annotations

from typing import Final, Literal

QueuePolicy = Literal["Priority", "Block", "FIFO"]
PRIORITY: Final = "Priority"
BLOCK: Final = "Block"
FIFO: Final = "FIFO"
POLICIES: Final = frozenset({PRIORITY, BLOCK, FIFO})
