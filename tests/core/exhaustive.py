"""A brute-force oracle for small cases: is there ANY assignment of the minimum set?"""

from __future__ import annotations

from fleet.core.assignment import Assignment
from fleet.core.inventory import NodeInfo
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang


def admits(gang_component_constraints: object, info: NodeInfo) -> bool:
    from fleet.core.constraints import PodConstraints

    assert isinstance(gang_component_constraints, PodConstraints)
    return (
        gang_component_constraints.rejection(
            info.labels, info.taints, info.unschedulable, info.name
        )
        is None
    )


def exists_assignment(snapshot: ClusterSnapshot, gang: Gang) -> bool:
    nodes = sorted(snapshot.nodes(), key=lambda n: n.name)
    free = [dict(snapshot.free(n.name) or Resources()) for n in nodes]
    items = list(gang.minimum)
    allowed = [[admits(c.constraints, info) for info in nodes] for c, _ in items]

    def place(i: int, j: int, left: int) -> bool:
        if left == 0:
            return i + 1 == len(items) or place(i + 1, 0, items[i + 1][1])
        if j == len(free):
            return False
        requests = items[i][0].requests
        k_max = min(left, requests.copies_in(free[j])) if allowed[i][j] else 0
        for k in range(k_max, -1, -1):
            for name, amount in requests.items():
                free[j][name] = free[j].get(name, 0) - k * amount
            ok = place(i, j + 1, left - k)
            for name, amount in requests.items():
                free[j][name] += k * amount
            if ok:
                return True
        return False

    return not items or place(0, 0, items[0][1])


def assert_valid(snapshot: ClusterSnapshot, gang: Gang, assignment: Assignment) -> None:
    """The assignment really places the minimum set: counts, resources and constraints."""
    by_name = {c.name: c for c in gang.components}
    assert assignment.per_component() == {c.name: n for c, n in gang.minimum}
    for slot in assignment:
        assert slot.node is not None
        info = snapshot.node(slot.node)
        assert info is not None
        assert admits(by_name[slot.component].constraints, info), (slot, info)
        assert slot.requests == by_name[slot.component].requests
    for node_name, used in assignment.per_node().items():
        assert node_name is not None
        free = snapshot.free(node_name)
        assert free is not None
        assert used.fits_in(free), (node_name, used, free)
