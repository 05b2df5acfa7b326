"""Member clusters: one connection each, a live snapshot, a health verdict, a status writer.

registry.py    membership: MemberClusters, their Secrets, serialized (re)connects
connection.py  one connection generation: its client, watches and probe
feed.py        node and pod events into the member's ClusterSnapshot
health.py      the Ready/NotReady verdict (pure)
status.py      the MemberCluster status, written by the leader
secrets.py     watching the kubeconfig Secrets
member.py      one member's state
"""

from fleet.controller.members.member import Member
from fleet.controller.members.registry import (
    Connect,
    MemberListener,
    MemberRegistry,
    connect_with_kubeconfig,
)

__all__ = ["Connect", "Member", "MemberListener", "MemberRegistry", "connect_with_kubeconfig"]
