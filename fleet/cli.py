"""The `fleet` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from fleet.api.access import DEFAULT_MEMBER_NAMESPACE, FLEET_SECRETS_NAMESPACE
from fleet.api.membership import DEFAULT_TOKEN_SECONDS, DEFAULT_VIEWER_TOKEN_SECONDS
from fleet.core.admission import AdmissionSettings
from fleet.core.kinds import supported
from fleet.sandbox import ClusterStatus, Sandbox, SandboxConfig, SandboxError, ensure_toolchain
from fleet.sandbox.toolchain import OPERATOR_PARTS, ensure_operators


def _sandbox(args: argparse.Namespace) -> Sandbox:
    return Sandbox(Path(args.state_dir) if args.state_dir else None)


def _cmd_sandbox_up(args: argparse.Namespace) -> int:
    config = (
        SandboxConfig.load(Path(args.config))
        if args.config
        else SandboxConfig.default(
            args.members,
            # kind members cannot run koord-scheduler yet: all coscheduling unless asked
            args.koordinator if args.koordinator is not None else int(args.provider != "kind"),
            args.native,
        )
    )
    sandbox = _sandbox(args)
    if args.provider == "kind":
        from fleet.sandbox.kind import up_with_kind

        up_with_kind(config, sandbox.root)
        print(f"\nexport KUBECONFIG={sandbox.root / 'kubeconfig'}")
        return 0
    sandbox.up(config, timeout=args.timeout)
    _print_status(sandbox)
    print(f"\nexport KUBECONFIG={sandbox.kubeconfig}")
    return 0


def _cmd_sandbox_down(args: argparse.Namespace) -> int:
    _sandbox(args).down()
    return 0


def _cmd_sandbox_status(args: argparse.Namespace) -> int:
    sandbox = _sandbox(args)
    statuses = _print_status(sandbox)
    return 0 if statuses and all(s.healthy for s in statuses) else 1


def _print_status(sandbox: Sandbox) -> list[ClusterStatus]:
    statuses = sandbox.status()
    rows = [("CLUSTER", "HEALTH", "ENDPOINT", "NODES", "GPUS", "PROCESSES")]
    for s in statuses:
        health = "Healthy" if s.healthy else f"Unhealthy: {s.detail}"
        rows.append(
            (
                s.name,
                health,
                s.endpoint,
                str(s.nodes),
                str(s.gpus),
                f"{s.processes_alive}/{s.processes_total}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return statuses


def _cmd_demo(args: argparse.Namespace) -> int:
    from fleet.demo import STORIES, run

    if args.list:
        for story in STORIES:
            print(f"{story.name:15} {story.title}")
        return 0
    try:
        return run(
            Path(args.state_dir) if args.state_dir else None,
            check=args.check,
            stories=args.story,
            down=args.down,
        )
    except ValueError as e:
        print(f"fleet demo: error: {e}", file=sys.stderr)
        return 2


def _cmd_controller(args: argparse.Namespace) -> int:
    from fleet.controller import Settings, StartupError, run
    from fleet.kube import load

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("kopf", "httpx", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings = Settings(
        estimator=args.estimator,
        scoring=args.scoring,
        workers=args.workers,
        member_qps=args.member_qps,
        member_burst=args.member_burst,
        metrics_port=args.metrics_port,
        lease_seconds=args.lease_seconds,
        renew_deadline=args.renew_deadline,
        lease_namespace=args.lease_namespace,
        secrets_namespaces=tuple(dict.fromkeys(filter(None, args.secrets_namespaces.split(",")))),
        fleet_id=args.fleet_id or "",
        sweep_interval=args.sweep_interval,
        resync_interval=args.resync_interval,
        token_renew_before=args.token_renew_before,
        guard_check_interval=args.guard_check_interval,
        queue_placement_timeout=args.queue_placement_timeout,
        queue_backoff_seconds=args.queue_backoff,
        queue_backoff_limit=max(args.queue_backoff_limit, args.queue_backoff),
        queue_reclaim=args.queue_reclaim == "on",
        queue_preemption=args.queue_preemption == "on",
        queue_reclaim_grace=args.queue_reclaim_grace,
        queue_reclaim_unplaced=args.queue_reclaim_unplaced == "on",
        queue_reclaim_loss_per_gpu=_seconds_or_off(args.queue_reclaim_loss_per_gpu),
        queue_reclaim_delay=args.queue_reclaim_delay,
        queue_reclaim_worth=args.queue_reclaim_worth == "on",
    )
    connection = load(args.kubeconfig, args.context)
    # An exec plugin that cannot log in stops the controller here, with one line, rather than
    # inside kopf's login loop.
    connection.bearer_token()
    try:
        asyncio.run(run(settings, connection, identity=args.id))
    except StartupError as e:
        print(f"fleet: error: {e}", file=sys.stderr)
        return 1
    return 0


def _seconds_or_off(text: str) -> float:
    """A number of seconds, or `off` (no limit: infinity)."""
    if text.strip() == "off":
        return math.inf
    seconds = float(text)
    if not seconds > 0:
        raise ValueError(f"expected seconds > 0 or off, got {text!r}")
    return seconds


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from fleet.dashboard.serve import serve

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return asyncio.run(
            serve(
                args.kubeconfig,
                args.context,
                args.host,
                args.port,
                args.allow_host,
                auth_headers=args.auth_headers,
                user_header=args.user_header,
                group_header=args.group_header,
            )
        )
    except KeyboardInterrupt:
        return 0


def _cmd_install(args: argparse.Namespace) -> int:
    from fleet.install import install_crds
    from fleet.kube import SyncKubeClient, load

    with SyncKubeClient(load(args.kubeconfig, args.context), name="fleet") as client:
        for name in install_crds(client):
            print(f"customresourcedefinition/{name} applied")
    return 0


def _labels(items: list[str] | None) -> dict[str, str] | None:
    labels = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            print(f"fleet: error: --label {item!r} is not key=value", file=sys.stderr)
            return None
        labels[key] = value
    return labels


def _cmd_join(args: argparse.Namespace) -> int:
    from fleet.join import (
        JoinError,
        dry_run,
        fleet_id_of,
        join,
        member_client,
        plan_for,
        user_kubeconfig,
    )
    from fleet.join.renewal_access import check_renewal_access
    from fleet.kube import KubeError, SyncKubeClient, load

    labels = _labels(args.label)
    if labels is None:
        return 2
    config = user_kubeconfig(args.member_kubeconfig)
    client, cluster = member_client(config, args.member_context)
    with client, SyncKubeClient(load(args.kubeconfig, args.context), name="fleet") as fleet:
        try:
            plan = plan_for(
                args.name,
                client,
                cluster,
                fleet_id=lambda: fleet_id_of(fleet, args.fleet_id),
                labels=labels,
                namespace=args.member_namespace,
                token_type=args.token_type,
                token_seconds=args.token_expiration,
                secrets_namespace=args.secrets_namespace,
                viewer_token_seconds=args.viewer_token_expiration,
                open_namespaces=tuple(n for n in (args.namespaces or "").split(",") if n),
            )
        except KubeError:
            raise  # an unusable kubeconfig: main prints it
        except JoinError as e:
            print(f"fleet: error: join {e}", file=sys.stderr)
            return 1
        except ValueError as e:
            print(f"fleet: error: {e}", file=sys.stderr)
            return 2
        if args.dry_run:
            print(dry_run(plan), end="")
            return 0
        try:
            check_renewal_access(fleet, args.secrets_namespace, args.controller_service_account)
            join(fleet, client, plan, force=args.force, rotate=args.rotate, timeout=args.timeout)
        except JoinError as e:
            print(f"fleet: error: join {e}", file=sys.stderr)
            return 1
    print(f"membercluster/{args.name} joined")
    return 0


def _cmd_unjoin(args: argparse.Namespace) -> int:
    from fleet.join import JoinError, fleet_id_of, member_client, unjoin, user_kubeconfig
    from fleet.kube import SyncKubeClient, load

    member = None
    if args.member_kubeconfig or args.member_context:
        member, _ = member_client(user_kubeconfig(args.member_kubeconfig), args.member_context)
    try:
        with SyncKubeClient(load(args.kubeconfig, args.context), name="fleet") as fleet:
            notes = unjoin(
                fleet,
                member,
                args.name,
                move=args.move,
                leave=args.leave,
                timeout=args.timeout,
                fleet_id=fleet_id_of(fleet, args.fleet_id),
            )
    except JoinError as e:
        print(f"fleet: error: unjoin {e}", file=sys.stderr)
        return 1
    finally:
        if member is not None:
            member.close()
    for note in notes:
        print(note, file=sys.stderr)
    print(f"membercluster/{args.name} unjoined")
    return 0


def _fleet_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="the fleet's kubeconfig (default: $KUBECONFIG)")
    parser.add_argument("--context", help="context in that kubeconfig (default: current)")


def _fleet_id_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fleet-id",
        help="the fleet's id, when its controller runs with --fleet-id (default: derived from "
        "the fleet's kube-system namespace, as the controller derives it)",
    )


def _cmd_toolchain(args: argparse.Namespace) -> int:
    tc = ensure_toolchain()
    print(tc.root)
    if args.operator:
        print(ensure_operators(args.operator).root)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleet",
        description=__doc__,
        epilog="kinds fleet dispatches: " + ", ".join(supported()),
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sandbox = sub.add_parser(
        "sandbox", help="a local fleet + member clusters on real control planes"
    )
    sandbox.add_argument(
        "--state-dir",
        help="where the sandbox keeps its state (default: "
        "$FLEET_SANDBOX_DIR or ~/.local/state/fleet/sandbox)",
    )
    ssub = sandbox.add_subparsers(dest="action", required=True)
    up = ssub.add_parser("up", help="build what is missing and start the fleet and its members")
    up.add_argument("--members", type=int, default=4, help="number of member clusters (default 4)")
    up.add_argument(
        "--koordinator",
        type=int,
        default=None,
        help="how many of the members (the last ones) run koord-scheduler instead of "
        "coscheduling (default 1, 0 with --provider kind; the first use builds koord-scheduler, "
        "about 11 minutes on 2 cores)",
    )
    up.add_argument(
        "--native",
        type=int,
        default=0,
        help="how many of the members (the last ones) gang-schedule with Kubernetes' own "
        "Workload API instead (default 0; the first use builds Kubernetes v1.37.2's control "
        "plane, about 10 minutes on 2 cores)",
    )
    up.add_argument("--config", help="a sandbox YAML file describing members and their nodes")
    up.add_argument("--timeout", type=float, default=180, help="seconds to wait for each phase")
    up.add_argument(
        "--provider",
        choices=["processes", "kind"],
        default="processes",
        help="processes (default; no Docker needed) or kind (needs Docker, kind, kubectl, helm)",
    )
    up.set_defaults(func=_cmd_sandbox_up)
    ssub.add_parser("down", help="stop every sandbox process and remove its state").set_defaults(
        func=_cmd_sandbox_down
    )
    ssub.add_parser("status", help="health, endpoint and node/GPU totals per cluster").set_defaults(
        func=_cmd_sandbox_status
    )
    demo = sub.add_parser(
        "demo",
        help="sandbox up, then the seeds' stories end to end",
        description="Build what is missing, bring up a local fleet with four members (one on "
        "koord-scheduler), and tell the seeds' stories on it (--list names them). Every step "
        "waits for what it shows, with a bounded timeout; a step that does not happen stops the "
        "demo naming it (exit 1).",
    )
    demo.add_argument("--state-dir", help="sandbox state folder (default as for `fleet sandbox`)")
    demo.add_argument(
        "--check",
        action="store_true",
        help="non-interactive: no pauses, an ok: line for each thing a step proves",
    )
    demo.add_argument(
        "--story",
        action="append",
        metavar="NAME",
        help="tell only this story (repeatable; default: all, in order)",
    )
    demo.add_argument("--list", action="store_true", help="list the stories and exit")
    demo.add_argument(
        "--down", action="store_true", help="stop the sandbox afterwards (default: keep it up)"
    )
    demo.set_defaults(func=_cmd_demo)
    ctl = sub.add_parser("controller", help="run the fleet controller against a fleet API server")
    _fleet_flags(ctl)
    ctl.add_argument(
        "--estimator",
        choices=["nodes", "sum"],
        default="nodes",
        help="placement estimator when a policy sets none (default nodes)",
    )
    ctl.add_argument(
        "--scoring",
        choices=["bestFit", "fragmentation"],
        default="bestFit",
        help="which fitting member nodes placement prefers when a policy sets no gangScoring "
        "(default bestFit)",
    )
    ctl.add_argument("--workers", type=int, default=4, help="concurrent reconciles")
    ctl.add_argument(
        "--member-qps",
        type=float,
        default=0.0,
        help="each member client's requests per second after its burst (default 0: no limit)",
    )
    ctl.add_argument(
        "--member-burst",
        type=int,
        default=0,
        help="requests a member client may send at once before --member-qps applies",
    )
    ctl.add_argument("--metrics-port", type=int, default=0, help="serve /metrics and /healthz")
    ctl.add_argument(
        "--lease-seconds",
        type=float,
        default=15.0,
        help="leader lease: the longest a standby waits to take over",
    )
    ctl.add_argument(
        "--renew-deadline",
        type=float,
        default=0.0,
        help="a leader that has not renewed its lease for this many seconds stops leading at "
        "once, cancelling its reconciles in flight; shorter than the lease (default 0: two "
        "thirds of --lease-seconds)",
    )
    ctl.add_argument("--lease-namespace", default="kube-system", help="namespace of the Lease")
    ctl.add_argument(
        "--secrets-namespaces",
        default=FLEET_SECRETS_NAMESPACE,
        help="comma-separated namespaces holding member kubeconfig Secrets: the only ones whose "
        f"Secrets the controller lists, watches and renews (default {FLEET_SECRETS_NAMESPACE})",
    )
    ctl.add_argument("--id", help="this replica's identity in the lease (default host-pid)")
    ctl.add_argument(
        "--fleet-id",
        default=os.environ.get("FLEET_ID"),
        help="value of the managed-by label on member objects, so fleets can share members "
        "(default: fleet- and the start of the fleet's kube-system namespace UID)",
    )
    ctl.add_argument(
        "--sweep-interval",
        type=float,
        default=300.0,
        help="seconds between the collector's passes over every member for copies no binding "
        "wants (0: only when a member (re)connects)",
    )
    ctl.add_argument(
        "--resync-interval",
        type=float,
        default=30.0,
        help="seconds between reconciles of every bound job, which also bound how long a "
        "change to a propagated Secret or ConfigMap takes to reach the members (0: off)",
    )
    ctl.add_argument(
        "--token-renew-before",
        type=float,
        default=0.0,
        help="renew a joined member's bound token this many seconds before it expires "
        "(default 0: at 80%% of its lifetime)",
    )
    ctl.add_argument(
        "--guard-check-interval",
        type=float,
        default=60.0,
        help="seconds between checks, with fleet's token, that each member's admission policy "
        "(the guard fleet join installed) still refuses what it must (default 60): a member "
        "whose guard is gone is Guarded=False and takes no new gangs",
    )
    ctl.add_argument(
        "--queue-placement-timeout",
        type=float,
        default=300.0,
        help="seconds a job released by the queue may stay unplaced before it backs off "
        "(TimeoutBackoff; default 300)",
    )
    ctl.add_argument(
        "--queue-backoff",
        type=float,
        default=60.0,
        help="first backoff after a placement timeout, doubling with each attempt (default 60)",
    )
    ctl.add_argument(
        "--queue-backoff-limit",
        type=float,
        default=900.0,
        help="longest backoff after a placement timeout (default 900)",
    )
    ctl.add_argument(
        "--queue-reclaim",
        choices=("on", "off"),
        default="on",
        help="a job waiting within its quota's min evicts gangs that borrow (default on)",
    )
    ctl.add_argument(
        "--queue-preemption",
        choices=("on", "off"),
        default="off",
        help="a job evicts lower-priority gangs of its own queue (default off)",
    )
    ctl.add_argument(
        "--queue-reclaim-unplaced",
        choices=("on", "off"),
        default="on",
        help="a job holding its quota that no member can place may reclaim node capacity too, "
        "the room it frees held for it (default on)",
    )
    ctl.add_argument(
        "--queue-reclaim-loss-per-gpu",
        default="86400",
        help="seconds of work one reclaim eviction may destroy per GPU the job that reclaims "
        "asks: a gang that has run longer since its start or last checkpoint is spared "
        "(default 86400: a day; off: no limit)",
    )
    ctl.add_argument(
        "--queue-reclaim-delay",
        type=float,
        default=AdmissionSettings.reclaim_delay,
        help="seconds a dequeued job that no member can place waits before it may reclaim node "
        "capacity (with --queue-reclaim-unplaced on; default "
        f"{AdmissionSettings.reclaim_delay:.0f}: room that jobs about to end free comes first)",
    )
    ctl.add_argument(
        "--queue-reclaim-worth",
        choices=("on", "off"),
        default="on" if AdmissionSettings.reclaim_worth else "off",
        help="evict only when the claimant's wait saved outweighs the work lost, and never gangs "
        "that all end by their declared limits (activeDeadlineSeconds) within 5 minutes "
        "(default off)",
    )
    ctl.add_argument(
        "--queue-reclaim-grace",
        type=float,
        default=30.0,
        help="seconds between recording an eviction (reclaim or preemption) and deleting the "
        "victim's member copy (default 30: Kubernetes' default termination grace; 0: at once)",
    )
    ctl.add_argument("-v", "--verbose", action="store_true")
    ctl.set_defaults(func=_cmd_controller)
    dash = sub.add_parser(
        "dashboard",
        help="serve a read-only web page of the fleet, live (docs/dashboard.md)",
    )
    _fleet_flags(dash)
    dash.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; the page has no login)",
    )
    dash.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    dash.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="also answer requests whose Host (or cross-origin Origin) names NAME (repeatable); "
        "by default only the --host address and, on loopback or 0.0.0.0, localhost are "
        "answered, against DNS rebinding (docs/dashboard.md)",
    )
    dash.add_argument(
        "--auth-headers",
        action="store_true",
        help="behind an authenticating proxy: answer only requests naming their user in "
        "--user-header (401 without it), and serve a job's page and log only to a user the "
        "fleet's RBAC lets get that job (SubjectAccessReview; docs/dashboard.md)",
    )
    dash.add_argument(
        "--user-header",
        default="X-Remote-User",
        metavar="NAME",
        help="the header the proxy names the user in (default X-Remote-User; oauth2-proxy: "
        "X-Forwarded-User)",
    )
    dash.add_argument(
        "--group-header",
        default="X-Remote-Group",
        metavar="NAME",
        help="the header the proxy names the user's groups in, repeated or comma-separated "
        "(default X-Remote-Group; oauth2-proxy: X-Forwarded-Groups)",
    )
    dash.add_argument("-v", "--verbose", action="store_true")
    dash.set_defaults(func=_cmd_dashboard)
    inst = sub.add_parser("install", help="apply fleet's CRDs to the fleet API server")
    _fleet_flags(inst)
    inst.set_defaults(func=_cmd_install)
    jn = sub.add_parser(
        "join", help="make fleet's own identity in a member and register it (docs/security.md)"
    )
    _fleet_flags(jn)
    jn.add_argument("name", help="the member's name in the fleet")
    jn.add_argument(
        "--member-kubeconfig",
        help="YOUR kubeconfig reaching the member (default: $KUBECONFIG); used once, never stored",
    )
    jn.add_argument("--member-context", help="context in that kubeconfig (default: current)")
    jn.add_argument("--label", action="append", help="key=value label for clusterAffinity")
    jn.add_argument(
        "--member-namespace",
        default=DEFAULT_MEMBER_NAMESPACE,
        help=f"namespace for fleet's identity in the member (default {DEFAULT_MEMBER_NAMESPACE})",
    )
    jn.add_argument(
        "--token-type",
        choices=["bound", "secret"],
        default="bound",
        help="bound: a TokenRequest token with an expiry, renewed by the controller (default); "
        "secret: a long-lived service-account-token Secret, for members that forbid TokenRequest",
    )
    jn.add_argument(
        "--token-expiration",
        type=int,
        default=DEFAULT_TOKEN_SECONDS,
        help=f"lifetime of a bound token in seconds (default {DEFAULT_TOKEN_SECONDS}, min 600)",
    )
    jn.add_argument(
        "--viewer-token-expiration",
        type=int,
        default=DEFAULT_VIEWER_TOKEN_SECONDS,
        help="lifetime in seconds of the people's read-only token (kubectl amc, the dashboard; "
        f"default {DEFAULT_VIEWER_TOKEN_SECONDS}: 30 days, min 600); not renewed: `fleet join` "
        "again issues a new one",
    )
    jn.add_argument(
        "--secrets-namespace",
        default=FLEET_SECRETS_NAMESPACE,
        help="namespace of the kubeconfig Secret on the fleet: the chart's "
        f"(default {FLEET_SECRETS_NAMESPACE}); another is refused unless the controller may "
        "watch and renew Secrets there (the chart's controller.secretsNamespaces)",
    )
    jn.add_argument(
        "--controller-service-account",
        default=f"{FLEET_SECRETS_NAMESPACE}/fleet-controller",
        help="the controller's ServiceAccount on the fleet, NAMESPACE/NAME, asked about for "
        f"--secrets-namespace (default {FLEET_SECRETS_NAMESPACE}/fleet-controller)",
    )
    jn.add_argument(
        "--namespaces",
        metavar="NS[,NS...]",
        help="existing member namespaces to open to this fleet's jobs (the label "
        "open-to.fleet.dev/<fleet id>=true, written with YOUR credentials); elsewhere fleet "
        "dispatches only into namespaces it creates (docs/security.md)",
    )
    jn.add_argument(
        "--dry-run", action="store_true", help="print what would be created, send nothing"
    )
    jn.add_argument(
        "--force",
        action="store_true",
        help="re-point NAME at another cluster: its jobs are moved off first (as unjoin --move)",
    )
    jn.add_argument(
        "--rotate",
        action="store_true",
        help="revoke every token issued so far: fleet's ServiceAccounts in the member are "
        "deleted and made again (new UIDs) before the new token is issued (docs/security.md)",
    )
    jn.add_argument(
        "--timeout", type=float, default=300.0, help="seconds --force waits (default 300)"
    )
    _fleet_id_flag(jn)
    jn.set_defaults(func=_cmd_join)
    uj = sub.add_parser(
        "unjoin", help="remove a member from the fleet and fleet's identity from the member"
    )
    _fleet_flags(uj)
    uj.add_argument("name", help="the member's name in the fleet")
    uj.add_argument(
        "--member-kubeconfig",
        help="YOUR kubeconfig reaching the member, to remove fleet's identity there "
        "(without it or --member-context, only the fleet side is removed)",
    )
    uj.add_argument("--member-context", help="context in that kubeconfig (default: current)")
    jobs = uj.add_mutually_exclusive_group()
    jobs.add_argument(
        "--move", action="store_true", help="fail the member's jobs over first (MemberUnjoined)"
    )
    jobs.add_argument(
        "--leave", action="store_true", help="leave the member's jobs running there, unmanaged"
    )
    uj.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds --move or --leave waits for the controller (default 300)",
    )
    _fleet_id_flag(uj)
    uj.set_defaults(func=_cmd_unjoin)
    sub.add_parser("simulate", help="replay GPU traces through the placement code (see --help)")
    sub.add_parser("amc", help="kubectl amc: objects across member clusters (see --help)")
    tc = sub.add_parser("toolchain", help="build (or find) the pinned upstream binaries")
    tc.add_argument(
        "--operator",
        action="append",
        choices=sorted(OPERATOR_PARTS),
        help="also build (or find) this job operator (repeatable), as members that run it do",
    )
    tc.set_defaults(func=_cmd_toolchain)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["simulate"]:
        from fleet.simulate.cli import main as simulate

        return simulate(argv[1:])
    if argv[:1] == ["amc"]:
        from fleet.amc import main as amc

        return amc(argv[1:])
    from fleet.kube import KubeError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (SandboxError, KubeError) as e:
        print(f"fleet: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fleet: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug or an unforeseen failure: one line, the traceback on request
        if os.environ.get("FLEET_DEBUG"):
            raise
        print(
            f"fleet: error: {args.command}: {type(e).__name__}: {e} "
            "(set FLEET_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
