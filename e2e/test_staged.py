"""Staged JobSets through fleet, on members running the JobSet controller (issue 34).

JobSet's own startup-policy (`startupPolicyOrder: InOrder`) and depends-on examples (v0.10.1,
`fleet.testing.workloads.jobset_in_order` / `jobset_depends_on`, shaped as upstream writes
them), dispatched under a Gang policy: the JobSet controller creates one stage at a time, and
fleet writes the member's gang per stage, so each stage starts as soon as its own pods are
there, and the JobSet runs every stage to `Completed`. On a coscheduling member (member-2:
scheduler-plugins PodGroups) and on the native-gang member (member-5: Kubernetes' own
PodGroups), each with one node that holds every stage at once, as placement requires.

The pods are played by kwok: a pod runs until labelled with its outcome. The stages that end
by themselves carry `Succeeded` on their templates; the driver (InOrder) and the launcher
(dependsOn) run on while the workers run, as in upstream's examples, and are ended by the
test once the workers are done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import NATIVE_MEMBER
from fleet.testing.workloads import (
    OUTCOME_LABEL,
    gang_policy,
    jobset_depends_on,
    jobset_in_order,
)

from .conftest import Fleet, joined_apart

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
ROLE_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
#: The member that runs the JobSet controller under scheduler-plugins' coscheduling.
COSCHEDULING_MEMBER = "member-2"
POD_GROUP = {
    COSCHEDULING_MEMBER: ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    NATIVE_MEMBER: ("scheduling.k8s.io/v1beta1", "PodGroup"),
}
TAINT = {"key": "fleet.dev/native", "value": "e2e", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def native(fleet: Fleet) -> Iterator[ClusterClient]:
    """member-5 joined with fleet join and tainted for this module (as test_native_gang)."""
    with joined_apart(fleet, NATIVE_MEMBER, TAINT, gang_scheduler="Kubernetes") as member:
        yield member


def _policy(namespace: str, member: str) -> dict[str, Any]:
    policy = gang_policy("gang", namespace, kinds=("JobSet",), cluster_names=[member])
    policy["spec"]["placement"]["clusterTolerations"] = [
        {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
    ]
    return policy


def _ends_by_itself(job: dict[str, Any], *replicated: str) -> dict[str, Any]:
    """`job` with the pods of these replicated jobs ending Succeeded once they run."""
    for r in job["spec"]["replicatedJobs"]:
        if r["name"] in replicated:
            template = r["template"]["spec"]["template"]
            template.setdefault("metadata", {}).setdefault("labels", {})[OUTCOME_LABEL] = (
                "Succeeded"
            )
    return job


def _pods(member: ClusterClient, namespace: str, job: str, role: str) -> list[dict[str, Any]]:
    return member.pods(namespace, f"{NAME_LABEL}={job},{ROLE_LABEL}={role}")


def _phases(member: ClusterClient, namespace: str, job: str, role: str) -> list[str]:
    return sorted(p["status"].get("phase") or "" for p in _pods(member, namespace, job, role))


def _completed(live: Fleet, namespace: str, name: str) -> bool:
    status = (live.api.get(*JOBSET, name, namespace) or {}).get("status") or {}
    done = any(
        x.get("type") == "Completed" and x.get("status") == "True"
        for x in status.get("conditions") or []
    )
    return done and status.get("terminalState") == "Completed"


def _minimum(group: dict[str, Any] | None) -> int | None:
    """A PodGroup's minimum: scheduler-plugins' minMember, the native one's minCount."""
    spec = (group or {}).get("spec") or {}
    if "minMember" in spec:
        return int(spec["minMember"])
    count = ((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount")
    return None if count is None else int(count)


# (the JobSet, its stages as group suffix -> pods, the replicated jobs ending by themselves, the
# one that runs on until the test ends it)
Example = tuple[Callable[..., dict[str, Any]], dict[str, int], tuple[str, ...], str]
EXAMPLES: dict[str, Example] = {
    "in-order": (jobset_in_order, {"driver": 1, "workers": 4}, ("workers",), "driver"),
    "depends-on": (
        jobset_depends_on,
        {"initializer": 1, "launcher": 1, "worker": 4},
        ("initializer", "worker"),
        "launcher",
    ),
}


@pytest.mark.parametrize("member", [COSCHEDULING_MEMBER, NATIVE_MEMBER])
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_a_staged_jobset_runs_every_stage_to_completion(
    live: Fleet,
    namespace: str,
    add_nodes: Callable[..., list[str]],
    request: pytest.FixtureRequest,
    example: str,
    member: str,
) -> None:
    if member == NATIVE_MEMBER:
        request.getfixturevalue("native")
    make, stages, by_themselves, runs_on = EXAMPLES[example]
    pods = sum(stages.values())
    here = {"test": namespace}
    # One node that holds every stage at once (one GPU per pod): placement holds that much.
    add_nodes(member, count=1, gpu=pods, labels=here)
    live.api.create(_policy(namespace, member))
    job = _ends_by_itself(make(namespace=namespace, node_selector=here), *by_themselves)
    name = job["metadata"]["name"]
    live.api.create(job)
    client = live.clusters[member]

    # The last stage ran to its end while the long-running one before it still ran: every
    # stage's gang formed with its own pods, none waited for a later stage's.
    last = list(stages)[-1]
    try:
        wait_until(
            lambda: _phases(client, namespace, name, last) == ["Succeeded"] * stages[last],
            timeout=120,
            what=f"the {last} stage of {name} Succeeded in {member}",
        )
    except AssertionError as e:
        seen = {role: _phases(client, namespace, name, role) for role in stages}
        raise AssertionError(f"{e}: pods by replicated job {seen}") from None
    assert _phases(client, namespace, name, runs_on) == ["Running"]
    minimum = {
        group: _minimum(client.get(*POD_GROUP[member], f"{name}-{group}", namespace))
        for group in stages
    }
    assert minimum == stages

    client.mark_pods(namespace, f"{NAME_LABEL}={name},{ROLE_LABEL}={runs_on}", "Succeeded")
    wait_until(
        lambda: _completed(live, namespace, name),
        timeout=90,
        what=f"{name} Completed on the fleet",
    )
