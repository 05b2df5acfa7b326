"""`fleet join --secrets-namespace NS`: refused unless the controller may follow and renew the
kubeconfig Secret there.

The controller lists, watches and patches Secrets only in the namespaces its chart names (the
release namespace and `controller.secretsNamespaces`, a Role in each; fleet.api.access
fleet_secrets_rules). A Secret kept anywhere else would be read by nobody and renewed by nobody:
the member would turn NotReady at once (KubeconfigSecretNotWatched), or, worse, about a day
later when its token expires. So before anything is written, `fleet join` asks the fleet's API
server, with a SubjectAccessReview, whether the controller's ServiceAccount may do each of those
verbs in NS, and refuses naming what is missing and how to grant it (the chart's values).

Why a check and not a grant (`--grant-renewal`): a Role made by `fleet join` would still not
make the controller watch the namespace (its --secrets-namespaces, set by the chart), so the
member would fail anyway; and it would widen the controller's access to Secrets by a side
effect of joining a member, outside the chart where every other permission of the controller is
declared and reviewed. docs/security.md says the same.

The chart's own namespace always holds the controller's Role, so the default namespace is not
asked about (a controller run by hand, as an admin, has no ServiceAccount to ask about).
"""

from __future__ import annotations

from typing import Final

from fleet.api.access import FLEET_SECRETS_NAMESPACE
from fleet.join.join import JoinError
from fleet.kube import KubeError, SyncKubeClient

__all__ = ["CONTROLLER_SERVICE_ACCOUNT", "RENEWAL_VERBS", "check_renewal_access"]

#: The chart's controller ServiceAccount (namespace/name), in the chart's default namespace.
CONTROLLER_SERVICE_ACCOUNT: Final = f"{FLEET_SECRETS_NAMESPACE}/fleet-controller"
#: What the controller does with a member's kubeconfig Secret: read it, watch it, renew it.
RENEWAL_VERBS: Final = ("get", "list", "watch", "patch")


def _review(account_namespace: str, account: str, namespace: str, verb: str) -> dict[str, object]:
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{account_namespace}:{account}",
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{account_namespace}",
                "system:authenticated",
            ],
            "resourceAttributes": {
                "namespace": namespace,
                "verb": verb,
                "group": "",
                "resource": "secrets",
            },
        },
    }


def check_renewal_access(
    fleet: SyncKubeClient,
    namespace: str,
    controller: str = CONTROLLER_SERVICE_ACCOUNT,
) -> None:
    """JoinError unless the controller's ServiceAccount (`namespace/name`) may get, list,
    watch and patch Secrets in `namespace`; nothing is asked for the controller's own one."""
    account_namespace, _, account = controller.partition("/")
    if not account or not account_namespace:
        raise JoinError(f"--controller-service-account {controller!r}: expected NAMESPACE/NAME")
    if namespace == account_namespace:
        return  # the chart's namespace: the controller's Role is there
    missing: list[str] = []
    for verb in RENEWAL_VERBS:
        try:
            answer = fleet.create(_review(account_namespace, account, namespace, verb))
        except KubeError as e:
            raise JoinError(
                f"--secrets-namespace {namespace}: cannot check that the controller "
                f"({controller}) may renew a kubeconfig Secret there (a SubjectAccessReview "
                f"was refused: {e}); join with the default --secrets-namespace "
                f"{account_namespace}, or as someone who may create subjectaccessreviews"
            ) from None
        if not (answer.get("status") or {}).get("allowed"):
            missing.append(verb)
    if missing:
        raise JoinError(
            f"--secrets-namespace {namespace}: the controller ({controller}) may not "
            f"{', '.join(missing)} Secrets in namespace {namespace!r}: it could neither "
            f"follow nor renew this member's token there. Keep the Secret in "
            f"{account_namespace} (the default --secrets-namespace), or install the chart "
            f"with --set 'controller.secretsNamespaces={{{namespace}}}', which grants those "
            "verbs there and makes the controller watch it"
        )
