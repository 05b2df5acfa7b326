"""The command line of `kubectl amc` (also `fleet amc`): parsing, and one line per failure."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime

from fleet.amc import describe, get, logs
from fleet.amc.errors import EXIT_CODES_HELP, EXIT_ERROR, AmcError
from fleet.amc.members import Dial, Fleet, dial
from fleet.kube import KubeError

DESCRIPTION = """\
Look at what fleet placed in its member clusters, from the fleet, as ACK One's AMC does.

  kubectl amc get pytorchjob -M                        every member, with CLUSTER and ADOPTION
  kubectl amc get pod -m member-1,member-2 -n team-a   some members
  kubectl amc get pytorchjob pytorch-test -m member-1 -o yaml
  kubectl amc describe pytorchjob pytorch-test         the fleet job, its binding, its copy
  kubectl amc logs pytorchjob/pytorch-test --replica worker-0 -f

Members and their kubeconfigs come from the fleet (MemberClusters and the Secrets they name):
the fleet kubeconfig is all you need.
"""


def _fleet_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="the fleet's kubeconfig (default: $KUBECONFIG)")
    parser.add_argument("--context", help="the context in it (default: its current context)")
    parser.add_argument(
        "-n", "--namespace", help="namespace (default: the context's, else default)"
    )


def _members(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected member cluster names, comma-separated")
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl amc",
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="verb", required=True, metavar="{get,describe,logs}")

    g = sub.add_parser(
        "get",
        help="list or show objects of one kind in member clusters",
        description="List or show objects of one kind in member clusters.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument("kind", help="any kind the members serve: pytorchjob, pods, po, jobs.batch")
    g.add_argument("name", nargs="?")
    scope = g.add_mutually_exclusive_group(required=True)
    scope.add_argument("-M", "--all-members", action="store_true", help="every member cluster")
    scope.add_argument(
        "-m",
        "--member",
        type=_members,
        action="extend",
        help="member clusters, comma-separated or repeated",
    )
    _fleet_flags(g)
    g.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    g.add_argument("-l", "--selector", help="label selector, as kubectl's (-l app=x,tier!=db)")
    g.add_argument("-o", "--output", choices=get.OUTPUTS, help="wide, yaml, json or name")

    d = sub.add_parser(
        "describe",
        help="a fleet job, its GangBinding and its member copy, in one view",
        description=(
            "The fleet object and its conditions and events, its GangBinding (cluster, phase, "
            "placement and failover history, why other clusters were rejected), and the "
            "member copy's status, pods and events."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("kind", help="the fleet object's kind: pytorchjob, tfjob, jobs.batch, ...")
    d.add_argument("name")
    _fleet_flags(d)

    lg = sub.add_parser(
        "logs",
        help="a job's pod log, from the member it runs in",
        description=(
            "Print (or follow) the log of one pod of a job, read through the API server of the "
            "member the job's GangBinding placed it in. Pods are named as the training "
            "operator names them: <job>-<replica type>-<index>."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lg.add_argument("job", metavar="KIND/NAME", help="the fleet job: pytorchjob/pytorch-test")
    lg.add_argument(
        "--replica",
        help="which pod: worker-0, ps-1, master (index 0); default: master or chief, else worker-0",
    )
    lg.add_argument("-c", "--container", help="container (default: the pod's default or first)")
    lg.add_argument("-f", "--follow", action="store_true", help="keep streaming new lines")
    lg.add_argument("--tail", type=int, metavar="N", help="only the last N lines")
    _fleet_flags(lg)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    connect: Dial = dial,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """`connect` makes the clients (tests pass one on an httpx.MockTransport), `clock` says
    what time it is (for ages)."""
    args = build_parser().parse_args(argv)
    try:
        with ExitStack() as stack:
            fleet = Fleet.open(args.kubeconfig, args.context, stack, connect)
            namespace = args.namespace or fleet.namespace
            if args.verb == "get":
                if args.name and args.selector:
                    raise AmcError("a name and a label selector (-l) cannot be given together")
                request = get.GetRequest(
                    word=args.kind,
                    name=args.name,
                    members=None if args.all_members else args.member,
                    namespace=None if args.all_namespaces else namespace,
                    label_selector=args.selector,
                    output=args.output,
                )
                return get.run(fleet, request, clock())
            if args.verb == "describe":
                return describe.run(fleet, args.kind, args.name, namespace, clock())
            if args.tail is not None and args.tail < 0:
                raise AmcError(f"--tail must not be negative, got {args.tail}")
            request_logs = logs.LogsRequest.parse(
                args.job, namespace, args.replica, args.container, args.follow, args.tail
            )
            return logs.run(fleet, request_logs)
    except (AmcError, KubeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `| head` closed the pipe: not an error. Point stdout at nothing so the interpreter's
        # final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
