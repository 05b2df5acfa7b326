"""Leader election on a coordination.k8s.io Lease, so two replicas never act at once.

As client-go does, expiry is judged by the local clock since the lease record was last seen to
change, never by comparing our clock with another replica's timestamps. A leader that has not
renewed within its renew deadline (shorter than the lease duration, as client-go's
RenewDeadline) stops leading at that moment, a renewal still in flight cancelled with it, so it
has stopped before a standby, counting a whole lease duration from the same renewal, can take
over.
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

#: The renew deadline when none is given: client-go's 10 s of a 15 s lease.
RENEW_DEADLINE_SHARE = 2 / 3


def renew_deadline_of(lease_seconds: float, renew_deadline: float | None) -> float:
    """The renew deadline in force (two thirds of the lease unless given), checked as client-go
    checks its own: shorter than the lease, longer than the retry period."""
    deadline = lease_seconds * RENEW_DEADLINE_SHARE if renew_deadline is None else renew_deadline
    retry = retry_period(lease_seconds)
    if not retry < deadline < lease_seconds:
        raise ValueError(
            f"the leader's renew deadline ({deadline:g} s) must be shorter than the lease "
            f"(--lease-seconds {lease_seconds:g}) and longer than its retry period "
            f"({retry:g} s, a fifth of the lease)"
        )
    return deadline


def retry_period(lease_seconds: float) -> float:
    """How often a replica tries to acquire or renew the lease."""
    return max(lease_seconds / 5, 0.5)


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
        renew_deadline: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        wait_until: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        """`on_stopped` runs the moment the replica stops leading, before anything else of
        this replica runs: it must stop the replica's work at once. `sleep` is the pause
        between tries; `wait_until(t)` returns once `clock.monotonic()` reaches `t` (the renew
        deadline; by default a sleep until then)."""
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_deadline = renew_deadline_of(lease_seconds, renew_deadline)
        self.retry = retry_period(lease_seconds)
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.clock = clock
        self.sleep = sleep
        self.wait_until = wait_until or self._sleep_until
        self.leading = False
        self._observed: tuple[str | None, str | None] = (None, None)
        self._observed_at = clock.monotonic()
        #: When the last renewal that succeeded was started (its request sent after it).
        self._renewed_at = 0.0

    async def run(self) -> None:
        try:
            while True:
                if self.leading and self._overdue():
                    self._set(False)  # the deadline passed during the pause
                self._set(await self._attempt())
                await self.sleep(self._pause())
        finally:
            if self.leading:
                await self.release()

    @property
    def deadline(self) -> float:
        """The monotonic time a leader stops leading unless it renews before."""
        return self._renewed_at + self.renew_deadline

    def _overdue(self) -> bool:
        return self.clock.monotonic() >= self.deadline

    def _pause(self) -> float:
        """The retry period; a leader wakes at its deadline, if that comes first."""
        if not self.leading:
            return self.retry
        return max(0.0, min(self.retry, self.deadline - self.clock.monotonic()))

    async def _sleep_until(self, at: float) -> None:
        await asyncio.sleep(max(0.0, at - self.clock.monotonic()))

    async def _attempt(self) -> bool:
        """One try to acquire or renew; whether we hold the lease after it. A leader's try is
        cut short at its deadline: the request in flight is cancelled and the lease counts as
        lost, whatever that request would have answered."""
        if not self.leading:
            try:
                return await self._try()
            except (ApiError, Unreachable) as e:
                log.warning("leader election: %s", e)
                return False
        attempt = asyncio.ensure_future(self._try())
        timer = asyncio.ensure_future(self.wait_until(self.deadline))
        try:
            await asyncio.wait((attempt, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (attempt, timer):
                task.cancel()
            await asyncio.gather(attempt, timer, return_exceptions=True)
        if attempt.cancelled():
            log.warning(
                "%s: no renewal of the lease within %g s; stops leading",
                self.identity,
                self.renew_deadline,
            )
            return False
        error = attempt.exception()
        if isinstance(error, (ApiError, Unreachable)):
            log.warning("leader election: %s", error)
            return not self._overdue()
        if error is not None:
            raise error
        return attempt.result()

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
        now, started = self.clock.now(), self.clock.monotonic()
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
            return await self._write(self.client.create(body), started)
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
        return await self._write(self.client.replace(lease), started)

    async def _write(self, request: Awaitable[Obj], started: float) -> bool:
        """Create or update the lease; losing the race (409) means someone else holds it."""
        try:
            await request
        except ApiError as e:
            if e.conflict:
                return False
            raise
        self._renewed_at = started
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
