"""Spread: deal a job's workers across racks, one per rack in turn.

The pessimistic baseline: it maximises cross-rack (and cross-machine) traffic, so it
bounds from above what a placement does to the network.

Rule, for a job of ``w`` workers, with "free" counting GPUs given to earlier jobs of this
call and to this job's earlier workers: visit the racks in the cluster's rack order
(:meth:`ClusterView.racks`), round after round, skipping racks with no free GPU; in each
visited rack give the next worker one GPU of the machine with the most free GPUs (ties by
machine order). Every round starts again at the first rack, so a job of ``w`` workers uses
``min(w, racks with a free GPU)`` racks and the workers are balanced across racks as far
as their free GPUs allow.

Queueing: ``pending`` is processed in order. A job needing more GPUs than are still free
waits (is absent from the result) and later smaller jobs may still be placed: no
head-of-line blocking unless ``strict_order=True``, which stops at the first job that does
not fit.

Ranks are grouped by machine (all ranks of a machine contiguous), machines in the order
they first received a worker, lowest free GPU indices first within a machine.

Cost: O(w * M) per job for M machines.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.base import (
    ClusterView,
    GpuSlot,
    JobRequest,
    Placement,
    PlacementPolicy,
    Tentative,
    jobs_by_name,
)


class SpreadPolicy(PlacementPolicy):
    """One worker per rack in turn, within a rack the machine with most free GPUs.

    Args:
        seed: unused (the policy is deterministic); kept for the common interface.
        strict_order: stop at the first pending job that does not fit (no later job starts).
    """

    name = "spread"

    def __init__(self, seed: int = 0, strict_order: bool = False):
        super().__init__(seed)
        self.strict_order = strict_order

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """Place pending jobs in order, spread across racks; jobs that do not fit wait."""
        jobs_by_name(pending)
        tentative = Tentative(view)
        racks = list(view.racks().values())
        out = []
        for job in pending:
            if job.workers > tentative.total_free:
                if self.strict_order:
                    break
                continue
            out.append(Placement(job.name, tuple(self._choose(job.workers, racks, tentative))))
        return out

    @staticmethod
    def _choose(workers: int, racks: list[list[str]], tentative: Tentative) -> list[GpuSlot]:
        """Take ``workers`` GPUs from ``tentative``, one per rack in turn."""
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
