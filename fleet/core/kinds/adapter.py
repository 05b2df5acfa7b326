"""What fleet knows about one kind of workload: the adapter every kind module provides.

An adapter answers, for its kind and from plain values only (no I/O):

* `templates(obj)`: where the pod templates are and how many pods each stands for (a clear
  `FieldError` naming the field on bad input); `pod_spec(obj, t)` the pod spec the member's
  operator will actually create from a template, so placement counts what it adds where fleet
  can know it (an MPIJob launcher's init container); `min_member(...)` the gang minimum;
  `gang(obj)` puts these together (generic); `stages(obj)` the stages the member's operator
  creates the pods in, one after the other (a staged JobSet), so the member-side gang is
  written per stage (placement still holds room for the whole job);
* `member_copy(...)`: the object to create in the member: the spec without the fields the
  fleet's API server set (they would be refused there), with its pods marked (`mark_pods`, the
  one hook that puts the member's schedulerName, the gang in what the member's gang scheduler
  understands (`fleet.core.gangmarks`) and fleet's labels where the member's pods get them);
  `gang_refusal(...)` says why a member's gang scheduler cannot run the kind as a gang (the
  member is then not chosen); `pod_templates(obj, needed)` the templates the pods are made from,
  where dependencies are read;
* `conditions`, `fleet_word(...)`: the shape and types of the kind's own status conditions,
  and its own status words, which fleet writes on the fleet object in the kind's terms;
* `member_access`, `fleet_access`: the other objects fleet reads or writes for the kind (its
  RBAC rules, fleet.api.access);
* `state(status)`: one state word for the status mirror and failover, and `status_fields`, the
  status fields mirrored onto the fleet object as they are;
* `pod_name(job, component, index)` and `log_roles`: how `kubectl amc` names replicas and
  finds their pods (None: the member names pods at random, found by their owner);
* `priority_class(obj)` and `charge(gang)`: what the queue orders by and charges.

The shell (controller, `kubectl amc`) asks the adapter and never looks inside a kind's spec
itself. Adding a kind is one module in this package and one line in the registry
(`fleet.core.kinds.ADAPTERS`); see docs/kinds.md.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from fleet.core import gangmarks
from fleet.core.constraints import PodConstraints
from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState, first_true
from fleet.core.names import LABEL_VALUE_MAX, bounded
from fleet.core.requests import pod_requests
from fleet.core.resources import EMPTY, Resources
from fleet.core.topology import rules_from_templates
from fleet.core.workload import Component, Gang, WorkloadRef

#: Objects a kind's gang is read from besides the job itself, as the shell fetched them from
#: the fleet: (kind, namespace or "", name) -> the object, or None when it does not exist.
Needed = Mapping[tuple[str, str, str], Mapping[str, Any] | None]

#: The pod-template label and annotation a user may give the gang minimum with.
LABEL_MIN_AVAILABLE = gangmarks.POD_GROUP_MIN_AVAILABLE_LABEL
ANNOTATION_MIN_AVAILABLE = gangmarks.KOORDINATOR_GANG_MIN_AVAILABLE_ANNOTATION


@dataclass(frozen=True, slots=True)
class PodMarks:
    """What fleet puts on every pod of a member copy (`KindAdapter.mark_pods`): the gang in the
    terms of the member's gang scheduler, the member's schedulerName, and fleet's labels."""

    #: The gang's name (the copy's) and minimum.
    name: str
    min_member: int
    #: The member's gang scheduler (`gangmarks`), None when unknown.
    gang_scheduler: str | None
    #: The schedulerName the member asks for; a user's own is kept. None: the member's default.
    scheduler_name: str | None = None
    #: Labels every pod carries, set over anything of that name (fleet's UID label).
    labels: Mapping[str, str] = field(default_factory=dict)
    #: The label naming each pod's role (the component), if any.
    role_label: str | None = None


@dataclass(frozen=True, slots=True)
class Access:
    """Objects other than the kind itself that fleet reads or writes for it (a TrainJob's
    runtimes, a JobSet's PodGroup): one RBAC rule, each verb with why fleet needs it."""

    group: str
    resources: tuple[str, ...]
    why: Mapping[str, str]
    about: str


@dataclass(frozen=True, slots=True)
class ConditionStyle:
    """The kind's own status conditions, so fleet writes its own in the kind's terms."""

    #: `kubeflow`: a Kubeflow JobCondition (with lastUpdateTime); `metav1`: a metav1.Condition
    #: (with observedGeneration); `batch`: a batch/v1 JobCondition (no observedGeneration).
    shape: Literal["kubeflow", "metav1", "batch"]
    #: The type set True on a job that waits on the fleet, if the kind has one (Created).
    waiting: str | None = None
    #: The type set True when fleet fails the job over, if the kind has one (Restarting).
    restarting: str | None = None
    #: The types dropped when fleet fails the job over: the old copy's end (or its run).
    ended: tuple[str, ...] = ("Failed",)
    #: The types set True, in order, when fleet fails the job for good (maxFailovers).
    failed: tuple[str, ...] = ("Failed",)


#: The scheduler-plugins PodGroup fleet writes beside a copy whose operator makes none.
POD_GROUP_ACCESS = Access(
    gangmarks.COSCHEDULING_POD_GROUP_GROUP,
    ("podgroups",),
    {
        "create": "the PodGroup of a copy whose operator makes none (JobSet, Ray, a TrainJob "
        "whose runtime has no podGroupPolicy) on a coscheduling member; server-side apply of a "
        "new object is authorized as create",
        "patch": "that PodGroup is written by server-side apply",
    },
    "scheduler-plugins PodGroups for kinds whose operator makes none.",
)

#: The native PodGroup (Kubernetes' Workload API) fleet writes beside every copy on a member
#: whose gang scheduler is Kubernetes' own: no operator makes one.
NATIVE_POD_GROUP_ACCESS = Access(
    gangmarks.KUBERNETES_POD_GROUP_API.split("/")[0],
    ("podgroups",),
    {
        "create": "the PodGroup (scheduling.k8s.io/v1beta1) of every copy on a member that "
        "gang-schedules with Kubernetes' own Workload API; server-side apply of a new object is "
        "authorized as create",
        "patch": "that PodGroup is written by server-side apply",
    },
    "Kubernetes' own PodGroups (Workload API) for every copy on a native-gang member.",
)


@dataclass(frozen=True, slots=True)
class PodTemplate:
    """One pod template of a workload: `replicas` pods of one role.

    `template` is the object's own dict, so a caller holding a copy edits it in place."""

    #: The gang component's name: the role lowercased (`worker`), or `pod` for one template.
    component: str
    #: The role as the kind spells it (`Worker`); empty for a kind with one template.
    role: str
    replicas: int
    template: dict[str, Any]
    #: Where the template is, for error messages: `spec.pytorchReplicaSpecs.Worker.template`.
    field: str


@dataclass(frozen=True, slots=True)
class Stage:
    """Pods the member's operator creates at one moment, and only once the stage before it has
    started (or ended): a staged job's own gang in the member (`KindAdapter.stages`). Placement
    still holds room for every stage at once; only the member-side gang is written per stage,
    so no stage waits for pods only a later stage creates."""

    #: What its member-side group's name adds to the copy's (`group_name`): the first
    #: component's role, as the kind spells it.
    suffix: str
    #: Its components (`PodTemplate.component`), in the kind's order.
    components: tuple[str, ...]
    #: The pods it creates at once.
    pods: int

    def group_name(self, copy_name: str) -> str:
        """Its member-side group's name: `<copy>-<suffix>`, within a label value's 63
        characters (cut, with a hash of the whole, when longer)."""
        return bounded(f"{copy_name}-{self.suffix}", LABEL_VALUE_MAX)

    def min_member(self, gang_min: int) -> int:
        """Its member-side minimum: its pods, or the gang's minimum when that is smaller (a
        stage never waits for more than the job as a whole does)."""
        return min(self.pods, gang_min)


class KindAdapter:
    """The generic parts of an adapter; a kind module subclasses it (or configures it) and
    overrides what its kind does differently."""

    api_version: str
    kind: str
    #: Kubeflow-style jobs print per-role replicas (`{c:0,[{master 1} {worker 2}]}`);
    #: single-template kinds print a replica count (`{c:4}`), as Karmada does.
    multi_role: ClassVar[bool] = True
    #: The spec field that gives the gang minimum, if the kind has one.
    min_available_field: ClassVar[str | None] = None
    #: The spec field that declares the most seconds a run may take (`activeDeadlineSeconds`
    #: or the kind's equivalent), if the kind has one (`run_limit_seconds`).
    run_limit_field: ClassVar[str | None] = None
    #: Where the job declares its gang scheduler's timeout in seconds (the training operator
    #: writes it into the PodGroup's scheduleTimeoutSeconds), if the kind has such a field.
    gang_timeout_field: ClassVar[str | None] = None
    #: Conditions that decide the state word, strongest first.
    state_conditions: ClassVar[tuple[tuple[str, JobState], ...]] = ()
    #: Member status fields copied to the fleet object as they are (besides conditions).
    status_fields: ClassVar[tuple[str, ...]] = ()
    #: The kind's status conditions (None: it has no conditions list, fleet writes none).
    conditions: ClassVar[ConditionStyle | None] = ConditionStyle("metav1")
    #: Objects besides the kind that fleet writes in members / reads on the fleet for it.
    member_access: ClassVar[tuple[Access, ...]] = ()
    fleet_access: ClassVar[tuple[Access, ...]] = ()
    #: The label the member's operator puts on a job's pods, with the job's name as value.
    pods_label: ClassVar[str] = ""
    #: Whether the pod templates may change once the object exists (a Job's may not).
    mutable_templates: ClassVar[bool] = True
    #: Whether the member's operator names pods by role and index (`pod_name`); if not, they
    #: are found by their owner, the member copy.
    names_pods: ClassVar[bool] = False
    #: Components whose pod's log is the job's own story, preferred in order (`amc logs`).
    log_roles: ClassVar[tuple[str, ...]] = ()
    #: For the docs' table (docs/kinds.md, checked by a test): where the gang is read from,
    #: what the copy drops, and what the member's operator adds to the pods (counted or not).
    #: On a coscheduling member fleet writes this kind's gang itself, a scheduler-plugins
    #: PodGroup beside the copy and its label on every template: the member's operator makes
    #: none for it (JobSet, Ray).
    fleet_pod_group: ClassVar[bool] = False
    #: The pod label naming a pod's role (replicated job, Ray group), for `amc logs` of kinds
    #: whose pods are found by `pods_of`.
    role_label: ClassVar[str | None] = None
    #: Whether the pods the member's operator makes carry the labels fleet puts on the copy's
    #: templates, so that they can consume the Reservations fleet makes for them on a
    #: Koordinator member (a kind whose templates are not in the object cannot: TrainJob).
    reservable: ClassVar[bool] = True
    #: How fleet deletes a copy in a member. In the foreground the copy stays (with a
    #: deletionTimestamp) until the garbage collector has removed its pods; fleet waits for
    #: its pods either way (`member_copy.copy_gone`), by the fleet labels they carry. A kind
    #: whose operator rebuilds its children while the copy is being deleted cannot be deleted
    #: in the foreground: the collector and the operator take turns for ever (TrainJob).
    deletion_propagation: ClassVar[Literal["Foreground", "Background"]] = "Foreground"
    #: Where every pod spec of the kind's object is, one path each, for the member's admission
    #: policy (fleet.api.guard builds its CEL from them): dotted fields, `*` for every value of
    #: a map (`spec.pytorchReplicaSpecs.*.template.spec`), `[]` for every item of a list
    #: (`spec.replicatedJobs[].template.spec.template.spec`), at most one of either per path
    #: (`specs_at` reads them). Every pod the member's operator makes from the object is made
    #: from one of these (tests/core/test_kinds_pod_spec_paths.py holds each kind to it).
    pod_spec_paths: tuple[str, ...] = ()
    #: The same for the objects of `needs_kinds` fleet writes in members with propagateDeps
    #: (a TrainJob's runtimes): kind -> paths.
    needs_pod_spec_paths: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    doc_gang: str = ""
    doc_dropped: str = "nothing"
    doc_added: str = "nothing"

    @property
    def failed_conditions(self) -> tuple[str, ...]:
        """The conditions fleet sets True on the fleet object when it fails the job for good
        (maxFailovers reached), in order."""
        return self.conditions.failed if self.conditions is not None else ()

    def accesses(self) -> tuple[tuple[Access, ...], tuple[Access, ...]]:
        """(in members, on the fleet): every object besides the kind fleet touches for it."""
        member = self.member_access
        if self.fleet_pod_group and POD_GROUP_ACCESS not in member:
            member = (*member, POD_GROUP_ACCESS)
        if NATIVE_POD_GROUP_ACCESS not in member:
            member = (*member, NATIVE_POD_GROUP_ACCESS)
        return member, self.fleet_access

    @property
    def type(self) -> tuple[str, str]:
        """(apiVersion, kind)."""
        return (self.api_version, self.kind)

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"

    # -- reading the gang ------------------------------------------------------------------

    def templates(self, obj: Mapping[str, Any]) -> list[PodTemplate]:
        """Every pod template of `obj`, in the order the minimum set is filled (coordinators
        first). Raises `FieldError` naming the field when the spec is malformed."""
        raise NotImplementedError

    def templates_with(self, obj: Mapping[str, Any], needed: Needed) -> list[PodTemplate]:
        """The templates the gang is read from: `templates(obj)`, unless the kind keeps them in
        another object (`needs`)."""
        return self.templates(obj)

    def stages(self, obj: Mapping[str, Any]) -> tuple[Stage, ...]:
        """The stages the member's operator creates the job's pods in, one after the other, when
        it does not create them all at once (a JobSet with `startupPolicyOrder: InOrder` or
        `dependsOn`): the member-side gang is then written per stage (`place_gang`,
        `pod_groups`). None, by default: one gang of every pod. Raises `FieldError` naming the
        field when the staging is malformed."""
        return ()

    def pod_spec(self, obj: Mapping[str, Any], template: PodTemplate) -> Mapping[str, Any]:
        """The pod spec the member's operator creates from `template`: by default the
        template's own. A kind whose operator adds containers fleet can know overrides it."""
        return mapping(template.template.get("spec"), f"{template.field}.spec")

    def outside_gang(self, obj: Mapping[str, Any]) -> list[str]:
        """What the kind's operator may add in the member beyond the gang fleet placed, one
        sentence each naming the field (a Ray autoscaler's workers): the controller says each
        once on the object (`OutsideGang` Event). None, by default."""
        return []

    def min_member(
        self, obj: Mapping[str, Any], templates: Sequence[PodTemplate], total: int
    ) -> tuple[int, str]:
        """(gang minimum, where it came from): the kind's minAvailable field, else the gang
        label or annotation on the templates (roles that set it must agree), else all."""
        found: tuple[object, str] | None = None
        if self.min_available_field is not None:
            value = at(obj, self.min_available_field)
            if value is not None:
                found = (value, self.min_available_field)
        if found is None:
            found = _from_templates(templates, "labels", LABEL_MIN_AVAILABLE)
        if found is None:
            found = _from_templates(templates, "annotations", ANNOTATION_MIN_AVAILABLE)
        if found is None:
            return self.default_min_member(obj, templates, total)
        raw, where = found
        value = as_count(raw, where)
        if value < 1:
            raise FieldError(where, f"must be at least 1, got {value}")
        if value > total:
            raise FieldError(where, f"{value} is larger than the {total} replicas of the job")
        return value, where

    def default_min_member(
        self, obj: Mapping[str, Any], templates: Sequence[PodTemplate], total: int
    ) -> tuple[int, str]:
        """(gang minimum, where it came from) when the job gives none (`min_member`): every
        replica, unless the kind knows fewer must start at once (an elastic PyTorchJob)."""
        return total, "all replicas"

    def keep_member_owned(self, desired: dict[str, Any], member_obj: Mapping[str, Any]) -> None:
        """Before fleet applies `desired` again over its copy `member_obj` in a member: keep in
        `desired` the fields a controller of the member owns (an elastic PyTorchJob's Worker
        replicas, scaled by the member's HPA), so the apply does not take them back. Nothing,
        by default."""

    #: (apiVersion, kind) of every kind `needs` may name: the controller watches them on the
    #: fleet and looks again at this kind's workloads when one changes (a runtime created after
    #: the TrainJob that names it).
    needs_kinds: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The kinds of `needs_kinds` that are cluster-scoped (a ClusterTrainingRuntime): one
    #: object of theirs in a member may serve jobs of every namespace.
    cluster_scoped_needs: ClassVar[frozenset[str]] = frozenset()

    def needs(self, obj: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
        """(apiVersion, kind, namespace or "", name) of the other objects the gang is read from
        (a TrainJob's runtime): the shell fetches them from the fleet for `gang`. None, by
        default."""
        return []

    def gang(self, obj: Mapping[str, Any], ref: WorkloadRef, needed: Needed | None = None) -> Gang:
        """`obj` as a gang (raises `FieldError`; `kinds.gang_from_workload` names the object).
        `needed` holds what `needs` named, as fetched (None for what does not exist)."""
        mapping(obj.get("spec"), "spec")
        templates = self.templates_with(obj, needed or {})
        components = []
        for t in templates:
            spec = self.pod_spec(obj, t)
            components.append(
                Component(
                    name=t.component,
                    replicas=t.replicas,
                    requests=pod_requests(spec, f"{t.field}.spec"),
                    constraints=PodConstraints.from_pod_spec(spec, f"{t.field}.spec"),
                    role=t.role,
                )
            )
        total = sum(c.replicas for c in components)
        min_member, source = self.min_member(obj, templates, total)
        # Placement holds room for every stage; their staging must read too (FieldError).
        self.stages(obj)
        # Kueue's topology annotations on the templates: each template is one pod set.
        topology = rules_from_templates([(t.component, t.field, t.template) for t in templates])
        return Gang(ref, tuple(components), min_member, self.multi_role, source, topology)

    # -- the member copy -------------------------------------------------------------------

    def member_copy(
        self,
        workload: Mapping[str, Any],
        *,
        min_member: int,
        gang_scheduler: str | None,
        scheduler_name: str | None = None,
        pod_labels: Mapping[str, str] | None = None,
        role_label: str | None = None,
        needed: Needed | None = None,
    ) -> dict[str, Any]:
        """The member copy's apiVersion, kind, name, namespace, the user's labels and
        annotations and spec, without what the fleet's API server set, its pods marked
        (`mark_pods`) for `gang_scheduler` (None: unknown), `scheduler_name`, `pod_labels` and
        each pod's role in `role_label`. `needed`: what `needs` named, as fetched. The shell
        adds fleet's marks on the copy itself."""
        meta = workload["metadata"]
        out: dict[str, Any] = {
            "apiVersion": workload["apiVersion"],
            "kind": workload["kind"],
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
            },
            "spec": copy.deepcopy(workload.get("spec") or {}),
        }
        self.drop_server_set(out)
        marks = PodMarks(
            name=meta["name"],
            min_member=min_member,
            gang_scheduler=gang_scheduler,
            scheduler_name=scheduler_name,
            labels=dict(pod_labels or {}),
            role_label=role_label,
        )
        self.mark_pods(out, marks, needed or {})
        return out

    def mark_pods(self, copy_obj: dict[str, Any], marks: PodMarks, needed: Needed) -> None:
        """Mark the pods the member's operator will make from the copy: the gang for the
        member's gang scheduler (`place_gang`), fleet's labels, the member's schedulerName (a
        user's own is kept). By default on every pod template of the copy; a kind whose pod
        templates live elsewhere (TrainJob: its runtime) writes them where its pods get them."""
        self.place_gang(
            copy_obj,
            name=marks.name,
            min_member=marks.min_member,
            gang_scheduler=marks.gang_scheduler,
        )
        for t in self.templates(copy_obj):
            labels = t.template.setdefault("metadata", {}).setdefault("labels", {})
            labels.update(marks.labels)
            if marks.role_label:
                labels[marks.role_label] = t.component
            if marks.scheduler_name:
                t.template.setdefault("spec", {}).setdefault("schedulerName", marks.scheduler_name)

    def gang_refusal(
        self,
        obj: Mapping[str, Any],
        needed: Needed,
        *,
        gang_scheduler: str | None,
        scheduler_name: str | None,
    ) -> str | None:
        """Why a member with this gang scheduler and schedulerName cannot run `obj` as one gang
        (the member is not chosen, the binding says why); None when it can. Kubeflow's
        operators make the gang for any scheduler; a kind whose gang fleet writes itself
        (`fleet_pod_group`) has none on a Volcano member."""
        if self.fleet_pod_group and gang_scheduler == gangmarks.VOLCANO:
            return (
                f"a {self.kind} gets no gang from Volcano: its operator makes no Volcano "
                "PodGroup and fleet writes none"
            )
        return None

    def pod_templates(self, obj: Mapping[str, Any], needed: Needed) -> list[PodTemplate]:
        """The templates the member's pods are made from, with what the object overrides in
        them: where the dependencies propagateDeps takes along are read. By default the gang's
        templates (`templates_with`); empty when they cannot be read."""
        try:
            return self.templates_with(obj, needed)
        except FieldError:
            return []

    def drop_server_set(self, copy_obj: dict[str, Any]) -> None:
        """Remove from a copy what the fleet's API server defaulted and a member's would
        refuse or set differently. Nothing, by default."""

    def place_gang(
        self, copy_obj: dict[str, Any], *, name: str, min_member: int, gang_scheduler: str | None
    ) -> None:
        """Write the gang into the copy. By default ACK's pod-group labels on every template
        when the member runs Koordinator or its scheduler is unknown; a user's own gang labels
        (or Koordinator gang annotation) are kept, never overwritten. On a member with
        Kubernetes' own gang scheduling, every kind's templates name the native PodGroup fleet
        writes beside the copy (`pod_group`). A staged job's templates name their stage's group
        and minimum instead (`stage_groups`)."""
        groups = self.stage_groups(copy_obj, name, min_member)
        if gang_scheduler == gangmarks.KUBERNETES:
            for t in self.templates(copy_obj):
                labels = t.template.setdefault("metadata", {}).setdefault("labels", {})
                group, _ = groups.get(t.component, (name, min_member))
                labels.setdefault(gangmarks.KUBERNETES_POD_GROUP_LABEL, group)
            return
        if self.fleet_pod_group and gang_scheduler == gangmarks.COSCHEDULING:
            for t in self.templates(copy_obj):
                labels = t.template.setdefault("metadata", {}).setdefault("labels", {})
                group, _ = groups.get(t.component, (name, min_member))
                labels.setdefault(gangmarks.COSCHEDULING_POD_GROUP_LABEL, group)
            return
        if not gangmarks.writes_pod_group_labels(gang_scheduler):
            return
        for t in self.templates(copy_obj):
            pod_group_labels(t.template, *groups.get(t.component, (name, min_member)))

    def stage_groups(
        self, obj: Mapping[str, Any], name: str, min_member: int
    ) -> dict[str, tuple[str, int]]:
        """component -> (its member-side group's name, that group's minimum) of a staged job
        (`stages`) whose copy is `name` and gang minimum `min_member`; empty for one gang."""
        return {
            component: (stage.group_name(name), stage.min_member(min_member))
            for stage in self.stages(obj)
            for component in stage.components
        }

    def pod_group(
        self,
        member_obj: Mapping[str, Any],
        *,
        min_member: int,
        gang_scheduler: str | None,
        topology: str | None = None,
    ) -> dict[str, Any] | None:
        """The PodGroup fleet writes beside a copy (None when the member's operator makes the
        gang, or its scheduler reads it from the pods), owned by the member copy so the member's
        garbage collector deletes it with the copy; fleet's labels go on top. A `fleet_pod_group`
        kind's scheduler-plugins PodGroup on a coscheduling member; on a member with Kubernetes'
        own gang scheduling, every kind's native PodGroup, with `topology` (the label key of
        the one domain the whole gang must share, when it requires one) as its scheduling
        constraint."""
        if gang_scheduler == gangmarks.KUBERNETES:
            return native_pod_group(member_obj, min_member, topology)
        if not (self.fleet_pod_group and gang_scheduler == gangmarks.COSCHEDULING):
            return None
        return self._pod_group(member_obj, min_member)

    def pod_groups(
        self,
        member_obj: Mapping[str, Any],
        *,
        min_member: int,
        gang_scheduler: str | None,
        topology: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every PodGroup fleet writes beside a copy: `pod_group`'s, or for a staged job
        (`stages`) one per stage, named after it (`Stage.group_name`, as its templates name
        it), its minimum the stage's (`Stage.min_member`), each owned by the copy and with the
        same `topology`."""
        stages = self.stages(member_obj)
        if not stages:
            group = self.pod_group(
                member_obj, min_member=min_member, gang_scheduler=gang_scheduler, topology=topology
            )
            return [] if group is None else [group]
        out = []
        copy_name = member_obj["metadata"]["name"]
        for stage in stages:
            group = self.pod_group(
                member_obj,
                min_member=stage.min_member(min_member),
                gang_scheduler=gang_scheduler,
                topology=topology,
            )
            if group is None:
                return []
            group["metadata"]["name"] = stage.group_name(copy_name)
            out.append(group)
        return out

    def _pod_group(self, member_obj: Mapping[str, Any], min_member: int) -> dict[str, Any]:
        return {
            "apiVersion": f"{gangmarks.COSCHEDULING_POD_GROUP_GROUP}/v1alpha1",
            "kind": "PodGroup",
            "metadata": _owned_by(member_obj),
            "spec": {"minMember": min_member},
        }

    # -- state -------------------------------------------------------------------------------

    def state(self, status: Mapping[str, Any] | None) -> JobState:
        """The state word of a copy with this status: the strongest True condition of
        `state_conditions`, else Running while pods are active, else Pending."""
        status = status or {}
        found = first_true(status, self.state_conditions)
        if found is not None:
            return found
        return "Running" if status.get("active") else "Pending"

    def fleet_status(
        self,
        member: Mapping[str, Any],
        fleet: Mapping[str, Any],
        *,
        fails_over: bool,
    ) -> dict[str, Any]:
        """What the status mirror writes on the fleet object (fleet's own condition aside):
        `status_fields` and the conditions of the member copy's status `member`, as they are.
        `fleet` is the fleet object's status now; `fails_over`: a failure of this copy will be
        failed over (the job goes on elsewhere). A kind whose API server refuses some status
        transitions on the fleet object overrides it."""
        out = {k: member.get(k) for k in self.status_fields}
        if self.conditions is not None:
            out["conditions"] = list(member.get("conditions") or [])
        return out

    def fleet_word(
        self, word: Literal["Restarting", "Failed"], reason: str, message: str
    ) -> dict[str, Any]:
        """Status fields besides conditions that fleet writes on the fleet object when it fails
        the job over (`Restarting`) or fails it for good (`Failed`), in the kind's own words
        (a JobSet's terminalState, a RayJob's jobDeploymentStatus). None, by default."""
        return {}

    # -- kubectl amc -------------------------------------------------------------------------

    def pods_of(self, member_obj: Mapping[str, Any]) -> str | None:
        """The label selector of the pods the member's operator made for a copy, for kinds
        whose pods carry the job's name in a label (JobSet, Ray); None: by name or owner."""
        return None

    def pod_name(self, job: str, component: str, index: int) -> str:
        """The name the member's operator gives pod `index` of `component` (only asked when
        `names_pods`)."""
        raise NotImplementedError(f"{self} names its pods at random")

    def pod_selector(self, job: str) -> str:
        """The label selector of a job's pods in the member (kinds whose pods carry the job's
        name in `pods_label`; a RayJob's pods carry the name of the cluster it made, `pods_of`)."""
        if not self.pods_label:
            raise NotImplementedError(f"the pods of a {self.kind} do not carry its name")
        return f"{self.pods_label}={job}"

    # -- the queue ---------------------------------------------------------------------------

    def priority_class(self, obj: Mapping[str, Any], needed: Needed | None = None) -> str | None:
        """The PriorityClass the job names: the first priorityClassName of the templates its
        pods are made from (`pod_templates`: a TrainJob's runtime's, given in `needed`)."""
        for t in self.pod_templates(obj, needed or {}):
            name = (t.template.get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return None

    def run_limit_seconds(self, obj: Mapping[str, Any]) -> float | None:
        """The run time the job declares at most, in seconds from its start (`run_limit_field`):
        a reclaim spares a gang about to end by it (docs/queue.md, "Worth it"). None when the
        kind has no such field, or the job does not set it to a positive integer."""
        if self.run_limit_field is None:
            return None
        value = at(obj, self.run_limit_field)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return None
        return float(value)

    def gang_timeout_seconds(self, obj: Mapping[str, Any]) -> float | None:
        """The gang scheduler's timeout the job declares (`gang_timeout_field`): how long its
        pods may go refused in the member before its copy is stuck, unless the policy says
        (`fleet.core.failover.gang_deadline`). None when the kind has no such field, or the job
        does not set it to a positive integer."""
        if self.gang_timeout_field is None:
            return None
        value = at(obj, self.gang_timeout_field)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return None
        return float(value)

    def charge(self, gang: Gang) -> Resources:
        """What the job's queue unit asks of its quota: every replica of every role (as the
        fleet object declares them, whatever its minimum)."""
        total = EMPTY
        for component in gang.components:
            total = total + component.requests * component.replicas
        return total

    def running_charge(self, gang: Gang, member_obj: Mapping[str, Any]) -> Resources:
        """What the unit of a job that runs is charged, its member copy `member_obj` as the
        member holds it: what it declares (`charge`), unless the member scales it (an elastic
        PyTorchJob's HPA), then what the copy runs."""
        return self.charge(gang)


# -- helpers the kind modules share ----------------------------------------------------------


def _owned_by(member_obj: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of an object named after a member copy and owned by it (its gang's
    PodGroup): the member's garbage collector deletes it with the copy."""
    meta = member_obj["metadata"]
    return {
        "name": meta["name"],
        "namespace": meta.get("namespace"),
        "ownerReferences": [
            {
                "apiVersion": member_obj["apiVersion"],
                "kind": member_obj["kind"],
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def native_pod_group(
    member_obj: Mapping[str, Any], min_member: int, topology: str | None = None
) -> dict[str, Any]:
    """Kubernetes' own PodGroup (scheduling.k8s.io/v1beta1) for the gang of a member copy: the
    Gang policy with the gang's minimum as `minCount`, so kube-scheduler's GangScheduling
    plugin binds none of its pods until that many fit at once; with `topology`, a scheduling
    constraint on that node label, so its TopologyPlacementGenerator puts the whole group in
    one domain of it. The pods join it by `spec.schedulingGroup.podGroupName`
    (`gangmarks.KUBERNETES_POD_GROUP_LABEL`)."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_member}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {
        "apiVersion": gangmarks.KUBERNETES_POD_GROUP_API,
        "kind": "PodGroup",
        "metadata": _owned_by(member_obj),
        "spec": spec,
    }


def pod_group_labels(template: dict[str, Any], name: str, min_member: int) -> None:
    """ACK's pod-group labels on one template, unless the user gave a Koordinator gang (or
    these labels) already."""
    meta = template.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    if gangmarks.KOORDINATOR_GANG_NAME_ANNOTATION in (meta.get("annotations") or {}):
        return
    labels.setdefault(gangmarks.POD_GROUP_NAME_LABEL, name)
    labels.setdefault(gangmarks.POD_GROUP_MIN_AVAILABLE_LABEL, str(min_member))


def path_steps(path: str) -> list[str]:
    """The steps of a pod-spec path (`KindAdapter.pod_spec_paths`): field names, `*` (every
    value of a map) and `[]` (every item of a list); ValueError on more than one of those."""
    steps: list[str] = []
    for part in path.split("."):
        if part.endswith("[]"):
            steps += [part[:-2], "[]"]
        else:
            steps.append(part)
    if sum(step in ("*", "[]") for step in steps) > 1 or not all(steps):
        raise ValueError(f"pod-spec path {path!r}: dotted fields with at most one * or []")
    return steps


def specs_at(obj: Mapping[str, Any], path: str) -> list[Mapping[str, Any]]:
    """Every object at a pod-spec path of `obj` (missing steps give none), in order."""
    nodes: list[Any] = [obj]
    for step in path_steps(path):
        found: list[Any] = []
        for node in nodes:
            if step == "*" and isinstance(node, Mapping):
                found += list(node.values())
            elif step == "[]" and isinstance(node, list):
                found += node
            elif isinstance(node, Mapping) and step in node:
                found.append(node[step])
        nodes = found
    return [n for n in nodes if isinstance(n, Mapping)]


def optional_count(spec: Mapping[str, Any], key: str, field: str) -> int | None:
    """A non-negative integer field of `spec`, or None when absent."""
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"{field}.{key}", f"expected an integer, got {value!r}")
    if value < 0:
        raise FieldError(f"{field}.{key}", f"must not be negative, got {value}")
    return value


def as_count(raw: object, field: str) -> int:
    """An integer, or its decimal string (labels and annotations are strings)."""
    if isinstance(raw, bool):
        raise FieldError(field, f"expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.strip().isdigit() and raw.strip().isascii():
        return int(raw.strip())
    raise FieldError(field, f"expected an integer, got {raw!r}")


def at(obj: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, None when any step is missing."""
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FieldError(field, f"expected an object, got {value!r}")
    return value


def template_at(obj: Mapping[str, Any], field: str) -> dict[str, Any]:
    """The pod template at `field` (an object, or a FieldError naming the field)."""
    value = at(obj, field)
    if not isinstance(value, dict):
        raise FieldError(field, f"expected a pod template, got {value!r}")
    return value


def _from_templates(
    templates: Sequence[PodTemplate], meta_key: str, key: str
) -> tuple[object, str] | None:
    """The value of a pod-template label/annotation; roles that set it must agree."""
    first: tuple[object, str] | None = None
    for t in templates:
        meta = t.template.get("metadata") or {}
        values = meta.get(meta_key) if isinstance(meta, Mapping) else None
        if not isinstance(values, Mapping) or key not in values:
            continue
        where = f"{t.field}.metadata.{meta_key}.{key}"
        if first is None:
            first = (values[key], where)
        elif values[key] != first[0]:
            raise FieldError(where, f"{values[key]!r} disagrees with {first[1]} = {first[0]!r}")
    return first


def object_at(parent: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    """`parent[key]`, which must be an object; the error names `path.key`."""
    value = parent.get(key)
    if not isinstance(value, dict):
        what = "missing" if value is None else f"expected an object, got {value!r}"
        raise FieldError(f"{path}.{key}" if path else key, what)
    return value


def name_at(parent: Mapping[str, Any], key: str, path: str) -> str:
    """`parent[key]`, which must be a non-empty string."""
    value = parent.get(key)
    if not isinstance(value, str) or not value:
        raise FieldError(f"{path}.{key}", f"expected a name, got {value!r}")
    return value


def job_pods(spec: Mapping[str, Any], field: str) -> int:
    """Pods a batch/v1 Job spec runs at once: parallelism (default 1) capped by completions,
    the Job controller's `wantActive` before any pod succeeded."""
    parallelism = optional_count(spec, "parallelism", field)
    completions = optional_count(spec, "completions", field)
    pods = 1 if parallelism is None else parallelism
    return pods if completions is None else min(pods, completions)
