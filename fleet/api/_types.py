"""Scalar types shared by every fleet resource, each carrying its Kubernetes OpenAPI shape.

The CRD generator reads the JSON schema these annotations produce, so the Kubernetes form
(int-or-string quantities, RFC 3339 seconds, int32 bounds) is declared once, here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, WithJsonSchema

from fleet.api._time import format_time, from_epoch, to_epoch
from fleet.core.quantity import parse_quantity

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "QUANTITY_PATTERN",
    "FreeForm",
    "Int32",
    "Int64",
    "IntOrString",
    "NonNegInt32",
    "NonNegInt64",
    "PosInt32",
    "PosInt64",
    "Quantity",
    "ResourceList",
    "Time",
    "format_time",
]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

_INT32 = Field(strict=True, ge=-(2**31), le=INT32_MAX, json_schema_extra={"format": "int32"})
_INT64 = Field(strict=True, ge=-(2**63), le=INT64_MAX, json_schema_extra={"format": "int64"})

# Strict: a Kubernetes integer is never a bool or a numeric string. The bounds are what a Go
# int32/int64 holds, so nothing fleet accepts overflows in the API server.
Int32 = Annotated[int, _INT32]
NonNegInt32 = Annotated[int, _INT32, Field(ge=0)]
PosInt32 = Annotated[int, _INT32, Field(ge=1)]
Int64 = Annotated[int, _INT64]
NonNegInt64 = Annotated[int, _INT64, Field(ge=0)]
PosInt64 = Annotated[int, _INT64, Field(ge=1)]

# The canonical Kubernetes quantity grammar (resource.Quantity), as kubebuilder emits it.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _check_quantity(value: Any) -> Any:
    # Before pydantic's int|str union, which would turn True into 1 and 2.0 into 2.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"a quantity is an integer or a string such as '500m', not {value!r}")
    if isinstance(value, str):
        parse_quantity(value)  # the core's grammar: one parser for everything fleet reads
    return value


Quantity = Annotated[
    int | str,
    BeforeValidator(_check_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A resource.Quantity: an integer or a string such as "500m" or "16Gi" (never a float)."""

IntOrString = Annotated[
    int | str,
    WithJsonSchema(
        {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    ),
]
"""A number or a name, as intstr.IntOrString."""

ResourceList = dict[str, Quantity]
"""Resource name (cpu, memory, nvidia.com/gpu, ...) to quantity, like corev1.ResourceList."""


def _to_utc(value: datetime) -> datetime:
    return from_epoch(to_epoch(value))


Time = Annotated[
    datetime,
    AfterValidator(_to_utc),
    PlainSerializer(format_time, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""metav1.Time: always dumped as "2006-01-02T15:04:05Z" so dumps are ready for the API server."""


def _free_form(value: Any) -> Any:
    if not isinstance(value, dict):
        raise ValueError("must be an object")
    return value


FreeForm = Annotated[
    dict[str, Any],
    BeforeValidator(_free_form),
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]
"""An embedded object whose shape fleet does not own (a member's raw status, managedFields)."""
