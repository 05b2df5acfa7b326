"""The people's read-only identity may read a namespace of a member once fleet dispatched there:
the controller binds the viewer's ClusterRole to the viewer's ServiceAccount there (once per
namespace), through the member's writer."""

from __future__ import annotations

from fleet.api import constants as c
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
