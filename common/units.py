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


def wall_s(virtual_s: float, dilation: float) -> float:
    """Wall-clock seconds that ``virtual_s`` of emulated (paper-scale) time take under dilation D.

    Time dilation (DieCast, TDF): virtual time runs D times slower than wall time, so emulated
    compute and every timeout are multiplied by D.
    """
    return virtual_s * dilation


def virtual_s(wall_seconds: float, dilation: float) -> float:
    """Emulated (paper-scale) seconds that ``wall_seconds`` measured under dilation D stand for.

    Every reported time of the emulated system (communication, compute, iteration) is
    divided by D, so reports are the same whatever D is.
    """
    return wall_seconds / dilation


TCP_IP_HEADER_BYTES = 52
"""IPv4 (20) + TCP (20) + the timestamps option Linux sends by default (12): MSS = MTU - 52."""
ETHERNET_HEADER_BYTES = 14
"""What a qdisc counts of a frame beyond the IP packet (no preamble, FCS or gap on a veth)."""


def wire_bytes(payload_bytes: int, mtu: int) -> int:
    """Bytes a link's shaper counts to carry ``payload_bytes`` of one TCP message at ``mtu``.

    Full segments of MSS = ``mtu - 52`` payload bytes, each with 66 bytes of TCP/IP and
    Ethernet headers: at MTU 1500 a bulk transfer costs 1514/1448 = 1.046 times its payload.
    """
    if payload_bytes <= 0:
        return 0
    mss = mtu - TCP_IP_HEADER_BYTES
    packets = -(-payload_bytes // mss)
    return payload_bytes + packets * (TCP_IP_HEADER_BYTES + ETHERNET_HEADER_BYTES)
