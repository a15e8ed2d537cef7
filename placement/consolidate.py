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

YARN-CS (``idle_first=True``). Tiresias (NSDI'19 §2.2; ``docs/resolutions.md`` Tiresias §4.1,
§6.1) describes Microsoft's YARN-CS as strict consolidation: a job that needs more than one
machine gets *completely free* machines ("a 16-GPU job on 4-GPU servers needs 4 completely
free servers"), else it waits, and the authors' simulator does exactly this
(SymbioticLab/Tiresias ``simulator/switch.py``, ``_Switch.try_cross_node_alloc``:
``need // gpu_p_node`` idle nodes plus one node with ``need % gpu_p_node`` free GPUs;
``try_single_node_alloc`` for smaller jobs). The rule above is not that: when no single
machine fits it fills the machines with the most free GPUs, idle or not, so an 8-GPU job on
4-GPU machines may be split over partly used ones, and on a mixed cluster an 8-GPU job may
take a partly used 16-GPU machine before an idle 8-GPU one. With ``idle_first=True``:

1. Idle machines, largest first (ties by machine order), are taken whole while the remaining
   demand is at least the machine's size.
2. The remaining ``r`` workers (if any) go to one other machine with ``>= r`` free GPUs, the
   one with the fewest (best fit, ties by machine order; the simulator takes the first that
   fits). If there is none the job waits: it is never spread over partly used machines.

YARN-CS's placement is therefore ``consolidate,idle_first=true,strict_order=true`` (FIFO with
head-of-line blocking as in the ``yarn_cs`` scheduler), not ``consolidate,strict_order=true``.

Queueing: ``pending`` is processed in order. A job needing more GPUs than are still free
waits (is absent from the result) and later smaller jobs may still be placed: no
head-of-line blocking unless ``strict_order=True``, which stops at the first job that does
not fit.

Ranks are grouped by machine (all ranks of a machine contiguous), machines in the order
they were chosen (step 2: decreasing free GPUs, then the best-fit machine; YARN-CS: the idle
machines, then the remainder's machine), lowest free GPU indices first within a machine.

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
        idle_first: YARN-CS's strict consolidation: whole idle machines first, the rest on one
            machine, else wait (see the module docstring).
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
