"""Per-iteration times of a job as its ranks recorded them: the measurement the emulator reports
and the simulator's estimate mirrors (the slowest rank's time per iteration)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from common.units import virtual_s


@dataclasses.dataclass(frozen=True)
class IterationTime:
    """One iteration of one job as its ranks recorded it.

    Attributes:
        comm_s: the slowest rank's communication time, virtual seconds.
        compute_s: the slowest rank's compute time, virtual seconds.
        ranks: ranks that recorded the iteration.
    """

    comm_s: float
    compute_s: float
    ranks: int


def job_iteration_times(records, dilation: float = 1.0) -> dict[str, dict[int, IterationTime]]:
    """Per job and iteration: the slowest rank's communication and compute time.

    Records hold wall-clock seconds; the times returned are virtual (paper-scale) seconds,
    the wall time divided by the run's dilation factor (:func:`common.units.virtual_s`).
    """
    out: dict[str, dict[int, IterationTime]] = defaultdict(dict)
    for r in records:
        its = out[r.job]
        it = its.get(r.iteration, IterationTime(0.0, 0.0, 0))
        its[r.iteration] = IterationTime(max(it.comm_s, virtual_s(r.comm_s, dilation)),
                                         max(it.compute_s, virtual_s(r.compute_s, dilation)), it.ranks + 1)
    return out
