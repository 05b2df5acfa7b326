"""What can go wrong in `kubectl amc`, and the exit codes that say so.

A member that cannot be asked is never fatal: it is one warning line, the other members are
still shown, and the exit code says the answer is incomplete. Only a request that cannot be
answered at all (no fleet, an unknown kind or cluster, nothing found) is an error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: Everything asked was answered.
EXIT_OK: Final = 0
#: Nothing could be shown: the fleet is unreachable, the kind, cluster or object is unknown.
EXIT_ERROR: Final = 1
#: The command line itself is wrong (argparse's code).
EXIT_USAGE: Final = 2
#: What could be shown was shown, but at least one member cluster could not be asked.
EXIT_INCOMPLETE: Final = 3

EXIT_CODES_HELP: Final = f"""\
exit codes:
  {EXIT_OK}  everything asked was answered
  {EXIT_ERROR}  nothing could be shown (fleet unreachable; unknown kind, cluster or object)
  {EXIT_USAGE}  the command line is wrong
  {EXIT_INCOMPLETE}  shown what could be, but a member cluster could not be asked (one
     `warning:` line each: unreachable, kubeconfig Secret missing, forbidden or invalid)
"""


class AmcError(Exception):
    """A request kubectl amc cannot answer; printed as one `error:` line."""


@dataclass(frozen=True)
class MemberProblem:
    """Why one member cluster could not be asked; `message` is the whole line and names it."""

    member: str
    message: str

    def __str__(self) -> str:
        return self.message


class MemberUnavailable(Exception):
    """A member cluster cannot be asked (its Secret, its kubeconfig, its API server)."""

    def __init__(self, problem: MemberProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def warn(message: object) -> None:
    print(f"warning: {message}", file=sys.stderr)


def report(problems: Sequence[MemberProblem]) -> int:
    """One warning line per member that could not be asked; the exit code that says so."""
    for problem in problems:
        warn(problem)
    return EXIT_INCOMPLETE if problems else EXIT_OK


def none_answered(problems: Sequence[MemberProblem]) -> AmcError:
    """The error when not one member could be asked: the one reason itself, or (after a
    warning line for each) how many there were."""
    if len(problems) == 1:
        return AmcError(problems[0].message)
    report(problems)
    return AmcError(f"none of the {len(problems)} member clusters asked could answer")
