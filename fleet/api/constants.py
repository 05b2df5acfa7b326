"""Every group, label, annotation and condition name fleet writes, in one place.

Member objects are found again after a controller restart by these labels alone, so any code
that writes or selects them must use these constants rather than string literals.
"""

from __future__ import annotations

from typing import Final

from fleet.core import gangmarks, ledger
from fleet.core.admission.reasons import REASON_QUEUED as _REASON_QUEUED
from fleet.core.placement import NAMESPACE_NOT_OPEN as _NAMESPACE_NOT_OPEN

# --- API groups -----------------------------------------------------------------------------
POLICY_GROUP: Final = "policy.one.alibabacloud.com"
"""ACK One's policy group; PropagationPolicy and ClusterPropagationPolicy live here."""
KARMADA_POLICY_GROUP: Final = "policy.karmada.io"
"""Karmada's policy group: a Karmada policy applies to fleet once its group is changed to ours."""
FLEET_GROUP: Final = "fleet.dev"
"""fleet's own group (MemberCluster, GangBinding)."""
API_VERSION: Final = "v1alpha1"
POLICY_API_VERSION: Final = "policy.one.alibabacloud.com/v1alpha1"
FLEET_API_VERSION: Final = "fleet.dev/v1alpha1"
ELASTIC_QUOTA_GROUP: Final = "scheduling.sigs.k8s.io"
"""ACK's (and koord-queue's) group of the ElasticQuotaTree."""
ELASTIC_QUOTA_VERSION: Final = "v1beta1"
ELASTIC_QUOTA_API_VERSION: Final = "scheduling.sigs.k8s.io/v1beta1"
QUEUE_GROUP: Final = "scheduling.x-k8s.io"
"""kube-queue's group of Queue and QueueUnit."""
QUEUE_API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"

# --- Kube Queue ----------------------------------------------------------------------------
QUOTA_TREE_NAMESPACE: Final = "kube-system"
"""The one namespace whose ElasticQuotaTree is honoured (ACK's rule)."""
QUEUE_NAMESPACE: Final = "kube-queue"
"""Where the Queues live, one per quota node (`kubectl get queue -n kube-queue`)."""
QUOTA_FULLNAME_ANNOTATION: Final = "kube-queue/quota-fullname"
"""Annotation on a Queue: the full path of its quota node (`root/child-2`); koord-queue's name.
The Queue's own name is generated (`root-child-2-v5zxz`), so this is how it is found again."""

# --- Labels and annotations fleet writes on member-cluster objects -------------------------
MANAGED_BY_LABEL: Final = "fleet.dev/managed-by"
"""Label on every object fleet created in a member cluster (karmadactl's ADOPTION column). Its
value is the fleet's id (`fleet controller --fleet-id`), so two fleets sharing a member never
take each other's copies for their own."""
DEFAULT_FLEET_ID_PREFIX: Final = "fleet-"
"""A fleet's default id is this prefix and the start of its kube-system namespace's UID."""
FLEET_UID_LABEL: Final = "fleet.dev/fleet-uid"
"""Label: UID of the fleet-side workload a member object was made from (36 chars, fits a label).

Selecting by UID, not name, means a deleted-and-recreated workload never adopts the old copy.
"""
ROLE_LABEL: Final = "fleet.dev/role"
"""Label on every pod template of a member copy: the role (master, worker, ps, ...) in lower case,
so a Reservation's owner selector picks exactly the gang's pods of that role."""
BINDING_ANNOTATION: Final = "fleet.dev/binding"
"""Annotation `<namespace>/<name>` of the GangBinding that placed the object.

An annotation, not a label: label values cannot contain '/' and are limited to 63 characters.
"""
POLICY_ANNOTATION: Final = "fleet.dev/policy"
"""Annotation on the fleet-side workload: `<Kind>/<namespace>/<name>` of the policy that claimed it
(namespace empty for a ClusterPropagationPolicy), written with the finalizer. The claim itself is
the binding's spec.policy; the annotation shows it on the workload."""
APPLIED_DIGEST_ANNOTATION: Final = "fleet.dev/applied-digest"
"""Annotation on a member copy: digest of what fleet last applied, so unchanged copies are not
re-applied on every reconcile."""
HOLD_ANNOTATION: Final = "fleet.dev/hold"
"""Annotation on a claimant's QueueUnit: the room a reclaim holds for it (`Hold.record()` as
JSON), read back at a restart (docs/queue.md, "The hold")."""
CHECKPOINT_ANNOTATION: Final = "fleet.dev/last-checkpoint"
"""Annotation the job's own code (or its operator) writes on the fleet job or on its member copy:
the RFC 3339 time of the last checkpoint its next copy resumes from. A reclaim counts the work an
eviction loses from the later of the two (docs/queue.md, "Checkpoints the controller knows").
Not copied from the fleet job to the member copy: a checkpoint does not rewrite the copy."""
FINALIZER: Final = "fleet.dev/cleanup"
"""Finalizer fleet puts on a dispatched workload until its member copies are purged."""

# --- What propagateDeps takes along ------------------------------------------------------------
DEPENDENCY_KINDS: Final = {
    "ConfigMap": "v1",
    "Secret": "v1",
    "ServiceAccount": "v1",
    "PersistentVolumeClaim": "v1",
}
"""Kind -> apiVersion of the objects `propagateDeps` copies into the member with a workload (and
that `kubectl amc` shows an ADOPTION column for)."""
DEPENDENCY_ADOPTED_ANNOTATION: Final = "fleet.dev/adopted"
"""Annotation `"true"` on a member dependency fleet took over under `conflictResolution:
Overwrite` (it was the member's before): fleet keeps it in step but never deletes it."""
REASON_DEPENDENCY_CONFLICT: Final = "DependencyConflict"
"""A dependency of the job exists in a member and is not fleet's (or the member refused fleet's
write of it): the job is not dispatched there (placement's pending reason code, the binding's
FullyApplied reason, and the Warning Event's reason)."""

# --- Gang labels and annotations member schedulers understand -----------------------------
# One copy, in the core (`fleet.core.gangmarks`: the kind adapters write them).
POD_GROUP_NAME_LABEL = gangmarks.POD_GROUP_NAME_LABEL
POD_GROUP_MIN_AVAILABLE_LABEL = gangmarks.POD_GROUP_MIN_AVAILABLE_LABEL
COSCHEDULING_POD_GROUP_LABEL = gangmarks.COSCHEDULING_POD_GROUP_LABEL
KOORDINATOR_GANG_NAME_ANNOTATION = gangmarks.KOORDINATOR_GANG_NAME_ANNOTATION
KOORDINATOR_GANG_MIN_AVAILABLE_ANNOTATION: Final = (
    gangmarks.KOORDINATOR_GANG_MIN_AVAILABLE_ANNOTATION
)
KOORDINATOR_GANG_TOTAL_NUMBER_ANNOTATION = gangmarks.KOORDINATOR_GANG_TOTAL_NUMBER_ANNOTATION
KOORDINATOR_GANG_GROUPS_ANNOTATION = gangmarks.KOORDINATOR_GANG_GROUPS_ANNOTATION
VOLCANO_GROUP_NAME_ANNOTATION = gangmarks.VOLCANO_GROUP_NAME_ANNOTATION

# --- Well-known MemberCluster labels Karmada's fieldSelector fields map to -----------------
REGION_LABEL: Final = "topology.kubernetes.io/region"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
PROVIDER_LABEL: Final = "fleet.dev/provider"
FIELD_SELECTOR_LABELS: Final = {
    "region": REGION_LABEL,
    "zone": ZONE_LABEL,
    "provider": PROVIDER_LABEL,
}
"""Karmada selects clusters by spec.{provider,region,zone}; fleet keeps those as labels."""

# --- Condition types and reasons ---------------------------------------------------------
CONDITION_READY: Final = "Ready"
"""MemberCluster: the API server answered a probe with this kubeconfig."""
CONDITION_SCHEDULED: Final = "Scheduled"
"""GangBinding: a target cluster was chosen (Karmada's name)."""
CONDITION_FULLY_APPLIED: Final = "FullyApplied"
"""GangBinding: the workload exists in the target cluster (Karmada's name)."""
CONDITION_HEALTHY: Final = "Healthy"
"""GangBinding: the member copy is healthy (fleet's; Karmada keeps health per cluster only)."""
CONDITION_RECOGNIZED: Final = "Recognized"
"""(Cluster)PropagationPolicy: whether fleet knows its customSchedulingType (fleet's)."""
REASON_UNKNOWN_SCHEDULING_TYPE: Final = "UnknownSchedulingType"
"""Recognized=False, and the Warning Event: customSchedulingType is not a value fleet knows."""
REASON_GANG: Final = "Gang"
"""Recognized=True: customSchedulingType Gang, fleet places the policy's workloads."""
REASON_NOT_GANG: Final = "NoCustomSchedulingType"
"""Recognized=True: no customSchedulingType, a plain Karmada policy fleet knowingly leaves."""

REASON_CLUSTER_READY: Final = "ClusterReady"
REASON_CLUSTER_NOT_READY: Final = "ClusterNotReady"
REASON_CLUSTER_NOT_REACHABLE: Final = "ClusterNotReachable"
"""MemberCluster Ready=False: the member did not answer (connection refused, timeout, TLS, 5xx):
it may be down, so its gangs fail over after tolerationSeconds (ClusterLost)."""
REASON_CREDENTIALS_REFUSED: Final = "CredentialsRefused"
"""MemberCluster Ready=False: the member answers but refuses fleet's credentials (401 or 403 on
the probe, or on a node or pod watch past its grace): it is up and its copies most likely run,
so its gangs are not failed over on that ground (fleet.controller.members.health)."""
REASON_KUBECONFIG_INVALID: Final = "KubeconfigInvalid"
REASON_CLUSTER_ID_MISMATCH: Final = "ClusterIDMismatch"
"""MemberCluster Ready=False: its kubeconfig reaches (or was issued for) another cluster than
the one recorded in spec.id; fleet does not use it, so no job runs in the wrong cluster."""
REASON_DUPLICATE_CLUSTER: Final = "DuplicateCluster"
"""MemberCluster Ready=False: its cluster (spec.id, or the kube-system UID its kubeconfig
reaches) is already another MemberCluster, which the message names and which holds it (the one
created first, then the first by name: fleet.core.identity); fleet does not use this one, so
the cluster's capacity is counted once and a failover never lands where it left."""
REASON_KUBECONFIG_SECRET_MISSING: Final = "KubeconfigSecretMissing"
REASON_KUBECONFIG_SECRET_UNREADABLE: Final = "KubeconfigSecretUnreadable"
"""The Secret exists, or may, but the controller may not read it (403) or got an error."""
REASON_KUBECONFIG_SECRET_NOT_WATCHED: Final = "KubeconfigSecretNotWatched"
"""Ready=False: the Secret is in a namespace the controller does not watch (--secrets-namespaces,
the chart's controller.secretsNamespaces), so it may not list, watch or renew it there."""
CONDITION_KUBECONFIG_WATCHED: Final = "KubeconfigWatched"
"""MemberCluster: whether the controller's watch on its kubeconfig Secret's namespace works
(reason `Watching`, or `WatchFailed` with the API server's words, e.g. 403 when its Role there is
missing): an edited or renewed kubeconfig is taken in only while it does."""
REASON_WATCHING: Final = "Watching"
REASON_WATCH_FAILED: Final = "WatchFailed"
CONDITION_TOKEN_RENEWED: Final = "TokenRenewed"
"""MemberCluster (bound tokens only): whether the controller's last attempt to renew fleet's
token in the member succeeded; status.tokenRenewal carries the times."""
REASON_TOKEN_VALID: Final = "TokenValid"
"""TokenRenewed=True: a token this controller has not renewed yet (the one `fleet join` stored,
or one renewed before the controller started), not due yet."""
REASON_TOKEN_RENEWED: Final = "TokenRenewed"
"""TokenRenewed=True after a renewal; also the Normal Event when renewals recover."""
REASON_TOKEN_RENEWAL_FAILED: Final = "TokenRenewalFailed"
"""The Warning Event of a refused renewal (the condition's reason is the refusal's own)."""
REASON_SCHEDULED: Final = "Success"
"""Karmada's reason on Scheduled=True."""
REASON_NO_CLUSTER_FIT: Final = "NoClusterFit"
"""Karmada's reason on Scheduled=False when no cluster can hold the workload."""
REASON_WAITING_FOR_DOMAIN: Final = "WaitingForDomain"
"""fleet's reason on Scheduled=False while a gang with a Preferred gangTopology that fits only
spread waits for one domain (gangTopology.waitSeconds); the message says until when."""
#: Kube Queue's opt-out of reclaim: `"false"` on a PropagationPolicy (label or annotation) or
#: a Namespace (label) keeps its queued jobs from being reclaimed, at the cost of not borrowing
#: (they are dequeued only within their quota's min). Copied onto each QueueUnit.
RECLAIMABLE_LABEL: Final = "kube-queue.fleet.dev/reclaimable"
#: Scheduled=False while spec.suspension.scheduling holds the binding in the queue (the core's
#: `fleet.core.admission.reasons`, which decides it).
REASON_QUEUED: Final = _REASON_QUEUED
REASON_FULLY_APPLIED: Final = "FullyAppliedSuccess"
REASON_APPLY_FAILED: Final = "FullyAppliedFailed"
REASON_HEALTHY: Final = "Healthy"
REASON_UNHEALTHY: Final = "Unhealthy"
#: Healthy=False on the binding, Scheduled=False on the fleet job, a Warning Event, and the
#: failover reason: the gang has not started in its member within its gang schedule timeout
#: (its pods refused by the member's scheduler; `fleet.core.failover`).
REASON_GANG_UNSCHEDULABLE: Final = "GangUnschedulable"
REASON_CLUSTER_LOST: Final = "ClusterLost"
REASON_FAILED_OVER: Final = "FailedOver"

# --- fleet's identity in a member (`fleet join`) -----------------------------------------------
JOINED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
"""Label on the objects `fleet join` makes (value JOINED_BY), in the member and on the fleet."""
JOINED_BY: Final = "fleet-join"
TOKEN_TYPE_ANNOTATION: Final = "fleet.dev/token-type"
"""On a member kubeconfig Secret `fleet join` wrote: `bound` (a TokenRequest token with an
expiry, renewed by the controller) or `secret` (a long-lived service-account-token Secret)."""
TOKEN_TYPE_BOUND: Final = "bound"
TOKEN_TYPE_SECRET: Final = "secret"
SERVICE_ACCOUNT_ANNOTATION: Final = "fleet.dev/service-account"
"""On a member kubeconfig Secret: `<namespace>/<name>` of fleet's ServiceAccount in the member,
whose tokens the controller requests when it renews, and which `fleet unjoin` removes."""
RENEWER_SECRET_ANNOTATION: Final = "fleet.dev/renewer-secret"
"""On a member kubeconfig Secret with a bound token: the name of the Secret, in the same
namespace, holding the token of the renewer (fleet.api.access.RENEWER_SERVICE_ACCOUNT), which
the controller renews the dispatch token with. Absent on a Secret of a join before the renewer
(the token then renews itself, as it did) and with `--token-type secret`."""
RENEWER_TOKEN_KEY: Final = "token"
TOKEN_SECONDS_ANNOTATION: Final = "fleet.dev/token-expiration-seconds"
"""On a member kubeconfig Secret with a bound token: the lifetime `fleet join` chose
(--token-expiration), which each renewal asks for again: the member's token policy refuses any
longer one (fleet.api.guard.token_policy), so it is not derived from clocks that may differ."""
"""The key of the renewer's token in that Secret."""
TOKEN_ISSUED_ANNOTATION: Final = "fleet.dev/token-issued-at"
TOKEN_EXPIRES_ANNOTATION: Final = "fleet.dev/token-expires-at"
"""When the bound token in the Secret was issued and expires (RFC 3339): the renewal is timed
from these (fleet.core.tokens.renew_at)."""
FLEET_ID_LABEL: Final = "fleet.dev/fleet-id"
"""On the objects `fleet join` makes in a member (identity, RBAC, admission policy): the id of
the fleet that made them, so two fleets joining one member never share or delete each other's."""
CLUSTER_ID_ANNOTATION: Final = "fleet.dev/cluster-id"
"""On a member kubeconfig Secret `fleet join` wrote: the member's cluster id (its kube-system
namespace's UID, as Karmada's Cluster spec.id), the cluster that Secret's token belongs to."""
ADMISSION_POLICY_ANNOTATION: Final = "fleet.dev/admission-policy"
"""On a member kubeconfig Secret: the ValidatingAdmissionPolicy `fleet join` installed in the
member to narrow the token's rights (fleet.api.guard), or NO_ADMISSION_POLICY when the member
serves none (Kubernetes < 1.30): the MemberCluster's Guarded condition says which."""
NO_ADMISSION_POLICY: Final = "none"
SCHEDULING_GROUP_POLICY_ANNOTATION: Final = "fleet.dev/scheduling-group-policy"
"""On a member kubeconfig Secret: the MutatingAdmissionPolicy `fleet join` installed in a
native-gang member (fleet.api.schedulinggroup); absent when it installed none. `fleet unjoin`
names it (and its binding) in what it leaves in a member it cannot reach."""
VIEWER_ROLE_ANNOTATION: Final = "fleet.dev/viewer-cluster-role"
"""On a member kubeconfig Secret `fleet join` wrote on a guarded member: the ClusterRole of the
people's read-only identity there (fleet.api.access.viewer_rules), which the controller binds to
that identity's ServiceAccount (`fleet-viewer` in the same member namespace) by a RoleBinding in
each namespace it dispatches to. Absent: no viewer (an older join), or one join bound
cluster-wide (a member without the guard)."""
VIEWER_ANNOTATION: Final = "fleet.dev/viewer"
"""Label `"true"` on the fleet-side Secret holding a member's viewer kubeconfig (the one
`kubectl amc` and `fleet dashboard` read), and on the RoleBindings of the viewer in members."""
CONDITION_GUARDED: Final = "Guarded"
"""MemberCluster: fleet's identity there is narrowed by its admission policy (fleet.api.guard);
False on a member that serves no ValidatingAdmissionPolicy, where RBAC alone applies."""
REASON_GUARD_MISSING: Final = "GuardMissing"
"""Guarded=False (and Ready=False: nothing new is placed there), and the Warning Event: the
controller's periodic probe with fleet's token (fleet.api.guardprobe) was admitted, so the guard
`fleet join` installed is gone from the member or no longer refuses (its policy or binding
deleted, or the binding made to warn or audit only). `fleet join NAME` again installs it."""
REASON_GUARD_IN_FORCE: Final = "AdmissionPolicy"
"""Guarded=True; also the Normal Event when the probe sees the guard in force again."""
ALLOW_OVERWRITE_LABEL: Final = "fleet.dev/allow-overwrite"
"""Label `"true"` on a namespace in a member, set by its owners: fleet may take over objects of
the same name there (a job copy, a Secret, ConfigMap, ServiceAccount or PVC it did not create)
under `conflictResolution: Overwrite`. Without it the member's admission policy
(fleet.api.guard) refuses fleet any change to an object it did not create, and the job is not
sent there."""
OPEN_TO_LABEL_PREFIX: Final = "open-to.fleet.dev/"
"""A member namespace labelled `open-to.fleet.dev/<fleet id>: "true"` is opened to that fleet by
the member's admins (`fleet join --namespaces`, or kubectl): its dispatch token may create and
update its marked objects there. Elsewhere it may write only in namespaces it created (carrying
its managed-by mark). One key per fleet, so a namespace may be opened to several
(fleet.api.guard, docs/security.md)."""
SERVICE_ACCOUNTS_ANNOTATION: Final = "fleet.dev/service-accounts"
"""Annotation on a member namespace: the ServiceAccounts (comma-separated names) the pods of
fleet's workloads there may run as, besides `default`. Written by the namespace's admins in a
namespace they opened; by fleet, in a namespace it created, when it propagates a ServiceAccount
there (propagateDeps). The member's admission policy refuses any other (fleet.api.guard)."""
POD_SECURITY_PREFIX: Final = "pod-security.kubernetes.io/"
"""Kubernetes' PodSecurity admission labels on a namespace: `<prefix>enforce|warn|audit`."""
REASON_NAMESPACE_NOT_OPEN: Final = _NAMESPACE_NOT_OPEN
"""A member refused a job because its namespace there is neither fleet's nor opened to this
fleet (the admission policy's refusal): the gang leaves the member, as for a DependencyConflict;
the binding (FullyApplied, pending reasons) and a Warning Event say how to open it."""
UNJOINING_TAINT_KEY: Final = "fleet.dev/unjoining"
"""NoExecute taint `fleet unjoin --move` puts on a MemberCluster: the controller moves every
gang off it (failover reason MemberUnjoined, not counted against maxFailovers)."""
UNJOINING_LEAVE: Final = "leave"
"""The value of that taint from `fleet unjoin --leave`: the controller releases every gang there
instead (phase Released: the copy runs on, unmanaged, and none is made elsewhere)."""
REASON_MEMBER_UNJOINED: Final = "MemberUnjoined"

# -- the ledger: copies outside a job's target (fleet.core.ledger) ------------------------------

REASON_FENCING: Final = "Fencing"
"""Placement skips a member that (re)connected until the collector has deleted every object of
fleet's there that no binding wants (a pending reason, not a MemberCluster condition)."""
CONDITION_OLD_COPIES_REMOVED: Final = "OldCopiesRemoved"
"""GangBinding: True when no copy of the job is left outside its target; False while one may
still run elsewhere, with the cluster, why and since when (reasons below)."""
REASON_COPY_UNFENCED: Final = ledger.UNFENCED
"""OldCopiesRemoved=False: a copy is in a cluster fleet cannot reach (or that left the fleet);
it is deleted the moment that cluster answers again, under any MemberCluster name."""
REASON_COPY_OVERLAP: Final = ledger.OVERLAP
"""OldCopiesRemoved=False: the old copy runs on by its purge mode (Gracefully until the new one
runs or the grace period ends; Never until a person removes it)."""
REASON_COPY_DELETING: Final = ledger.DELETING
"""OldCopiesRemoved=False: the old copy is deleted, its pods are not gone yet."""
REASON_OLD_COPIES_GONE: Final = ledger.NONE_LEFT
"""OldCopiesRemoved=True."""
