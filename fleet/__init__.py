"""fleet: a multi-cluster gang dispatcher for Kubernetes."""

__version__ = "0.1.0"
