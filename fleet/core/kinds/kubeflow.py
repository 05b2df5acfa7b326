"""Kubeflow training jobs (training operator v1): PyTorchJob, TFJob, XGBoostJob, PaddleJob,
JAXJob, and the shared layout MPIJob builds on.

* Gang: `spec.<x>ReplicaSpecs` maps a replica type to `{replicas (default 1), template}`; the
  minimum is `spec.runPolicy.schedulingPolicy.minAvailable`, else the pod-group label or
  Koordinator annotation on the templates, else every replica. Roles fill the minimum in the
  kind's declared order (coordinators first).
* Elastic PyTorchJob (`spec.elasticPolicy`): torchrun starts with `minReplicas` workers and the
  operator's HPA (with `metrics`) scales `pytorchReplicaSpecs.Worker.replicas` (the kind's
  scale subresource) between `minReplicas` and `maxReplicas`. The operator sizes its PodGroup
  from `schedulingPolicy.minAvailable`, else every replica (training-operator v1.9.3,
  `common/job.go`; elasticPolicy plays no part), so without a minimum the member would wait
  for all `replicas`. When the job gives none, its minimum is what must start at once: every
  other role's replicas (the Master) plus `minReplicas` workers (the operator's default:
  `minReplicas`, else `maxReplicas`, else the Worker replicas), and fleet writes it into the
  copy's minAvailable like any other. A `minReplicas` above the Worker `replicas` is refused
  (the HPA would at once scale the job past what fleet placed). With `metrics` the member's
  HPA owns the copy's Worker replicas: fleet applies the copy again with the member's value
  (`keep_member_owned`), so it never takes a scaling back.
* Copy: nothing server-set to drop. The gang goes to `runPolicy.schedulingPolicy.minAvailable`
  on every member (the operator makes a coscheduling or Volcano PodGroup from it), plus ACK's
  pod-group labels on every template for Koordinator or an unknown scheduler.
* State: the operator's conditions (Failed, Succeeded, Suspended, Restarting, Running, Created).
  Fleet writes its own in the operator's JobCondition shape: `Created` while the job waits on
  the fleet, `Restarting` when it fails over, `Failed` when fleet gives up.
* `kubectl amc`: pods are `<job>-<replica type, lowercased>-<index>`.
* Queue: `runPolicy.schedulingPolicy.priorityClass`, else the first template's
  priorityClassName; charged every replica (an elastic PyTorchJob: its Worker `replicas` as
  the fleet object declares them while it waits; once it runs under its member's HPA, the
  Worker replicas its copy has there: `running_charge`).
* Not counted: a PyTorchJob with a Master gives each Worker the operator's `init-pytorch`
  init container (50m CPU, 10Mi memory requested, from a template the member's operator
  config may replace); it asks less than any worker container does in practice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.kinds.adapter import (
    ConditionStyle,
    KindAdapter,
    Needed,
    PodTemplate,
    at,
    mapping,
    optional_count,
)
from fleet.core.resources import EMPTY, Resources
from fleet.core.workload import Gang

#: Where Kubeflow training jobs keep their gang minimum.
RUN_POLICY_MIN_AVAILABLE = "spec.runPolicy.schedulingPolicy.minAvailable"
#: A PyTorchJob's elastic policy, and the replica type its HPA scales.
ELASTIC_POLICY = "spec.elasticPolicy"
ELASTIC_ROLE = "Worker"


class KubeflowJob(KindAdapter):
    """A training-operator job: `field` maps each of `roles` to a replica spec."""

    min_available_field = RUN_POLICY_MIN_AVAILABLE
    run_limit_field = "spec.runPolicy.activeDeadlineSeconds"
    gang_timeout_field = "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds"
    state_conditions: ClassVar[tuple[tuple[str, JobState], ...]] = (
        ("Failed", "Failed"),
        ("Succeeded", "Succeeded"),
        ("Suspended", "Suspended"),
        ("Restarting", "Restarting"),
        ("Running", "Running"),
        ("Created", "Created"),
    )
    # Not lastReconcileTime: the operator stamps it on each retry while a PodGroup waits, and
    # each stamp would be one more write of the fleet job saying nothing new.
    status_fields = ("replicaStatuses", "startTime", "completionTime")
    #: The training operator's JobCondition: a job waiting on the fleet is `Created` (as the
    #: operator says of a job whose pods are not up), one failing over `Restarting`, after the
    #: failed copy's Failed (and its Running or Succeeded) are dropped.
    conditions = ConditionStyle(
        "kubeflow",
        waiting="Created",
        restarting="Restarting",
        ended=("Failed", "Running", "Succeeded"),
    )
    names_pods = True
    pods_label = "training.kubeflow.org/job-name"
    log_roles = ("master", "chief", "launcher", "worker")

    def __init__(
        self,
        api_version: str,
        kind: str,
        field: str,
        roles: tuple[str, ...],
        *,
        added: str = "nothing",
        elastic: bool = False,
    ) -> None:
        self.api_version = api_version
        self.kind = kind
        self.field = field
        self.roles = roles
        #: Whether the kind has `spec.elasticPolicy` (PyTorchJob).
        self.elastic = elastic
        self.pod_spec_paths = (f"{field}.*.template.spec",)
        self.doc_gang = f"`{field}` ({', '.join(roles)}); minimum in `runPolicy`"
        if elastic:
            self.doc_gang += (
                ", else with `elasticPolicy` the other roles plus `minReplicas` workers"
            )
        self.doc_added = added

    def _replica_key(self, obj: Mapping[str, Any], role: str) -> str | None:
        """The key `obj` gives `role` under `field` (any case, as the operator reads it)."""
        specs = at(obj, self.field)
        if not isinstance(specs, Mapping):
            return None
        return next((str(k) for k in specs if str(k).lower() == role.lower()), None)

    def _elastic_policy(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if not self.elastic:
            return None
        policy = at(obj, ELASTIC_POLICY)
        return None if policy is None else mapping(policy, ELASTIC_POLICY)

    def default_min_member(
        self, obj: Mapping[str, Any], templates: Sequence[PodTemplate], total: int
    ) -> tuple[int, str]:
        """An elastic PyTorchJob's minimum: the other roles plus `minReplicas` workers."""
        policy = self._elastic_policy(obj)
        if policy is None:
            return super().default_min_member(obj, templates, total)
        workers = next((t for t in templates if t.role == ELASTIC_ROLE), None)
        if workers is None:
            # The operator's webhook refuses it too.
            raise FieldError(
                f"{self.field}.{ELASTIC_ROLE}", f"must be given when {ELASTIC_POLICY} is"
            )
        # The operator's defaults (pytorch_defaults.go): each bound falls back on the other,
        # both on the Worker replicas.
        low = optional_count(policy, "minReplicas", ELASTIC_POLICY)
        high = optional_count(policy, "maxReplicas", ELASTIC_POLICY)
        if low is not None:
            where = f"{ELASTIC_POLICY}.minReplicas"
        elif high is not None:
            low, where = high, f"{ELASTIC_POLICY}.maxReplicas"
        else:
            return super().default_min_member(obj, templates, total)
        if low < 1:
            raise FieldError(where, f"must be at least 1, got {low}")
        if low > workers.replicas:
            spec = workers.field.removesuffix(".template")
            raise FieldError(
                where,
                f"{low} is larger than the {workers.replicas} replicas of {spec}: "
                f"set its replicas to at least {low} (the workers the job starts with)",
            )
        return total - workers.replicas + low, where

    def keep_member_owned(self, desired: dict[str, Any], member_obj: Mapping[str, Any]) -> None:
        """With `elasticPolicy.metrics` the member's HPA scales the Worker replicas: the copy
        keeps the member's count."""
        policy = self._elastic_policy(desired)
        if policy is None or not policy.get("metrics"):
            return
        ours = self._replica_key(desired, ELASTIC_ROLE)
        theirs = self._replica_key(member_obj, ELASTIC_ROLE)
        if ours is None or theirs is None:
            return
        scaled = at(member_obj, f"{self.field}.{theirs}.replicas")
        if isinstance(scaled, int) and not isinstance(scaled, bool):
            at(desired, f"{self.field}.{ours}")["replicas"] = scaled

    def running_charge(self, gang: Gang, member_obj: Mapping[str, Any]) -> Resources:
        """An elastic PyTorchJob whose member HPA scales it (`metrics`) is charged the Worker
        replicas its copy has there (what runs, between minReplicas and maxReplicas), the
        other roles as declared."""
        policy = self._elastic_policy(member_obj)
        theirs = self._replica_key(member_obj, ELASTIC_ROLE)
        scaled = at(member_obj, f"{self.field}.{theirs}.replicas") if theirs else None
        if (
            policy is None
            or not policy.get("metrics")
            or not isinstance(scaled, int)
            or isinstance(scaled, bool)
            or scaled < 0
        ):
            return super().running_charge(gang, member_obj)
        total = EMPTY
        for component in gang.components:
            count = scaled if component.name == ELASTIC_ROLE.lower() else component.replicas
            total = total + component.requests * count
        return total

    def templates(self, obj: Mapping[str, Any]) -> list[PodTemplate]:
        specs = mapping(at(obj, self.field), self.field)
        # The training operator normalises role names ("worker" -> "Worker"); so do we.
        canonical = {role.lower(): role for role in self.roles}
        found: dict[str, tuple[str, Mapping[str, Any]]] = {}
        for key, value in specs.items():
            role = canonical.get(str(key).lower())
            if role is None:
                raise FieldError(
                    f"{self.field}.{key}",
                    f"unknown replica type (expected one of {', '.join(self.roles)})",
                )
            if role in found:
                raise FieldError(f"{self.field}.{key}", f"replica type {role} given twice")
            found[role] = (str(key), mapping(value, f"{self.field}.{key}"))
        out = []
        for role in self.roles:
            if role not in found:
                continue
            key, replica_spec = found[role]
            path = f"{self.field}.{key}"
            replicas = optional_count(replica_spec, "replicas", path)
            template = replica_spec.get("template")
            if not isinstance(template, dict):
                raise FieldError(f"{path}.template", f"expected an object, got {template!r}")
            out.append(
                PodTemplate(
                    component=role.lower(),
                    role=role,
                    replicas=1 if replicas is None else replicas,  # the operator's default
                    template=template,
                    field=f"{path}.template",
                )
            )
        return out

    def place_gang(
        self, copy_obj: dict[str, Any], *, name: str, min_member: int, gang_scheduler: str | None
    ) -> None:
        run_policy = copy_obj["spec"].setdefault("runPolicy", {})
        run_policy.setdefault("schedulingPolicy", {})["minAvailable"] = min_member
        super().place_gang(
            copy_obj, name=name, min_member=min_member, gang_scheduler=gang_scheduler
        )

    def pod_name(self, job: str, component: str, index: int) -> str:
        return f"{job}-{component}-{index}"

    def priority_class(self, obj: Mapping[str, Any], needed: Needed | None = None) -> str | None:
        name = at(obj, "spec.runPolicy.schedulingPolicy.priorityClass")
        return str(name) if name else super().priority_class(obj, needed)


PYTORCHJOB = KubeflowJob(
    "kubeflow.org/v1",
    "PyTorchJob",
    "spec.pytorchReplicaSpecs",
    ("Master", "Worker"),
    added="workers, with a Master: `init-pytorch` init container, 50m CPU, 10Mi (not counted)",
    elastic=True,
)
TFJOB = KubeflowJob(
    "kubeflow.org/v1",
    "TFJob",
    "spec.tfReplicaSpecs",
    ("Chief", "Master", "PS", "Worker", "Evaluator"),
)
XGBOOSTJOB = KubeflowJob(
    "kubeflow.org/v1", "XGBoostJob", "spec.xgbReplicaSpecs", ("Master", "Worker")
)
PADDLEJOB = KubeflowJob(
    "kubeflow.org/v1", "PaddleJob", "spec.paddleReplicaSpecs", ("Master", "Worker")
)
JAXJOB = KubeflowJob("kubeflow.org/v1", "JAXJob", "spec.jaxReplicaSpecs", ("Worker",))
