"""The ElasticQuotaTree in force: one tree, in kube-system, checked by the core.

Only one tree is honoured: the oldest in `kube-system` (ACK's rule: one tree, in kube-system).
Every other tree gets `status.state: Ignored` and a `QuotaTreeIgnored` Event saying why. The
honoured tree's spec is checked by `fleet.core.quota.check_tree` (through the admission, which
puts it in force only when it is valid):

* valid: it is put in force (`QuotaTreeApplied` Event once per generation), `status.state:
  Active`, warnings listed in `status.problems` and a `QuotaTreeWarning` Event;
* invalid: the last valid tree stays in force (`status.state: Invalid`, `status.inForce` the
  generation still used), every broken rule in `status.problems` and one `QuotaTreeInvalid`
  Event naming each node and rule.

The spec in force is kept in `status.inForce.spec`, so a controller restarted while the latest
edit is invalid keeps using the last valid tree.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from fleet.api import constants as c
from fleet.controller.events import EventRecorder
from fleet.core.admission import Admission
from fleet.core.quota import QuotaProblem, TreeCheck, check_tree
from fleet.kube import KubeClient, Obj

log = logging.getLogger(__name__)

TREE = (c.ELASTIC_QUOTA_API_VERSION, "ElasticQuotaTree")


@dataclasses.dataclass(frozen=True)
class InForce:
    """Which tree, at which generation, the admission is using."""

    namespace: str
    name: str
    generation: int
    spec: Mapping[str, Any]


def honoured(trees: Mapping[tuple[str, str], Obj]) -> tuple[Obj | None, list[Obj]]:
    """The tree fleet honours (the oldest in kube-system, then by name) and the ignored rest."""
    candidates = sorted(
        (t for (namespace, _), t in trees.items() if namespace == c.QUOTA_TREE_NAMESPACE),
        key=lambda t: (t["metadata"].get("creationTimestamp") or "", t["metadata"]["name"]),
    )
    chosen = candidates[0] if candidates else None
    return chosen, [t for t in trees.values() if t is not chosen]


def _problems(check: TreeCheck) -> list[dict[str, Any]] | None:
    return [
        {
            "node": p.path or "spec.root",
            "field": p.field,
            "rule": p.rule,
            "severity": p.severity,
            "message": p.message,
        }
        for p in check.problems
    ] or None


def _sentence(problems: tuple[QuotaProblem, ...]) -> str:
    return "; ".join(str(p) for p in problems)


def _ref(in_force: InForce | None) -> dict[str, Any] | None:
    if in_force is None:
        return None
    return {
        "namespace": in_force.namespace,
        "name": in_force.name,
        "generation": in_force.generation,
        "spec": dict(in_force.spec),
    }


class Trees:
    """Every ElasticQuotaTree (by namespace and name) and which one is in force."""

    def __init__(self, fleet: KubeClient, events: EventRecorder) -> None:
        self.fleet = fleet
        self.events = events
        self.objects: dict[tuple[str, str], Obj] = {}
        self.in_force: InForce | None = None
        #: Whether the trees have been read since this replica started leading.
        self.read = False

    def event(self, obj: Obj, *, deleted: bool) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if deleted:
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj

    def reset(self, listed: list[Obj]) -> None:
        """Start over from a fresh list (a restart): nothing is in force until `sync`."""
        self.objects = {(t["metadata"]["namespace"], t["metadata"]["name"]): t for t in listed}
        self.in_force = None
        self.read = False

    async def sync(self, admission: Admission, *, announce: bool = True) -> bool:
        """Put the honoured tree in force if it is valid, and write every tree's status. True when
        the tree in force changed. `announce` False (a restart) posts no `QuotaTreeApplied`."""
        chosen, ignored = honoured(self.objects)
        for tree in ignored:
            await self._ignore(tree, chosen)
        if chosen is None:
            changed = self.in_force is not None or not self.read
            if changed:
                admission.set_tree(None)
                self.in_force = None
                self.read = True
                log.info("no ElasticQuotaTree in %s: no quota in force", c.QUOTA_TREE_NAMESPACE)
            return changed
        meta = chosen["metadata"]
        generation = int(meta.get("generation") or 0)
        spec = chosen.get("spec") or {}
        current = self.in_force
        same = (
            current is not None
            and (current.namespace, current.name) == (meta["namespace"], meta["name"])
            and current.generation == generation
        )
        changed = False
        if same:
            check = check_tree(spec)
        else:
            check = admission.apply_tree_spec(spec)
            if check.valid:
                self.in_force = InForce(meta["namespace"], meta["name"], generation, spec)
                changed = True
            elif not self.read:
                changed = self._restore_in_force(admission, chosen)
        self.read = True
        if check.valid:
            if changed and announce:
                await self.events.record(
                    chosen,
                    "QuotaTreeApplied",
                    f"generation {generation} is in force: {len(admission.tree or ())} quota nodes",
                )
            if check.warnings:
                await self.events.record(
                    chosen, "QuotaTreeWarning", _sentence(check.warnings), warning=True
                )
            status: dict[str, Any] = {
                "state": "Active",
                "valid": True,
                "message": str(check.warnings[0]) if check.warnings else None,
            }
        else:
            kept = (
                f"generation {self.in_force.generation} stays in force"
                if self.in_force is not None
                else "no tree is in force"
            )
            await self.events.record(
                chosen,
                "QuotaTreeInvalid",
                f"{_sentence(check.errors)}; {kept}",
                warning=True,
            )
            status = {"state": "Invalid", "valid": False, "message": str(check.errors[0])}
        status |= {
            "observedGeneration": generation,
            "inForce": _ref(self.in_force),
            "problems": _problems(check),
        }
        await self._write_status(chosen, status)
        return changed

    def _restore_in_force(self, admission: Admission, tree: Obj) -> bool:
        """After a restart the latest spec is invalid: use the valid spec the status kept."""
        kept = ((tree.get("status") or {}).get("inForce")) or {}
        spec = kept.get("spec")
        if not isinstance(spec, Mapping):
            admission.set_tree(None)
            return False
        check = admission.apply_tree_spec(spec)
        if not check.valid:
            admission.set_tree(None)
            return False
        meta = tree["metadata"]
        self.in_force = InForce(
            meta["namespace"], meta["name"], int(kept.get("generation") or 0), dict(spec)
        )
        return True

    async def _ignore(self, tree: Obj, chosen: Obj | None) -> None:
        meta = tree["metadata"]
        if meta["namespace"] != c.QUOTA_TREE_NAMESPACE:
            why = (
                f"only an ElasticQuotaTree in {c.QUOTA_TREE_NAMESPACE} is honoured; this one is in "
                f"{meta['namespace']}"
            )
        else:
            other = chosen["metadata"]["name"] if chosen else "another tree"
            why = f"only one ElasticQuotaTree is honoured: {c.QUOTA_TREE_NAMESPACE}/{other} is"
        current = tree.get("status") or {}
        if current.get("state") == "Ignored" and current.get("message") == why:
            return
        await self.events.record(tree, "QuotaTreeIgnored", why, warning=True)
        await self._write_status(
            tree,
            {
                "state": "Ignored",
                "valid": None,
                "message": why,
                "observedGeneration": meta.get("generation"),
                "inForce": None,
                "problems": None,
            },
        )

    async def _write_status(self, tree: Obj, status: dict[str, Any]) -> None:
        current = tree.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return
        meta = tree["metadata"]
        if current.get("inForce") and current.get("inForce") != status.get("inForce"):
            # A merge patch would merge the old spec into the new one: clear it first.
            await self.fleet.patch(
                *TREE,
                meta["name"],
                {"status": {"inForce": None}},
                meta["namespace"],
                subresource="status",
            )
        updated = await self.fleet.patch(
            *TREE, meta["name"], {"status": status}, meta["namespace"], subresource="status"
        )
        self.objects[(meta["namespace"], meta["name"])] = updated
