"""The link shaper's parameters, shared by the network (which configures it) and the ECN marker
(whose virtual queue must behave like the shaper's real queue), and the rates it can shape."""

from __future__ import annotations

from common.errors import EmulationError
from common.units import scale_bw_mbps

MAX_RATE_MBPS = 1000.0
MIN_RATE_MBPS = 0.1
"""Lowest emulated link rate, Mbit/s. Below it one full-size packet (1500 bytes) takes more than
0.12 s on the wire (a 100-packet queue then holds over 12 s), and the shaper's minimum
token-bucket depth (15 000 bytes, :func:`measure.shaping.burst_bytes`) lets more than
1.2 s of traffic through at once, so the link no longer behaves like a link of that rate."""

ETH_HEADER = 14  # bytes the shaper counts on top of the MTU (FCS and preamble are not counted)


def frame_bytes(mtu: int) -> int:
    """Largest frame the shaper sees for an MTU."""
    return mtu + ETH_HEADER


def burst_bytes(rate_mbps: float, mtu: int) -> int:
    """Token bucket depth of a shaped link: 15 000 bytes, two frames, or 1 ms at line rate, whichever is most."""
    return max(15000, 2 * frame_bytes(mtu), int(rate_mbps * 1e6 / 8 / 1000))


def link_rates_mbps(g, scale: float, dilation: float = 1.0) -> dict[tuple[str, str], float]:
    """Emulated rate of every link: paper-scale rate / (scale x dilation).

    Args:
        g: topology graph whose edges carry ``bw_mbps`` (paper scale).
        scale: time-preserving scale factor (> 0), dividing rates and byte counts alike.
        dilation: time dilation factor D (>= 1; 1 = no dilation), dividing rates on top of
            ``scale`` because virtual time runs D times slower than wall time.

    Returns:
        ``{(u, v): rate in Mbit/s}`` for every edge, in the graph's edge order.

    Raises:
        EmulationError: when ``scale`` or ``dilation`` is out of range, when a link's rate is
            outside [``MIN_RATE_MBPS``, ``MAX_RATE_MBPS``] (naming the link, its computed rate,
            the scale and the dilation), or when a link has a delay (no netem here).
    """
    if not scale > 0:
        raise EmulationError(f"scale {scale!r} is out of range (must be > 0)")
    if not dilation >= 1:
        raise EmulationError(f"dilation {dilation!r} is out of range (must be >= 1; 1 = no dilation)")
    rates = {}
    for u, v, d in g.edges(data=True):
        paper_mbps = float(d["bw_mbps"])
        r = scale_bw_mbps(paper_mbps, scale * dilation)
        if not MIN_RATE_MBPS <= r <= MAX_RATE_MBPS:
            hint = ("raise the scale factor or the dilation" if r > MAX_RATE_MBPS
                    else "lower the scale factor or the dilation" if r < MIN_RATE_MBPS
                    else "check the link's bw_mbps")
            raise EmulationError(
                f"link {u}-{v}: {paper_mbps:g} Mbit/s / (scale {scale:g} x dilation {dilation:g}) = {r:g} Mbit/s "
                f"is outside the shapeable range [{MIN_RATE_MBPS:g}, {MAX_RATE_MBPS:g}] Mbit/s; {hint}")
        if float(d.get("delay_us", 0)) > 0:
            raise EmulationError(f"link {u}-{v}: delay_us={d['delay_us']} needs netem, which this network does not use")
        rates[(u, v)] = r
    return rates
