"""When to renew a bound service-account token: a pure function of when it was issued, when it
expires, and now.

The default is the kubelet's rule for projected tokens: a new token at 80% of the old one's
lifetime. A reader that re-reads a rotating token (fleet.kube.refresh_deadline) does so at 90%,
so what is renewed at 80% is picked up while the old token is still valid. `renew_before`
(a controller setting) renews that long before the expiry instead: TokenRequest will not issue
a token shorter than 10 minutes, so a test that wants to see renewals sooner sets it.
"""

from __future__ import annotations

from typing import Final

#: The kubelet renews a projected token at this fraction of its lifetime.
RENEW_AT_FRACTION: Final = 0.8
#: Never renew a token younger than this: a renew-before longer than the lifetime must not make
#: the controller request tokens in a loop.
MIN_TOKEN_AGE_SECONDS: Final = 30.0


def renew_at(
    issued: float, expires: float, now: float, *, renew_before: float | None = None
) -> float:
    """Epoch seconds at which a token issued at `issued` and expiring at `expires` is renewed
    (`now` if that moment has passed)."""
    lifetime = max(expires - issued, 0.0)
    at = issued + RENEW_AT_FRACTION * lifetime if renew_before is None else expires - renew_before
    at = max(at, issued + min(MIN_TOKEN_AGE_SECONDS, lifetime / 2))
    return max(at, now)
