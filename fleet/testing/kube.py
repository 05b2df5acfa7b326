"""A synchronous client per sandbox cluster for tests and the demo: create, read, patch, wait.

Built on fleet's own sync client (fleet.kube.SyncKubeClient), from the merged kubeconfig's
context, so tests reach the API servers through the same connections, discovery and errors
as `kubectl amc` and the CLIs. A refused request raises fleet.kube.ApiError.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from fleet.core.kinds import adapter_for
from fleet.kube import NotFound, Resource, SyncKubeClient, load
from fleet.testing.workloads import OUTCOME_LABEL, outcome_template_patch

T = TypeVar("T")


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    interval: float = 0.25,
    what: str = "condition",
    why: Callable[[], str] | None = None,
) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` and the last value,
    and with what `why` says of the state then (where the wait stopped, for the reader of a
    failure that cannot be rerun: a CI log)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            said = f"\n{why()}" if why is not None else ""
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}{said}"
            )
        time.sleep(interval)


class ClusterClient:
    """One sandbox cluster, addressed through the merged kubeconfig's context."""

    def __init__(
        self, kubeconfig: str, context: str, *, field_manager: str = "fleet-tests"
    ) -> None:
        self.name = context
        self.field_manager = field_manager
        self.api = SyncKubeClient(load(kubeconfig, context), name=context)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resource(self, api_version: str, kind: str) -> Resource:
        return self.api.resource(api_version, kind)

    def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        return self.api.create(obj, namespace)

    def apply(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        if namespace:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
        return self.api.apply(obj, field_manager=self.field_manager)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        return self.api.get(api_version, kind, name, namespace)

    def items(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        listing = self.api.list(api_version, kind, namespace, label_selector=label_selector)
        return list(listing.get("items") or [])

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
    ) -> dict[str, Any]:
        return self.api.patch(api_version, kind, name, patch, namespace)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        return self.api.delete(api_version, kind, name, namespace)

    def dry_run(self, obj: dict[str, Any], namespace: str | None = None) -> None:
        """Server-side apply `obj` with dryRun=All and strict field validation: the server says
        whether it would take it (unknown fields included) and keeps nothing."""
        if namespace:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
        self.api.apply(
            obj, field_manager=self.field_manager, dry_run=True, field_validation="Strict"
        )

    def service_account_token(self, namespace: str, name: str, seconds: int = 86400) -> str:
        """A bound token for the ServiceAccount (TokenRequest), as a pod of it would get."""
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [], "expirationSeconds": seconds},
        }
        response = self.api.create_subresource(
            "v1", "ServiceAccount", name, "token", request, namespace
        )
        token = (response.get("status") or {}).get("token")
        if not token:
            raise AssertionError(f"no token issued for ServiceAccount {namespace}/{name}")
        return str(token)

    def mark_job(self, api: tuple[str, str], name: str, namespace: str, outcome: str) -> None:
        """Make a job's pods end with `outcome` (kwok plays it): its pod templates first where
        they may change, so pods the operator starts again carry it too, then the pods it has.
        (A batch Job's template is immutable: give it `backoffLimit: 0` to fail on one pod.)"""
        job = self.get(*api, name, namespace)
        if job is None:
            raise AssertionError(f"{api[1]} {namespace}/{name} not found in {self.name}")
        adapter = adapter_for(*api)
        if adapter is None:
            raise AssertionError(f"{api[1]} is no kind fleet dispatches")
        if adapter.mutable_templates:
            self.patch(*api, name, outcome_template_patch(job, outcome), namespace)
        self.mark_pods(namespace, adapter.pod_selector(name), outcome)

    def mark_pods(self, namespace: str, label_selector: str, outcome: str) -> None:
        """Make the pods of `label_selector` end with `outcome` (kwok plays it). A pod the
        operator deleted meanwhile (one failure can bring the rest of a gang down) is passed
        over: it ended already."""
        for pod in self.pods(namespace, label_selector):
            with contextlib.suppress(NotFound):
                self.patch(
                    "v1",
                    "Pod",
                    pod["metadata"]["name"],
                    {"metadata": {"labels": {OUTCOME_LABEL: outcome}}},
                    namespace,
                )

    def pods(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.items("v1", "Pod", namespace, label_selector)

    def events(self, namespace: str, name: str | None = None) -> Iterator[dict[str, Any]]:
        for event in self.items("v1", "Event", namespace):
            if name is None or event["involvedObject"]["name"] == name:
                yield event


def job_condition(job: dict[str, Any] | None, kind: str) -> bool:
    """Whether a Kubeflow job has condition `kind` (Running, Succeeded, Failed, ...) True."""
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)
