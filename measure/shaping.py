"""The link shaper's parameters, shared by the network (which configures it) and the ECN marker
(whose virtual queue must behave like the shaper's real queue), and the rates it can shape."""

from __future__ import annotations

from common.errors import EmulationError
from common.units import scale_bw_mbps

MAX_RATE_MBPS = 1000.0
MIN_RATE_MBPS = 0.1
"""Lowest emulated link rate, Mbit/s. Below it one full-size packet (1500 bytes) takes more than
0.12 s on the wire (a 100-packet queue then holds over 12 s), and the shaper's token bucket (two
frames, :func:`measure.shaping.burst_bytes`) lets a quarter of a second of traffic through at
once, so the link no longer behaves like a link of that rate."""

ETH_HEADER = 14  # bytes the shaper counts on top of the MTU (FCS and preamble are not counted)


def frame_bytes(mtu: int) -> int:
    """Largest frame the shaper sees for an MTU."""
    return mtu + ETH_HEADER


def burst_bytes(rate_mbps: float, mtu: int) -> int:
    """Token bucket depth of a shaped link: two frames, or 1 ms at line rate, whichever is more.

    A link idle long enough passes this many bytes at once, where the link it emulates would
    serialise them at its rate: the smallest depth the shaper keeps its rate with (one frame must
    fit, and below 1 ms of line rate the timer's wake-ups would cost rate). A larger depth lets
    whole small transfers through in one burst: with 15 000 bytes at 6.7 Mbit/s (scale 500,
    dilation 3), a small CNN's halving-doubling allreduce measured 0.07 of its bandwidth bound;
    with two frames, 0.72-0.82."""
    return max(2 * frame_bytes(mtu), int(rate_mbps * 1e6 / 8 / 1000))


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


def virtual_rates_mbps(g, scale: float) -> dict[tuple[str, str], float]:
    """Every link's rate in virtual (paper-scale) time at ``scale``: paper-scale rate / scale, what a
    job's bound and the simulator compute with. Not a shaper's rate: a dilated run shapes its links ``dilation``
    times slower (:func:`link_rates_mbps`), so these need not be shapeable.

    Raises:
        EmulationError: ``scale`` is not > 0.
    """
    if not scale > 0:
        raise EmulationError(f"scale {scale!r} is out of range (must be > 0)")
    return {(u, v): scale_bw_mbps(float(d["bw_mbps"]), scale) for u, v, d in g.edges(data=True)}
