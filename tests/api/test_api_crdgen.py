"""The CRDs in crds/ are exactly what the models generate, and a real API server would take them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _api_samples import KUBECTL_GB, KUBECTL_MC, KUBECTL_PP

from fleet.api import RESOURCES, constants
from fleet.api.crdgen import (
    HEADER,
    RECURSION_DEPTH,
    crd_filename,
    crd_for,
    main,
    render_crds,
    structural_problems,
)
from fleet.api.crdgen import _value_problems as value_problems


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return render_crds()


@pytest.fixture(scope="module")
def crds(rendered: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = {}
    for text in rendered.values():
        crd = yaml.safe_load(text)
        out[crd["spec"]["names"]["kind"]] = crd
    return out


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def _walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def test_crds_directory_matches_the_generator(repo: Path, rendered: dict[str, str]) -> None:
    on_disk = {p.name: p.read_text() for p in (repo / "crds").glob("*.yaml")}
    assert on_disk == rendered, "crds/ drifted: run python -m fleet.api.crdgen --write crds/"
    assert main(["--check", str(repo / "crds")]) == 0


def test_check_reports_drift_and_write_fixes_it(tmp_path: Path) -> None:
    assert main(["--check", str(tmp_path)]) == 1
    assert main(["--write", str(tmp_path)]) == 0
    assert main(["--check", str(tmp_path)]) == 0
    victim = tmp_path / crd_filename(RESOURCES[0])
    victim.write_text(victim.read_text() + "# edited\n")
    assert main(["--check", str(tmp_path)]) == 1
    stale = tmp_path / "fleet.dev_gone.yaml"
    stale.write_text(HEADER + "{}\n")
    (tmp_path / "hand-written.yaml").write_text("kind: Other\n")
    assert main(["--write", str(tmp_path)]) == 0
    assert not stale.exists() and (tmp_path / "hand-written.yaml").exists()
    assert main(["--check", str(tmp_path)]) == 0


def test_file_names_and_identity(rendered: dict[str, str]) -> None:
    assert sorted(rendered) == [
        "fleet.dev_gangbindings.yaml",
        "fleet.dev_memberclusters.yaml",
        "policy.one.alibabacloud.com_clusterpropagationpolicies.yaml",
        "policy.one.alibabacloud.com_propagationpolicies.yaml",
        "scheduling.sigs.k8s.io_elasticquotatrees.yaml",
        "scheduling.x-k8s.io_queues.yaml",
        "scheduling.x-k8s.io_queueunits.yaml",
    ]
    for text in rendered.values():
        assert text.startswith(HEADER)
        assert len(list(yaml.safe_load_all(text))) == 1


@pytest.mark.parametrize(
    ("kind", "group", "scope", "short", "status"),
    [
        ("PropagationPolicy", constants.POLICY_GROUP, "Namespaced", "pp", True),
        ("ClusterPropagationPolicy", constants.POLICY_GROUP, "Cluster", "cpp", True),
        ("MemberCluster", constants.FLEET_GROUP, "Cluster", "mc", True),
        ("GangBinding", constants.FLEET_GROUP, "Namespaced", "gb", True),
    ],
)
def test_names_scope_and_subresources(
    crds: dict[str, dict[str, Any]], kind: str, group: str, scope: str, short: str, status: bool
) -> None:
    crd = crds[kind]
    spec = crd["spec"]
    assert spec["group"] == group and spec["scope"] == scope
    assert spec["names"]["shortNames"] == [short]
    assert "fleet" in spec["names"]["categories"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert ("status" in version.get("subresources", {})) is status
    assert _schema(crd)["required"] == ["spec"]


@pytest.mark.parametrize(
    "kind",
    [
        "PropagationPolicy",
        "ClusterPropagationPolicy",
        "MemberCluster",
        "GangBinding",
        "ElasticQuotaTree",
        "Queue",
        "QueueUnit",
    ],
)
def test_schema_is_structural(crds: dict[str, dict[str, Any]], kind: str) -> None:
    assert structural_problems(crds[kind]) == []
    for path, node in _walk(_schema(crds[kind])):
        assert not {"$ref", "$defs", "allOf", "oneOf", "title", "nullable"} & set(node), path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
        if not (
            node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        ):
            assert "type" in node, path
        if path and path != ".metadata" and not path.endswith(("[]", "{}")):
            assert node.get("description"), f"{kind}{path} has no description"


def test_preserve_unknown_fields_only_where_content_is_free_form(
    crds: dict[str, dict[str, Any]],
) -> None:
    found = {
        f"{kind}{path}"
        for kind, crd in crds.items()
        for path, node in _walk(_schema(crd))
        if node.get("x-kubernetes-preserve-unknown-fields")
    }
    # The quota tree's children past RECURSION_DEPTH levels: a structural schema cannot recurse
    # (in the spec, and in the copy of the spec in force that the status keeps).
    deep = ".root" + ".children[]" * RECURSION_DEPTH
    assert found == {
        "GangBinding.status.aggregatedStatus[].status",
        "ElasticQuotaTree.spec" + deep,
        "ElasticQuotaTree.status.inForce.spec" + deep,
    }


def test_quantities_are_int_or_string(crds: dict[str, dict[str, Any]]) -> None:
    mc = _schema(crds["MemberCluster"])
    alloc = mc["properties"]["status"]["properties"]["resources"]["properties"]["allocatable"]
    q = alloc["additionalProperties"]
    assert q["x-kubernetes-int-or-string"] is True and "type" not in q
    assert q["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    gb = _schema(crds["GangBinding"])
    comp = gb["properties"]["spec"]["properties"]["gang"]["properties"]["components"]["items"]
    assert comp["properties"]["requests"]["additionalProperties"]["x-kubernetes-int-or-string"]


def _at(schema: dict[str, Any], dotted: str) -> dict[str, Any]:
    node = schema
    for part in dotted.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_enums_minimums_defaults_and_required(crds: dict[str, dict[str, Any]]) -> None:
    pp = _schema(crds["PropagationPolicy"])
    assert _at(pp, "spec.resourceSelectors")["minItems"] == 1
    assert set(_at(pp, "spec")["required"]) == {"resourceSelectors"}
    assert set(_at(pp, "spec.resourceSelectors.[]")["required"]) == {"apiVersion", "kind"}
    app = _at(pp, "spec.failover.application")
    assert app["required"] == ["decisionConditions"]
    tol = _at(pp, "spec.failover.application.decisionConditions.tolerationSeconds")
    assert tol["default"] == 300 and tol["minimum"] == 0 and tol["type"] == "integer"
    assert set(app["properties"]["purgeMode"]["enum"]) == {
        "Immediately",
        "Graciously",
        "Never",
        "Directly",
        "Gracefully",
    }
    assert app["properties"]["maxFailovers"]["minimum"] == 0
    assert app["properties"]["clusterExclusionSeconds"]["minimum"] == 0
    assert "fleet extension" in app["properties"]["maxFailovers"]["description"]
    rs = _at(pp, "spec.placement.replicaScheduling")
    assert rs["properties"]["replicaSchedulingType"]["enum"] == ["Duplicated", "Divided"]
    assert rs["properties"]["replicaSchedulingType"]["default"] == "Divided"
    assert rs["properties"]["replicaDivisionPreference"]["enum"] == ["Aggregated", "Weighted"]
    assert rs["properties"]["gangEstimator"]["enum"] == ["nodes", "sum"]
    assert rs["properties"]["gangScoring"]["enum"] == ["bestFit", "fragmentation"]
    assert _at(pp, "spec.suspension")["properties"]["scheduling"]["type"] == "boolean"
    assert _at(pp, "spec.priority")["default"] == 0
    assert _at(pp, "spec.placement.clusterAffinities.[].affinityName")["maxLength"] == 32
    mc = _schema(crds["MemberCluster"])
    assert _at(mc, "spec.kubeconfigSecretRef.key")["default"] == "kubeconfig"
    gb = _schema(crds["GangBinding"])
    assert _at(gb, "status.phase")["enum"] == [
        "Pending",
        "Queued",
        "Reserving",
        "Scheduled",
        "Dispatched",
        "Running",
        "Succeeded",
        "Failed",
        "FailingOver",
        "Released",
    ]
    assert _at(gb, "status.aggregatedStatus.[].health")["enum"] == [
        "Healthy",
        "Unhealthy",
        "Unknown",
    ]
    assert _at(gb, "spec.gang.minMember")["minimum"] == 1
    assert _at(gb, "status.unhealthySince")["format"] == "date-time"
    conds = _at(gb, "status.conditions")
    assert conds["x-kubernetes-list-type"] == "map" and conds["x-kubernetes-list-map-keys"] == [
        "type"
    ]


def test_printer_columns(crds: dict[str, dict[str, Any]]) -> None:
    def cols(kind: str) -> list[str]:
        return [
            c["name"]
            for c in crds[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
            if not c.get("priority")
        ]

    assert cols("MemberCluster") == ["READY", "VERSION", "GANG", "NODES", "GPUS", "AGE"]
    assert cols("GangBinding") == ["CLUSTER", "PHASE", "SCHEDULED", "APPLIED", "AGE"]
    assert cols("PropagationPolicy")[-1] == "AGE"


def _policies(repo: Path, load_docs: Callable[[str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    docs = []
    for path in sorted((repo / "policies").glob("*.yaml")):
        docs += [d for d in load_docs(path.read_text()) if d.get("kind") != "Secret"]
    return docs


def test_examples_and_model_dumps_validate_against_the_crd_schemas(
    crds: dict[str, dict[str, Any]], repo: Path, load_docs: Callable[[str], list[dict[str, Any]]]
) -> None:
    from fleet.api import parse_object

    docs = [*_policies(repo, load_docs), KUBECTL_PP, KUBECTL_MC, KUBECTL_GB]
    for doc in docs:
        schema = _schema(crds[doc["kind"]])
        dumped = parse_object(doc).to_dict()
        dumped.pop("metadata")  # ObjectMeta is validated by the API server itself, not the CRD
        assert value_problems(dumped, schema, doc["kind"]) == []


# --- The checker itself catches what an API server would refuse ------------------------------


def _broken(crds: dict[str, dict[str, Any]], change: Callable[[dict[str, Any]], None]) -> list[str]:
    crd = copy.deepcopy(crds["GangBinding"])
    change(crd)
    return structural_problems(crd)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s["properties"]["spec"].pop("type"), "no type"),
        (lambda s: s["properties"]["spec"].update({"$ref": "#/x"}), "$ref"),
        (
            lambda s: s["properties"]["status"]["properties"]["phase"].update({"default": "Lost"}),
            "not one of",
        ),
        (
            lambda s: s["properties"]["spec"]["properties"]["gang"]["properties"][
                "minMember"
            ].update({"default": 0}),
            "minimum",
        ),
        (lambda s: s.update({"nullable": True}), "root cannot be nullable"),
        (
            lambda s: s["properties"]["spec"].update({"additionalProperties": False}),
            "additionalProperties",
        ),
        (lambda s: s["properties"]["spec"]["properties"]["clusters"].pop("items"), "items"),
        (
            lambda s: s["properties"]["metadata"].update(
                {"properties": {"name": {"type": "string"}}}
            ),
            "metadata",
        ),
        (lambda s: s["properties"]["spec"].update({"anyOf": [{"type": "object"}]}), "anyOf"),
        (lambda s: s["properties"]["spec"]["required"].append("nope"), "not a property"),
    ],
)
def test_structural_checker_catches_mistakes(
    crds: dict[str, dict[str, Any]], change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    problems = _broken(crds, lambda crd: change(_schema(crd)))
    assert any(expected in p for p in problems), problems


def test_structural_checker_catches_bad_printer_columns(crds: dict[str, dict[str, Any]]) -> None:
    def bad_path(crd: dict[str, Any]) -> None:
        crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"] = (
            ".spec.cluster[0].name"
        )

    assert any("no field 'cluster'" in p for p in _broken(crds, bad_path))

    def bad_index(crd: dict[str, Any]) -> None:
        crd["spec"]["versions"][0]["additionalPrinterColumns"][1]["jsonPath"] = ".status.phase[0]"

    assert any("not an array" in p for p in _broken(crds, bad_index))

    def bad_type(crd: dict[str, Any]) -> None:
        crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = "datetime"

    assert any("bad type" in p for p in _broken(crds, bad_type))

    def status_gone(crd: dict[str, Any]) -> None:
        del _schema(crd)["properties"]["status"]

    assert any("status subresource" in p for p in _broken(crds, status_gone))


def test_every_resource_has_a_crd() -> None:
    assert {m.crd.kind for m in RESOURCES} == {
        "PropagationPolicy",
        "ClusterPropagationPolicy",
        "MemberCluster",
        "GangBinding",
        "ElasticQuotaTree",
        "Queue",
        "QueueUnit",
    }
    for model in RESOURCES:
        assert crd_for(model)["metadata"]["name"] == model.crd.crd_name


def test_helm_chart_carries_the_generated_crds():
    """helm/fleet/crds is written by `python -m fleet.api.crdgen --write helm/fleet/crds/`."""
    from pathlib import Path

    from fleet.api.crdgen import render_crds

    chart = Path(__file__).resolve().parents[2] / "helm" / "fleet" / "crds"
    rendered = render_crds()
    assert sorted(p.name for p in chart.glob("*.yaml")) == sorted(rendered)
    for name, text in rendered.items():
        assert (chart / name).read_text() == text, f"{name} drifted: regenerate the chart's CRDs"


@pytest.mark.parametrize(
    ("kind", "group", "version", "short", "spec_required"),
    [
        ("ElasticQuotaTree", constants.ELASTIC_QUOTA_GROUP, "v1beta1", ["eqtree"], True),
        ("Queue", constants.QUEUE_GROUP, "v1alpha1", None, False),
        ("QueueUnit", constants.QUEUE_GROUP, "v1alpha1", ["qu"], True),
    ],
)
def test_kube_queue_kinds(
    crds: dict[str, dict[str, Any]],
    kind: str,
    group: str,
    version: str,
    short: list[str] | None,
    spec_required: bool,
) -> None:
    spec = crds[kind]["spec"]
    assert spec["group"] == group and spec["scope"] == "Namespaced"
    assert spec["names"].get("shortNames") == short
    assert spec["names"]["categories"] == ["fleet", "kube-queue"]
    version_ = spec["versions"][0]
    assert version_["name"] == version and "status" in version_["subresources"]
    assert ("required" in _schema(crds[kind])) is spec_required


def test_kube_queue_printer_columns(crds: dict[str, dict[str, Any]]) -> None:
    def cols(kind: str, wide: bool = False) -> list[str]:
        return [
            c["name"]
            for c in crds[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
            if wide or not c.get("priority")
        ]

    # `kubectl get queue -n kube-queue` reads as the seeds show it: NAME AGE.
    assert cols("Queue") == ["AGE"]
    assert cols("Queue", wide=True) == ["AGE", "QUOTA", "POLICY", "PRIORITY", "WAITING", "DEQUEUED"]
    assert cols("QueueUnit") == ["QUEUE", "PHASE", "RESOURCE", "AGE"]
    assert cols("ElasticQuotaTree") == ["STATE", "VALID", "IN-FORCE", "AGE"]


def test_quota_tree_schema_types_four_levels_and_quantities(
    crds: dict[str, dict[str, Any]],
) -> None:
    node = _at(_schema(crds["ElasticQuotaTree"]), "spec.root")
    for _ in range(RECURSION_DEPTH):
        assert node["properties"]["max"]["additionalProperties"]["x-kubernetes-int-or-string"]
        assert node["required"] == ["name"]
        node = node["properties"]["children"]["items"]
    assert node["x-kubernetes-preserve-unknown-fields"] is True and node["type"] == "object"
    queue = _schema(crds["Queue"])
    assert _at(queue, "spec.queuePolicy")["enum"] == ["Priority", "Block", "FIFO"]
    assert _at(queue, "spec.queuePolicy")["default"] == "Priority"
    unit = _schema(crds["QueueUnit"])
    assert _at(unit, "status.phase")["enum"] == [
        "Enqueued",
        "Dequeued",
        "Running",
        "Succeed",
        "Failed",
        "TimeoutBackoff",
    ]
    assert _at(unit, "spec")["required"] == ["consumerRef"]


def test_crds_in_protected_groups_carry_the_approval_annotation():
    """The API server refuses a *.k8s.io CRD without api-approved.kubernetes.io (KEP-1111);
    x-k8s.io is the open group and needs none."""
    from fleet.api import ElasticQuotaTree, Queue
    from fleet.api.crdgen import APPROVAL_ANNOTATION, crd_for, is_protected_group

    assert is_protected_group("scheduling.sigs.k8s.io")
    assert is_protected_group("apps.kubernetes.io")
    assert not is_protected_group("scheduling.x-k8s.io")
    assert not is_protected_group("fleet.dev")
    quota = crd_for(ElasticQuotaTree)
    assert quota["metadata"]["annotations"][APPROVAL_ANNOTATION].startswith("unapproved")
    assert "annotations" not in crd_for(Queue)["metadata"]
    del quota["metadata"]["annotations"]
    assert any("protected" in p for p in structural_problems(quota))
