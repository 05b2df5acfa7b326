"""Retries: reads and idempotent writes try again on no answer, 429 and 5xx; a create or a
replace is sent once (a retried POST could create twice); a refusal is never retried."""

from __future__ import annotations

import httpx
import pytest

from fleet.kube import ApiError, Forbidden, Unreachable
from tests.kube.fakes import FakeApi, async_client, status, sync_client

POD = "/api/v1/namespaces/default/pods/p"
PODS = "/api/v1/namespaces/default/pods"
OBJ = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}


@pytest.mark.parametrize(
    "transient",
    [
        status(429, "TooManyRequests", "slow down"),
        status(500, "InternalError", "etcd hiccup"),
        status(503, "ServiceUnavailable", "starting"),
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
    ],
    ids=["429", "500", "503", "refused", "timeout"],
)
def test_a_read_is_retried_until_it_works(transient: object) -> None:
    api = FakeApi().on("GET", POD, transient, transient, OBJ)
    client, sleeps = sync_client(api)
    assert client.get("v1", "Pod", "p", "default") == OBJ
    assert len(api.asked("GET", POD)) == 3
    assert len(sleeps.waits) == 2


def test_retries_stop_after_the_budget_with_the_last_error() -> None:
    api = FakeApi().on("GET", POD, status(503, "ServiceUnavailable", "down"))
    client, sleeps = sync_client(api, retries=4)
    with pytest.raises(ApiError) as err:
        client.get("v1", "Pod", "p", "default")
    assert err.value.status == 503
    assert len(api.asked("GET", POD)) == 4
    assert len(sleeps.waits) == 3


def test_a_refusal_is_not_retried() -> None:
    api = FakeApi().on("GET", POD, status(403, "Forbidden", "no"))
    client, sleeps = sync_client(api)
    with pytest.raises(Forbidden):
        client.get("v1", "Pod", "p", "default")
    assert len(api.asked("GET", POD)) == 1
    assert sleeps.waits == []


@pytest.mark.parametrize(
    "failure",
    [status(503, "ServiceUnavailable", "starting"), httpx.ConnectError("refused")],
    ids=["503", "refused"],
)
def test_a_create_is_sent_once(failure: object) -> None:
    api = FakeApi().on("POST", PODS, failure, OBJ)
    client, sleeps = sync_client(api)
    with pytest.raises((ApiError, Unreachable)):
        client.create(OBJ)
    assert len(api.asked("POST", PODS)) == 1
    assert sleeps.waits == []


def test_a_replace_is_sent_once() -> None:
    api = FakeApi().on("PUT", POD, status(500, "InternalError", "oops"), OBJ)
    client, _ = sync_client(api)
    with pytest.raises(ApiError):
        client.replace({**OBJ, "metadata": {**OBJ["metadata"], "resourceVersion": "7"}})
    assert len(api.asked("PUT", POD)) == 1


def test_an_apply_and_a_delete_are_retried() -> None:
    api = FakeApi()
    api.on("PATCH", POD, status(502, "", "bad gateway"), OBJ)
    api.on("DELETE", POD, httpx.ConnectError("refused"), {"kind": "Status", "status": "Success"})
    client, _ = sync_client(api)
    assert client.apply(OBJ, field_manager="t") == OBJ
    assert client.delete("v1", "Pod", "p", "default") is True
    assert len(api.asked("PATCH", POD)) == 2 and len(api.asked("DELETE", POD)) == 2


async def test_the_async_client_retries_the_same_way() -> None:
    api = FakeApi().on("GET", POD, status(429, "TooManyRequests", "slow"), OBJ)
    api.on("POST", PODS, status(503, "ServiceUnavailable", "starting"))
    client, sleeps = async_client(api)
    try:
        assert await client.get("v1", "Pod", "p", "default") == OBJ
        with pytest.raises(ApiError):
            await client.create(OBJ)
    finally:
        await client.aclose()
    assert len(api.asked("GET", POD)) == 2 and len(api.asked("POST", PODS)) == 1
    assert len(sleeps.waits) == 1


def test_a_dry_run_is_asked_once() -> None:
    api = FakeApi().on("PATCH", POD, status(500, "InternalError", "field not declared"))
    client, _ = sync_client(api)
    with pytest.raises(ApiError):
        client.apply(OBJ, field_manager="t", dry_run=True, field_validation="Strict")
    (request,) = api.asked("PATCH", POD)
    assert request.url.params["dryRun"] == "All"
    assert request.url.params["fieldValidation"] == "Strict"


async def test_a_dry_run_create_asks_for_a_dry_run_once_in_both_clients() -> None:
    """`create(dry_run=True)` sends dryRun=All (the server admits the object and keeps
    nothing), once, as every create; a plain create sends no dryRun at all."""
    starting = status(503, "ServiceUnavailable", "starting")
    api = FakeApi().on("POST", PODS, starting)
    client, sleeps = sync_client(api)
    with pytest.raises(ApiError):
        client.create(OBJ, dry_run=True)
    async_api = FakeApi().on("POST", PODS, status(503, "ServiceUnavailable", "starting"))
    aclient, async_sleeps = async_client(async_api)
    try:
        with pytest.raises(ApiError):
            await aclient.create(OBJ, dry_run=True)
        with pytest.raises(ApiError):
            await aclient.create(OBJ)
    finally:
        await aclient.aclose()
    (dry,) = api.asked("POST", PODS)
    async_dry, plain = async_api.asked("POST", PODS)
    assert dry.url.params["dryRun"] == "All" and async_dry.url.params["dryRun"] == "All"
    assert "dryRun" not in plain.url.params
    assert sleeps.waits == [] and async_sleeps.waits == []
