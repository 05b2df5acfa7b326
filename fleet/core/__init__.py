"""The functional core: placement, queueing and failover decisions over plain snapshots.

Nothing in this package does I/O or imports kopf or a Kubernetes client; the controller and the
simulator call the very same functions.
"""
