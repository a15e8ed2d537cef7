"""Themis-like scheduling: GPU leases auctioned for finish-time fairness (``docs/resolutions.md`` Cassini
§5.1, §7.4; Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI'20).

A job that wins GPUs holds them for a lease (``lease_s``), unsynchronised across jobs; at each call
the jobs without an unexpired lease bid, ranked by finish-time fairness ``ρ = T_shared / T_ideal``
([R]: its estimates from what the loop knows), winners are admitted by GPU count with skipping and
losers that ran are preempted. Worker counts are the jobs' own [R]; the placement half is
:mod:`placement.themis`.

Each step and how ``ρ`` is estimated: ``docs/algorithms.md`` (Themis' scheduler). Cost per call:
O(J log J).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduling.base import Decision, JobStatus, Scheduler, admit_by_count, check_jobs, positive_seconds


class ThemisScheduler(Scheduler):
    """Leases and finish-time-fair auctions (see ``docs/algorithms.md``).

    Args:
        seed: unused (deterministic); kept for the common interface.
        lease_s: how long a won lease lasts, seconds (> 0; the thesis's 10 minutes by default).

    Raises:
        JobError: a lease that is not positive and finite.
    """

    name = "themis"

    def __init__(self, seed: int = 0, lease_s: float = 600.0):
        super().__init__(seed)
        self.lease_s = positive_seconds(self.name, "lease_s", lease_s)
        self._lease_end: dict[str, float] = {}

    def fairness(self, job: JobStatus, active: int, total_gpus: int, now_s: float) -> float:
        """The job's finish-time fairness ``ρ`` at ``now_s`` among ``active`` jobs (``docs/algorithms.md``)."""
        waited = max(0.0, now_s - job.arrival_s)
        ran_s = job.service_gpu_s / job.workers
        if job.remaining_gpu_s is None:
            return (waited + self.lease_s) / (ran_s + self.lease_s)
        work = job.service_gpu_s + max(0.0, job.remaining_gpu_s)
        share = max(min(job.workers, total_gpus / max(1, active)), 1e-9)
        ideal = work / share
        shared = waited + max(0.0, job.remaining_gpu_s) / job.workers
        return shared / ideal if ideal > 0 else 1.0

    def schedule(self, jobs: Sequence[JobStatus], total_gpus: int, now_s: float) -> Decision:
        """Keep unexpired leases, auction the rest by finish-time fairness (``docs/algorithms.md``)."""
        check_jobs(jobs, total_gpus)
        names = {j.name for j in jobs}
        self._lease_end = {n: t for n, t in self._lease_end.items() if n in names}
        eps = 1e-9 * max(1.0, abs(now_s))
        holding = [j for j in jobs if j.running and self._lease_end.get(j.name, -math.inf) > now_s + eps]
        bidders = [j for j in jobs if j not in holding]
        rho = {j.name: self.fairness(j, len(jobs), total_gpus, now_s) for j in bidders}
        index = {j.name: i for i, j in enumerate(jobs)}
        ranked = sorted(bidders, key=lambda j: (-rho[j.name], j.arrival_s, index[j.name]))
        winners = admit_by_count(ranked, total_gpus - sum(j.workers for j in holding))
        won = {j.name for j in winners}
        for j in winners:
            self._lease_end[j.name] = now_s + self.lease_s
        for j in bidders:
            if j.name not in won:
                self._lease_end.pop(j.name, None)
        run = [*holding, *winners]
        ends = [self._lease_end[j.name] for j in run]
        return Decision(
            order=tuple(j.name for j in [*holding, *ranked]),
            run=tuple(j.name for j in run),
            preempt=tuple(j.name for j in bidders if j.running and j.name not in won),
            start=tuple(j.name for j in winners if not j.running),
            wake_s=min(ends, default=None),
        )
