"""Spread: deal a job's workers across racks, one per rack in turn.

The pessimistic baseline: it maximises cross-rack (and cross-machine) traffic, so it bounds from
above what a placement does to the network. Round after round over the racks in the cluster's
order, each rack with a free GPU gives the next worker one GPU of its machine with the most free
GPUs.

The rule, queueing and rank order: ``docs/algorithms.md`` (Spread). Cost: O(w * M) per job for M
machines.
"""

from __future__ import annotations

from placement.base import (
    ClusterView,
    GpuSlot,
    InOrderPolicy,
    JobRequest,
    Tentative,
)


class SpreadPolicy(InOrderPolicy):
    """One worker per rack in turn, within a rack the machine with most free GPUs.

    Args:
        seed: unused (the policy is deterministic); kept for the common interface.
        strict_order: stop at the first pending job that does not fit (no later job starts).
    """

    name = "spread"

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot]:
        """Take the job's GPUs from ``tentative``, one per rack in turn."""
        workers, racks = job.workers, list(view.racks().values())
        by_machine: dict[str, list[GpuSlot]] = {}
        taken = 0
        while taken < workers:
            for machines in racks:
                if taken == workers:
                    break
                with_free = [m for m in machines if tentative.n_free(m) > 0]
                if not with_free:
                    continue
                machine = max(with_free, key=tentative.n_free)
                by_machine.setdefault(machine, []).extend(tentative.take(machine, 1))
                taken += 1
        return [s for slots in by_machine.values() for s in slots]
