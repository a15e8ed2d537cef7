"""FIFO scheduling: non-preemptive, in arrival order; with or without head-of-line blocking.

Two baselines of Tiresias' evaluation (``docs/resolutions.md`` Tiresias §6.1-6.2):

* ``fifo`` ("Best-effort", [R]'s ``fjf``): running jobs keep their GPUs; waiting jobs are
  admitted in arrival order, and a job that does not fit in the GPUs left is skipped, so a
  later, smaller job may start (backfilling).
* ``yarn_cs`` (YARN-CS, Microsoft's production scheduler): the same, but the scan stops at the
  first waiting job that does not fit (head-of-line blocking). A job larger than
  ``total_gpus`` therefore blocks every job behind it for ever; that is YARN-CS's semantics,
  and :func:`experiment.run.loop.run_loop` rejects such a job up front.

Neither ever preempts. Ties in arrival time go to the earlier position in the input. O(n log n).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.base import Decision, JobStatus, Scheduler, check_jobs, sort_stable


class FifoScheduler(Scheduler):
    """Arrival order, never preempts, skips jobs that do not fit (Best-effort / ``fjf``).

    Args:
        seed: unused (deterministic); kept for the common interface.
        blocking: stop at the first waiting job that does not fit (YARN-CS behaviour).
    """

    name = "fifo"

    def __init__(self, seed: int = 0, blocking: bool = False):
        super().__init__(seed)
        self.blocking = blocking

    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """Keep running jobs, admit waiting ones in arrival order while they fit."""
        check_jobs(jobs, total_gpus)
        ordered = sort_stable(jobs, lambda j: 0.0)
        free = total_gpus - sum(j.workers for j in ordered if j.running)
        start = []
        for j in ordered:
            if j.running:
                continue
            if j.workers <= free:
                start.append(j.name)
                free -= j.workers
            elif self.blocking:
                break
        started = set(start)
        return Decision(
            order=tuple(j.name for j in ordered),
            run=tuple(j.name for j in ordered if j.running or j.name in started),
            start=tuple(start),
        )


class YarnCsScheduler(FifoScheduler):
    """FIFO with head-of-line blocking, never preempts (YARN-CS, ``docs/resolutions.md`` Tiresias §6.1).

    Args:
        seed: unused (deterministic); kept for the common interface.
        blocking: True by default; False makes it :class:`FifoScheduler`.
    """

    name = "yarn_cs"

    def __init__(self, seed: int = 0, blocking: bool = True):
        super().__init__(seed, blocking=blocking)
