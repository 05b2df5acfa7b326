"""`fleet dashboard` with a kubeconfig it cannot use: one error line, exit 1, nothing served."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.cli import main


def test_an_unusable_kubeconfig_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.kubeconfig"

    assert main(["dashboard", "--kubeconfig", str(missing), "--port", "0"]) == 1

    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot use the fleet's kubeconfig")
    assert str(missing) in err[0]


def test_an_allow_host_that_is_not_a_host_name_is_one_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["dashboard", "--allow-host", "https://x.example/", "--port", "0"]) == 1

    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --allow-host 'https://x.example/': not a host name (NAME or NAME:PORT)"]
