"""What fleet may do, as data: the RBAC rules of its identity in a member and on the fleet.

One place for every permission. `fleet join` creates the member-side ClusterRole from
`member_rules()`, the Helm chart's `templates/rbac.yaml` (the controller on the fleet) and
`templates/member-rbac.yaml` (the same member identity, for GitOps) are generated from here by
`python -m fleet.api.rbacgen`, and docs/security.md lists the same rules with why each verb is
needed (a test keeps all three equal to this module).

The rules were found by auditing what the controller sends: the member connection's informers
and probe (controller/members), the member copy and its dependencies (controller/member_copy),
Reservations (controller/reserving). People (`kubectl amc`'s get, describe and logs, and `fleet
dashboard`) reach the members through a second, read-only identity (`viewer_rules`), whose
kubeconfig the fleet keeps in a Secret of its own: the dispatch identity is the controller's
alone. Discovery (`/api`, `/apis`) and
`/version` need no rule: Kubernetes grants them to every authenticated user.

The job kinds come from `job_kinds()`, the one reader of the kinds fleet dispatches, so a new
kind is permitted where it is dispatched and nowhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from fleet.api.constants import DEPENDENCY_KINDS
from fleet.core.kinds import ADAPTERS

__all__ = [
    "DEFAULT_MEMBER_NAMESPACE",
    "FLEET_SECRETS_NAMESPACE",
    "RBAC_GROUP",
    "RENEWER_ROLE",
    "RENEWER_SERVICE_ACCOUNT",
    "SERVICE_ACCOUNT",
    "VIEWER_SECRETS_ROLE",
    "VIEWER_SERVICE_ACCOUNT",
    "Rule",
    "as_policy_rules",
    "dashboard_namespaced_rules",
    "dashboard_rules",
    "fleet_namespaced_rules",
    "fleet_rules",
    "fleet_secrets_rules",
    "group_of",
    "job_kinds",
    "member_cluster_role",
    "member_rules",
    "plural",
    "renewer_rules",
    "viewer_cluster_role",
    "viewer_cluster_rules",
    "viewer_nodes_role",
    "viewer_rules",
    "viewer_secret_name",
    "viewer_secrets_rules",
]

#: The namespace `fleet join` makes in a member for fleet's identity (the dispatch and renewer
#: ServiceAccounts, the renewer's Role and token Secret, a long-lived dispatch token Secret when
#: asked for).
DEFAULT_MEMBER_NAMESPACE: Final = "fleet-member"
#: fleet's dispatch ServiceAccount in that namespace: the identity the controller acts with. It
#: may request no token at all (no Role gives it `serviceaccounts/token`).
SERVICE_ACCOUNT: Final = "fleet"
#: The people's read-only ServiceAccount in that namespace (`kubectl amc`, `fleet dashboard`).
VIEWER_SERVICE_ACCOUNT: Final = "fleet-viewer"
#: The Role on the fleet, in each namespace holding member kubeconfigs, that lets `get` exactly
#: the viewer kubeconfig Secrets there (resourceNames, kept by `fleet join` and `fleet unjoin`):
#: bind `kubectl amc` users and the dashboard to it, never to the dispatch or renewer Secrets.
VIEWER_SECRETS_ROLE: Final = "fleet-viewer-kubeconfigs"
RBAC_GROUP: Final = "rbac.authorization.k8s.io"
#: The renewer: a second ServiceAccount whose only right is to request tokens of the dispatch
#: one (`renewer_rules`). Its token is held by the controller alone, in a fleet Secret of its own.
RENEWER_SERVICE_ACCOUNT: Final = "fleet-renewer"
#: The namespaced Role (and RoleBinding) giving the renewer that right.
RENEWER_ROLE: Final = "fleet-renewer"
#: Where `fleet join` keeps member kubeconfig Secrets on the fleet (the chart's namespace).
FLEET_SECRETS_NAMESPACE: Final = "fleet-system"


@dataclasses.dataclass(frozen=True)
class Rule:
    """One RBAC rule and, for each verb, why fleet needs it."""

    group: str
    resources: tuple[str, ...]
    why: Mapping[str, str]
    resource_names: tuple[str, ...] = ()
    #: What the rule as a whole is for (a comment in the chart).
    about: str = ""

    @property
    def verbs(self) -> tuple[str, ...]:
        return tuple(self.why)

    def as_policy_rule(self) -> dict[str, Any]:
        rule: dict[str, Any] = {
            "apiGroups": [self.group],
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        return rule


def as_policy_rules(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    return [r.as_policy_rule() for r in rules]


def group_of(api_version: str) -> str:
    """`kubeflow.org/v1` -> `kubeflow.org`; `v1` -> `` (the core group)."""
    return api_version.rpartition("/")[0]


def plural(kind: str) -> str:
    """The resource name of a kind fleet writes. Every kind fleet knows pluralises by an `s`
    (pytorchjobs, jobs, configmaps, reservations); a kind that does not would be caught by the
    sandbox tests, which run the controller with exactly these rules."""
    return kind.lower() + "s"


def job_kinds() -> tuple[tuple[str, str], ...]:
    """Every (apiVersion, kind) fleet dispatches: the one place the rules read the kinds from."""
    return tuple(adapter.type for adapter in ADAPTERS)


def _job_kind_resources() -> dict[str, tuple[str, ...]]:
    by_group: dict[str, list[str]] = {}
    for api_version, kind in job_kinds():
        names = by_group.setdefault(group_of(api_version), [])
        if plural(kind) not in names:
            names.append(plural(kind))
    return {group: tuple(names) for group, names in by_group.items()}


def kind_access_rules(side: Literal["member", "fleet"]) -> tuple[Rule, ...]:
    """The rules for the objects the kinds' adapters say fleet touches besides the kinds
    themselves (`KindAdapter.accesses`: a TrainJob's runtimes, a JobSet's PodGroup), merged
    per group and resources: adding a kind adds its rules here with no edit."""
    merged: dict[tuple[str, tuple[str, ...]], tuple[dict[str, str], str]] = {}
    for adapter in ADAPTERS:
        member, fleet = adapter.accesses()
        for access in member if side == "member" else fleet:
            why, _ = merged.setdefault((access.group, access.resources), ({}, access.about))
            for verb, reason in access.why.items():
                why.setdefault(verb, reason)
    return tuple(
        Rule(group, resources, why, about=about)
        for (group, resources), (why, about) in sorted(merged.items())
    )


#: Koordinator's Reservation, which fleet makes for a gang on a member that enables them.
RESERVATION_GROUP: Final = "scheduling.koordinator.sh"


def member_rules(
    namespace: str = DEFAULT_MEMBER_NAMESPACE, *, guarded: bool = True
) -> tuple[Rule, ...]:
    """The ClusterRole of fleet's dispatch identity in the member namespace `namespace`: exactly
    what the controller asks of a member (people read through the viewer, `viewer_rules`). On a
    `guarded` member it may bind the viewer's ClusterRole in a namespace it dispatches to; on
    one without the guard (no admission policy could narrow what it binds, and to whom), not:
    join binds the viewer cluster-wide there instead."""
    jobs = tuple(
        Rule(
            group,
            resources,
            {
                "get": "reads a copy before it is overwritten or deleted, to tell fleet's own copy "
                "(by its fleet-UID label) from an object fleet did not create",
                "list": "the controller's job informer lists fleet's copies (by the managed-by "
                "label) to mirror their status and find orphans",
                "watch": "keeps that informer current, so status and failures are seen at once",
                "create": "dispatches the job: the member copy",
                "patch": "updates the copy by server-side apply when the fleet object changes",
                "delete": "removes the copy: the job was deleted, failed over, or orphaned",
            },
            about="The job kinds fleet dispatches (fleet.core.kinds).",
        )
        for group, resources in sorted(_job_kind_resources().items())
    )
    dependencies = Rule(
        "",
        tuple(plural(kind) for kind in DEPENDENCY_KINDS),
        {
            "create": "propagateDeps: a dependency is created in the member (a 409 says the "
            "member has one of that name, without reading it)",
            "patch": "propagateDeps: a dependency is kept in step with the fleet by a JSON patch "
            "whose first op tests fleet's managed-by label (so an object fleet did not write is "
            "never changed), under conflictResolution Overwrite taken over by a merge patch, and "
            "let go by `fleet unjoin --leave` (the label removed, behind the same test)",
            "delete": "propagateDeps: a dependency fleet created is deleted (by its UID) once no "
            "job of fleet's in the member uses it",
        },
        about="What propagateDeps copies with a job (fleet.api.constants.DEPENDENCY_KINDS). "
        "Write only: fleet never reads them in a member.",
    )
    namespaces = (
        Rule(
            "",
            ("namespaces",),
            {
                "get": "the member's cluster id: the kube-system namespace's UID, read on every "
                "connection (a kubeconfig that reaches another cluster is refused); "
                "propagateDeps reads a namespace it created before listing a ServiceAccount on it",
                "create": "a job's namespace is created in the member on its first dispatch there",
                "patch": "propagateDeps: a ServiceAccount copied into a namespace fleet created is "
                "listed in its fleet.dev/service-accounts annotation, so its pods may run as it "
                "(only fleet's own namespaces, never their labels: the admission policy)",
            },
            about="Namespaces: created when a job's is missing; only fleet's own annotated, "
            "never relabelled or deleted. Not listed: people list them through the viewer.",
        ),
    )
    viewer = (
        ()
        if not guarded
        else (
            Rule(
                RBAC_GROUP,
                ("rolebindings",),
                {
                    "create": "the people's identity may read a namespace once fleet dispatched "
                    "there: a RoleBinding of its ClusterRole to its ServiceAccount, the only "
                    "RoleBinding the guard admits (fleet.api.guard)",
                },
                about="The viewer's RoleBindings, one per namespace fleet dispatches to.",
            ),
            Rule(
                RBAC_GROUP,
                ("clusterroles",),
                {
                    "bind": "RBAC refuses a RoleBinding of a ClusterRole whose rights its "
                    "creator lacks (pod logs) unless it may bind that one ClusterRole",
                },
                resource_names=(viewer_cluster_role(namespace),),
                about="Binding the viewer's ClusterRole, and no other.",
            ),
        )
    )
    return (
        Rule(
            "",
            ("nodes",),
            {
                "list": "the node informer: what each node can hold (placement is node by node)",
                "watch": "keeps the node snapshot current (a node added, cordoned, removed)",
            },
            about="Nodes, read: the member's capacity.",
        ),
        Rule(
            "",
            ("pods",),
            {
                "list": "the pod informer (what is allocated where, whether a gang's pods are "
                "bound): node-level placement counts every pod's requests on its node",
                "watch": "keeps the pod snapshot current",
            },
            about="Pods, read: what is allocated where (docs/security.md: what this exposes).",
        ),
        *namespaces,
        *jobs,
        dependencies,
        *kind_access_rules("member"),
        Rule(
            RESERVATION_GROUP,
            ("reservations",),
            {
                "create": "reserves a gang's capacity before dispatch (spec.reservation)",
                "list": "finds the Reservations made for a job (by its fleet-UID label) to judge "
                "them and to delete them",
                "delete": "releases them once the job runs, is deleted or fails over",
            },
            about="Koordinator Reservations (MemberCluster spec.reservation).",
        ),
        *viewer,
    )


def viewer_rules() -> tuple[Rule, ...]:
    """The ClusterRole of the people's identity (`kubectl amc`, `fleet dashboard`) in a member,
    bound by a RoleBinding in each namespace fleet dispatched to there (the controller makes it
    on its first dispatch into that namespace), so it reads there and nowhere else. Read only:
    no Secret, no ConfigMap, no write."""
    jobs = tuple(
        Rule(
            group,
            resources,
            {
                "get": "`kubectl amc get NAME`, `describe` and `logs` read fleet's copy",
                "list": "`kubectl amc get -M` lists the copies",
                "watch": "`kubectl amc get --watch`; the dashboard's informers",
            },
            about="The job kinds fleet dispatches (fleet.core.kinds), read.",
        )
        for group, resources in sorted(_job_kind_resources().items())
    )
    return (
        *jobs,
        Rule(
            "",
            ("pods",),
            {
                "get": "`kubectl amc logs --replica` reads the pod it prints",
                "list": "`kubectl amc get pod -M`, `describe` and `logs` list a job's pods",
                "watch": "the dashboard's pod informer (a job's pods on its page)",
            },
            about="Pods, read.",
        ),
        Rule(
            "",
            ("pods/log",),
            {"get": "`kubectl amc logs` and the dashboard stream a replica's log"},
            about="Pod logs.",
        ),
        Rule(
            "",
            ("events",),
            {"list": "`kubectl amc describe` shows the member copy's events"},
            about="Events, read, for `kubectl amc describe`.",
        ),
        Rule(
            "",
            ("namespaces",),
            {"get": "`kubectl amc get namespace NAME -M`: whether the member has it"},
            about="The namespace itself (a RoleBinding in it grants `get` on it alone).",
        ),
    )


def viewer_cluster_rules() -> tuple[Rule, ...]:
    """The cluster-wide reads of the people's identity (a ClusterRoleBinding `fleet join`
    makes): the member's nodes, which the dashboard draws its capacity from, and Koordinator's
    Reservations (cluster-scoped), which its Reservations view shows. Neither holds a workload's
    spec, a Secret or a log."""
    return (
        Rule(
            "",
            ("nodes",),
            {
                "list": "the dashboard's node informer (each node's capacity); `kubectl amc get "
                "nodes -M`",
                "watch": "keeps the dashboard's node grid live",
            },
            about="Nodes, read: the member's capacity.",
        ),
        Rule(
            RESERVATION_GROUP,
            ("reservations",),
            {
                "list": "`fleet dashboard`'s Reservations view lists them",
                "watch": "and keeps them live with an informer",
            },
            about="Koordinator Reservations, read (cluster-scoped).",
        ),
    )


def renewer_rules(service_account: str = SERVICE_ACCOUNT) -> tuple[Rule, ...]:
    """The namespaced Role of the renewer (RENEWER_SERVICE_ACCOUNT), and nothing else: a
    TokenRequest for the dispatch ServiceAccount `service_account` only (resourceNames). The
    dispatch identity itself gets no such Role, so whoever holds its token cannot extend it; the
    lifetime of what the renewer asks for is capped by join's token policy
    (fleet.api.guard.token_policy)."""
    return (
        Rule(
            "",
            ("serviceaccounts/token",),
            {
                "create": "the controller renews the dispatch identity's bound token before it "
                "expires, authenticated as the renewer (TokenRequest), whatever state the "
                "dispatch token is in (expired while the controller was down)",
            },
            resource_names=(service_account,),
            about="Tokens of fleet's dispatch ServiceAccount, only.",
        ),
    )


def member_cluster_role(namespace: str = DEFAULT_MEMBER_NAMESPACE) -> str:
    """The name of the ClusterRole (and ClusterRoleBinding) of the identity in `namespace`: one
    per identity, so two fleets joining a member in two namespaces do not share theirs."""
    return f"fleet:{namespace}"


def viewer_cluster_role(namespace: str = DEFAULT_MEMBER_NAMESPACE) -> str:
    """The ClusterRole of the people's identity in `namespace` (`viewer_rules`), and the name of
    each RoleBinding of it the controller makes in a namespace it dispatches to."""
    return f"fleet:{namespace}:viewer"


def viewer_nodes_role(namespace: str = DEFAULT_MEMBER_NAMESPACE) -> str:
    """The ClusterRole (and ClusterRoleBinding) of the viewer's cluster-wide reads
    (`viewer_cluster_rules`)."""
    return f"fleet:{namespace}:viewer-cluster"


# -- the fleet side -----------------------------------------------------------------------------


def fleet_rules() -> tuple[Rule, ...]:
    """The ClusterRole of the controller on the fleet (the Helm chart's): what kopf's event
    handlers, the controller's informers and its writes (controller/**) ask of the fleet."""
    jobs = _job_kind_resources()
    watch = "kopf's event handler watches them"
    return (
        *(
            Rule(
                group,
                resources,
                {
                    "get": "reads a job that is not in the informer's cache yet",
                    "list": "kopf lists the jobs to claim",
                    "watch": watch,
                    "patch": "puts fleet's finalizer and policy annotation on a claimed job",
                },
                about="The jobs users submit: read, claimed (finalizer).",
            )
            for group, resources in sorted(jobs.items())
        ),
        *(
            Rule(
                group,
                tuple(f"{r}/status" for r in resources),
                {"patch": "mirrors the member copy's status onto the fleet job"},
                about="Their status: mirrored from the member copy.",
            )
            for group, resources in sorted(jobs.items())
        ),
        *kind_access_rules("fleet"),
        Rule(
            "policy.one.alibabacloud.com",
            ("propagationpolicies", "clusterpropagationpolicies"),
            {
                "get": "reads the policy that claimed a job",
                "list": "kopf lists the policies",
                "watch": "a policy edit re-places what it claims",
            },
            about="The policies, read.",
        ),
        Rule(
            "policy.one.alibabacloud.com",
            ("propagationpolicies/status", "clusterpropagationpolicies/status"),
            {
                "patch": "condition Recognized: a customSchedulingType fleet does not know "
                "(`gang`) is said on the policy",
            },
            about="Their status: whether fleet recognizes the policy.",
        ),
        Rule(
            "fleet.dev",
            ("gangbindings",),
            {
                "get": "reads a binding not in the cache yet",
                "list": "the bindings are listed at start (and by kopf)",
                "watch": watch,
                "create": "a GangBinding per claimed job",
                "patch": "a binding's spec (placement, the policy's terms)",
                "delete": "a binding whose job is gone",
            },
            about="GangBindings: fleet's record of each gang.",
        ),
        Rule(
            "fleet.dev",
            ("memberclusters",),
            {
                "get": "reads a MemberCluster before its status is written",
                "list": "kopf lists the members",
                "watch": watch,
            },
            about="MemberClusters, read: who joined (fleet join writes them).",
        ),
        Rule(
            "fleet.dev",
            ("gangbindings/status", "memberclusters/status"),
            {"patch": "a binding's lifecycle (placements, failovers); a member's health"},
            about="Their status.",
        ),
        Rule(
            "scheduling.sigs.k8s.io",
            ("elasticquotatrees",),
            {
                "get": "reads the quota tree",
                "list": "kopf lists the trees",
                "watch": "a tree edit re-admits queued jobs",
            },
            about="Kube Queue: the ElasticQuotaTree, read.",
        ),
        Rule(
            "scheduling.sigs.k8s.io",
            ("elasticquotatrees/status",),
            {"patch": "the tree's per-quota usage"},
            about="Its status (usage).",
        ),
        Rule(
            "scheduling.x-k8s.io",
            ("queues",),
            {
                "get": "reads a Queue",
                "list": "kopf lists the Queues",
                "watch": watch,
                "create": "one Queue per quota node",
                "delete": "a Queue whose quota node is gone",
            },
            about="Kube Queue: one Queue per quota node.",
        ),
        Rule(
            "scheduling.x-k8s.io",
            ("queueunits",),
            {
                "get": "reads a QueueUnit after a conflict",
                "list": "kopf lists the QueueUnits",
                "watch": watch,
                "create": "one QueueUnit per queued job",
                "patch": "moves a QueueUnit to its Queue",
                "delete": "a QueueUnit whose job is gone",
            },
            about="Kube Queue: one QueueUnit per queued job.",
        ),
        Rule(
            "scheduling.x-k8s.io",
            ("queues/status", "queueunits/status"),
            {"patch": "queue positions and phases"},
            about="Their status.",
        ),
        Rule(
            "scheduling.k8s.io",
            ("priorityclasses",),
            {
                "get": "reads the PriorityClass a job names",
                "list": "kopf lists them",
                "watch": "keeps queue order current",
            },
            about="PriorityClasses, read (queue order).",
        ),
        Rule(
            "",
            ("namespaces",),
            {
                "list": "kopf lists the namespaces: a namespace's reclaim opt-out (its label) "
                "is followed by the queue",
                "watch": "a namespace relabelled changes its running gangs' reclaimability at once",
                "create": "the kube-queue namespace, for the Queues",
            },
            about="Namespaces: watched for the queue's reclaim opt-out; kube-queue created.",
        ),
        Rule(
            "",
            tuple(
                dict.fromkeys(
                    ["secrets", *(plural(kind) for kind in DEPENDENCY_KINDS), "namespaces"]
                )
            ),
            {
                "get": "what propagateDeps copies, read one by one in the job's namespace; the "
                "kube-system namespace (the fleet id) and kube-queue (whether it exists)",
            },
            about="The dependencies propagateDeps copies, and namespaces: get only. Listing "
            "and watching Secrets is granted only where member kubeconfigs are kept (a Role).",
        ),
        Rule(
            "",
            ("events",),
            {"create": "records what fleet did (ScheduleBindingSucceed, FailedOver, ...)"},
            about="Events.",
        ),
        Rule(
            "apiextensions.k8s.io",
            ("customresourcedefinitions",),
            {
                "get": "kopf checks the resources it serves",
                "list": "kopf's discovery",
                "watch": "kopf notices a CRD installed later",
            },
            about="kopf discovers resources.",
        ),
    )


def fleet_namespaced_rules() -> tuple[Rule, ...]:
    """The Role of the controller in its own namespace (the chart's release namespace, where
    `fleet join` keeps the member kubeconfig Secrets)."""
    return (
        Rule(
            "coordination.k8s.io",
            ("leases",),
            {
                "get": "reads the leader Lease",
                "create": "the first replica creates it",
                "update": "the leader renews it; a standby takes it over",
            },
            about="Leader election.",
        ),
        *fleet_secrets_rules(),
    )


def fleet_secrets_rules() -> tuple[Rule, ...]:
    """The controller's rights on the Secrets of a namespace that holds member kubeconfigs: the
    chart's namespace, and each of `controller.secretsNamespaces` (a Role there), which are
    also the namespaces the controller watches (its --secrets-namespaces)."""
    return (
        Rule(
            "",
            ("secrets",),
            {
                "get": "reads the kubeconfig Secret a MemberCluster names",
                "list": "the informer on this namespace's Secrets (one per namespace)",
                "watch": "an edited, rotated or renewed kubeconfig Secret is taken in at once",
                "patch": "writes a member's renewed token into its kubeconfig Secret, on the "
                "condition that it did not change since it was read",
            },
            about="Member kubeconfigs: the Secrets `fleet join` keeps here, watched and renewed.",
        ),
    )


# -- the dashboard on the fleet (the Helm chart's, dashboard.enabled) ---------------------------


def dashboard_rules() -> tuple[Rule, ...]:
    """The ClusterRole of the in-cluster `fleet dashboard`: read only, exactly what its watches
    (fleet.dashboard.state.FLEET_KINDS) and a job's log (`kubectl amc logs`) read on the fleet,
    and the SubjectAccessReviews that authorize each user behind a proxy. What it does in a
    member is what the member's viewer kubeconfig may do there (`viewer_rules`)."""

    def informer(get: str = "") -> dict[str, str]:
        return {
            **({"get": get} if get else {}),
            "list": "the dashboard's informer lists them",
            "watch": "keeps the page live (server-sent events, no polling)",
        }

    return (
        Rule(
            "fleet.dev",
            ("memberclusters", "gangbindings"),
            informer(
                "a job's log: `kubectl amc logs` reads its binding, and the member's "
                "MemberCluster to reach it"
            ),
            about="The members and the gang bindings, read.",
        ),
        Rule(
            "scheduling.sigs.k8s.io",
            ("elasticquotatrees",),
            informer(),
            about="Kube Queue's quota tree, read.",
        ),
        Rule(
            "scheduling.x-k8s.io",
            ("queues", "queueunits"),
            informer(),
            about="Kube Queue's queues and units, read.",
        ),
        *(
            Rule(
                group,
                resources,
                {
                    "get": "a job's log is found through its kind and object on the fleet, as "
                    "`kubectl amc logs KIND/NAME` finds it",
                },
                about="The job kinds fleet dispatches (fleet.core.kinds): a job's log.",
            )
            for group, resources in sorted(_job_kind_resources().items())
        ),
        Rule(
            "authorization.k8s.io",
            ("subjectaccessreviews",),
            {
                "create": "with `--auth-headers`, asks the fleet whether the user the "
                "authenticating proxy names may `get` a job (its page and log) or `list` a "
                "namespace's jobs (the job list)",
            },
            about="Per-user authorization: SubjectAccessReviews for the proxy's user.",
        ),
    )


def viewer_secret_name(member: str) -> str:
    """The fleet Secret holding the people's kubeconfig of the member `member` (beside its
    dispatch kubeconfig Secret, in the same namespace)."""
    return f"{member}-viewer-kubeconfig"


def viewer_secrets_rules(members: Iterable[str]) -> tuple[Rule, ...]:
    """The Role `VIEWER_SECRETS_ROLE` `fleet join` keeps in a namespace holding member
    kubeconfigs: `get` on the viewer kubeconfig Secrets of `members`, by name, and on no other
    Secret (never with no names: an empty resourceNames would mean every Secret)."""
    names = tuple(sorted({viewer_secret_name(m) for m in members}))
    if not names:
        raise ValueError("a viewer Secrets Role needs at least one member")
    return (
        Rule(
            "",
            ("secrets",),
            {
                "get": "`kubectl amc` and `fleet dashboard` reach a member with its viewer "
                "kubeconfig (read only); the dispatch kubeconfig Secrets are not named",
            },
            resource_names=names,
            about="The people's kubeconfigs of the members, by name.",
        ),
    )


def dashboard_namespaced_rules() -> tuple[Rule, ...]:
    """What the dashboard may do in the release namespace: exactly the Role `fleet join` keeps
    there (`viewer_secrets_rules`), to which the chart binds it; shown for a member `NAME`."""
    return viewer_secrets_rules(["NAME"])
