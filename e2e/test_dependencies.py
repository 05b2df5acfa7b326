"""propagateDeps on real API servers, as a Karmada user tries it (issue 25): a member's own
ConfigMap is never changed under `conflictResolution: Abort` (the job goes elsewhere, or waits,
saying why), taken over under `Overwrite` where the member's namespace allows it; a rotated
Secret follows within one resync; deleting the job deletes what fleet created, and only that.

Each test confines its jobs to fake GPU nodes it adds (labelled with its namespace).
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from fleet.api import constants as c
from fleet.testing.kube import wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import FLEET_ID, PYTORCHJOB, Fleet

CONFIGMAP = ("v1", "ConfigMap")
SECRET = ("v1", "Secret")
#: The controller's --resync-interval (its default): the longest a fleet change takes to
#: reach the members' copies of a dependency.
RESYNC_SECONDS = 30.0


def _policy(namespace: str, resolution: str) -> dict[str, Any]:
    policy = gang_policy("gang", namespace, propagate_deps=True)
    policy["spec"]["conflictResolution"] = resolution
    return policy


def _config_map(namespace: str, name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"v": value},
    }


def _secret(namespace: str, name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {"token": base64.b64encode(value.encode()).decode()},
    }


def _job(
    namespace: str, name: str, *, config_maps: tuple[str, ...] = (), secrets: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A PyTorchJob (a master and one worker, one GPU each) whose pods mount these."""
    job = pytorchjob(name, namespace=namespace, node_selector={"test": namespace}, workers=1)
    volumes = [{"name": f"cm-{n}", "configMap": {"name": n}} for n in config_maps] + [
        {"name": f"s-{n}", "secret": {"secretName": n}} for n in secrets
    ]
    mounts = [{"name": v["name"], "mountPath": f"/deps/{v['name']}"} for v in volumes]
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        spec = replica["template"]["spec"]
        spec["volumes"] = copy.deepcopy(volumes)
        spec["containers"][0]["volumeMounts"] = copy.deepcopy(mounts)
    return job


def _pending_codes(live: Fleet, namespace: str, name: str) -> dict[str, str]:
    status = (live.binding(namespace, name) or {}).get("status") or {}
    return {r["cluster"]: r.get("code", "") for r in status.get("pendingReasons") or []}


def test_abort_leaves_a_members_own_config_map_unchanged_and_the_job_goes_elsewhere(
    live: Fleet, namespace, add_nodes
):
    member_1, member_2 = live.clusters["member-1"], live.clusters["member-2"]
    member_1.create(_config_map(namespace, "train-config", "member-own"))
    before = member_1.get(*CONFIGMAP, "train-config", namespace)
    live.api.create(_config_map(namespace, "train-config", "fleet"))
    live.api.create(_policy(namespace, "Abort"))
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    live.api.create(_job(namespace, "reads-config", config_maps=("train-config",)))

    # member-1 alone has room, and its train-config is its own: the job waits, saying so.
    wait_until(
        lambda: (
            _pending_codes(live, namespace, "reads-config").get("member-1") == "DependencyConflict"
        ),
        what="member-1 rejected for its own train-config",
    )
    events = live.events(namespace, "reads-config")
    conflict = [m for r, m, _ in events if r == "DependencyConflict"]
    assert conflict and f"ConfigMap {namespace}/train-config in member-1" in conflict[0]
    assert live.copies(namespace, "reads-config") == []
    assert member_1.get(*CONFIGMAP, "train-config", namespace) == before  # byte for byte

    # Room elsewhere: the job goes there, with the fleet's ConfigMap.
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    live.wait_running(namespace, "reads-config", "member-2")
    made = member_2.get(*CONFIGMAP, "train-config", namespace)
    assert made["data"] == {"v": "fleet"}
    assert made["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID
    assert member_1.get(*CONFIGMAP, "train-config", namespace) == before

    # Deleted with its job: fleet's copy goes, the member's own stays as it was.
    live.api.delete(*PYTORCHJOB, "reads-config", namespace)
    wait_until(
        lambda: member_2.get(*CONFIGMAP, "train-config", namespace) is None,
        what="fleet's train-config gone from member-2",
    )
    assert member_1.get(*CONFIGMAP, "train-config", namespace) == before


def test_overwrite_takes_the_members_config_map_over_where_its_namespace_allows(
    live: Fleet, namespace, add_nodes
):
    member_1 = live.clusters["member-1"]
    # The member's admins let fleet take objects over in this namespace (the admission
    # policy `fleet join` installs refuses it elsewhere).
    member_1.patch(
        "v1",
        "Namespace",
        namespace,
        {"metadata": {"labels": {c.ALLOW_OVERWRITE_LABEL: "true"}}},
    )
    member_1.create(_config_map(namespace, "train-config", "member-own"))
    live.api.create(_config_map(namespace, "train-config", "fleet"))
    live.api.create(_policy(namespace, "Overwrite"))
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    live.api.create(_job(namespace, "takes-over", config_maps=("train-config",)))

    live.wait_running(namespace, "takes-over", "member-1")
    taken = member_1.get(*CONFIGMAP, "train-config", namespace)
    assert taken["data"] == {"v": "fleet"}
    assert taken["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID
    assert taken["metadata"]["annotations"][c.DEPENDENCY_ADOPTED_ANNOTATION] == "true"
    reasons = [r for r, _, _ in live.events(namespace, "takes-over")]
    assert "AdoptedExistingDependency" in reasons

    # Taken over, not created: deleting the job leaves it.
    live.api.delete(*PYTORCHJOB, "takes-over", namespace)
    wait_until(lambda: live.copies(namespace, "takes-over") == [], what="member copy gone")
    wait_until(lambda: live.job(namespace, "takes-over") is None, what="fleet job gone")
    assert member_1.get(*CONFIGMAP, "train-config", namespace) is not None


def test_a_rotated_secret_reaches_the_member_within_one_resync(live: Fleet, namespace, add_nodes):
    member_2 = live.clusters["member-2"]
    live.api.create(_secret(namespace, "creds", "old"))
    live.api.create(_policy(namespace, "Abort"))
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    live.api.create(_job(namespace, "uses-creds", secrets=("creds",)))
    live.wait_running(namespace, "uses-creds", "member-2")
    first = _secret(namespace, "creds", "old")["data"]
    assert member_2.get(*SECRET, "creds", namespace)["data"] == first

    rotated = _secret(namespace, "creds", "new")["data"]
    live.api.patch(*SECRET, "creds", {"data": rotated}, namespace)
    wait_until(
        lambda: member_2.get(*SECRET, "creds", namespace)["data"] == rotated,
        timeout=RESYNC_SECONDS + 15,
        what="the rotated Secret in member-2 within one resync",
    )


def test_deleting_the_job_deletes_only_what_fleet_created(live: Fleet, namespace, add_nodes):
    member_2 = live.clusters["member-2"]
    member_2.create(_config_map(namespace, "site-config", "member-own"))  # not fleet's
    own = member_2.get(*CONFIGMAP, "site-config", namespace)
    live.api.create(_config_map(namespace, "shared", "fleet"))
    live.api.create(_secret(namespace, "creds", "s3cret"))
    live.api.create(_policy(namespace, "Abort"))
    add_nodes("member-2", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_job(namespace, "first", config_maps=("shared",), secrets=("creds",)))
    live.api.create(_job(namespace, "second", config_maps=("shared",)))
    live.wait_running(namespace, "first", "member-2")
    live.wait_running(namespace, "second", "member-2")

    live.api.delete(*PYTORCHJOB, "first", namespace)
    wait_until(
        lambda: member_2.get(*SECRET, "creds", namespace) is None,
        what="the Secret only the first job used, gone",
    )
    wait_until(lambda: live.job(namespace, "first") is None, what="first job gone")
    assert member_2.get(*CONFIGMAP, "shared", namespace) is not None  # the second uses it
    assert member_2.get(*CONFIGMAP, "site-config", namespace) == own

    live.api.delete(*PYTORCHJOB, "second", namespace)
    wait_until(
        lambda: member_2.get(*CONFIGMAP, "shared", namespace) is None,
        what="the shared ConfigMap gone with the last job using it",
    )
    assert member_2.get(*CONFIGMAP, "site-config", namespace) == own
