"""pytest fixtures that run tests against a real local sandbox.

The sandbox comes up once per session and is always taken down: by the session finalizer on a
normal end, a failure or Ctrl-C, and by the kernel if pytest itself is killed (every sandbox
process is started with a parent-death signal). Tests are isolated by namespace, and by the fake
nodes they add, which are removed after each test.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleet.sandbox import FLEET, MemberSpec, NodePool, Sandbox, SandboxConfig
from fleet.testing.kube import ClusterClient

#: The member that runs koord-scheduler (the others run scheduler-plugins coscheduling). The
#: end-to-end fleet joins it only in the tests about it, so the others never see it.
KOORDINATOR_MEMBER = "member-4"
#: The member whose control plane is Kubernetes' own gang scheduling (a newer release, with the
#: Workload API's PodGroup and kube-scheduler's GangScheduling and topology-aware placement),
#: joined, like the Koordinator member, only in the tests about it (e2e/test_native_gang.py).
NATIVE_MEMBER = "member-5"
#: The members that also run the JobSet controller, Trainer v2 and KubeRay (two, so a job of
#: those kinds can fail over from one to the other); member-1 runs the training operator only,
#: the Koordinator member the training operator, the JobSet controller (Reservations for a
#: kind beside the Kubeflow jobs) and Trainer v2 (a TrainJob's gang marked for koord-scheduler,
#: e2e/test_kind_marks.py).
OPERATOR_MEMBERS = ("member-2", "member-3")
#: Members start with one CPU-only node each: tests add the GPU nodes they reason about, so the
#: capacity a test sees is exactly the capacity it made.
TEST_CONFIG = SandboxConfig(
    members=[
        MemberSpec(
            name=f"member-{i}",
            labels={"region": f"region-{i}"},
            nodes=[NodePool(name="base", count=1, cpu="64", memory="256Gi", gpu=0)],
            scheduler=(
                "koordinator"
                if f"member-{i}" == KOORDINATOR_MEMBER
                else "kubernetes"
                if f"member-{i}" == NATIVE_MEMBER
                else "coscheduling"
            ),
            operators=(
                ["training-operator", "jobset", "trainer", "kuberay"]
                if f"member-{i}" in OPERATOR_MEMBERS
                else ["training-operator", "jobset", "trainer"]
                if f"member-{i}" == KOORDINATOR_MEMBER
                else ["training-operator", "jobset"]
                if f"member-{i}" == NATIVE_MEMBER
                else ["training-operator"]
            ),
        )
        for i in (1, 2, 3, 4, 5)
    ]
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "sandbox" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.sandbox)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """The session's sandbox (fleet + 3 coscheduling members, 1 Koordinator member and 1
    native-gang member);
    FLEET_TEST_SANDBOX_DIR pins its folder."""
    env = os.environ.get("FLEET_TEST_SANDBOX_DIR")
    state = Path(env) if env else tmp_path_factory.mktemp("sandbox")
    sbx = Sandbox(state)
    try:
        sbx.up(TEST_CONFIG, die_with_parent=True)
        yield sbx
    finally:
        sbx.down(progress=lambda _m: None)


@pytest.fixture(scope="session")
def clusters(sandbox: Sandbox) -> Iterator[dict[str, ClusterClient]]:
    """A client per cluster: `clusters["fleet"]`, `clusters["member-1"]`, ..."""
    clients = {
        name: ClusterClient(str(sandbox.kubeconfig), name) for name in sandbox.cluster_names()
    }
    yield clients
    for client in clients.values():
        client.close()


@pytest.fixture
def namespace(request: pytest.FixtureRequest, clusters: dict[str, ClusterClient]) -> Iterator[str]:
    """A fresh namespace, created in the fleet and every member, deleted afterwards."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{secrets.token_hex(2)}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    for client in clusters.values():
        client.create(body)
    yield name
    for client in clusters.values():
        client.delete("v1", "Namespace", name)


@pytest.fixture
def add_nodes(sandbox: Sandbox, namespace: str) -> Iterator[Callable[..., list[str]]]:
    """`add_nodes("member-1", count=2, gpu=2)`: fake nodes that are removed after the test.

    Pools are named after the test's namespace, so nodes never collide between tests.
    """
    added: list[tuple[str, list[str]]] = []
    counter = iter(range(1000))

    def add(member: str, **pool: object) -> list[str]:
        name = pool.pop("name", None) or f"{namespace[-4:]}p{next(counter)}"
        names = sandbox.add_nodes(member, NodePool(name=str(name), **pool))
        added.append((member, names))
        return names

    yield add
    for member, names in added:
        sandbox.remove_nodes(member, names)


__all__ = [
    "FLEET",
    "KOORDINATOR_MEMBER",
    "NATIVE_MEMBER",
    "OPERATOR_MEMBERS",
    "TEST_CONFIG",
    "add_nodes",
    "clusters",
    "namespace",
    "sandbox",
]
