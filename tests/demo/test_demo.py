"""`fleet demo` without a sandbox: the runner's verdicts, the CLI, and the stories' premises.

The premises are checked with the core the controller calls: on the demo's layout no member can
hold the seeds' TFJob (each for capacity), the node the held-gang story adds makes member-2 hold
it, ACK's sum rule would accept member-1, and the other stories' gangs fit where they say. The
queue story's tree puts `default` in one leaf of one job at a time, and its policy queues only
the jobs it labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.api import PropagationPolicy, WorkloadRef
from fleet.api.matching import match_policy
from fleet.cli import main as fleet_main
from fleet.core.estimate import NODES, SUM
from fleet.core.inventory import node_from_k8s
from fleet.core.kinds import gang_from_workload
from fleet.core.placement import INSUFFICIENT, place
from fleet.core.quota import check_tree
from fleet.core.snapshot import ClusterSnapshot
from fleet.demo import STORIES, seeds
from fleet.demo.layout import DEMO_CONFIG
from fleet.demo.runner import Demo, Story, select, tell
from fleet.demo.stories import held_gang, queue, reservation
from fleet.sandbox import Sandbox
from fleet.sandbox.config import NodePool, node_manifest
from fleet.testing.workloads import pytorchjob

ROOT = Path(__file__).resolve().parents[2]


# -- the runner -----------------------------------------------------------------------------


class Script:
    """Stories made of callables, recording what the runner did with them."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def story(self, name: str, body: Any) -> Story:
        def run(demo: Demo) -> None:
            self.calls.append(f"run {name}")
            body(demo)

        def reset(demo: Demo) -> None:
            self.calls.append(f"reset {name}")

        return Story(name=name, title=f"the {name} story", run=run, reset=reset)


def _demo(tmp_path: Path, lines: list[str]) -> Demo:
    return Demo(Sandbox(tmp_path), check=True, out=lines.append)


def test_every_story_starts_clean_and_the_last_one_stays(tmp_path: Path) -> None:
    script, lines = Script(), []

    def happens(demo: Demo) -> None:
        demo.step("something visible")
        demo.expect(lambda: "yes", "the thing")
        demo.verify(True, "a fact")

    stories = [script.story("one", happens), script.story("two", happens)]
    assert tell(_demo(tmp_path, lines), stories) == 0
    assert script.calls == ["reset one", "run one", "reset one", "reset two", "run two"]
    assert sum(line.startswith("  ok: the thing") for line in lines) == 2
    assert "  ok: a fact" in lines


def test_a_step_that_does_not_happen_stops_the_demo_naming_it(tmp_path: Path) -> None:
    script, lines = Script(), []

    def never(demo: Demo) -> None:
        demo.step("the gang runs")
        demo.expect(lambda: None, "five pods Running", timeout=0.2, interval=0.05)

    stories = [script.story("held", never), script.story("after", lambda d: None)]
    assert tell(_demo(tmp_path, lines), stories) == 1
    assert "run after" not in script.calls
    failed = [line for line in lines if "FAILED" in line]
    assert len(failed) == 1
    assert "'held'" in failed[0] and "'the gang runs'" in failed[0]
    assert "five pods Running" in failed[0]


def test_a_false_fact_fails_its_step(tmp_path: Path) -> None:
    script, lines = Script(), []

    def wrong(demo: Demo) -> None:
        demo.step("waits whole")
        demo.verify(False, "no member holds a copy")

    assert tell(_demo(tmp_path, lines), [script.story("held", wrong)]) == 1
    assert any("'waits whole'" in line and "no member holds a copy" in line for line in lines)


def test_select_keeps_the_demo_order_and_refuses_unknown_names() -> None:
    names = [s.name for s in select(STORIES, ["failover", "held-gang"])]
    assert names == ["held-gang", "failover"]
    assert select(STORIES, None) == list(STORIES)
    with pytest.raises(ValueError, match="no story named nope"):
        select(STORIES, ["nope"])


def test_cli_lists_stories_and_refuses_an_unknown_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert fleet_main(["demo", "--list"]) == 0
    listed = capsys.readouterr().out.split("\n")
    assert [line.split()[0] for line in listed if line] == [s.name for s in STORIES]
    assert fleet_main(["demo", "--story", "nope"]) == 2
    assert "no story named nope" in capsys.readouterr().err


# -- the seeds' objects -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "policy"),
    [
        ("policies/pytorchjob-gang.yaml", seeds.PYTORCHJOB_POLICY),
        ("policies/tfjob-gang.yaml", seeds.TFJOB_POLICY),
        ("policies/pytorchjob-gang-queued.yaml", seeds.QUEUED_POLICY),
        ("policies/elasticquotatree-seed.yaml", seeds.QUOTA_TREE),
    ],
)
def test_the_demo_submits_the_policies_users_find_in_policies(
    path: str, policy: dict[str, Any]
) -> None:
    assert yaml.safe_load((ROOT / path).read_text()) == policy


def test_the_seeds_tfjob_is_unchanged() -> None:
    job = seeds.tfjob()
    specs = job["spec"]["tfReplicaSpecs"]
    assert (specs["PS"]["replicas"], specs["Worker"]["replicas"]) == (1, 4)
    worker = specs["Worker"]["template"]
    assert worker["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 2}
    for role in ("PS", "Worker"):
        assert specs[role]["template"]["metadata"]["labels"] == {
            "pod-group.scheduling.sigs.k8s.io/name": "tf-smoke-gpu",
            "pod-group.scheduling.sigs.k8s.io/min-available": "5",
        }


# -- the stories' premises, decided by the core ----------------------------------------------


def _fleet(extra: dict[str, list[NodePool]] | None = None) -> list[ClusterSnapshot]:
    snapshots = []
    for member in DEMO_CONFIG.members:
        pools = [*member.nodes, *((extra or {}).get(member.name) or [])]
        nodes = [
            node_from_k8s(node_manifest(member.name, pool, i))
            for pool in pools
            for i in range(pool.count)
        ]
        snapshots.append(ClusterSnapshot.build(member.name, nodes, labels=member.labels))
    return snapshots


def test_no_member_can_hold_the_seeds_tfjob_until_the_story_adds_a_node() -> None:
    gang = gang_from_workload(seeds.tfjob())
    assert gang.min_member == 5
    held = place(gang, _fleet(), estimator=NODES)
    assert held.placement is None
    assert {r.cluster for r in held.rejections} == {m.name for m in DEMO_CONFIG.members}
    assert {r.category for r in held.rejections} == {INSUFFICIENT}
    grown = place(gang, _fleet({held_gang.GROWS: [held_gang.NEW_NODES]}), estimator=NODES)
    assert grown.placement is not None
    assert grown.placement.cluster == held_gang.GROWS


def test_acks_sum_rule_would_send_the_tfjob_to_the_scattered_member() -> None:
    decision = place(gang_from_workload(seeds.tfjob()), _fleet(), estimator=SUM)
    assert decision.placement is not None
    assert decision.placement.cluster == "member-1"


def test_the_fragmentation_gang_avoids_member_1_and_fits_elsewhere() -> None:
    gang = gang_from_workload(pytorchjob("big-gang", workers=2, gpus=2, master_gpus=0))
    decision = place(gang, _fleet(), estimator=NODES, explain_all=True)
    assert decision.placement is not None
    assert decision.placement.cluster != "member-1"
    assert any(r.cluster == "member-1" and r.category == INSUFFICIENT for r in decision.rejections)


def test_the_seeds_pytorchjob_has_somewhere_to_fail_over_to() -> None:
    gang = gang_from_workload(pytorchjob("pytorch-test", workers=2, gpus=1))
    first = place(gang, _fleet(), estimator=NODES)
    assert first.placement is not None
    second = place(gang, _fleet(), estimator=NODES, failed_over={first.placement.cluster: "Failed"})
    assert second.placement is not None


def test_the_queue_storys_jobs_each_fit_a_member_so_only_the_quota_holds_the_second() -> None:
    gang = gang_from_workload(queue.queued_job(queue.FIRST))
    assert gang.min_member == queue.PODS
    decision = place(gang, _fleet(), estimator=NODES)
    assert decision.placement is not None


def test_the_seeds_tree_puts_default_in_child_2_with_one_job_at_a_time() -> None:
    checked = check_tree(seeds.QUOTA_TREE["spec"])
    assert checked.tree is not None
    assert [p.rule for p in checked.problems] == ["RootMinEqualsMax"]  # a warning, as documented
    assert checked.tree.quota_for(seeds.NAMESPACE) == "root/child-2"
    assert {node.path for node in checked.tree} == set(queue.QUEUES)


def test_the_queued_policy_takes_the_queue_storys_jobs_and_no_other_storys() -> None:
    policies = [
        PropagationPolicy.model_validate(p) for p in (seeds.PYTORCHJOB_POLICY, seeds.QUEUED_POLICY)
    ]

    def governing(job: dict[str, Any]) -> str:
        match = match_policy(WorkloadRef.from_object(job), policies, [])
        assert match.policy is not None and match.gang
        return match.policy.metadata.name

    for name in (queue.FIRST, queue.SECOND):
        assert governing(queue.queued_job(name)) == "example-policy-queued"
    for other in ("pytorch-test", "big-gang"):
        assert governing(pytorchjob(other, namespace=seeds.NAMESPACE)) == "example-policy"


def test_the_koordinator_member_holds_no_gpu_gang_until_the_reservation_story_adds_a_node() -> None:
    koordinator = [m.name for m in DEMO_CONFIG.members if m.scheduler == "koordinator"]
    assert koordinator == [reservation.MEMBER]
    others = [
        seeds.tfjob(),
        pytorchjob("big-gang", workers=2, gpus=2, master_gpus=0),
        pytorchjob("pytorch-test", workers=2, gpus=1),
        queue.queued_job(queue.FIRST),
        reservation.job(),
    ]
    only = [s for s in _fleet() if s.name == reservation.MEMBER]
    for job in others:
        decision = place(gang_from_workload(job), only, estimator=NODES)
        assert decision.placement is None
        assert {r.category for r in decision.rejections} == {INSUFFICIENT}
    grown = [
        s
        for s in _fleet({reservation.MEMBER: [reservation.NEW_NODES]})
        if s.name == reservation.MEMBER
    ]
    decision = place(gang_from_workload(reservation.job()), grown, estimator=NODES)
    assert decision.placement is not None
    assert decision.placement.cluster == reservation.MEMBER


def test_the_reservation_policy_takes_its_storys_job_only_and_sends_it_to_member_4() -> None:
    policies = [
        PropagationPolicy.model_validate(p)
        for p in (seeds.PYTORCHJOB_POLICY, seeds.QUEUED_POLICY, reservation.policy())
    ]

    def governing(job: dict[str, Any]) -> str:
        match = match_policy(WorkloadRef.from_object(job), policies, [])
        assert match.policy is not None and match.gang
        return match.policy.metadata.name

    assert governing(reservation.job()) == reservation.POLICY_NAME
    assert reservation.policy()["spec"]["placement"]["clusterAffinity"] == {
        "clusterNames": [reservation.MEMBER]
    }
    for other in ("pytorch-test", "big-gang"):
        assert governing(pytorchjob(other, namespace=seeds.NAMESPACE)) == "example-policy"
    for name in (queue.FIRST, queue.SECOND):
        assert governing(queue.queued_job(name)) == "example-policy-queued"
