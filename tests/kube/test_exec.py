"""Exec credential plugins in the user's own kubeconfig, as kubectl runs them.

The plugin is a real program (a small Python script written per test): what it is given (argv,
env, KUBERNETES_EXEC_INFO) is what it records, and what it prints is what fleet must take or
refuse. The API server is an httpx MockTransport that accepts only the tokens a test allows;
time is a clock the test moves.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from fleet.cli import main as fleet_main
from fleet.controller.operator import KopfLogin, kopf_login
from fleet.kube import (
    ExecAuth,
    ExecPluginError,
    KubeClient,
    KubeconfigError,
    SyncKubeClient,
    Trust,
    from_kubeconfig,
    load,
)
from fleet.kubeconfig import connection_from_secret, validate_kubeconfig
from tests.kube.pki import b64, make_pem

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)

PLUGIN = """#!{python}
import json, os, pathlib, subprocess, sys, time
here = pathlib.Path(__file__).resolve().parent
runs = here / "runs"
n = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(n))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
seen = {{"argv": sys.argv[1:], "info": info, "greeting": os.environ.get("GREETING")}}
(here / f"seen-{{n}}.json").write_text(json.dumps(seen))
mode = os.environ.get("PLUGIN_MODE", "ok")
if mode == "fail":
    print("some noise first", file=sys.stderr)
    print("the token service said no", file=sys.stderr)
    sys.exit(3)
if mode == "garbage":
    print("<html>please log in</html>")
    sys.exit(0)
if mode == "hang":
    subprocess.Popen(["sleep", "60"])  # a helper that holds stdout open: killed with the group
    time.sleep(60)
status = {{"token": f"token-{{n}}"}}
if os.environ.get("PLUGIN_EXPIRES"):
    status["expirationTimestamp"] = os.environ["PLUGIN_EXPIRES"]
if mode == "cert":
    status = {{"clientCertificateData": "x", "clientKeyData": "y"}}
version = os.environ.get("PLUGIN_API_VERSION") or info["apiVersion"]
print(json.dumps({{"apiVersion": version, "kind": "ExecCredential", "status": status}}))
"""


def write_plugin(folder: Path, name: str = "login") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(PLUGIN.format(python=sys.executable))
    path.chmod(0o755)
    return path


def seen(folder: Path, run: int = 1) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((folder / f"seen-{run}.json").read_text())
    return loaded


def kubeconfig(exec_: dict[str, Any], *, ca: bytes | None = None) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": "https://fleet.test:6443"}
    if ca is not None:
        cluster["certificate-authority-data"] = b64(ca)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fleet", "cluster": cluster}],
        "users": [{"name": "cloud-admin", "user": {"exec": exec_}}],
        "contexts": [{"name": "fleet", "context": {"cluster": "fleet", "user": "cloud-admin"}}],
        "current-context": "fleet",
    }


def plugin_exec(api_version: str = V1, mode: str = "Never", **env: str) -> dict[str, Any]:
    stanza: dict[str, Any] = {
        "apiVersion": api_version,
        "command": "bin/login",
        "args": ["--cluster", "fleet"],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    if mode:
        stanza["interactiveMode"] = mode
    return stanza


def write_kubeconfig(tmp_path: Path, config: dict[str, Any]) -> Path:
    file = tmp_path / "kube" / "config"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(yaml.safe_dump(config))
    return file


class Server:
    """An API server that answers /version to the tokens in `accepted`, 401 to the rest."""

    def __init__(self, *accepted: str) -> None:
        self.accepted = set(accepted)
        self.sent: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.sent.append(token)
        if token in self.accepted:
            return httpx.Response(200, json={"major": "1", "minor": "31"})
        status = {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "nope"}
        return httpx.Response(401, json=status)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> dt.datetime:
        return self.now


def exec_auth(connection: Any, clock: Clock | None = None) -> ExecAuth:
    auth = connection.auth
    assert isinstance(auth, ExecAuth)
    if clock is not None:
        auth.clock = clock
    return auth


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "kube" / "bin"
    write_plugin(folder)
    return folder


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_the_plugin_gets_args_env_and_exec_info_and_its_token_is_sent(
    tmp_path: Path, plugin_dir: Path, api_version: str
) -> None:
    pem = make_pem()
    stanza = plugin_exec(api_version, GREETING="hello")
    stanza["provideClusterInfo"] = True
    config = kubeconfig(stanza, ca=pem.ca)
    config["clusters"][0]["cluster"]["extensions"] = [
        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "fleet"}}
    ]
    connection = load(str(write_kubeconfig(tmp_path, config)))
    server = Server("token-1")
    with SyncKubeClient(connection, transport=httpx.MockTransport(server)) as client:
        client.version()
        client.version()
    assert server.sent == ["token-1", "token-1"]
    record = seen(plugin_dir)
    assert record["argv"] == ["--cluster", "fleet"]
    assert record["greeting"] == "hello"
    assert record["info"] == {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://fleet.test:6443",
                "certificate-authority-data": b64(pem.ca),
                "config": {"audience": "fleet"},
            },
        },
    }
    assert exec_auth(connection).runs == 1


def test_without_provide_cluster_info_the_plugin_is_not_told_the_cluster(
    tmp_path: Path, plugin_dir: Path
) -> None:
    connection = load(str(write_kubeconfig(tmp_path, kubeconfig(plugin_exec()))))
    assert connection.bearer_token() == "token-1"
    assert seen(plugin_dir)["info"]["spec"] == {"interactive": False}


def test_the_token_is_cached_until_it_expires(tmp_path: Path, plugin_dir: Path) -> None:
    expires = "2026-01-01T12:10:00Z"
    config = kubeconfig(plugin_exec(PLUGIN_EXPIRES=expires))
    connection = load(str(write_kubeconfig(tmp_path, config)))
    clock = Clock()
    auth = exec_auth(connection, clock)
    server = Server("token-1", "token-2")
    with SyncKubeClient(connection, transport=httpx.MockTransport(server)) as client:
        client.version()
        clock.now = NOW + dt.timedelta(minutes=9, seconds=59)
        client.version()
        assert auth.runs == 1
        clock.now = NOW + dt.timedelta(minutes=10)
        client.version()
    assert server.sent == ["token-1", "token-1", "token-2"]
    assert auth.runs == 2
    assert connection.token_expires == dt.datetime(2026, 1, 1, 12, 10, tzinfo=dt.UTC)


def test_a_401_runs_the_plugin_again_and_sends_the_request_once_more(
    tmp_path: Path, plugin_dir: Path
) -> None:
    connection = load(str(write_kubeconfig(tmp_path, kubeconfig(plugin_exec()))))
    server = Server("token-1")
    with SyncKubeClient(connection, transport=httpx.MockTransport(server)) as client:
        client.version()
        server.accepted = {"token-2"}  # revoked: the server now wants a new one
        assert client.version()["major"] == "1"
        server.accepted = set()  # refused again after the new run: one retry, then the 401
        with pytest.raises(Exception, match="401"):
            client.version()
    assert server.sent == ["token-1", "token-1", "token-2", "token-2", "token-3"]


def test_the_async_client_runs_the_plugin_once_for_concurrent_requests_and_again_on_401(
    tmp_path: Path, plugin_dir: Path
) -> None:
    connection = load(str(write_kubeconfig(tmp_path, kubeconfig(plugin_exec()))))
    server = Server("token-1")

    async def main() -> None:
        async with KubeClient(connection, transport=httpx.MockTransport(server)) as client:
            await asyncio.gather(*(client.version() for _ in range(5)))
            server.accepted = {"token-2"}
            await client.version()

    asyncio.run(main())
    assert server.sent == ["token-1"] * 5 + ["token-1", "token-2"]
    assert exec_auth(connection).runs == 2


def test_kopf_logs_in_with_the_plugin_token_and_again_after_a_401(
    tmp_path: Path, plugin_dir: Path
) -> None:
    config = kubeconfig(plugin_exec(PLUGIN_EXPIRES="2026-01-01T13:00:00+00:00"))
    connection = load(str(write_kubeconfig(tmp_path, config)))
    exec_auth(connection, Clock())
    first = kopf_login(connection, NOW)
    assert first.token == "token-1"
    assert first.expiration == dt.datetime(2026, 1, 1, 13, 0, tzinfo=dt.UTC)
    # kopf asks again only when its token was refused (or expired): never the same token back.
    again = kopf_login(connection, NOW, rejected=first.token)
    assert again.token == "token-2"
    # The controller's login handler remembers what it gave kopf.
    logins = KopfLogin(connection)
    assert [logins.login(NOW).token, logins.login(NOW).token] == ["token-2", "token-3"]


def test_a_command_on_path_is_found_and_a_missing_one_gives_its_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "tools"
    write_plugin(folder, "fleet-test-login")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    stanza = plugin_exec()
    stanza["command"] = "fleet-test-login"
    connection = from_kubeconfig(kubeconfig(stanza), trust=Trust.USER)
    assert connection.bearer_token() == "token-1"
    stanza["command"] = "no-such-login-plugin"
    stanza["installHint"] = "Install it with:\n  brew install no-such-login-plugin\n"
    connection = from_kubeconfig(kubeconfig(stanza), trust=Trust.USER)
    with pytest.raises(ExecPluginError) as err:
        connection.bearer_token()
    assert str(err.value) == (
        "kubeconfig user 'cloud-admin': exec plugin 'no-such-login-plugin': command not found "
        "on PATH (Install it with: brew install no-such-login-plugin)"
    )


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            {"PLUGIN_MODE": "fail"},
            "exited with status 3: the token service said no",
        ),
        (
            {"PLUGIN_MODE": "garbage"},
            "printed something that is not an ExecCredential: '<html>please log in</html>'",
        ),
        (
            {"PLUGIN_API_VERSION": V1BETA1},
            f"printed apiVersion {V1BETA1!r}; the kubeconfig asks for {V1}",
        ),
        (
            {"PLUGIN_EXPIRES": "tomorrow"},
            "status.expirationTimestamp 'tomorrow' is not an RFC 3339 time",
        ),
        (
            {"PLUGIN_MODE": "cert"},
            "returned a client certificate; fleet takes only tokens from exec plugins "
            "(status.token)",
        ),
    ],
)
def test_a_plugin_that_gives_no_token_is_one_line_naming_the_user(
    tmp_path: Path, plugin_dir: Path, env: dict[str, str], problem: str
) -> None:
    connection = load(str(write_kubeconfig(tmp_path, kubeconfig(plugin_exec(**env)))))
    with pytest.raises(ExecPluginError) as err:
        connection.bearer_token()
    command = str(plugin_dir / "login")
    assert str(err.value) == f"kubeconfig user 'cloud-admin': exec plugin {command!r}: {problem}"


def test_a_plugin_that_hangs_is_stopped_with_its_helpers(tmp_path: Path, plugin_dir: Path) -> None:
    connection = load(str(write_kubeconfig(tmp_path, kubeconfig(plugin_exec(PLUGIN_MODE="hang")))))
    exec_auth(connection).timeout = 1.0
    with pytest.raises(ExecPluginError, match=r"did not finish within 1s and was stopped$"):
        connection.bearer_token()


def test_interactive_mode(tmp_path: Path, plugin_dir: Path) -> None:
    def connect(mode: str, at_terminal: bool, api_version: str = V1) -> ExecAuth:
        for f in plugin_dir.glob("seen-*"):
            f.unlink()
        (plugin_dir / "runs").unlink(missing_ok=True)
        file = write_kubeconfig(tmp_path, kubeconfig(plugin_exec(api_version, mode)))
        auth = exec_auth(load(str(file)))
        auth.terminal = lambda: at_terminal
        return auth

    def interactive(auth: ExecAuth) -> bool:
        auth.token()
        return bool(seen(plugin_dir)["info"]["spec"]["interactive"])

    assert interactive(connect("Never", at_terminal=True)) is False
    assert interactive(connect("IfAvailable", at_terminal=True)) is True
    assert interactive(connect("IfAvailable", at_terminal=False)) is False
    assert interactive(connect("Always", at_terminal=True)) is True
    # v1beta1 may leave it out (IfAvailable); v1 requires it.
    assert interactive(connect("", at_terminal=True, api_version=V1BETA1)) is True
    with pytest.raises(ExecPluginError, match="interactiveMode is Always but standard input"):
        connect("Always", at_terminal=False).token()


def test_exec_stanzas_kubectl_refuses_are_refused_naming_the_field(tmp_path: Path) -> None:
    stanza: dict[str, Any] = {
        "apiVersion": "client.authentication.k8s.io/v1alpha1",
        "args": "--oops",
        "env": [{"value": "x"}],
        "interactiveMode": "Sometimes",
    }
    with pytest.raises(KubeconfigError) as err:
        from_kubeconfig(kubeconfig(stanza), trust=Trust.USER)
    assert [str(p) for p in err.value.problems] == [
        "users[0].user.exec.apiVersion: 'client.authentication.k8s.io/v1alpha1' is not "
        f"supported; use one of {V1}, {V1BETA1}",
        "users[0].user.exec.command: required",
        "users[0].user.exec.args: must be a list of strings",
        "users[0].user.exec.env[0]: must have a name and a string value",
        "users[0].user.exec.interactiveMode: 'Sometimes' is not one of Never, IfAvailable, Always",
    ]
    with pytest.raises(KubeconfigError, match="interactiveMode: required by"):
        from_kubeconfig(kubeconfig(plugin_exec(V1, mode="")), trust=Trust.USER)


def test_a_token_beside_the_plugin_wins_as_in_kubectl(tmp_path: Path, plugin_dir: Path) -> None:
    config = kubeconfig(plugin_exec())
    config["users"][0]["user"]["token"] = "static"
    connection = load(str(write_kubeconfig(tmp_path, config)))
    assert connection.bearer_token() == "static"
    assert not (plugin_dir / "runs").exists()


def test_a_secret_never_runs_a_plugin(tmp_path: Path, plugin_dir: Path) -> None:
    config = kubeconfig(plugin_exec(), ca=make_pem().ca)
    config["users"][0]["user"]["exec"]["command"] = str(plugin_dir / "login")
    secret = {
        "metadata": {"name": "member-1-kubeconfig", "namespace": "fleet-system"},
        "stringData": {"kubeconfig": yaml.safe_dump(config)},
    }
    with pytest.raises(KubeconfigError) as err:
        connection_from_secret(secret)
    assert str(err.value).endswith(
        "users[0].user.exec: exec plugins are not allowed in a kubeconfig Secret; join the "
        "member with `fleet join`, which stores a token for fleet's own ServiceAccount"
    )
    assert [p.field for p in validate_kubeconfig(config)] == ["users[0].user.exec"]
    # Even handed straight to the client, a kubeconfig in memory gets the Secret rules.
    with pytest.raises(KubeconfigError, match="not allowed in a kubeconfig Secret"):
        from_kubeconfig(config)
    assert not (plugin_dir / "runs").exists()


def test_the_command_lines_print_one_line_and_exit_non_zero(
    tmp_path: Path, plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet.amc import main as amc_main

    file = write_kubeconfig(tmp_path, kubeconfig(plugin_exec(PLUGIN_MODE="fail")))
    expected = (
        f"kubeconfig user 'cloud-admin': exec plugin {str(plugin_dir / 'login')!r}: "
        "exited with status 3: the token service said no"
    )
    assert fleet_main(["install", "--kubeconfig", str(file)]) == 1
    assert capsys.readouterr().err.splitlines() == [f"fleet: error: {expected}"]
    assert fleet_main(["controller", "--kubeconfig", str(file)]) == 1
    assert capsys.readouterr().err.splitlines() == [f"fleet: error: {expected}"]
    assert amc_main(["get", "pods", "-M", "--kubeconfig", str(file)]) == 1
    assert capsys.readouterr().err.splitlines() == [f"error: {expected}"]
