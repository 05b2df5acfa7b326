"""Every kind marks its pods through its adapter, and writes its own conditions: on real API
servers, Trainer v2, the JobSet controller, koord-scheduler and scheduler-plugins.

- A TrainJob (its pod templates are its runtime's) dispatched to the Koordinator member
  (member-4, joined for this module only and tainted so no other test's gang goes there) and
  to a coscheduling member: its pods carry fleet's labels and the gang in the member's
  scheduler's terms (through `spec.podTemplateOverrides`), and run as one gang.
- A JobSet that fails over: its conditions on the fleet are JobSet's own (metav1.Condition,
  no Kubeflow `Restarting`/`Created`), and the columns `kubectl get jobset` prints read sensibly.

Needs Trainer on member-4 (fleet.testing.pytest_plugin.TEST_CONFIG).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleet.api import constants as c
from fleet.sandbox.process import log_tail
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER, OPERATOR_MEMBERS
from fleet.testing.workloads import (
    JOBSET_NAME_LABEL,
    gang_policy,
    jobset,
    training_runtime,
    trainjob,
)

from .conftest import Fleet, joined_apart
from .test_reservation import foreign_reservation

TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
PODGROUP = ("scheduling.x-k8s.io/v1alpha1", "PodGroup")
RESERVATION = ("scheduling.koordinator.sh/v1alpha1", "Reservation")
MEMBER_CLUSTER = ("fleet.dev/v1alpha1", "MemberCluster")
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
TAINT = {"key": "fleet.dev/kind-marks", "value": "e2e", "effect": "NoSchedule"}
#: metav1.Condition's fields; a Kubeflow JobCondition has lastUpdateTime instead of the last.
METAV1 = {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}
#: The types a JobSet's conditions may have (the JobSet controller's) and fleet's own.
JOBSET_TYPES = {"Completed", "Failed", "Suspended", "StartupPolicyCompleted", "Scheduled"}


@pytest.fixture(scope="module")
def koordinator(fleet: Fleet) -> Iterator[ClusterClient]:
    """member-4 joined, tainted (its gang scheduler detected: Koordinator), then removed."""
    with joined_apart(fleet, KOORDINATOR_MEMBER, TAINT, "Koordinator") as member:
        yield member


@pytest.fixture(autouse=True)
def scheduler_logs_on_failure(fleet: Fleet, request: pytest.FixtureRequest) -> Iterator[None]:
    """Whether a gang was held or bound is the member scheduler's doing: a failed test shows
    the end of koord-scheduler's log."""
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        path = fleet.sandbox.cluster(KOORDINATOR_MEMBER).log("kube-scheduler")
        print(f"\n{KOORDINATOR_MEMBER} koord-scheduler log:\n{log_tail(path, 80)}")


def _policy(namespace: str, kind: str, clusters: list[str]) -> dict[str, Any]:
    policy = gang_policy(
        "gang",
        namespace,
        kinds=(kind,),
        toleration_seconds=2,
        purge_mode="Immediately",
        cluster_names=clusters,
    )
    policy["spec"]["placement"]["clusterTolerations"] = [
        {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
    ]
    return policy


def _target(live: Fleet, namespace: str, kind: tuple[str, str], name: str) -> str | None:
    return live.target(namespace, name, kind)


def _running(client: ClusterClient, namespace: str, selector: str, count: int) -> bool:
    pods = client.pods(namespace, selector)
    return len(pods) == count and all(
        p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods
    )


def _uid(live: Fleet, namespace: str, name: str, kind: tuple[str, str]) -> str:
    job = wait_until(lambda: live.job(namespace, name, kind), what="the fleet job")
    return str(job["metadata"]["uid"])


def _marked(pod: dict[str, Any], uid: str) -> dict[str, str]:
    """The pod's labels, once checked for fleet's own (what the dashboard's job page and
    `kubectl amc` find a job's pods by)."""
    labels: dict[str, str] = pod["metadata"].get("labels") or {}
    assert labels.get(c.FLEET_UID_LABEL) == uid, labels
    assert labels.get(c.ROLE_LABEL) == "node", labels
    return labels


def test_a_trainjob_on_the_koordinator_member_runs_as_one_koordinator_gang(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes
):
    """The runtime has no podGroupPolicy: fleet gives the gang in ACK's pod-group labels,
    through podTemplateOverrides. koord-scheduler holds the whole gang while one pod cannot
    fit (capacity fleet cannot see), and binds all of it once it can."""
    here = {"test": namespace}
    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels=here)
    live.api.create(_policy(namespace, "TrainJob", [KOORDINATOR_MEMBER]))
    live.api.create(
        training_runtime(
            "plain", namespace=namespace, gpus=1, coscheduling=False, node_selector=here
        )
    )
    hold = foreign_reservation(koordinator, namespace, gpus=2)  # 2 of the 4 GPUs: 2 pods fit
    try:
        live.api.create(trainjob("tj", "plain", namespace=namespace, nodes=3))
        uid = _uid(live, namespace, "tj", TRAINJOB)
        assert (
            wait_until(lambda: _target(live, namespace, TRAINJOB, "tj"), what="placement")
            == KOORDINATOR_MEMBER
        )
        copy = wait_until(
            lambda: koordinator.get(*TRAINJOB, "tj", namespace), what="the copy in member-4"
        )
        (entry,) = copy["spec"]["podTemplateOverrides"]
        assert entry["targetJobs"] == [{"name": "node"}]
        selector = f"{JOBSET_NAME_LABEL}=tj"
        pods = wait_until(
            lambda: (p := koordinator.pods(namespace, selector)) and len(p) == 3 and p,
            what="Trainer's 3 trainer pods",
        )
        for pod in pods:
            labels = _marked(pod, uid)
            assert labels[c.POD_GROUP_NAME_LABEL] == "tj"
            assert labels[c.POD_GROUP_MIN_AVAILABLE_LABEL] == "3"
            assert c.COSCHEDULING_POD_GROUP_LABEL not in labels
            # MemberCluster member-4 names no schedulerName: koord-scheduler is its default.
            assert pod["spec"].get("schedulerName") == "default-scheduler"
        # One pod cannot fit; the gang holds the two that could, unbound.
        wait_until(
            lambda: any(
                e["reason"] == "FailedScheduling"
                and e["involvedObject"].get("kind") == "Pod"
                and e["involvedObject"]["name"].startswith("tj-")
                for e in koordinator.events(namespace)
            ),
            timeout=60,
            what="koord-scheduler refusing a pod of the gang",
        )
        assert not [p for p in koordinator.pods(namespace, selector) if p["spec"].get("nodeName")]
    finally:
        koordinator.delete(*RESERVATION, hold)
    # Room for all three: the gang is bound whole.
    wait_until(
        lambda: _running(koordinator, namespace, selector, 3),
        timeout=120,
        what="the 3 trainer pods Running together",
    )


def test_a_trainjob_on_a_coscheduling_member_gets_fleets_pod_group(
    live: Fleet, namespace, add_nodes
):
    """The runtime has no podGroupPolicy, so Trainer makes no PodGroup: fleet labels the pods
    `scheduling.x-k8s.io/pod-group` through podTemplateOverrides and writes the PodGroup."""
    here = {"test": namespace}
    member_name = OPERATOR_MEMBERS[0]
    member = live.clusters[member_name]
    add_nodes(member_name, count=1, gpu=4, labels=here)
    live.api.create(_policy(namespace, "TrainJob", [member_name]))
    live.api.create(
        training_runtime(
            "plain", namespace=namespace, gpus=1, coscheduling=False, node_selector=here
        )
    )
    live.api.create(trainjob("tj", "plain", namespace=namespace, nodes=3))
    uid = _uid(live, namespace, "tj", TRAINJOB)
    assert wait_until(lambda: _target(live, namespace, TRAINJOB, "tj"), what="placement") == (
        member_name
    )
    selector = f"{JOBSET_NAME_LABEL}=tj"
    wait_until(lambda: _running(member, namespace, selector, 3), what="3 trainer pods Running")
    for pod in member.pods(namespace, selector):
        labels = _marked(pod, uid)
        assert labels[c.COSCHEDULING_POD_GROUP_LABEL] == "tj"
        assert c.POD_GROUP_NAME_LABEL not in labels
    group = member.get(*PODGROUP, "tj", namespace)
    assert group is not None and group["spec"]["minMember"] == 3
    assert group["metadata"]["labels"][c.FLEET_UID_LABEL] == uid  # fleet's, not Trainer's
    # scheduler-plugins' PodGroup controller saw the gang scheduled as one.
    wait_until(
        lambda: (
            ((member.get(*PODGROUP, "tj", namespace) or {}).get("status") or {}).get("phase")
            in ("Scheduled", "Running")
        ),
        what="the PodGroup Scheduled",
    )


def _columns(live: Fleet, obj: dict[str, Any]) -> dict[str, str]:
    """The columns `kubectl get jobset` prints for `obj`, from the JobSet CRD's printer
    columns (the two JSONPath forms they use on status: `.status.x`, and a condition's status
    by type)."""
    crd = live.api.get(*CRD, "jobsets.jobset.x-k8s.io") or {}
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    status = obj.get("status") or {}
    out = {}
    for column in version.get("additionalPrinterColumns") or []:
        path = column["jsonPath"]
        if path.startswith(".status.conditions[?(@.type=="):
            wanted = path.split('"')[1]
            found = [x for x in status.get("conditions") or [] if x.get("type") == wanted]
            out[column["name"]] = found[0]["status"] if found else ""
        elif path.startswith(".status."):
            out[column["name"]] = str(status.get(path.removeprefix(".status.")) or "")
    return out


def test_a_jobset_that_fails_over_has_jobsets_own_conditions(live: Fleet, namespace, add_nodes):
    here = {"test": namespace}
    live.api.create(_policy(namespace, "JobSet", list(OPERATOR_MEMBERS)))
    for name in OPERATOR_MEMBERS:
        add_nodes(name, count=1, gpu=8, labels=here)
    live.api.create(jobset("js", namespace=namespace, workers=1, worker_pods=2, node_selector=here))
    selector = f"{JOBSET_NAME_LABEL}=js"
    first = wait_until(lambda: _target(live, namespace, JOBSET, "js"), what="placement")
    member = live.clusters[first]
    wait_until(lambda: _running(member, namespace, selector, 3), what="3 pods Running")

    member.mark_pods(namespace, selector, "Failed")
    second = wait_until(
        lambda: (t := _target(live, namespace, JOBSET, "js")) and t != first and t,
        timeout=90,
        what="failover",
    )
    wait_until(
        lambda: _running(live.clusters[second], namespace, selector, 3),
        what="3 pods Running in the other member",
    )
    job: dict[str, Any] = wait_until(
        lambda: (
            (j := live.job(namespace, "js", JOBSET))
            and any(
                x["type"] == c.CONDITION_SCHEDULED and x["status"] == "True"
                for x in (j.get("status") or {}).get("conditions") or []
            )
            and j
        ),
        what="the fleet JobSet scheduled again",
    )
    conditions = job["status"]["conditions"]
    assert {x["type"] for x in conditions} <= JOBSET_TYPES, conditions
    for x in conditions:
        assert "lastUpdateTime" not in x and set(x) <= METAV1, x
    failed = [x for x in conditions if x["type"] == "Failed"]
    assert not failed or failed[0]["status"] != "True"  # the failed copy does not end it
    events = [r for r, _m, _c in live.events(namespace, "js")]
    assert "FailoverTriggered" in events
    columns = _columns(live, job)
    assert columns["TerminalState"] == ""  # no end while it runs again
    assert columns["Completed"] in ("", "False")
