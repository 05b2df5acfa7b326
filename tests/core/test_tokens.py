"""When a bound token is renewed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fleet.core.tokens import renew_at


def test_by_default_at_four_fifths_of_the_lifetime():
    assert renew_at(1000.0, 1000.0 + 86400, 1000.0) == 1000.0 + 0.8 * 86400


def test_renew_before_counts_back_from_the_expiry():
    assert renew_at(0.0, 600.0, 0.0, renew_before=570) == 30.0


def test_a_renew_before_longer_than_the_lifetime_still_lets_the_token_age():
    assert renew_at(0.0, 600.0, 0.0, renew_before=6000) == 30.0


def test_a_moment_already_past_is_now():
    assert renew_at(0.0, 600.0, 590.0) == 590.0


@given(
    issued=st.floats(0, 1e9),
    lifetime=st.floats(600, 1e7),
    now_offset=st.floats(0, 1e7),
    before=st.none() | st.floats(1, 1e7),
)
def test_always_after_issue_not_before_now_and_before_expiry_when_still_valid(
    issued, lifetime, now_offset, before
):
    expires, now = issued + lifetime, issued + now_offset
    at = renew_at(issued, expires, now, renew_before=before)
    assert at >= now and at >= issued
    if now < expires:
        assert at < expires or at == now
