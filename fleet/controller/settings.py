"""The controller's settings (command-line flags and FLEET_* environment variables)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from fleet.api.access import FLEET_SECRETS_NAMESPACE
from fleet.core.admission.settings import AdmissionSettings
from fleet.core.snapshot import DEFAULT_RESERVATION_SECONDS


@dataclasses.dataclass(frozen=True)
class Settings:
    #: Placement estimator when a policy does not set gangEstimator.
    estimator: Literal["nodes", "sum"] = "nodes"
    #: Which fitting member the `nodes` estimator prefers when a policy sets no gangScoring:
    #: `bestFit`, or `fragmentation` (least added fragmentation for the recent arrivals' mix).
    scoring: Literal["bestFit", "fragmentation"] = "bestFit"
    #: How long a placement holds its capacity in the fleet's snapshot before the member shows
    #: the pods bound (in-flight reservation).
    reservation_seconds: float = DEFAULT_RESERVATION_SECONDS
    #: Concurrent reconciles.
    workers: int = 4
    #: Each member client's rate limit, as client-go's QPS and burst: up to `member_burst`
    #: requests at once, then `member_qps` per second. 0 QPS: no limit.
    member_qps: float = 0.0
    member_burst: int = 0
    #: How often each member is probed.
    probe_interval: float = 3.0
    #: How often MemberCluster status is refreshed (also on every health change).
    status_interval: float = 10.0
    #: How often the guard `fleet join` installed in each member is asked, with fleet's token,
    #: whether it still refuses (fleet.api.guardprobe): the longest a deleted guard goes
    #: unnoticed (Guarded=False, GuardMissing).
    guard_check_interval: float = 60.0
    #: How often every bound workload is reconciled again (0 disables): the longest a change to
    #: a propagated Secret or ConfigMap on the fleet takes to reach the members' copies.
    resync_interval: float = 30.0
    #: How often the collector looks at every member for copies no binding wants (their fleet
    #: object gone, or the job bound elsewhere); 0: only when a member (re)connects.
    sweep_interval: float = 300.0
    #: This fleet's id: the value of the managed-by label on everything it creates in members,
    #: so two fleets can share a member. Empty: `fleet-` and the start of the fleet API
    #: server's kube-system namespace UID.
    fleet_id: str = ""
    #: Namespace for the controller's Lease (high availability).
    lease_namespace: str = "kube-system"
    lease_name: str = "fleet-controller"
    #: The namespaces that hold member kubeconfig Secrets: the only ones whose Secrets the
    #: controller lists, watches and renews (the chart's namespace and its
    #: controller.secretsNamespaces, where its Roles are). A MemberCluster naming a Secret
    #: elsewhere is NotReady (KubeconfigSecretNotWatched).
    secrets_namespaces: tuple[str, ...] = (FLEET_SECRETS_NAMESPACE,)
    #: Lease duration: a standby takes over at most this long after the leader stops renewing.
    lease_seconds: float = 15.0
    #: A leader that has not renewed the lease for this long stops leading at once, its
    #: reconciles in flight cancelled (client-go's RenewDeadline); shorter than the lease, so
    #: it has stopped before a standby can take over. 0: two thirds of `lease_seconds` (10 s of
    #: 15 s, client-go's defaults).
    renew_deadline: float = 0.0
    #: Renew a joined member's bound token this many seconds before it expires; 0: at 80% of
    #: its lifetime (fleet.core.tokens). TokenRequest issues tokens of 10 minutes at least, so a
    #: test that wants to watch renewals sets this close to the lifetime.
    token_renew_before: float = 0.0
    #: Port for /metrics and /healthz; 0 disables.
    metrics_port: int = 0
    #: Kube Queue: how long a job the queue released may stay unplaced (no member can hold the
    #: gang) before its quota is released and it backs off (phase TimeoutBackoff).
    queue_placement_timeout: float = 300.0
    #: Kube Queue: the first backoff after a placement timeout; each later one doubles, up to
    #: `queue_backoff_limit`.
    queue_backoff_seconds: float = 60.0
    queue_backoff_limit: float = 900.0
    #: Kube Queue: a job waiting within its quota's min evicts gangs that borrow (reclaim).
    queue_reclaim: bool = True
    #: Kube Queue: a job evicts lower-priority gangs of its own queue (off by default).
    queue_preemption: bool = False
    #: Kube Queue: a job that holds its quota but finds no member with the nodes may reclaim
    #: node capacity too (on by default since the controller holds the freed room for it:
    #: docs/queue.md, "Simulated: reclaim", measures it on every dataset).
    queue_reclaim_unplaced: bool = True
    #: Kube Queue: seconds of work one reclaim eviction may destroy per GPU the job that
    #: reclaims asks (`AdmissionSettings.reclaim_loss_per_gpu`; inf: no limit).
    queue_reclaim_loss_per_gpu: float = AdmissionSettings.reclaim_loss_per_gpu
    #: Kube Queue: seconds a dequeued job no member can place waits before it may make a node
    #: claim (`AdmissionSettings.reclaim_delay`): room that jobs about to end free comes first.
    queue_reclaim_delay: float = AdmissionSettings.reclaim_delay
    #: Kube Queue: an eviction only when it is worth its cost (`AdmissionSettings.reclaim_worth`,
    #: off by default as in the core: docs/queue.md, "Worth it"); with it, gangs that all end by
    #: their declared limits (`activeDeadlineSeconds`...) within 5 minutes are never evicted.
    queue_reclaim_worth: bool = AdmissionSettings.reclaim_worth
    #: Seconds between recording a reclaim or preemption on the victim's binding and deleting
    #: its member copy (0: at once). 30 s is Kubernetes' default terminationGracePeriodSeconds:
    #: a job that checkpoints on SIGTERM already fits in it, and it is a tenth of the placement
    #: timeout, so the gang that reclaimed is placed long before its dequeue times out.
    queue_reclaim_grace: float = 30.0
