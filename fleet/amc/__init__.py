"""`kubectl amc`: look at what fleet placed in its member clusters, from the fleet, as ACK One's
AMC does.

    kubectl amc get pytorchjob -M                      # every member, with CLUSTER and ADOPTION
    kubectl amc get pod -m member-1 -n team-a          # some members
    kubectl amc describe pytorchjob pytorch-test       # fleet job + GangBinding + member copy
    kubectl amc logs pytorchjob/pytorch-test -f        # its pod's log, from its member

One concept per module: `members` (the fleet, its members, asking them at once), `get`,
`describe`, `logs`, `adoption` (what fleet manages), `output` (how things print), `errors`
(what can go wrong, exit codes), `cli` (the command line).
"""

from fleet.amc.cli import main

__all__ = ["main"]
