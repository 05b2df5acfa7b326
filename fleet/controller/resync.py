"""The periodic resync: every bound workload is reconciled again every `resync_interval`.

Events drive the controller, but not everything a bound job depends on sends one: the fleet's
Secrets and ConfigMaps a job's pods use (propagateDeps) are not watched, so a rotated Secret
reaches the member's copy at the job's next reconcile. The resync bounds that wait: a change
to a propagated object reaches every member holding a copy of a job using it within one
`resync_interval` (docs/api.md). A steady job's reconcile writes nothing.
"""

from __future__ import annotations

import asyncio

from fleet.controller.context import Shell


def resync_once(shell: Shell) -> int:
    """Queue every workload bound to a member; how many."""
    keys = list(shell.triggers.placed)
    for key in keys:
        shell.queue.add(key)
    return len(keys)


async def resync_forever(shell: Shell, leading: asyncio.Event) -> None:
    """Resync every `settings.resync_interval` seconds while this replica leads."""
    while True:
        await asyncio.sleep(shell.settings.resync_interval)
        if leading.is_set():
            resync_once(shell)
