"""The words of rejection sentences, kept in one place so they read alike.

Each sentence explains one cluster in one line with the numbers that matter (what the gang needs,
what is free, where it breaks). They land in Kubernetes Events and status conditions, so each is
capped at `MAX_SENTENCE` characters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from fleet.core.resources import PODS, Resources, format_amount

MAX_SENTENCE = 200

#: One number behind a sentence, or the resource it is about.
Fact = int | str


class Sentence:
    """A sentence whose words are put together only when someone reads it.

    At a thousand clusters most rejections are never read; formatting them all would cost more
    than deciding. The numbers are captured when the sentence is made, so a later change to the
    snapshot does not change what it says.
    """

    __slots__ = ("_args", "_build", "_text", "facts")

    def __init__(
        self, build: Callable[..., str], *args: Any, facts: Mapping[str, Fact] | None = None
    ) -> None:
        self._build = build
        self._args = args
        self._text: str | None = None
        #: The numbers the sentence is made of, for machines (`resource`, `needed`, `free`, ...):
        #: a caller that needs them reads these, never the words.
        self.facts: Mapping[str, Fact] = facts if facts is not None else {}

    def __str__(self) -> str:
        if self._text is None:
            self._text = self._build(*self._args)
        return self._text

    def __repr__(self) -> str:
        return repr(str(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sentence | str):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))


class LazyFacts(Mapping[str, Fact]):
    """A sentence's facts, worked out the first time they are read (with the sentence's words,
    when both need the same search): a rejection nobody reads costs nothing."""

    __slots__ = ("_compute", "_facts")

    def __init__(self, compute: Callable[[], Mapping[str, Fact]]) -> None:
        self._compute: Callable[[], Mapping[str, Fact]] | None = compute
        self._facts: dict[str, Fact] | None = None

    def _resolved(self) -> dict[str, Fact]:
        if self._facts is None:
            assert self._compute is not None
            self._facts = dict(self._compute())
            self._compute = None
        return self._facts

    def __getitem__(self, key: str) -> Fact:
        return self._resolved()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._resolved())

    def __len__(self) -> int:
        return len(self._resolved())


#: What estimators and filters return to explain a rejection.
Reason = str | Sentence


def facts_of(reason: Reason) -> Mapping[str, Fact]:
    """The numbers behind a reason; none for a plain sentence (a filter's)."""
    return reason.facts if isinstance(reason, Sentence) else {}


def clip(sentence: str, limit: int = MAX_SENTENCE) -> str:
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def plural(name: str, count: int) -> str:
    """`1 master`, `4 workers`, `2 ps`."""
    if count == 1 or name.endswith("s"):
        return f"{count} {name}"
    return f"{count} {name}s"


def roster(parts: Iterable[tuple[str, int]]) -> str:
    """`1 master + 4 workers`."""
    return " + ".join(plural(name, count) for name, count in parts)


def pods_needing(
    parts: Iterable[tuple[str, int]], requests: Resources, focus: Iterable[str] | None = None
) -> str:
    """`4 workers x 2 GPUs`: pods and the per-pod amounts of the `focus` resources."""
    names = list(focus) if focus is not None else [r for r in requests if r != PODS]
    shown = Resources({r: requests[r] for r in names if r in requests})
    what = shown.describe(skip_pods=focus is None) if shown else "no resources"
    return f"{roster(parts)} x {what}"


def amount(resource: str, value: int) -> str:
    return format_amount(resource, value)


def constraint_sentence(role_text: str, reasons: Mapping[str, int]) -> str:
    """`no node admits the workers: 12 are cordoned, 30 lack label gpu=a100`."""
    ranked = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    detail = ", ".join(f"{count} {reason}" for reason, count in ranked[:3])
    if not ranked:
        detail = "the cluster has no nodes"
    return clip(f"no node admits the {role_text}: {detail}")
