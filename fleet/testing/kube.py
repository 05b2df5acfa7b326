"""A synchronous client per sandbox cluster for tests: create, read, patch, wait.

Built on the official `kubernetes` dynamic client, so tests speak to the real API servers the
same way any user tool would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from kubernetes import config as k8s_config
from kubernetes.client import (
    ApiClient,
    AuthenticationV1TokenRequest,
    CoreV1Api,
    V1TokenRequestSpec,
)
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from fleet.testing.workloads import JOB_NAME_LABEL, OUTCOME_LABEL, outcome_template_patch

T = TypeVar("T")


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    interval: float = 0.25,
    what: str = "condition",
) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` and the last value."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}"
            )
        time.sleep(interval)


class ClusterClient:
    """One sandbox cluster, addressed through the merged kubeconfig's context."""

    def __init__(self, kubeconfig: str, context: str) -> None:
        self.name = context
        self.api: ApiClient = k8s_config.new_client_from_config(
            config_file=kubeconfig, context=context
        )
        self.dynamic = DynamicClient(self.api)

    def close(self) -> None:
        self.api.close()

    def resource(self, api_version: str, kind: str) -> Any:
        try:
            return self.dynamic.resources.get(api_version=api_version, kind=kind)
        except Exception:
            # A CRD created after our discovery cache was filled: refresh once.
            self.dynamic.resources.invalidate_cache()
            return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        res = self.resource(obj["apiVersion"], obj["kind"])
        created: dict[str, Any] = res.create(body=obj, namespace=ns).to_dict()
        return created

    def apply(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        res = self.resource(obj["apiVersion"], obj["kind"])
        applied: dict[str, Any] = res.server_side_apply(
            body=obj, namespace=ns, field_manager="fleet-tests", force_conflicts=True
        ).to_dict()
        return applied

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = (
                self.resource(api_version, kind).get(name=name, namespace=namespace).to_dict()
            )
        except (NotFoundError, ApiException) as e:
            if getattr(e, "status", None) == 404:
                return None
            raise
        return obj

    def items(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        res = self.resource(api_version, kind)
        out = res.get(namespace=namespace, label_selector=label_selector).to_dict()
        items: list[dict[str, Any]] = out["items"]
        return items

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
    ) -> dict[str, Any]:
        res = self.resource(api_version, kind)
        patched: dict[str, Any] = res.patch(
            name=name, namespace=namespace, body=patch, content_type="application/merge-patch+json"
        ).to_dict()
        return patched

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        try:
            self.resource(api_version, kind).delete(name=name, namespace=namespace)
        except (NotFoundError, ApiException) as e:
            if getattr(e, "status", None) == 404:
                return False
            raise
        return True

    def dry_run(self, obj: dict[str, Any], namespace: str | None = None) -> None:
        """Server-side apply `obj` with dryRun=All and strict field validation: the server says
        whether it would take it (unknown fields included) and keeps nothing."""
        ns = namespace or obj.get("metadata", {}).get("namespace")
        res = self.resource(obj["apiVersion"], obj["kind"])
        request = self.api.param_serialize(
            "PATCH",
            res.path(name=obj["metadata"]["name"], namespace=ns),
            query_params=[
                ("dryRun", "All"),
                ("fieldValidation", "Strict"),
                ("fieldManager", "fleet-tests"),
                ("force", "true"),
            ],
            header_params={
                "Content-Type": "application/apply-patch+yaml",
                "Accept": "application/json",
            },
            body=obj,
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(*request)
        if not 200 <= response.status <= 299:
            response.read()
            self.api.response_deserialize(response, {})  # raises ApiException with the body

    def service_account_token(self, namespace: str, name: str, seconds: int = 86400) -> str:
        """A bound token for the ServiceAccount (TokenRequest), as a pod of it would get."""
        request = AuthenticationV1TokenRequest(
            spec=V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
        )
        response = CoreV1Api(self.api).create_namespaced_service_account_token(
            name, namespace, request
        )
        if response.status is None or not response.status.token:
            raise AssertionError(f"no token issued for ServiceAccount {namespace}/{name}")
        return response.status.token

    def mark_job(self, api: tuple[str, str], name: str, namespace: str, outcome: str) -> None:
        """Make a Kubeflow job's pods end with `outcome` (kwok plays it): its replica templates
        first, so pods the operator starts again carry it too, then the pods it has."""
        job = self.get(*api, name, namespace)
        if job is None:
            raise AssertionError(f"{api[1]} {namespace}/{name} not found in {self.name}")
        self.patch(*api, name, outcome_template_patch(job, outcome), namespace)
        for pod in self.pods(namespace, f"{JOB_NAME_LABEL}={name}"):
            labels = {OUTCOME_LABEL: outcome}
            self.patch(
                "v1", "Pod", pod["metadata"]["name"], {"metadata": {"labels": labels}}, namespace
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
