"""The fleet controller: the thin shell around fleet.core's decisions."""

from fleet.controller.operator import Controller, StartupError, run
from fleet.controller.settings import Settings

__all__ = ["Controller", "Settings", "StartupError", "run"]
