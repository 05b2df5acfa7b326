"""`fleet dashboard`: connect with the user's kubeconfig, start the watches, serve the page."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from fleet.amc.members import dial
from fleet.dashboard.authz import DEFAULT_GROUP_HEADER, DEFAULT_USER_HEADER, Authorizer
from fleet.dashboard.hosts import AllowedHosts
from fleet.dashboard.server import amc_log_reader, make_app
from fleet.dashboard.state import State
from fleet.dashboard.watch import Watches, amc_connector
from fleet.kube import KubeClient, KubeconfigError, load


async def serve(
    kubeconfig: str | None,
    context: str | None,
    host: str,
    port: int,
    allow_hosts: Sequence[str] = (),
    *,
    auth_headers: bool = False,
    user_header: str = DEFAULT_USER_HEADER,
    group_header: str = DEFAULT_GROUP_HEADER,
) -> int:
    """Serve until interrupted; 1 with one error line when the kubeconfig cannot be used or
    an `--allow-host` is not a host name. Requests are answered only for the names `host`
    serves and `allow_hosts` (fleet.dashboard.hosts); with `auth_headers`, only for the user
    an authenticating proxy names in `user_header`, as the fleet's RBAC lets that user
    (fleet.dashboard.authz)."""
    try:
        hosts = AllowedHosts.serving(host, allow_hosts)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        connection = load(kubeconfig, context)
    except KubeconfigError as e:
        print(
            f"error: cannot use the fleet's kubeconfig: {e} (pass --kubeconfig or set KUBECONFIG)",
            file=sys.stderr,
        )
        return 1
    fleet = KubeClient(connection, name="fleet")
    sync = dial(connection, "fleet")
    state = State()
    watches = Watches(state, fleet, amc_connector(sync))
    watches.start()

    async def send(body: Mapping[str, Any]) -> Mapping[str, Any]:
        return await fleet.create(body)

    authorizer = (
        Authorizer(send, user_header=user_header, group_header=group_header)
        if auth_headers
        else None
    )
    runner = web.AppRunner(
        make_app(state, read_log=amc_log_reader(sync), hosts=hosts, authorizer=authorizer),
        shutdown_timeout=1,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as e:
        print(f"error: cannot listen on {host}:{port}: {e.strerror}", file=sys.stderr)
        await watches.stop()
        await runner.cleanup()
        await fleet.aclose()
        sync.close()
        return 1
    bound = runner.addresses[0]
    print(f"fleet dashboard: http://{bound[0]}:{bound[1]}/ (Ctrl-C stops it)", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await watches.stop()
        await runner.cleanup()
        await fleet.aclose()
        sync.close()
    return 0
