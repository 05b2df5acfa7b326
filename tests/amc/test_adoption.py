"""ADOPTION is printed for exactly the kinds fleet propagates."""

from __future__ import annotations

from fleet.amc.adoption import adoption, propagated
from fleet.api.constants import DEPENDENCY_KINDS
from fleet.core.kinds import ADAPTERS
from fleet.kube import Resource


def test_workloads_and_dependencies_are_propagated_pods_are_not() -> None:
    for kind in ADAPTERS:
        assert propagated(Resource(kind.api_version, kind.kind, kind.kind.lower() + "s", True))
    for kind, api_version in DEPENDENCY_KINDS.items():
        assert propagated(Resource(api_version, kind, kind.lower() + "s", True))
    assert not propagated(Resource("v1", "Pod", "pods", True))
    # A kind of the same name in another group is not fleet's.
    assert not propagated(Resource("example.com/v1", "Job", "jobs", True))


def test_adoption_is_the_managed_by_label() -> None:
    assert adoption({"labels": {"fleet.dev/managed-by": "fleet-1"}}) == "Y"
    assert adoption({"labels": {"app": "x"}}) == "N"
    assert adoption(None) == "N"
