"""Errors the sandbox reports to people: each names the component and where its log is."""


class SandboxError(RuntimeError):
    """Something stopped the sandbox from building, starting or stopping."""
