"""Leader election on a coordination.k8s.io Lease, so two replicas never act at once.

As client-go does, expiry is judged by the local clock since the lease record was last seen to
change, never by comparing our clock with another replica's timestamps. A leader that cannot
renew for a whole lease duration steps down on its own before anyone else can take over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from fleet.api import format_micro_time
from fleet.controller.clock import SYSTEM_CLOCK, Clock
from fleet.kube import ApiError, KubeClient, Obj, Unreachable

log = logging.getLogger(__name__)

LEASE = ("coordination.k8s.io/v1", "Lease")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: float,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        clock: Clock = SYSTEM_CLOCK,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.retry = max(lease_seconds / 5, 0.5)
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.clock = clock
        self.sleep = sleep
        self.leading = False
        self._observed: tuple[str | None, str | None] = (None, None)
        self._observed_at = clock.monotonic()
        self._renewed_at = 0.0

    async def run(self) -> None:
        try:
            while True:
                try:
                    held = await self._try()
                except (ApiError, Unreachable) as e:
                    log.warning("leader election: %s", e)
                    held = (
                        self.leading
                        and self.clock.monotonic() - self._renewed_at < self.lease_seconds
                    )
                self._set(held)
                await self.sleep(self.retry)
        finally:
            if self.leading:
                await self.release()

    def _set(self, held: bool) -> None:
        if held and not self.leading:
            self.leading = True
            log.info("%s is now the active fleet controller", self.identity)
            self.on_started()
        elif not held and self.leading:
            self.leading = False
            log.warning("%s lost the lease and stops acting", self.identity)
            self.on_stopped()

    async def _try(self) -> bool:
        now = self.clock.now()
        lease = await self.client.get(*LEASE, self.name, self.namespace)
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_seconds),
            "renewTime": format_micro_time(now),
        }
        if lease is None:
            body: Obj = {
                "apiVersion": LEASE[0],
                "kind": LEASE[1],
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": format_micro_time(now), "leaseTransitions": 0},
            }
            return await self._write(self.client.create(body))
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        record = (holder, current.get("renewTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock.monotonic()
        duration = float(current.get("leaseDurationSeconds") or self.lease_seconds)
        expired = self.clock.monotonic() - self._observed_at > duration
        if holder not in (None, "", self.identity) and not expired:
            return False
        if holder != self.identity:
            spec["acquireTime"] = format_micro_time(now)
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        else:
            spec["acquireTime"] = current.get("acquireTime") or format_micro_time(now)
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0)
        lease["spec"] = spec
        return await self._write(self.client.replace(lease))

    async def _write(self, request: Awaitable[Obj]) -> bool:
        """Create or update the lease; losing the race (409) means someone else holds it."""
        try:
            await request
        except ApiError as e:
            if e.conflict:
                return False
            raise
        self._renewed_at = self.clock.monotonic()
        return True

    async def release(self) -> None:
        """Give the lease up on a clean shutdown, so a standby takes over at once."""
        try:
            lease = await self.client.get(*LEASE, self.name, self.namespace)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                await self.client.replace(lease)
        except (ApiError, Unreachable) as e:
            log.info("could not release the lease: %s", e)
