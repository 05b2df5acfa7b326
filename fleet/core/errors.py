"""Errors that point at the exact field of an object that could not be interpreted.

The controller copies these messages into Kubernetes Events, so a user must be able to go from
the message straight to the offending line of the YAML.
"""

from __future__ import annotations


class FieldError(ValueError):
    """A value at `field` (a dotted path such as `spec.containers[0].resources`) is invalid."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class ObjectError(FieldError):
    """A `FieldError` that also names the object, e.g. `Node gpu-7` or `PyTorchJob ns/job`."""

    def __init__(self, obj: str, field: str, reason: str) -> None:
        self.obj = obj
        FieldError.__init__(self, field, reason)
        self.args = (f"{obj}: {field}: {reason}" if field else f"{obj}: {reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


def join(path: str, child: str) -> str:
    """Extend a field path; map keys that contain dots (resource names) stay readable as-is."""
    return f"{path}.{child}" if path else child
