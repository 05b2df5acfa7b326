"""The Host and Origin headers the dashboard answers (DNS rebinding), as pure decisions; the
server's 403s over HTTP are in test_server.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.dashboard.hosts import AllowedHosts, split_host

LOOPBACK = AllowedHosts.serving("127.0.0.1")
EVERYWHERE = AllowedHosts.serving(
    "0.0.0.0", ["fleet-dashboard.fleet-system.svc", "ui.example:8443"]
)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("localhost:8765", ("localhost", 8765)),
        ("LOCALHOST", ("localhost", None)),
        ("[::1]:8765", ("::1", 8765)),
        ("fleet.example.com.", ("fleet.example.com", None)),
        ("", None),
        ("a@b", None),
        ("a/b", None),
        ("a:notaport", None),
    ],
)
def test_host_headers_are_read_as_name_and_port(value: str, parsed: object) -> None:
    assert split_host(value) == parsed


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "localhost"])
def test_loopback_serves_its_loopback_names(host: str) -> None:
    assert LOOPBACK.refusal(host, None) == ""


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8765", "10.0.0.7:8765", "localhost.evil.example"]
)
def test_loopback_refuses_any_other_name_naming_it(host: str) -> None:
    why = LOOPBACK.refusal(host, None)
    assert why.startswith(f"Host {host!r} is not a name this dashboard serves")
    assert "--allow-host" in why


def test_a_missing_host_is_refused() -> None:
    assert LOOPBACK.refusal(None, None).startswith("no usable Host header")


def test_every_address_serves_ip_literals_loopback_and_the_allowed_names_only() -> None:
    for host in ("10.244.0.7:8765", "[fd00::7]:8765", "localhost:9000", "127.0.0.1:8765"):
        assert EVERYWHERE.refusal(host, None) == "", host
    for host in ("fleet-dashboard.fleet-system.svc", "ui.example", "UI.example:8443"):
        assert EVERYWHERE.refusal(host, None) == "", host
    assert EVERYWHERE.refusal("evil.example", None) != ""
    assert EVERYWHERE.refusal("fleet-dashboard", None) != ""


def test_a_specific_address_serves_that_address() -> None:
    hosts = AllowedHosts.serving("10.0.0.5")
    assert hosts.refusal("10.0.0.5:8765", None) == ""
    assert hosts.refusal("10.0.0.6:8765", None) != ""
    assert hosts.refusal("localhost:8765", None) != ""


def test_same_origin_is_answered_and_a_foreign_one_refused() -> None:
    assert LOOPBACK.refusal("localhost:8765", "http://localhost:8765") == ""
    assert LOOPBACK.refusal("[::1]:8765", "http://[::1]:8765") == ""
    for origin in (
        "http://evil.example",
        "http://localhost:3000",  # another local app, another port: another origin
        "null",
        "file://",
        "http://localhost:8765/path",
    ):
        why = LOOPBACK.refusal("localhost:8765", origin)
        assert why.startswith(f"Origin {origin!r}"), origin


def test_an_allowed_name_may_be_the_origin_with_its_port_when_one_was_given() -> None:
    # Behind an ingress that rewrites Host to the Service's name, the page's origin differs.
    host = "fleet-dashboard.fleet-system.svc"
    assert EVERYWHERE.refusal(host, "https://ui.example:8443") == ""
    assert EVERYWHERE.refusal(host, "https://ui.example") != ""
    assert EVERYWHERE.refusal(host, "http://fleet-dashboard.fleet-system.svc:81") == ""
    assert EVERYWHERE.refusal(host, "http://evil.example") != ""


@given(st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){1,3}", fullmatch=True))
def test_no_name_is_served_on_loopback_unless_allowed(name: str) -> None:
    assert LOOPBACK.refusal(f"{name}:8765", None) != ""
    assert AllowedHosts.serving("127.0.0.1", [name]).refusal(f"{name}:8765", None) == ""


def test_an_allow_host_that_is_not_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match="--allow-host 'a/b'"):
        AllowedHosts.serving("127.0.0.1", ["a/b"])
