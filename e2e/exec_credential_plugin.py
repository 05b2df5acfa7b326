"""An exec credential plugin for the end-to-end tests, as `aws eks get-token` is one for EKS.

    python e2e/exec_credential_plugin.py ADMIN_KUBECONFIG CONTEXT NAMESPACE SERVICEACCOUNT

Asks the cluster (with the admin kubeconfig) for a bound token of the ServiceAccount
(TokenRequest, 10 minutes) and prints it as the ExecCredential kubectl and fleet read, in the
apiVersion KUBERNETES_EXEC_INFO asks for, with its expirationTimestamp. Nothing is written to
disk. A kubeconfig whose user has only this `exec` stanza logs in with that token alone.
"""

from __future__ import annotations

import json
import os
import sys

from fleet.kube import SyncKubeClient, load


def main(argv: list[str]) -> int:
    admin, context, namespace, account = argv
    info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{}")
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": 600},
    }
    with SyncKubeClient(load(admin, context), name=context) as api:
        issued = api.create_subresource(
            "v1", "ServiceAccount", account, "token", request, namespace
        )
    status = issued.get("status") or {}
    credential = {
        "apiVersion": info.get("apiVersion", "client.authentication.k8s.io/v1"),
        "kind": "ExecCredential",
        "status": {
            "token": status["token"],
            "expirationTimestamp": status["expirationTimestamp"],
        },
    }
    print(json.dumps(credential))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
