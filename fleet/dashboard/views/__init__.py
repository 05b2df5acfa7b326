"""The dashboard's view models: plain functions from objects to JSON-able dicts (no I/O)."""
