"""A CPU summary of an emulated run and when it counts as saturated.

On a 2-core machine the emulator itself can become the bottleneck: the whole machine
(workers, shapers and switches together), or the switch datapath's busiest thread (with the
userspace datapath one ``ovs-vswitchd`` thread can forward every packet). A 95th percentile at
or above :data:`SATURATED_FRACTION` of either marks the CPU as saturated; such a run's timings
may reflect the emulator rather than the network (see :mod:`measure.fidelity`). The sampler
that measures it is :class:`emulator.cpu.CpuSampler`.
"""

from __future__ import annotations

import dataclasses

SATURATED_FRACTION = 0.95


def percentile95(values: list[float]) -> float:
    """The 95th percentile of ``values`` (the sorted value at index ``int(0.95 n)``)."""
    v = sorted(values)
    return v[min(len(v) - 1, int(0.95 * len(v)))]


@dataclasses.dataclass(frozen=True)
class CpuSummary:
    """Machine CPU utilisation (0..1) over the sampled intervals: mean, 95th percentile and peak;
    the busiest switch thread's 95th percentile (None: no switch process sampled); and whether
    the CPU saturated (either 95th percentile >= :data:`SATURATED_FRACTION`). Every figure is
    None when no sample fell inside the windows asked for."""

    samples: int = 0
    mean: float | None = None
    p95: float | None = None
    max: float | None = None
    switch_thread_p95: float | None = None
    saturated: bool | None = None

    def to_dict(self) -> dict:
        """JSON form (``measurements.json``'s ``cpu`` and ``cpu_measured``)."""
        return dataclasses.asdict(self)


def summarise(machine: list[float], switch_thread: list[float]) -> CpuSummary:
    """The summary of machine and busiest-switch-thread utilisation samples (0..1)."""
    u = sorted(machine)
    if not u:
        return CpuSummary()
    p95 = percentile95(u)
    sw95 = percentile95(switch_thread) if switch_thread else None
    return CpuSummary(len(u), sum(u) / len(u), p95, u[-1], sw95,
                      p95 >= SATURATED_FRACTION or (sw95 is not None and sw95 >= SATURATED_FRACTION))
