"""An immutable vector of resource amounts in kube-scheduler's canonical integer units.

Every amount is an `int`: millicores for `cpu`, base units (bytes, devices, pod slots) for
everything else, so comparisons are exact and shapes can be hashed and grouped. Zero entries are
dropped on construction, which makes two vectors that mean the same thing compare and hash equal.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

from fleet.core.errors import FieldError, join
from fleet.core.quantity import canonical_amount

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
GPU = "nvidia.com/gpu"

#: Extended resources that count devices; printed as "2 GPUs" rather than "2 amd.com/gpu".
ACCELERATORS = frozenset({GPU, "amd.com/gpu"})

# A count no real gang or node reaches; what `copies_in` answers for a demand of nothing.
UNBOUNDED = 1 << 62


class Resources(Mapping[str, int]):
    """Resource name -> amount; hashable, immutable, zero-free."""

    __slots__ = ("_amounts", "_hash")

    _amounts: dict[str, int]
    _hash: int | None

    def __init__(self, amounts: Mapping[str, int] | None = None, /, **more: int) -> None:
        merged: dict[str, int] = {}
        for source in (amounts or {}, more):
            for name, amount in source.items():
                if isinstance(amount, bool) or not isinstance(amount, int):
                    raise TypeError(f"resource {name!r}: amount must be an int, got {amount!r}")
                if amount:
                    merged[name] = amount
        self._amounts = merged
        self._hash = None

    @classmethod
    def _trusted(cls, amounts: dict[str, int]) -> Resources:
        """Wrap a zero-free dict of ints without copying (hot paths inside the core)."""
        obj = cls.__new__(cls)
        obj._amounts = amounts
        obj._hash = None
        return obj

    @classmethod
    def parse(cls, raw: object, *, field: str = "") -> Resources:
        """Parse a Kubernetes ResourceList (`{"cpu": "500m", "nvidia.com/gpu": 2}`).

        Negative amounts are rejected: no request, limit or allocatable may be negative.
        """
        if raw is None:
            return EMPTY
        if not isinstance(raw, Mapping):
            raise FieldError(field, f"expected a map of resource quantities, got {raw!r}")
        amounts: dict[str, int] = {}
        for name, value in raw.items():
            where = join(field, str(name))
            amount = canonical_amount(str(name), value, field=where)
            if amount < 0:
                raise FieldError(where, f"negative quantity {value!r}")
            if amount:
                amounts[str(name)] = amount
        return cls._trusted(amounts)

    # Mapping protocol -------------------------------------------------------------------------
    def __getitem__(self, name: str) -> int:
        return self._amounts[name]

    def get(self, name: str, default: Any = 0) -> Any:
        return self._amounts.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    # The dict's own views: the Mapping defaults go through __getitem__ per key, and these are
    # on every hot path (snapshot updates, packing).
    def items(self) -> ItemsView[str, int]:
        return self._amounts.items()

    def keys(self) -> KeysView[str]:
        return self._amounts.keys()

    def values(self) -> ValuesView[int]:
        return self._amounts.values()

    def __len__(self) -> int:
        return len(self._amounts)

    def __contains__(self, name: object) -> bool:
        return name in self._amounts

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._amounts == other._amounts
        if isinstance(other, Mapping):
            return self._amounts == {k: v for k, v in other.items() if v}
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._amounts.items()))
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v}" for k, v in sorted(self._amounts.items()))
        return f"Resources({{{inner}}})"

    def __str__(self) -> str:
        return self.describe()

    def __reduce__(self) -> tuple[Any, ...]:
        return (Resources, (dict(self._amounts),))

    # Arithmetic -------------------------------------------------------------------------------
    def __add__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._amounts)
        for name, amount in other.items():
            total = out.get(name, 0) + amount
            if total:
                out[name] = total
            else:
                out.pop(name, None)
        return Resources._trusted(out)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._amounts)
        for name, amount in other.items():
            total = out.get(name, 0) - amount
            if total:
                out[name] = total
            else:
                out.pop(name, None)
        return Resources._trusted(out)

    def __mul__(self, times: int) -> Resources:
        if not times:
            return EMPTY
        return Resources._trusted({k: v * times for k, v in self._amounts.items()})

    __rmul__ = __mul__

    def max(self, other: Mapping[str, int]) -> Resources:
        """Per-resource maximum (how init containers combine with app containers)."""
        out = dict(self._amounts)
        for name, amount in other.items():
            if amount > out.get(name, 0):
                out[name] = amount
        return Resources._trusted({k: v for k, v in out.items() if v})

    def clamped(self) -> Resources:
        """Negative amounts raised to zero: an over-committed node has nothing free, not less."""
        if all(v > 0 for v in self._amounts.values()):
            return self
        return Resources._trusted({k: v for k, v in self._amounts.items() if v > 0})

    def fits_in(self, free: Mapping[str, int]) -> bool:
        """True when every positive amount here is available in `free` (kube-scheduler's Fit)."""
        get = free.get
        return all(amount <= get(name, 0) for name, amount in self._amounts.items() if amount > 0)

    def copies_in(self, free: Mapping[str, int]) -> int:
        """How many copies of this demand fit in `free` at once."""
        get = free.get
        best = UNBOUNDED
        for name, amount in self._amounts.items():
            if amount > 0:
                n = get(name, 0) // amount
                if n < best:
                    if n <= 0:
                        return 0
                    best = n
        return best

    def without(self, *names: str) -> Resources:
        return Resources._trusted({k: v for k, v in self._amounts.items() if k not in names})

    def as_dict(self) -> dict[str, int]:
        return dict(self._amounts)

    def quantities(self, *, skip_pods: bool = True) -> dict[str, str]:
        """As a Kubernetes ResourceList (`{"cpu": "1500m", "nvidia.com/gpu": "2"}`)."""
        return {
            name: to_quantity(name, amount)
            for name, amount in self._amounts.items()
            if not (skip_pods and name == "pods")
        }

    def describe(self, *, skip_pods: bool = True) -> str:
        """Human form for Events: `2 GPUs, 1500m CPU, 4Gi memory`."""
        names = sorted(self._amounts, key=display_rank)
        parts = [
            format_amount(name, self._amounts[name])
            for name in names
            if not (skip_pods and name == PODS)
        ]
        return ", ".join(parts) if parts else "nothing"


EMPTY = Resources()


def display_rank(name: str) -> tuple[int, str]:
    """Sort key that lists accelerators, then CPU, memory, storage, others, pod slots."""
    if name in ACCELERATORS:
        return (0, name)
    order = {CPU: 1, MEMORY: 2, EPHEMERAL_STORAGE: 3, PODS: 5}
    return (order.get(name, 4), name)


def format_amount(name: str, amount: int) -> str:
    """One amount in the words a user expects: `2 GPUs`, `1500m CPU`, `4Gi memory`."""
    if name in ACCELERATORS:
        return f"{amount} GPU{'' if amount == 1 else 's'}"
    if name == CPU:
        if amount % 1000 == 0:
            return f"{amount // 1000} CPU"
        return f"{amount}m CPU"
    if name == PODS:
        return f"{amount} pod slot{'' if amount == 1 else 's'}"
    if name in (MEMORY, EPHEMERAL_STORAGE) or name.startswith("hugepages-"):
        label = "memory" if name == MEMORY else name
        return f"{format_bytes(amount)} {label}"
    return f"{amount} {name}"


def format_bytes(amount: int) -> str:
    """Binary suffix when exact (`4Gi`), otherwise the largest binary unit with one decimal."""
    if amount == 0:
        return "0"
    for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        unit = 1 << power
        if abs(amount) >= unit:
            if amount % unit == 0:
                return f"{amount // unit}{suffix}"
            return f"{amount / unit:.1f}{suffix}"
    return str(amount)


def to_quantity(name: str, amount: int) -> str:
    """A canonical amount back as a Kubernetes quantity: cpu is held in millicores."""
    if name == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    return str(amount)
