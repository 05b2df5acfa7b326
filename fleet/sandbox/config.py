"""What a sandbox looks like: the member clusters and the fake nodes in each.

Loaded from a YAML file (`fleet sandbox up --config sandbox.yaml`) or built in code by tests:

    members:
    - name: member-1
      labels: {region: east}
      nodes:
      - {name: gpu, count: 2, cpu: "32", memory: 256Gi, gpu: 8}
      - {name: cpu, count: 1, cpu: "64", memory: 128Gi, gpu: 0,
         labels: {pool: cpu}, taints: [{key: dedicated, value: cpu, effect: NoSchedule}]}
    - name: member-k
      scheduler: koordinator   # koord-scheduler instead of scheduler-plugins coscheduling
      reservation_preemption: true   # its Reservations may preempt (off by default)

`scheduler` picks a member's gang scheduler: `coscheduling` (scheduler-plugins, the default: the
training operator makes a PodGroup for every job), `koordinator` (koord-scheduler, built on
first use: the seeds' pod-group labels and Koordinator's gang annotations, and Reservations) or
`kubernetes` (Kubernetes' own gang scheduling: the member's whole control plane is a newer
Kubernetes release, built on first use, with the Workload API's PodGroup and the upstream
kube-scheduler's GangScheduling and topology-aware placement turned on).

`operators` picks the job operators a member runs (default: the training operator only):

    - name: member-3
      operators: [training-operator, jobset, trainer, kuberay]

`jobset`, `trainer` (Kubeflow Trainer v2, which runs TrainJobs as JobSets, so it needs `jobset`
too) and `kuberay` are built on first use, only when a member names them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fleet.sandbox.errors import SandboxError

GPU = "nvidia.com/gpu"
#: The gang schedulers a sandbox member can run.
MemberScheduler = Literal["coscheduling", "koordinator", "kubernetes"]
#: The job operators a sandbox member can run.
MemberOperator = Literal["training-operator", "jobset", "trainer", "kuberay"]
#: What a member runs unless its config says otherwise.
DEFAULT_OPERATORS: tuple[MemberOperator, ...] = ("training-operator",)
#: What an operator needs beside it in the same member.
_OPERATOR_NEEDS: dict[str, str] = {"trainer": "jobset"}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class Taint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class NodePool(BaseModel):
    """`count` identical fake nodes named `<member>-<name>-<i>`."""

    model_config = ConfigDict(extra="forbid")

    name: str = "node"
    count: int = Field(default=1, ge=0, le=1000)
    cpu: str = "32"
    memory: str = "256Gi"
    gpu: int = Field(default=8, ge=0)
    pods: int = Field(default=110, ge=1)
    #: Real nodes advertise their disk (the kubelet's root filesystem); pods may ask for it (the
    #: training operator's MPIJob launcher asks 5Gi), so the fake ones do too.
    ephemeral_storage: str = "100Gi"
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not _DNS_LABEL.match(v):
            raise ValueError(f"node pool name {v!r} must be a DNS label (a-z, 0-9, '-')")
        return v


class MemberSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    nodes: list[NodePool] = Field(default_factory=lambda: [NodePool(count=2)])
    scheduler: MemberScheduler = "coscheduling"
    operators: list[MemberOperator] = Field(default_factory=lambda: list(DEFAULT_OPERATORS))
    #: Koordinator members only: koord-scheduler's Reservation preemption (the Reservation
    #: plugin's `enablePreemption`; `fleet.sandbox.components.koord_scheduler_config`). Off: no
    #: pod or Reservation preempts anything, as Koordinator's own default.
    reservation_preemption: bool = False

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not _DNS_LABEL.match(v) or v == "fleet":
            raise ValueError(f"member name {v!r} must be a DNS label other than 'fleet'")
        return v

    @field_validator("operators")
    @classmethod
    def _operators(cls, v: list[MemberOperator]) -> list[MemberOperator]:
        missing = [
            f"{op} needs {_OPERATOR_NEEDS[op]}" for op in v if _OPERATOR_NEEDS.get(op, op) not in v
        ]
        if missing:
            raise ValueError("; ".join(missing) + " (TrainJobs run as JobSets)")
        return list(dict.fromkeys(v))

    @model_validator(mode="after")
    def _preemption(self) -> MemberSpec:
        if self.reservation_preemption and self.scheduler != "koordinator":
            raise ValueError(
                f"member {self.name}: reservation_preemption is koord-scheduler's: it needs "
                "scheduler: koordinator"
            )
        return self


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    members: list[MemberSpec] = Field(default_factory=list)
    #: The training operator's --gang-scheduler-name; also the coscheduling profile's name.
    gang_scheduler_name: str = "scheduler-plugins-scheduler"
    #: Run the Kubeflow training operator in each member. Off, a member copy stays as fleet
    #: wrote it (no pods, no status): benches use it to measure fleet without the operator's
    #: CPU on a small machine.
    training_operator: bool = True

    @model_validator(mode="after")
    def _unique(self) -> SandboxConfig:
        names = [m.name for m in self.members]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"member names must be unique, repeated: {', '.join(dupes)}")
        return self

    @classmethod
    def default(cls, members: int = 4, koordinator: int = 1, native: int = 0) -> SandboxConfig:
        """N members, each with two 8-GPU nodes and a `region` label to select them by; the
        last `native` of them run Kubernetes' own gang scheduling (none by default), the
        `koordinator` before those koord-scheduler (one, by default: member-4), the others
        coscheduling."""
        first_native = members - native + 1
        first_koordinator = first_native - koordinator

        def scheduler(i: int) -> MemberScheduler:
            if i >= first_native:
                return "kubernetes"
            return "koordinator" if i >= first_koordinator else "coscheduling"

        return cls(
            members=[
                MemberSpec(
                    name=f"member-{i}", labels={"region": f"region-{i}"}, scheduler=scheduler(i)
                )
                for i in range(1, members + 1)
            ]
        )

    @property
    def needs_koordinator(self) -> bool:
        return any(m.scheduler == "koordinator" for m in self.members)

    @property
    def needs_native(self) -> bool:
        return any(m.scheduler == "kubernetes" for m in self.members)

    def runs(self, member: MemberSpec, operator: str) -> bool:
        """Does `member` run `operator`? (`training_operator: false` turns the training operator
        off in every member.)"""
        if operator == "training-operator" and not self.training_operator:
            return False
        return operator in member.operators

    @property
    def operators(self) -> list[str]:
        """Every operator some member runs (what the toolchain must have built)."""
        return sorted({op for m in self.members for op in m.operators if self.runs(m, op)})

    @classmethod
    def load(cls, path: Path) -> SandboxConfig:
        try:
            raw: Any = yaml.safe_load(path.read_text())
        except OSError as e:
            raise SandboxError(f"cannot read sandbox config {path}: {e.strerror}") from e
        except yaml.YAMLError as e:
            raise SandboxError(f"sandbox config {path} is not valid YAML: {e}") from e
        try:
            return cls.model_validate(raw or {})
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
            )
            raise SandboxError(f"sandbox config {path}: {problems}") from e


def node_manifest(member: str, pool: NodePool, index: int) -> dict[str, Any]:
    """A kwok-managed fake node with the pool's shape."""
    name = f"{member}-{pool.name}-{index}"
    capacity = {
        "cpu": pool.cpu,
        "memory": pool.memory,
        "ephemeral-storage": pool.ephemeral_storage,
        "pods": str(pool.pods),
    }
    if pool.gpu:
        capacity[GPU] = str(pool.gpu)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                "sandbox.fleet.dev/pool": pool.name,
                **pool.labels,
            },
        },
        "spec": {"taints": [t.model_dump() for t in pool.taints]} if pool.taints else {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }
