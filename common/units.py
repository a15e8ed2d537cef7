"""Unit conversions, in one place.

Internally sizes are bytes, rates are megabits per second (``*_mbps``, 10**6 bit/s),
times are seconds. The scale factor divides paper-scale rates and byte counts
alike, so that transfer times stay at paper scale (see ARCHITECTURE.md,
"Time-preserving scale").
"""

BITS_PER_BYTE = 8
MEGA = 1_000_000


def mbps_to_bytes_per_s(bw_mbps: float) -> float:
    """Convert a rate in Mbit/s to bytes per second."""
    return bw_mbps * MEGA / BITS_PER_BYTE


def bytes_per_s_to_mbps(rate_bytes_per_s: float) -> float:
    """Convert a rate in bytes per second to Mbit/s."""
    return rate_bytes_per_s * BITS_PER_BYTE / MEGA


def transfer_time_s(size_bytes: float, bw_mbps: float) -> float:
    """Time to send ``size_bytes`` at ``bw_mbps`` with no overhead."""
    return size_bytes / mbps_to_bytes_per_s(bw_mbps)


def scale_bw_mbps(paper_bw_mbps: float, scale: float) -> float:
    """Emulated rate for a paper-scale rate under the time-preserving scale factor."""
    return paper_bw_mbps / scale


def scale_bytes(paper_bytes: float, scale: float) -> int:
    """Emulated byte count for a paper-scale byte count (at least 4: one float32)."""
    return max(4, int(round(paper_bytes / scale / 4)) * 4)
