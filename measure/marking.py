"""ECN marking at switch egress: the paths a config may ask for and one port's thresholds.

The emulator marks with kernel RED where the kernel has it or with a BPF virtual-queue marker
(:mod:`emulator.ecn`); both take a port's :class:`MarkingParams`, computed here from the
config so that config validation, the emulator and the report agree on them.
"""

from __future__ import annotations

import dataclasses

from common.units import mbps_to_bytes_per_s
from measure import shaping

METHODS = ("auto", "bpf", "red")
MARKING = ("required", "optional", "off")
MAX_RAMP_NS = 4_000_000_000  # keeps max_p * (backlog - K) inside 64 bits in the program


@dataclasses.dataclass(frozen=True)
class MarkingParams:
    """Marking thresholds of one port, in emulated bytes of queue.

    Attributes:
        threshold_bytes: K; nothing is marked while the queue is at or below it.
        max_threshold_bytes: K_max >= K; the marking probability rises linearly from 0 at K to
            ``max_p`` at K_max, and every ECN-capable packet above K_max is marked. K_max == K
            is step marking (DCTCP).
        max_p: marking probability at K_max.
        limit_bytes: the FIFO's size; a packet that does not fit is dropped by the FIFO and
            is not added to the virtual queue.
        burst_bytes: the shaper's token bucket depth: the real queue starts only when the
            bucket is empty, so the marker's queue is its virtual backlog minus the burst.
    """

    threshold_bytes: float
    max_threshold_bytes: float
    max_p: float
    limit_bytes: float
    burst_bytes: float = 0.0


def marking_params(threshold_bytes: float, threshold_us: float, max_threshold_bytes: float, max_p: float,
                   rate_mbps: float, queue_packets: int, mtu: int) -> MarkingParams:
    """One port's :class:`MarkingParams` from the configuration (``threshold_us`` > 0 wins over bytes)."""
    k = threshold_us * 1e-6 * mbps_to_bytes_per_s(rate_mbps) if threshold_us > 0 else float(threshold_bytes)
    kmax = max(k, float(max_threshold_bytes)) if max_threshold_bytes else k
    return MarkingParams(k, kmax, max_p, float(queue_packets * shaping.frame_bytes(mtu)),
                         float(shaping.burst_bytes(rate_mbps, mtu)))


def bytes_to_ns(nbytes: float, rate_mbps: float) -> int:
    """Time to drain ``nbytes`` at ``rate_mbps``, in nanoseconds."""
    return int(round(nbytes * 1e9 / mbps_to_bytes_per_s(rate_mbps)))
