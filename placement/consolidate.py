"""Consolidation: pack each job onto as few machines as possible, best fit first.

An ElasticFlow-like packing baseline. ElasticFlow (Gu et al., "ElasticFlow: An Elastic
Serverless Training Platform for Distributed Deep Learning", ASPLOS 2023) consolidates a
job's workers on as few machines as possible to cut cross-machine traffic; this is a
simplified stand-in for that goal, not its buddy allocator. The rule implemented here, for
a job of ``w`` workers, with "free" counting GPUs given to earlier jobs of this call:

1. If some machine has ``>= w`` free GPUs, use the one with the *fewest* free GPUs among
   them (best fit, leaving big holes for big jobs); ties go to the earlier machine in the
   cluster's machine order.
2. Otherwise sort machines by free GPUs, decreasing (ties by machine order), and let ``k``
   be the smallest prefix length whose free GPUs sum to ``>= w``; ``k`` is the minimum
   number of machines that can hold the job. Take every free GPU of the first ``k - 1``
   machines; for the remaining ``r`` workers take, among the machines not yet used with
   ``>= r`` free GPUs, the one with the fewest free GPUs (best fit, ties by machine order).
   The ``k``-th machine of the sorted order always qualifies, so ``k`` stays minimal.

Queueing: ``pending`` is processed in order. A job needing more GPUs than are still free
waits (is absent from the result) and later smaller jobs may still be placed: no
head-of-line blocking unless ``strict_order=True``, which stops at the first job that does
not fit.

Ranks are grouped by machine (all ranks of a machine contiguous), machines in the order
they were chosen (step 2: decreasing free GPUs, then the best-fit machine), lowest free GPU
indices first within a machine.

Cost: O(M log M) per job for M machines.
"""

from __future__ import annotations

from placement.base import (
    ClusterView,
    GpuSlot,
    InOrderPolicy,
    JobRequest,
    Tentative,
)


class ConsolidatePolicy(InOrderPolicy):
    """Fewest machines, then best fit (see the module docstring for the exact rule).

    Args:
        seed: unused (the policy is deterministic); kept for the common interface.
        strict_order: stop at the first pending job that does not fit (no later job starts).
    """

    name = "consolidate"

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot]:
        """Take the job's GPUs from ``tentative`` by the consolidation rule."""
        workers, order = job.workers, [m.name for m in view.machines]
        single = tentative.best_fit(order, workers)
        if single is not None:
            return tentative.take(single, workers)
        by_free = sorted((m for m in order if tentative.n_free(m) > 0), key=tentative.n_free, reverse=True)
        slots: list[GpuSlot] = []
        for i, machine in enumerate(by_free):
            remaining = workers - len(slots)
            if tentative.n_free(machine) >= remaining:
                # This machine would be the k-th: pick the best fit for the rest instead.
                last = tentative.best_fit(by_free[i:], remaining)
                return slots + tentative.take(last, remaining)
            slots += tentative.take(machine, tentative.n_free(machine))
        raise AssertionError("unreachable: the caller checked that the job fits")
