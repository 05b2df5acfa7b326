"""One discovery path: kinds and users' words resolve the same way for every client."""

from __future__ import annotations

import pytest

from fleet.kube import NotFound, Resource
from tests.kube.fakes import KUBEFLOW, FakeApi, async_client, sync_client

PYTORCHJOB = Resource("kubeflow.org/v1", "PyTorchJob", "pytorchjobs", True, "pytorchjob", ())


@pytest.mark.parametrize(
    "word",
    ["pytorchjob", "pytorchjobs", "PyTorchJob", "PYTORCHJOBS", "pytorchjobs.kubeflow.org"],
)
def test_a_users_word_finds_the_kind_in_any_group(word: str) -> None:
    client, _ = sync_client(FakeApi())
    assert client.lookup(word) == PYTORCHJOB


@pytest.mark.parametrize(
    ("word", "kind"), [("po", "Pod"), ("no", "Node"), ("sa", "ServiceAccount")]
)
def test_short_names(word: str, kind: str) -> None:
    client, _ = sync_client(FakeApi())
    res = client.lookup(word)
    assert (res.api_version, res.kind) == ("v1", kind)


def test_core_wins_over_a_group_with_the_same_name_unless_the_group_is_named() -> None:
    client, _ = sync_client(FakeApi())
    assert client.lookup("events").api_version == "v1"
    assert client.lookup("events.events.k8s.io").api_version == "events.k8s.io/v1"


def test_a_down_aggregated_api_hides_only_its_own_kinds() -> None:
    client, _ = sync_client(FakeApi())  # metrics.k8s.io answers 503
    assert client.lookup("pytorchjob").kind == "PyTorchJob"
    with pytest.raises(NotFound) as err:
        client.lookup("podmetrics")
    assert "doesn't have a resource type 'podmetrics'" in str(err.value)


def test_lookups_are_cached_until_forgotten() -> None:
    api = FakeApi()
    client, _ = sync_client(api)
    client.lookup("pytorchjob")
    client.lookup("po")
    asked = len(api.requests)
    client.lookup("pytorchjobs")
    assert len(api.requests) == asked
    client.forget_discovery()
    client.lookup("pytorchjobs")
    assert len(api.requests) > asked


def test_a_kind_installed_after_the_cache_filled_is_found() -> None:
    api = FakeApi()
    client, _ = sync_client(api)
    assert client.resource("kubeflow.org/v1", "PyTorchJob") == PYTORCHJOB
    with pytest.raises(NotFound):
        client.resource("kubeflow.org/v1", "TFJob")
    tfjob = {"name": "tfjobs", "singularName": "tfjob", "namespaced": True, "kind": "TFJob"}
    api.discovery["/apis/kubeflow.org/v1"] = {
        **KUBEFLOW,
        "resources": [*KUBEFLOW["resources"], tfjob],
    }
    assert client.resource("kubeflow.org/v1", "TFJob").plural == "tfjobs"


def test_paths() -> None:
    assert PYTORCHJOB.path("team-a", "job-1") == (
        "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/job-1"
    )
    assert PYTORCHJOB.path() == "/apis/kubeflow.org/v1/pytorchjobs"
    node = Resource("v1", "Node", "nodes", False)
    assert node.path("ignored", "n1", "status") == "/api/v1/nodes/n1/status"
    assert node.describe("ignored", "n1") == "Node n1"
    assert PYTORCHJOB.describe("team-a") == "PyTorchJob in team-a"


async def test_the_async_client_resolves_the_same_way() -> None:
    client, _ = async_client(FakeApi())
    try:
        assert await client.lookup("PyTorchJobs") == PYTORCHJOB
        assert await client.resource("kubeflow.org/v1", "PyTorchJob") == PYTORCHJOB
    finally:
        await client.aclose()
