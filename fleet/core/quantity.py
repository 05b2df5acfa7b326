"""Kubernetes resource quantities, turned into the integers kube-scheduler compares.

kube-scheduler never compares quantities as decimals: it converts CPU with `MilliValue()` and
every other resource with `Value()`, both rounding up. Doing exactly the same here is what makes
"fits" mean the same thing for us as for the member's scheduler (`0.5` GPUs is one GPU, `1m`
memory is one byte). Parsing follows apimachinery's grammar: a signed decimal number, then one
of the suffixes n u m "" k M G T P E (powers of 10), Ki Mi Gi Ti Pi Ei (powers of 2), or an
exponent `e<int>` / `E<int>`. Values finer than a nano unit are rounded away from zero at parse
time, as apimachinery does.
"""

from __future__ import annotations

import math
from fractions import Fraction

from fleet.core.errors import FieldError

CPU = "cpu"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_DECIMAL_SUFFIXES["E"] = 18
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DIGITS = frozenset("0123456789")
_NANO = Fraction(1, 10**9)
_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1


def parse_quantity(raw: object, *, field: str = "") -> Fraction:
    """Parse a quantity as it appears in JSON/YAML (`"500m"`, `"2Gi"`, `"1e3"`, `2`, `0.5`).

    Returns the exact value (rounded to nano units like apimachinery). Raises `FieldError`
    naming `field` when the value is not a quantity.
    """
    text = _as_text(raw, field)
    value = _parse_text(text)
    if value is None:
        raise FieldError(field, f"unparsable quantity {text!r}")
    return value


def canonical_amount(resource: str, raw: object, *, field: str = "") -> int:
    """The integer kube-scheduler uses for `resource`: millicores for cpu, base units otherwise."""
    value = parse_quantity(raw, field=field)
    if resource == CPU:
        value *= 1000
    return _ceil_away_from_zero(value)


def _as_text(raw: object, field: str) -> str:
    # bool is an int in Python but never a quantity in Kubernetes.
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise FieldError(field, f"unparsable quantity {raw!r}")
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise FieldError(field, f"unparsable quantity {raw!r}")
        return repr(raw)  # shortest round-trip text, the same digits the JSON carried
    return str(raw).strip()


def _parse_text(text: str) -> Fraction | None:
    if not text:
        return None
    if text in ("+", "-"):
        return Fraction(0)  # apimachinery's scanner reads a bare sign as zero
    pos, end = 0, len(text)
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        fstart = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        frac = text[fstart:pos]
    if not whole and not frac:
        return None
    suffix = text[pos:]
    scale = _suffix_scale(suffix)
    if scale is None:
        return None
    base, exponent = scale
    digits = int(whole or "0") * 10 ** len(frac) + int(frac or "0")
    if digits and base == 10 and exponent - len(frac) > 19:
        # At least 10^20: beyond any int64. apimachinery accepts every int32 exponent; the
        # value saturates here, as binary-SI values do, instead of growing a huge integer.
        value = Fraction(_INT64_MAX)
    elif digits and base == 10 and exponent + len(whole) < -10:
        value = _NANO  # below a nano unit: rounded away from zero, as apimachinery does
    else:
        value = Fraction(digits, 10 ** len(frac)) * Fraction(base) ** exponent
        value = _ceil_away_from_zero(value / _NANO) * _NANO
        if value > _INT64_MAX:
            value = Fraction(_INT64_MAX)  # apimachinery silently caps binary-SI quantities
    return -value if negative else value


def _suffix_scale(suffix: str) -> tuple[int, int] | None:
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:]
        digits = exponent[1:] if exponent[0] in "+-" else exponent
        if not digits or not set(digits) <= _DIGITS:
            return None
        value = int(exponent)
        if abs(value) > _INT32_MAX:
            return None  # apimachinery reads the exponent as an int32
        return 10, value
    return None


def _ceil_away_from_zero(value: Fraction) -> int:
    return math.ceil(value) if value >= 0 else math.floor(value)
