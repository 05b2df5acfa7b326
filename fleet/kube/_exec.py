"""Exec credential plugins: a command in the user's own kubeconfig that prints a credential.

How EKS (`aws eks get-token`), GKE (`gke-gcloud-auth-plugin`), AKS and OIDC (`kubelogin`) log in,
as kubectl runs them (client-go's `plugin/pkg/client/auth/exec`), for
`client.authentication.k8s.io/v1` and `v1beta1`:

* the command is looked up on PATH, or, when it names a folder (`./bin/token`), read relative to
  the kubeconfig that held it; `args` and `env` are passed, and `KUBERNETES_EXEC_INFO` tells it
  the apiVersion, whether it may talk to the user (`spec.interactive`) and, with
  `provideClusterInfo`, the cluster it logs in to (`spec.cluster`);
* `interactiveMode` (Never, IfAvailable, Always; required by v1, IfAvailable by default in
  v1beta1) decides whether the plugin gets the terminal: only then are stdin and stderr its own;
* the ExecCredential's `status.token` is cached, in memory only, until `expirationTimestamp`
  (for ever without one), and the plugin runs again when the server answers 401 (the request
  is sent once more with the new token).

Only a kubeconfig the user gave fleet runs plugins (fleet.kube.Trust): never one from a Secret.
A plugin that is missing, fails, hangs past `timeout` or prints something that is not an
ExecCredential raises ExecPluginError, one line naming the kubeconfig user.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from fleet.kube._errors import ExecPluginError, KubeconfigProblem

__all__ = [
    "EXEC_API_VERSIONS",
    "EXEC_TIMEOUT",
    "ExecAuth",
    "ExecConfig",
    "ExecCredential",
    "exec_config",
]

V1: Final = "client.authentication.k8s.io/v1"
V1BETA1: Final = "client.authentication.k8s.io/v1beta1"
EXEC_API_VERSIONS: Final = (V1, V1BETA1)
INTERACTIVE_MODES: Final = ("Never", "IfAvailable", "Always")
#: The cluster extension a plugin reads as spec.cluster.config (client-go's name).
CLUSTER_CONFIG_EXTENSION: Final = "client.authentication.k8s.io/exec"
#: How long a plugin may run. Generous, for plugins that wait on a browser login (kubelogin
#: waits 3 minutes), and bounded, so a hung plugin ends in an error rather than a hang.
EXEC_TIMEOUT: Final = 180.0


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _stdin_is_a_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


@dataclass(frozen=True)
class ExecConfig:
    """A kubeconfig user's `exec` stanza, checked, with where it came from."""

    user: str
    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    interactive_mode: str = "IfAvailable"
    install_hint: str = ""
    #: spec.cluster for KUBERNETES_EXEC_INFO, when provideClusterInfo is true.
    cluster: Mapping[str, Any] | None = None
    #: The folder of the kubeconfig that held it: a command naming a folder is read from there.
    base: Path | None = None


def _string_list(value: Any, where: str, out: list[KubeconfigProblem]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        out.append(KubeconfigProblem(where, "must be a list of strings"))
        return ()
    return tuple(value)


def _env(value: Any, where: str, out: list[KubeconfigProblem]) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        out.append(KubeconfigProblem(where, "must be a list of {name, value}"))
        return ()
    pairs = []
    for i, item in enumerate(value):
        name = item.get("name") if isinstance(item, Mapping) else None
        val = item.get("value", "") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name or not isinstance(val, str):
            out.append(KubeconfigProblem(f"{where}[{i}]", "must have a name and a string value"))
            continue
        pairs.append((name, val))
    return tuple(pairs)


def _cluster_info(cluster: Mapping[str, Any], ca: bytes | None) -> dict[str, Any]:
    """spec.cluster as client-go fills it: the rest config of the cluster being logged in to."""
    info: dict[str, Any] = {"server": str(cluster.get("server") or "")}
    for key in ("tls-server-name", "proxy-url"):
        if cluster.get(key):
            info[key] = str(cluster[key])
    for key in ("insecure-skip-tls-verify", "disable-compression"):
        if cluster.get(key) in (True, "true", "True"):
            info[key] = True
    if ca:
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == CLUSTER_CONFIG_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def exec_config(
    user: str,
    body: Any,
    where: str,
    *,
    cluster: Mapping[str, Any],
    ca: bytes | None,
    base: Path | None,
    out: list[KubeconfigProblem],
) -> ExecConfig | None:
    """The `exec` stanza at `where` (`users[0].user.exec`), or None with its problems in `out`,
    each naming its field, as kubectl checks them."""
    if not isinstance(body, Mapping):
        out.append(KubeconfigProblem(where, "must be a mapping"))
        return None
    before = len(out)
    api_version = body.get("apiVersion")
    if not api_version:
        out.append(
            KubeconfigProblem(
                f"{where}.apiVersion", f"required: one of {', '.join(EXEC_API_VERSIONS)}"
            )
        )
    elif api_version not in EXEC_API_VERSIONS:
        out.append(
            KubeconfigProblem(
                f"{where}.apiVersion",
                f"{api_version!r} is not supported; use one of {', '.join(EXEC_API_VERSIONS)}",
            )
        )
    command = body.get("command")
    if not isinstance(command, str) or not command.strip():
        out.append(KubeconfigProblem(f"{where}.command", "required"))
    args = _string_list(body.get("args"), f"{where}.args", out)
    env = _env(body.get("env"), f"{where}.env", out)
    mode = body.get("interactiveMode")
    if mode is None or mode == "":
        if api_version == V1:
            out.append(
                KubeconfigProblem(
                    f"{where}.interactiveMode",
                    f"required by {V1}: one of {', '.join(INTERACTIVE_MODES)}",
                )
            )
        mode = "IfAvailable"
    elif mode not in INTERACTIVE_MODES:
        out.append(
            KubeconfigProblem(
                f"{where}.interactiveMode",
                f"{mode!r} is not one of {', '.join(INTERACTIVE_MODES)}",
            )
        )
    provide = body.get("provideClusterInfo")
    if provide not in (None, True, False):
        out.append(KubeconfigProblem(f"{where}.provideClusterInfo", "must be true or false"))
    hint = body.get("installHint")
    if len(out) > before:
        return None
    return ExecConfig(
        user=user,
        api_version=str(api_version),
        command=str(command).strip(),
        args=args,
        env=env,
        interactive_mode=str(mode),
        install_hint=" ".join(str(hint).split()) if hint else "",
        cluster=_cluster_info(cluster, ca) if provide else None,
        base=base,
    )


@dataclass(frozen=True, repr=False)
class ExecCredential:
    """What a plugin said: the token and until when it may be used (None: until refused)."""

    token: str
    expires: dt.datetime | None = None

    def fresh(self, now: dt.datetime) -> bool:
        return self.expires is None or now < self.expires

    def __repr__(self) -> str:
        return f"ExecCredential(<hidden>, expires={self.expires})"


def _timestamp(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


@dataclass
class _Run:
    """One run of the plugin's process: what it printed, how it ended."""

    stdout: bytes = b""
    stderr: bytes = b""
    returncode: int = 0
    timed_out: bool = False


class ExecAuth(httpx.Auth):
    """Bearer tokens from an exec plugin, for fleet's clients (sync and async) and kopf's login.

    `clock` says what time it is, `terminal` whether the user is at a terminal (stdin is a
    TTY), `timeout` how long one run may take; tests set their own.
    """

    def __init__(
        self,
        config: ExecConfig,
        *,
        clock: Callable[[], dt.datetime] = _utc_now,
        terminal: Callable[[], bool] = _stdin_is_a_terminal,
        timeout: float = EXEC_TIMEOUT,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.terminal = terminal
        self.timeout = timeout
        self._environ = environ
        self._lock = threading.Lock()
        self._cached: ExecCredential | None = None
        #: How many times the plugin ran (for tests and for the curious).
        self.runs = 0

    def __repr__(self) -> str:
        return f"ExecAuth(user={self.config.user!r}, command={self.config.command!r})"

    # -- the credential -------------------------------------------------------------------------

    @property
    def expires(self) -> dt.datetime | None:
        """When the cached credential stops being used (None: not known, or none cached)."""
        cached = self._cached
        return cached.expires if cached is not None else None

    def token(self, rejected: str | None = None) -> str:
        """The cached token while it is fresh; else (or when it is `rejected`, the token a
        server just answered 401 to) the plugin runs again. ExecPluginError if it fails."""
        with self._lock:
            cached = self._cached
            if cached is not None and cached.fresh(self.clock()) and cached.token != rejected:
                return cached.token
            self._cached = None
            self._cached = self._run_plugin()
            return self._cached.token

    def _fail(self, problem: str) -> ExecPluginError:
        return ExecPluginError(self.config.user, self.config.command, problem)

    def _argv(self) -> list[str]:
        command = self.config.command
        if os.sep in command or (os.altsep and os.altsep in command):
            path = Path(command).expanduser()
            if not path.is_absolute() and self.config.base is not None:
                path = self.config.base / path
            if not path.is_file():
                raise self._fail(f"command not found at {path}" + self._hint())
            return [str(path), *self.config.args]
        found = shutil.which(command, path=self._env().get("PATH"))
        if found is None:
            raise self._fail("command not found on PATH" + self._hint())
        return [found, *self.config.args]

    def _hint(self) -> str:
        return f" ({self.config.install_hint})" if self.config.install_hint else ""

    def _interactive(self) -> bool:
        mode = self.config.interactive_mode
        if mode == "Never":
            return False
        at_terminal = self.terminal()
        if mode == "Always" and not at_terminal:
            raise self._fail("interactiveMode is Always but standard input is not a terminal")
        return at_terminal

    def _env(self) -> dict[str, str]:
        env = dict(os.environ if self._environ is None else self._environ)
        env.update(self.config.env)
        return env

    def _exec_info(self, interactive: bool) -> str:
        spec: dict[str, Any] = {"interactive": interactive}
        if self.config.cluster is not None:
            spec["cluster"] = dict(self.config.cluster)
        return json.dumps(
            {"apiVersion": self.config.api_version, "kind": "ExecCredential", "spec": spec}
        )

    def _spawn(self, argv: list[str], env: dict[str, str], interactive: bool) -> _Run:
        """Run the plugin. At a terminal it shares stdin and stderr with the user (it may ask
        for a password); otherwise it reads nothing and its stderr is kept for the error. On
        timeout its process group is killed, so a helper it started cannot keep it alive."""
        try:
            process = subprocess.Popen(
                argv,
                stdin=None if interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=None if interactive else subprocess.PIPE,
                env=env,
                process_group=None if interactive else 0,
            )
        except OSError as exc:
            raise self._fail(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        run = _Run()
        try:
            run.stdout, stderr = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            run.timed_out = True
            with contextlib.suppress(OSError):
                if interactive:
                    process.kill()
                else:
                    os.killpg(process.pid, signal.SIGKILL)
            run.stdout, stderr = process.communicate()
        run.stderr = stderr or b""
        run.returncode = process.returncode
        return run

    def _run_plugin(self) -> ExecCredential:
        argv = self._argv()
        interactive = self._interactive()
        env = self._env()
        env["KUBERNETES_EXEC_INFO"] = self._exec_info(interactive)
        self.runs += 1
        run = self._spawn(argv, env, interactive)
        said = _last_line(run.stderr)
        if run.timed_out:
            raise self._fail(f"did not finish within {self.timeout:g}s and was stopped")
        if run.returncode != 0:
            raise self._fail(f"exited with status {run.returncode}" + (f": {said}" if said else ""))
        if run.stderr:  # a warning from a plugin that worked is the user's to read
            sys.stderr.write(run.stderr.decode("utf-8", "replace"))
        return self._credential(run.stdout)

    def _credential(self, stdout: bytes) -> ExecCredential:
        try:
            doc = json.loads(stdout)
        except (ValueError, UnicodeDecodeError):
            shown = stdout.decode("utf-8", "replace").strip()[:80]
            raise self._fail(
                f"printed something that is not an ExecCredential: {shown!r}"
            ) from None
        if not isinstance(doc, Mapping):
            raise self._fail("printed JSON that is not an ExecCredential object")
        if doc.get("kind") != "ExecCredential":
            raise self._fail(f"printed kind {doc.get('kind')!r}, not ExecCredential")
        if doc.get("apiVersion") != self.config.api_version:
            raise self._fail(
                f"printed apiVersion {doc.get('apiVersion')!r}; "
                f"the kubeconfig asks for {self.config.api_version}"
            )
        status = doc.get("status")
        if not isinstance(status, Mapping):
            raise self._fail("printed an ExecCredential without status")
        token = status.get("token")
        if (status.get("clientCertificateData") or status.get("clientKeyData")) and not token:
            raise self._fail(
                "returned a client certificate; fleet takes only tokens from exec plugins "
                "(status.token)"
            )
        if not isinstance(token, str) or not token.strip():
            raise self._fail("printed an ExecCredential without status.token")
        raw_expiry = status.get("expirationTimestamp")
        expires = _timestamp(raw_expiry)
        if raw_expiry is not None and expires is None:
            raise self._fail(f"status.expirationTimestamp {raw_expiry!r} is not an RFC 3339 time")
        return ExecCredential(token.strip(), expires)

    # -- httpx ----------------------------------------------------------------------------------

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        token = self.token()
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = f"Bearer {self.token(rejected=token)}"
            yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        # The plugin blocks (a process, a lock while another request runs it): off the loop.
        token = await asyncio.to_thread(self.token)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            fresh = await asyncio.to_thread(self.token, token)
            request.headers["Authorization"] = f"Bearer {fresh}"
            yield request


def _last_line(text: bytes) -> str:
    lines = [line.strip() for line in text.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    return lines[-1][:200] if lines else ""
