"""Whether a host is this machine: what the routes that only loopback may use (faults, KV reads) check."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """A loopback address (127.0.0.0/8, ::1) or the name localhost."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
