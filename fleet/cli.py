"""The `fleet` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from fleet.sandbox import ClusterStatus, Sandbox, SandboxConfig, SandboxError, ensure_toolchain


def _sandbox(args: argparse.Namespace) -> Sandbox:
    return Sandbox(Path(args.state_dir) if args.state_dir else None)


def _cmd_sandbox_up(args: argparse.Namespace) -> int:
    config = (
        SandboxConfig.load(Path(args.config))
        if args.config
        else SandboxConfig.default(args.members)
    )
    sandbox = _sandbox(args)
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
    sandbox = _sandbox(args)
    sandbox.up(SandboxConfig.default(3))
    _print_status(sandbox)
    print(f"\nexport KUBECONFIG={sandbox.kubeconfig}   # contexts: fleet, member-1..3")
    print("stop it with: fleet sandbox down")
    return 0


def _cmd_toolchain(args: argparse.Namespace) -> int:
    tc = ensure_toolchain()
    print(tc.root)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleet", description=__doc__)
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
    up.add_argument("--members", type=int, default=3, help="number of member clusters (default 3)")
    up.add_argument("--config", help="a sandbox YAML file describing members and their nodes")
    up.add_argument("--timeout", type=float, default=180, help="seconds to wait for each phase")
    up.set_defaults(func=_cmd_sandbox_up)
    ssub.add_parser("down", help="stop every sandbox process and remove its state").set_defaults(
        func=_cmd_sandbox_down
    )
    ssub.add_parser("status", help="health, endpoint and node/GPU totals per cluster").set_defaults(
        func=_cmd_sandbox_status
    )
    demo = sub.add_parser("demo", help="sandbox up, then the seeds' example end to end")
    demo.add_argument("--state-dir", help="sandbox state folder (default as for `fleet sandbox`)")
    demo.set_defaults(func=_cmd_demo)
    tc = sub.add_parser("toolchain", help="build (or find) the pinned upstream binaries")
    tc.set_defaults(func=_cmd_toolchain)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SandboxError as e:
        print(f"fleet: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fleet: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
