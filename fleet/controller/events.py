"""Kubernetes Events on fleet objects, as `kubectl describe` shows them.

Events are posted on state transitions, and an identical event for the same object is not
repeated within `quiet` seconds, so a job waiting for capacity does not flood the namespace.

An event that tells of one recorded fact (an eviction on a binding) is posted `once`: its name
is derived from that fact, so the controller that recorded it and a restarted one that finds
the record (the first was killed in between) post the same Event, and the API server keeps
one (the second create is refused as AlreadyExists).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fleet.api import format_time
from fleet.controller.clock import SYSTEM_CLOCK, Clock
from fleet.kube import ApiError, KubeClient, Unreachable

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(
        self,
        fleet: KubeClient,
        *,
        instance: str,
        quiet: float = 600.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.fleet = fleet
        self.instance = instance
        self.quiet = quiet
        self.clock = clock
        self._last: dict[tuple[str, str], tuple[str, float]] = {}
        self._posted: set[tuple[str, str]] = set()

    async def record(
        self,
        obj: Mapping[str, Any],
        reason: str,
        message: str,
        *,
        warning: bool = False,
        component: str = "fleet-controller",
        once: str | None = None,
    ) -> None:
        """Post an Event on `obj`. `once`: the event's identity (a DNS label, e.g. a digest of
        the fact it tells); an Event of that identity is posted at most once per object,
        whichever controller posts it, and is not subject to `quiet`."""
        meta = obj["metadata"]
        if once is not None:
            posted = (meta["uid"], once)
            if posted in self._posted:
                return
        else:
            key = (meta["uid"], reason)
            now = self.clock.monotonic()
            last = self._last.get(key)
            if last is not None and last[0] == message and now - last[1] < self.quiet:
                return
            self._last[key] = (message, now)
        stamp = format_time(self.clock.now())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                **(
                    {"name": f"{meta['name'][: 252 - len(once)]}.{once}"}  # 253 at most
                    if once is not None
                    else {"generateName": f"{meta['name']}."}
                ),
                "namespace": meta.get("namespace") or "default",
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self.fleet.create(event)
        except ApiError as e:
            if once is not None and e.status == 409:
                self._posted.add(posted)  # posted before (by us, or a controller before us)
                return
            log.warning("could not post event %s on %s: %s", reason, meta["name"], e)
            return
        except Unreachable as e:
            log.warning("could not post event %s on %s: %s", reason, meta["name"], e)
            return
        if once is not None:
            self._posted.add(posted)

    def forget(self, uid: str) -> None:
        for key in [k for k in self._last if k[0] == uid]:
            del self._last[key]
        self._posted = {p for p in self._posted if p[0] != uid}
