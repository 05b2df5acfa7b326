"""The people's read-only identity may read a namespace of a member once fleet dispatched there:
the controller binds the viewer's ClusterRole to the viewer's ServiceAccount there (once per
namespace), through the member's writer."""

from __future__ import annotations

from fleet.api import constants as c
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import FLEET_ID, NAMESPACE, World
from tests.controller.test_dependencies import job_using, member, policy

RBAC = "rbac.authorization.k8s.io/v1"
ROLE = "fleet:fleet-member:viewer"


async def test_the_first_dispatch_into_a_namespace_binds_the_viewer_there_once():
    world = World()
    first = member(world, "member-1", gpus=8)
    first.member.viewer = "fleet-member"  # the Secret join wrote names the viewer's role
    world.apply_policy(policy("Abort"))
    one = world.submit(job_using("one"))
    await world.reconcile(one)
    assert first.copy("one") is not None

    binding = first.api.get(RBAC, "RoleBinding", ROLE, NAMESPACE)
    assert binding is not None
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": ROLE,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "fleet-viewer", "namespace": "fleet-member"}
    ]
    assert binding["metadata"]["labels"] == {
        c.MANAGED_BY_LABEL: FLEET_ID,
        c.VIEWER_ANNOTATION: "true",
    }

    two = world.submit(job_using("two"))
    await world.reconcile(two)
    assert first.copy("two") is not None
    assert first.member.writes[("create", "RoleBinding")] == 1


async def test_a_member_without_a_viewer_to_bind_gets_no_role_binding():
    world = World()
    first = member(world, "member-1", gpus=8)
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("one"))
    await world.reconcile(key)
    assert first.copy("one") is not None
    assert first.api.list(RBAC, "RoleBinding") == []


async def test_the_first_write_creates_the_namespace_at_its_level_then_binds_the_viewer():
    """A job whose namespace the member lacks: the controller creates it (fleet's mark, the
    hub's PodSecurity level, never below baseline), then binds the viewer in it."""
    world = World()
    fake = world.add_member("member-1")
    fake.member.viewer = "fleet-member"
    world.apply_policy(gang_policy("gang", NAMESPACE))
    await world.reconcile(world.submit(pytorchjob("job")))

    assert fake.copy("job") is not None
    made = fake.api.get("v1", "Namespace", NAMESPACE)
    assert made is not None
    assert made["metadata"]["labels"][f"{c.POD_SECURITY_PREFIX}enforce"] == "baseline"
    assert made["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID
    assert fake.api.get(RBAC, "RoleBinding", ROLE, NAMESPACE) is not None
    creates = [
        r.url.path
        for r in fake.api.requests
        if r.method == "POST" and ("/namespaces" in r.url.path)
    ]
    namespace_at = next(i for i, p in enumerate(creates) if p.endswith("/api/v1/namespaces"))
    binding_at = next(i for i, p in enumerate(creates) if p.endswith("/rolebindings"))
    assert namespace_at < binding_at
