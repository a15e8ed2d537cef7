"""The link shaper's parameters, shared by the network (which configures it) and the ECN marker
(whose virtual queue must behave like the shaper's real queue)."""

from __future__ import annotations

ETH_HEADER = 14  # bytes the shaper counts on top of the MTU (FCS and preamble are not counted)


def frame_bytes(mtu: int) -> int:
    """Largest frame the shaper sees for an MTU."""
    return mtu + ETH_HEADER


def burst_bytes(rate_mbps: float, mtu: int) -> int:
    """Token bucket depth of a shaped link: 15 000 bytes, two frames, or 1 ms at line rate, whichever is most."""
    return max(15000, 2 * frame_bytes(mtu), int(rate_mbps * 1e6 / 8 / 1000))
