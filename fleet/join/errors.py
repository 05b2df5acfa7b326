"""The one error of `fleet join` and `fleet unjoin`, apart from the modules that raise it (the
join, its waits in fleet.join.in_force, unjoin), so none of them imports another for it."""

from __future__ import annotations

__all__ = ["JoinError"]


class JoinError(Exception):
    """`fleet join` (or unjoin) could not do what was asked; the message is one line."""
