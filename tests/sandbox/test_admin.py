"""The bootstrap client against an API server that answers as real ones do right after a create."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fleet.sandbox.admin import AdminClient
from fleet.sandbox.errors import SandboxError

CRD = "pytorchjobs.kubeflow.org"


def _crd(status: object) -> dict[str, object]:
    body: dict[str, object] = {"kind": "CustomResourceDefinition", "metadata": {"name": CRD}}
    if status is not ...:
        body["status"] = status
    return body


_DISCOVERY = {
    "kind": "APIResourceList",
    "groupVersion": "apiextensions.k8s.io/v1",
    "resources": [
        {
            "name": "customresourcedefinitions",
            "kind": "CustomResourceDefinition",
            "namespaced": False,
        },
        {"name": "customresourcedefinitions/status", "kind": "CustomResourceDefinition"},
    ],
}


def _server(answers: Iterator[dict[str, object]]) -> tuple[httpx.MockTransport, list[str]]:
    """Answers discovery as a real server does, and each CRD read with the next answer."""
    asked: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path == "/apis/apiextensions.k8s.io/v1":
            return httpx.Response(200, json=_DISCOVERY)
        return httpx.Response(200, content=json.dumps(next(answers)))

    return httpx.MockTransport(handle), asked


@pytest.mark.parametrize(
    "not_yet",
    [
        _crd(...),  # no status at all
        _crd(None),  # "status": null
        _crd({"conditions": None}),  # "conditions": null: the crash of issue #14
        _crd({"conditions": [{"type": "NamesAccepted", "status": "True"}]}),
        _crd({"conditions": [None]}),
    ],
)
def test_wait_established_reads_null_as_not_yet(not_yet: dict[str, object]) -> None:
    established = _crd({"conditions": [{"type": "Established", "status": "True"}]})
    transport, asked = _server(iter([not_yet, not_yet, established]))
    with AdminClient(
        "https://api.test", None, "member-1", transport=transport, poll_interval=0
    ) as api:
        api.wait_established([CRD])
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}"
    assert asked == ["/apis/apiextensions.k8s.io/v1"] + [crd_path] * 3


def test_wait_established_names_the_cluster_and_crd_when_it_never_comes() -> None:
    def forever() -> Iterator[dict[str, object]]:
        while True:
            yield _crd({"conditions": None})

    transport, _ = _server(forever())
    with (
        AdminClient(
            "https://api.test", None, "member-2", transport=transport, poll_interval=0
        ) as api,
        pytest.raises(SandboxError, match=f"member-2: CRD {CRD} not established"),
    ):
        api.wait_established([CRD], timeout=0.05)


def test_an_unexpected_error_during_up_names_phase_cluster_and_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleet.sandbox import Sandbox, SandboxConfig
    from fleet.sandbox.toolchain import Toolchain

    def broken(self: Sandbox, layout: object, config: object) -> None:
        raise TypeError("'NoneType' object is not iterable")

    monkeypatch.setattr(Sandbox, "_prepare", broken)
    root = tmp_path / "sbx"
    sandbox = Sandbox(root)
    with pytest.raises(SandboxError) as failure:
        sandbox.up(
            SandboxConfig.default(koordinator=0),
            toolchain=Toolchain(root / "toolchain"),
            progress=lambda _m: None,
        )
    message = str(failure.value)
    assert "while preparing certificates and configuration (cluster fleet)" in message
    assert "TypeError: 'NoneType' object is not iterable" in message
    trace = root / "up-failure.txt"
    assert f"traceback: {trace}" in message
    assert "in broken" in trace.read_text()
