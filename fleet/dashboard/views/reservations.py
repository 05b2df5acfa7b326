"""The Reservations view: Koordinator Reservations per member, and their state.

A Reservation's phase, node and why it is not usable are read by the controller's own
`seen_reservation` (what fleet's reservation wait judges); the job it was made for is the
binding fleet annotated it with. Members without Koordinator have no Reservations to show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.api import MemberCluster
from fleet.api import constants as c
from fleet.controller.reserving import seen_reservation
from fleet.dashboard.state import RESERVATION, MemberLive
from fleet.dashboard.views.fleet import member_status
from fleet.dashboard.views.parse import age, read

Obj = Mapping[str, Any]


def reservation_row(raw: Obj, now: float) -> dict[str, Any]:
    meta = raw.get("metadata") or {}
    try:
        seen = seen_reservation(dict(raw))
    except (AttributeError, TypeError) as e:  # a status that is not an object
        return {"name": meta.get("name"), "error": f"cannot be read: {e}"}
    annotations = meta.get("annotations") or {}
    return {
        "name": meta.get("name"),
        "phase": seen.phase or "Pending",
        "node": seen.node,
        "message": seen.message,
        "binding": annotations.get(c.BINDING_ANNOTATION),
        "gang": annotations.get(c.KOORDINATOR_GANG_NAME_ANNOTATION),
        "role": (meta.get("labels") or {}).get(c.ROLE_LABEL),
        "fleets": c.FLEET_UID_LABEL in (meta.get("labels") or {}),
        "age": age(raw, now),
        "error": "",
    }


def reservations_view(
    members: Mapping[str, Obj], live: Mapping[str, MemberLive], now: float
) -> dict[str, Any]:
    by_name = {str((raw.get("metadata") or {}).get("name") or ""): raw for raw in members.values()}
    rows = []
    for name in sorted(set(by_name) | set(live)):
        raw, state = by_name.get(name), live.get(name)
        member, error = (None, "") if raw is None else read(MemberCluster, raw)
        scheduler = member.status.gang_scheduler if member and member.status else None
        scheduler = scheduler or (member.spec.gang_scheduler if member else None)
        watched = state is not None and state.reservations is not None
        reservations = sorted(
            (reservation_row(r, now) for r in (state.reservations or {}).values())
            if state is not None
            else [],
            key=lambda r: str(r["name"]),
        )
        phases: dict[str, int] = {}
        for r in reservations:
            phase = r.get("phase") or "Unreadable"
            phases[phase] = phases.get(phase, 0) + 1
        rows.append(
            {
                "name": name,
                "error": error,
                "status": member_status(member, state),
                "problem": state.problem if state else "",
                "gangScheduler": scheduler,
                "watched": watched,
                # The Reservation watch's failure, a refusal included ("Reservation refused:
                # ... 403 Forbidden ..."): the list below is then not to be trusted.
                "watchProblem": state.watch_problems.get(RESERVATION[1], "") if state else "",
                "reservations": reservations,
                "phases": phases,
            }
        )
    return {"members": rows}
