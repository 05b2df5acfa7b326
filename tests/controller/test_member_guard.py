"""The guard `fleet join` installed is asked again, every guard period, with fleet's token and
join's own probe (fleet.api.guardprobe): a member whose guard was deleted turns Guarded=False
(GuardMissing), with a Warning Event, and takes no new gang (Ready=False) while its gangs stay;
put back, it says so and is placeable again."""

from __future__ import annotations

import httpx

from fleet.api import constants as c
from fleet.api.conditions import condition_of
from fleet.api.guardprobe import GUARD_PROBE_PREFIX
from fleet.controller.events import EventRecorder
from tests.controller.apiserver import status
from tests.controller.registry_harness import Members

URL = "https://m1.test"
GUARD = "fleet-member.fleet.dev"


class Guard:
    """The member's guard: while `present`, a create of fleet's probe is denied as Kubernetes'
    ValidatingAdmissionPolicy denies it; when deleted, admitted (a dry run answers 201)."""

    def __init__(self, members: Members) -> None:
        self.api = members.server(URL)
        self.api.put(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet-member"}}
        )
        self.present = True
        self.asked = 0
        self.api.interceptors.append(self)

    def __call__(self, request: httpx.Request) -> httpx.Response | None:
        if request.method != "POST" or GUARD_PROBE_PREFIX not in request.content.decode():
            return None
        assert request.url.params.get("dryRun") == "All", "the probe must never be stored"
        self.asked += 1
        if not self.present:
            return None
        return status(
            403,
            "Forbidden",
            f"configmaps is forbidden: ValidatingAdmissionPolicy '{GUARD}' with binding "
            f"'{GUARD}' denied request: fleet (f) may not write in namespace fleet-member",
        )


def _joined(members: Members) -> None:
    secret = members.secret("m1", URL)
    secret["metadata"]["annotations"] = {
        c.ADMISSION_POLICY_ANNOTATION: GUARD,
        c.SERVICE_ACCOUNT_ANNOTATION: "fleet-member/fleet",
    }
    members.fleet_api.put(secret)


def _condition(members: Members, type_: str) -> dict:
    mc = members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", "m1") or {}
    return condition_of((mc.get("status") or {}).get("conditions"), type_)


async def test_a_deleted_guard_turns_guarded_false_within_one_period_and_back():
    members = Members()
    registry = members.registry
    registry.guard_check_interval = 0.05
    registry.writes_enabled = True
    registry.events = EventRecorder(
        members.fleet_api.client("events"), instance="test", clock=members.clock
    )
    guard = Guard(members)
    registry.start()
    try:
        _joined(members)
        await registry.sync(members.member_cluster("m1"))
        member = registry.get("m1")
        assert member is not None
        await members.until(lambda: member.ready and guard.asked >= 1)
        await registry.write_statuses()
        assert _condition(members, "Guarded")["status"] == "True"
        assert registry.not_ready() == {}

        guard.present = False  # a member admin deletes the policy
        await members.until(lambda: _condition(members, "Guarded").get("status") == "False")
        guarded = _condition(members, "Guarded")
        assert guarded["reason"] == c.REASON_GUARD_MISSING
        assert GUARD in guarded["message"] and "fleet join m1" in guarded["message"]
        # Not placeable (Ready False with the reason), but not lost: nothing fails over.
        await members.until(lambda: _condition(members, "Ready").get("status") == "False")
        assert _condition(members, "Ready")["reason"] == c.REASON_GUARD_MISSING
        assert registry.not_ready()["m1"].startswith(c.REASON_GUARD_MISSING)
        assert member.ready and members.listener.health == [("m1", True)]
        await members.until(lambda: bool(members.fleet_api.events(c.REASON_GUARD_MISSING)))
        (event,) = members.fleet_api.events(c.REASON_GUARD_MISSING, about="m1")
        assert event["type"] == "Warning"
        assert not members.servers[URL].list("v1", "ConfigMap"), "a probe was stored"

        guard.present = True  # `fleet join m1` again
        await members.until(lambda: _condition(members, "Guarded").get("status") == "True")
        await members.until(lambda: _condition(members, "Ready").get("status") == "True")
        assert registry.not_ready() == {}
        (back,) = members.fleet_api.events(c.REASON_GUARD_IN_FORCE, about="m1")
        assert back["type"] == "Normal"
    finally:
        await members.stop()


async def test_a_member_joined_without_a_guard_is_never_probed():
    members = Members()
    registry = members.registry
    registry.guard_check_interval = 0.01
    guard = Guard(members)
    try:
        members.secret("m1", URL)  # no admission policy recorded
        await registry.sync(members.member_cluster("m1"))
        member = registry.get("m1")
        assert member is not None
        await members.until(lambda: member.ready)
        await members.until(lambda: member.connection is not None and member.connection.probes > 3)
        assert guard.asked == 0
    finally:
        await members.stop()
