"""What the controller does about the member's namespace rules (fleet.api.guard): a namespace it
creates carries the hub namespace's PodSecurity level, never below baseline; a ServiceAccount
it copies into a namespace of its own is listed there, so the job's pods may run as it; and a
member that refuses the job's namespace (neither fleet's nor opened to it) sends the gang
elsewhere with the way to open it, instead of a refusal retried on every reconcile.

The member's refusal is the policy's own words (its NOT_OPEN phrase), as the API server sends
them; e2e/test_trust.py proves them against a real one."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from fleet.api import constants as c
from fleet.api.guard import NOT_OPEN, open_label
from fleet.core.placement import NAMESPACE_NOT_OPEN
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.apiserver import status
from tests.controller.harness import FLEET_ID, NAMESPACE, World, conditions

ENFORCE = f"{c.POD_SECURITY_PREFIX}enforce"


def closed_namespace(namespace: str) -> Callable[[httpx.Request], httpx.Response | None]:
    """The member's admission policy on a namespace its admins made and did not open: every
    write of fleet's there is refused (403), in the policy's words."""

    def judge(request: httpx.Request) -> httpx.Response | None:
        if request.method not in ("POST", "PATCH") or f"/namespaces/{namespace}/" not in (
            request.url.path
        ):
            return None
        return status(
            403,
            "Forbidden",
            f"ValidatingAdmissionPolicy 'fleet-member.fleet.dev' denied request: fleet "
            f"({FLEET_ID}) may not write in namespace {namespace}: it {NOT_OPEN} (the label "
            f"{open_label(FLEET_ID)}=true)",
        )

    return judge


def _member_namespace(world: World, member: str, labels: dict[str, str] | None = None) -> None:
    """The job's namespace exists in `member`, made by its admins."""
    fake = world.members[member]
    fake.api.put(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": labels or {}},
        }
    )
    fake.member.namespaces.add(NAMESPACE)


async def test_a_namespace_not_open_sends_the_gang_elsewhere_saying_how_to_open_it():
    world = World()
    closed = world.add_member("member-1", gpus=4)  # the tighter fit: placement's first choice
    _member_namespace(world, "member-1")
    closed.api.interceptors.append(closed_namespace(NAMESPACE))
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)
    assert closed.copy("job") is None
    applied = conditions(world.binding(key))[c.CONDITION_FULLY_APPLIED]
    assert (applied["status"], applied["reason"]) == ("False", NAMESPACE_NOT_OPEN)
    assert f"namespace {NAMESPACE} in member-1" in applied["message"]
    assert f"fleet join member-1 --namespaces {NAMESPACE}" in applied["message"]
    assert f"{open_label(FLEET_ID)}=true" in applied["message"]
    (event,) = world.events(c.REASON_NAMESPACE_NOT_OPEN, key)
    assert event["type"] == "Warning" and "--namespaces" in event["message"]
    posts = sum(r.method == "POST" for r in closed.api.requests)

    # Not tried again on the next reconcile: the member is avoided, and the binding says why.
    await world.reconcile(key)
    assert sum(r.method == "POST" for r in closed.api.requests) == posts
    (reason,) = world.binding(key)["status"]["pendingReasons"]
    assert (reason["cluster"], reason["code"]) == ("member-1", NAMESPACE_NOT_OPEN)

    # A member whose namespace is open takes it.
    world.add_member("member-2", gpus=8)
    _member_namespace(world, "member-2", {open_label(FLEET_ID): "true"})
    await world.reconcile(key)
    assert world.members["member-2"].copy("job") is not None


async def test_a_namespace_fleet_creates_carries_the_hubs_pod_security_never_below_baseline():
    for hub, member in (
        ({ENFORCE: "restricted", f"{c.POD_SECURITY_PREFIX}warn": "restricted"}, None),
        ({ENFORCE: "privileged"}, {ENFORCE: "baseline"}),
        ({}, {ENFORCE: "baseline"}),
    ):
        world = World()
        fake = world.add_member("member-1")
        ns = world.fleet_api.get("v1", "Namespace", NAMESPACE)
        ns["metadata"]["labels"] = dict(hub)
        world.fleet_api.put(ns)
        world.apply_policy(gang_policy("gang", NAMESPACE))
        key = world.submit(pytorchjob("job"))
        await world.reconcile(key)
        made = fake.api.get("v1", "Namespace", NAMESPACE)
        assert made is not None and fake.copy("job") is not None
        labels = made["metadata"]["labels"]
        assert labels[c.MANAGED_BY_LABEL] == FLEET_ID
        assert {k: v for k, v in labels.items() if k.startswith(c.POD_SECURITY_PREFIX)} == (
            member or hub
        )


def _job_as(account: str) -> dict:
    job = pytorchjob("job")
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["serviceAccountName"] = account
    return job


async def _run_as_trainer(world: World) -> None:
    """A ServiceAccount `trainer` on the fleet, and a job running as it, dispatched with
    propagateDeps."""
    world.fleet_api.put(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "trainer", "namespace": NAMESPACE},
        }
    )
    world.apply_policy(gang_policy("gang", NAMESPACE, propagate_deps=True))
    await world.reconcile(world.submit(_job_as("trainer")))


async def test_a_service_account_fleet_copies_is_listed_on_its_own_namespace_only():
    world = World()
    fake = world.add_member("member-1")
    await _run_as_trainer(world)
    made = fake.api.get("v1", "Namespace", NAMESPACE)
    assert made["metadata"]["annotations"][c.SERVICE_ACCOUNTS_ANNOTATION] == "trainer"
    assert fake.api.get("v1", "ServiceAccount", "trainer", NAMESPACE) is not None
    assert fake.copy("job") is not None

    # In a namespace its admins opened, the list is theirs: fleet writes none.
    world = World()
    fake = world.add_member("member-1")
    _member_namespace(world, "member-1", {open_label(FLEET_ID): "true"})
    await _run_as_trainer(world)
    opened = fake.api.get("v1", "Namespace", NAMESPACE)
    assert c.SERVICE_ACCOUNTS_ANNOTATION not in (opened["metadata"].get("annotations") or {})
    namespace_path = f"/api/v1/namespaces/{NAMESPACE}"
    assert not [
        r for r in fake.api.requests if r.method == "PATCH" and r.url.path == namespace_path
    ]
