"""A periodic sweep for member copies whose fleet object is gone.

The finalizer removes a workload's copies when it is deleted. A finalizer removed by hand, a
fleet restored from a backup, or a copy created by a replica that died before writing its
binding can still leave one behind. Every `sweep_interval` the leader looks at every copy this
fleet manages (by its managed-by label: other fleets' copies are not ours) and deletes those
whose fleet object, by name and UID, no longer exists. The fleet API server is asked before a
copy is deleted, never only the cache.
"""

from __future__ import annotations

import asyncio
import logging

from fleet.api import constants as c
from fleet.controller.context import Shell
from fleet.controller.keys import WorkloadKey
from fleet.controller.member_copy import delete_copy
from fleet.kube import ApiError, Unreachable

log = logging.getLogger(__name__)


async def sweep_once(shell: Shell) -> int:
    """Delete orphaned copies in every ready member; how many were deleted."""
    deleted = 0
    for member in list(shell.members.members.values()):
        connection = member.connection
        if not member.ready or connection is None:
            continue
        for informer in list(connection.jobs.values()):
            for copy in list(informer.store.values()):
                labels = (copy.get("metadata") or {}).get("labels") or {}
                uid = labels.get(c.FLEET_UID_LABEL)
                if labels.get(c.MANAGED_BY_LABEL) != shell.settings.fleet_id or not uid:
                    continue
                key = WorkloadKey.of(copy)
                if await _still_there(shell, key, uid):
                    continue
                try:
                    if await delete_copy(member, key, uid):
                        deleted += 1
                        shell.metrics.orphans.inc(member.name)
                        log.warning(
                            "%s: deleted its copy in %s: the fleet object is gone", key, member.name
                        )
                except (ApiError, Unreachable) as e:
                    log.info("%s: orphan in %s not deleted yet: %s", key, member.name, e)
    return deleted


async def _still_there(shell: Shell, key: WorkloadKey, uid: str) -> bool:
    cached = shell.triggers.workloads.get(key)
    if cached is not None and (cached.get("metadata") or {}).get("uid") == uid:
        return True
    try:
        current = await shell.fleet.get(key.api_version, key.kind, key.name, key.namespace)
    except (ApiError, Unreachable):
        return True  # when in doubt, keep it
    return current is not None and (current.get("metadata") or {}).get("uid") == uid


async def sweep_forever(shell: Shell, leading: asyncio.Event) -> None:
    """Sweep every `settings.sweep_interval` seconds while this replica leads."""
    while True:
        await asyncio.sleep(shell.settings.sweep_interval)
        if leading.is_set():
            await sweep_once(shell)
