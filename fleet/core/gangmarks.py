"""How a gang is written for each member gang scheduler: the scheduler names and their marks.

A MemberCluster says (or fleet detects) which gang scheduler the member runs; an adapter writes
the gang into the member copy in what that scheduler understands (see `kinds.adapter`). The
API models re-export these names (`fleet.api.constants`), so there is one copy of each.
"""

from __future__ import annotations

from typing import Final

#: MemberCluster.spec.gangScheduler values.
COSCHEDULING: Final = "Coscheduling"
KOORDINATOR: Final = "Koordinator"
VOLCANO: Final = "Volcano"
KUBERNETES: Final = "Kubernetes"
"""Kubernetes' own gang scheduling (KEP-4671): the Workload API's PodGroup and kube-scheduler's
GangScheduling plugin (with TopologyAwareWorkloadScheduling, its TopologyPlacementGenerator)."""

POD_GROUP_NAME_LABEL: Final = "pod-group.scheduling.sigs.k8s.io/name"
"""ACK / Koordinator pod label: the gang (PodGroup) the pod belongs to."""
POD_GROUP_MIN_AVAILABLE_LABEL: Final = "pod-group.scheduling.sigs.k8s.io/min-available"
"""ACK / Koordinator pod label: how many pods of the gang must be schedulable together."""
COSCHEDULING_POD_GROUP_GROUP: Final = "scheduling.x-k8s.io"
"""scheduler-plugins' API group (its PodGroup, scheduling.x-k8s.io/v1alpha1)."""
COSCHEDULING_POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
"""scheduler-plugins coscheduling pod label naming a PodGroup (scheduling.x-k8s.io/v1alpha1)."""
KOORDINATOR_GANG_NAME_ANNOTATION: Final = "gang.scheduling.koordinator.sh/name"
KOORDINATOR_GANG_MIN_AVAILABLE_ANNOTATION: Final = "gang.scheduling.koordinator.sh/min-available"
KOORDINATOR_GANG_TOTAL_NUMBER_ANNOTATION: Final = "gang.scheduling.koordinator.sh/total-number"
KOORDINATOR_GANG_GROUPS_ANNOTATION: Final = "gang.scheduling.koordinator.sh/groups"
KUBERNETES_POD_GROUP_API: Final = "scheduling.k8s.io/v1beta1"
"""The native PodGroup's API (gate GenericWorkload; beta, off by default, in Kubernetes 1.37)."""
KUBERNETES_POD_GROUP_LABEL: Final = "scheduling.fleet.dev/pod-group"
"""Pod label naming the native PodGroup a pod of fleet's joins. A pod joins its group by
`spec.schedulingGroup.podGroupName`, which no operator passes from a template (their CRDs prune
it, their Go types predate it), so fleet labels the templates and the member's admission
policy (`fleet.api.schedulinggroup`, installed by `fleet join`) sets the field from the label
when the pod is created."""
VOLCANO_GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
"""Volcano pod annotation naming its PodGroup (scheduling.volcano.sh/v1beta1)."""


def writes_pod_group_labels(gang_scheduler: str | None) -> bool:
    """Whether the copy's pod templates carry ACK's pod-group labels: on Koordinator (which
    makes the PodGroup from them) and on a member whose scheduler is unknown (harmless to any
    other scheduler, and what ACK members read)."""
    return gang_scheduler in (None, KOORDINATOR)
