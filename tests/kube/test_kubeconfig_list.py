"""`$KUBECONFIG` as a list of files, merged as kubectl merges them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.kube import Connection, KubeconfigError, TokenFile, load, merge_kubeconfig_files
from fleet.kube import _connection as connection_module
from tests.kube.pki import b64, make_pem


def write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def cluster(name: str, server: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "cluster": {"server": server, **more}}


def user(name: str, **body: Any) -> dict[str, Any]:
    return {"name": name, "user": body}


def context(name: str, cluster_name: str, user_name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "context": {"cluster": cluster_name, "user": user_name, **more}}


def use(monkeypatch: pytest.MonkeyPatch, *files: Path | str) -> None:
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(map(str, files)))


def test_clusters_in_one_file_users_and_contexts_in_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pem = make_pem()
    clusters = write(
        tmp_path / "a" / "clusters",
        {"clusters": [cluster("fleet", "https://fleet.test", **{"certificate-authority": "ca"})]},
    )
    (tmp_path / "a" / "ca").write_bytes(pem.ca)
    users = write(
        tmp_path / "b" / "users",
        {
            "users": [user("me", tokenFile="token")],
            "contexts": [context("work", "fleet", "me", namespace="team-a")],
            "current-context": "work",
        },
    )
    (tmp_path / "b" / "token").write_text("from-b\n")
    use(monkeypatch, clusters, users)
    connection = load()
    assert connection.server == "https://fleet.test"
    assert connection.default_namespace == "team-a"
    # Each relative path is read from the folder of the file that held it.
    assert connection.tls.ca is not None and connection.tls.ca.path == tmp_path / "a" / "ca"
    assert isinstance(connection.auth, TokenFile)
    assert connection.auth.path == tmp_path / "b" / "token"
    assert connection.bearer_token() == "from-b"
    assert connection.source == f"{clusters}{os.pathsep}{users}"


def test_the_first_file_that_names_an_entry_wins_and_so_does_the_first_current_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write(
        tmp_path / "first",
        {
            "clusters": [cluster("fleet", "https://first.test")],
            "users": [user("me", token="first-token")],
            "contexts": [context("work", "fleet", "me")],
        },
    )
    second = write(
        tmp_path / "second",
        {
            "clusters": [cluster("fleet", "https://second.test"), cluster("other", "https://o")],
            "users": [user("me", token="second-token")],
            "contexts": [context("work", "other", "me"), context("play", "other", "me")],
            "current-context": "play",
        },
    )
    third = write(tmp_path / "third", {"current-context": "work"})
    use(monkeypatch, tmp_path / "missing", first, second, third, first)
    connection = load()
    # current-context: the first non-empty one (second's), not the last.
    assert (connection.server, connection.bearer_token()) == ("https://o", "first-token")
    work = load(context="work")
    assert (work.server, work.bearer_token()) == ("https://first.test", "first-token")
    merged = merge_kubeconfig_files([first, second, third])
    assert [c["name"] for c in merged["clusters"]] == ["fleet", "other"]
    assert [c["name"] for c in merged["contexts"]] == ["work", "play"]


def test_missing_files_are_skipped_and_none_at_all_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only = write(
        tmp_path / "only",
        {
            "clusters": [cluster("c", "https://c.test")],
            "users": [user("u", token="t")],
            "contexts": [context("x", "c", "u")],
            "current-context": "x",
        },
    )
    use(monkeypatch, tmp_path / "gone", only)
    assert load().server == "https://c.test"
    use(monkeypatch, tmp_path / "gone", tmp_path / "also-gone")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # no pod to fall back on
    with pytest.raises(KubeconfigError, match="KUBECONFIG: none of its files exists"):
        load()
    # --kubeconfig names one file, which must be there.
    with pytest.raises(KubeconfigError, match=r"\(file\): cannot read"):
        load(str(tmp_path / "gone"))


def test_a_file_in_the_list_that_is_broken_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = write(tmp_path / "good", {"clusters": [cluster("c", "https://c.test")]})
    bad = tmp_path / "bad"
    bad.write_text("users: {not: a list}\n")
    use(monkeypatch, good, bad)
    with pytest.raises(KubeconfigError) as err:
        load()
    assert str(err.value) == f"invalid kubeconfig ({bad}): users: must be a list"


def test_a_name_twice_in_one_file_is_still_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pem = make_pem()
    inline = {"certificate-authority-data": b64(pem.ca)}
    one = write(
        tmp_path / "one",
        {
            "clusters": [cluster("c", "https://a", **inline), cluster("c", "https://b")],
            "users": [user("u", token="t")],
            "contexts": [context("x", "c", "u")],
            "current-context": "x",
        },
    )
    use(monkeypatch, one)
    with pytest.raises(KubeconfigError, match=r"clusters\[1\].name: duplicate name 'c'"):
        load()


def test_a_list_of_missing_files_in_a_pod_falls_back_to_its_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod = Connection("https://10.0.0.1:443", source="service account")
    monkeypatch.setattr(connection_module, "in_cluster", lambda: pod)
    use(monkeypatch, tmp_path / "gone")
    assert load() is pod
    # A file that is there wins over the pod's account, as in kubectl.
    there = write(
        tmp_path / "there",
        {
            "clusters": [cluster("c", "https://c.test")],
            "users": [user("u", token="t")],
            "contexts": [context("x", "c", "u")],
            "current-context": "x",
        },
    )
    use(monkeypatch, tmp_path / "gone", there)
    assert load().server == "https://c.test"
