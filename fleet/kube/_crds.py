"""Waiting until CustomResourceDefinitions are served, the one way every caller waits.

Right after a CRD is created the API server may answer with no status, or with
`"conditions": null`; only `Established=True` means the kind can be used. Creating an object of
a kind that is not established yet fails with 404, which is why `fleet install` and the sandbox
wait here before anyone uses what they installed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleet.kube._errors import KubeError
from fleet.kube._sync import SyncKubeClient

CRD_API = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")

__all__ = ["CRD_API", "NotEstablished", "established", "wait_established"]


class NotEstablished(KubeError):
    """A CRD was not established in time."""


def established(crd: Mapping[str, Any] | None) -> bool:
    """Whether a CRD object says it is served (null and missing status read as not yet)."""
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(
        (c or {}).get("type") == "Established" and (c or {}).get("status") == "True"
        for c in conditions
    )


def wait_established(
    client: SyncKubeClient,
    names: Iterable[str],
    *,
    timeout: float = 60.0,
    poll_interval: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait until every named CRD is established; NotEstablished names the first that is not."""
    deadline = clock() + timeout
    for name in names:
        while True:
            last = ""
            try:
                if established(client.get(*CRD_API, name)):
                    break
            except KubeError as e:
                last = f" (last answer: {e})"
            if clock() > deadline:
                raise NotEstablished(
                    f"CRD {name} not established on {client.name} within {timeout:.0f}s{last}"
                )
            sleep(poll_interval)
