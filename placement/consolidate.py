"""Consolidation: pack each job onto as few machines as possible, best fit first.

An ElasticFlow-like packing baseline (Gu et al., ASPLOS 2023), a simplified stand-in for its goal of
few machines per job, not its buddy allocator: one machine by best fit if one holds the job, else
the fewest machines by free GPUs with the last one by best fit. ``idle_first=True`` is YARN-CS's
strict consolidation as Tiresias describes it (NSDI'19 §2.2; ``docs/resolutions.md`` Tiresias §4.1,
§6.1) and the authors' simulator implements it: whole idle machines, then one best-fit machine for
the remainder, else wait. YARN-CS's placement is ``consolidate,idle_first=true,strict_order=true``.

Both rules step by step, tie-breaks, queueing and rank order: ``docs/algorithms.md``
(Consolidation). Cost: O(M log M) per job for M machines.
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
    """Fewest machines, then best fit (see ``docs/algorithms.md`` for the exact rule).

    Args:
        seed: unused (the policy is deterministic); kept for the common interface.
        strict_order: stop at the first pending job that does not fit (no later job starts).
        idle_first: YARN-CS's strict consolidation: whole idle machines first, the rest on one
            machine, else wait (see ``docs/algorithms.md``).
    """

    name = "consolidate"

    def __init__(self, seed: int = 0, strict_order: bool = False, idle_first: bool = False):
        super().__init__(seed, strict_order)
        self.idle_first = idle_first

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot] | None:
        """Take the job's GPUs from ``tentative`` by the consolidation rule (None: the job waits)."""
        if self.idle_first:
            return _whole_idle_first(job.workers, view, tentative)
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


def whole_idle_plan(workers: int, view: ClusterView, tentative: Tentative) -> list[tuple[str, int]] | None:
    """YARN-CS's strict consolidation as ``(machine, GPUs)`` pairs: idle machines taken whole (largest
    first, ties by machine order) while the demand fills them, the rest on one best-fit machine;
    None when no machine takes the rest. Takes nothing from ``tentative``."""
    order = [m.name for m in view.machines]
    plan, r = [], workers
    for m in sorted((m for m in order if tentative.is_idle(m)), key=lambda m: -view.machine(m).gpus):
        if r >= view.machine(m).gpus:
            plan.append((m, view.machine(m).gpus))
            r -= view.machine(m).gpus
    if r:
        used = {m for m, _ in plan}
        last = tentative.best_fit([m for m in order if m not in used], r)
        if last is None:
            return None
        plan.append((last, r))
    return plan


def _whole_idle_first(workers: int, view: ClusterView, tentative: Tentative) -> list[GpuSlot] | None:
    """YARN-CS: :func:`whole_idle_plan`, taken from ``tentative`` (None: the job waits)."""
    plan = whole_idle_plan(workers, view, tentative)
    return None if plan is None else [slot for m, n in plan for slot in tentative.take(m, n)]
