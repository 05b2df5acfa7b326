"""Shared pytest setup: the sandbox fixtures live in the package so users can reuse them."""

pytest_plugins = ["fleet.testing.pytest_plugin"]
