"""Helpers to test against a real sandbox: pytest fixtures, cluster clients, workloads."""
