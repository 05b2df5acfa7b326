"""The controller's queue flags reach the admission's settings as the core defines them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fleet.cli import _seconds_or_off, build_parser
from fleet.controller.settings import Settings
from fleet.core.admission import AdmissionSettings

REPO = Path(__file__).resolve().parents[2]


def test_the_loss_budget_flag_defaults_to_the_cores_default():
    args = build_parser().parse_args(["controller"])
    assert (
        _seconds_or_off(args.queue_reclaim_loss_per_gpu) == AdmissionSettings.reclaim_loss_per_gpu
    )
    assert Settings().queue_reclaim_loss_per_gpu == AdmissionSettings.reclaim_loss_per_gpu


def test_the_loss_budget_flag_takes_seconds_or_off():
    assert _seconds_or_off("3600") == 3600.0
    assert _seconds_or_off("off") == math.inf
    with pytest.raises(ValueError, match="seconds > 0 or off"):
        _seconds_or_off("0")


def test_helm_passes_the_loss_budget():
    deployment = (REPO / "helm/fleet/templates/deployment.yaml").read_text()
    values = (REPO / "helm/fleet/values.yaml").read_text()
    assert "--queue-reclaim-loss-per-gpu={{ .Values.queue.reclaimLossPerGPUSeconds }}" in deployment
    assert 'reclaimLossPerGPUSeconds: "86400"' in values


def test_the_node_claim_delay_flag_defaults_to_the_cores_default_and_helm_passes_it():
    args = build_parser().parse_args(["controller"])
    assert args.queue_reclaim_delay == AdmissionSettings.reclaim_delay
    assert Settings().queue_reclaim_delay == AdmissionSettings.reclaim_delay
    deployment = (REPO / "helm/fleet/templates/deployment.yaml").read_text()
    values = (REPO / "helm/fleet/values.yaml").read_text()
    assert "--queue-reclaim-delay={{ .Values.queue.reclaimDelaySeconds }}" in deployment
    assert f"reclaimDelaySeconds: {AdmissionSettings.reclaim_delay:.0f}" in values


def test_the_worth_rule_flag_defaults_to_the_cores_default_and_helm_passes_it():
    args = build_parser().parse_args(["controller"])
    assert (args.queue_reclaim_worth == "on") == AdmissionSettings.reclaim_worth
    assert Settings().queue_reclaim_worth == AdmissionSettings.reclaim_worth
    deployment = (REPO / "helm/fleet/templates/deployment.yaml").read_text()
    values = (REPO / "helm/fleet/values.yaml").read_text()
    assert "--queue-reclaim-worth={{ .Values.queue.reclaimWorth }}" in deployment
    assert 'reclaimWorth: "off"' in values
