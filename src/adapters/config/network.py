"""The network policy of the settings: which bind addresses reach this machine only."""

from __future__ import annotations

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and ``localhost``: reachable from this machine only."""
    import ipaddress

    if host.strip().lower() in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False
