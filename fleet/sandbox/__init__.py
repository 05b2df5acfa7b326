"""The local multi-cluster sandbox: real Kubernetes control planes run as local processes."""

from fleet.sandbox.config import MemberSpec, NodePool, SandboxConfig, Taint
from fleet.sandbox.errors import SandboxError
from fleet.sandbox.sandbox import FLEET, ClusterStatus, Sandbox, default_state_dir
from fleet.sandbox.toolchain import Toolchain, ensure_toolchain

__all__ = [
    "FLEET",
    "ClusterStatus",
    "MemberSpec",
    "NodePool",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "Taint",
    "Toolchain",
    "default_state_dir",
    "ensure_toolchain",
]
