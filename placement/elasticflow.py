"""ElasticFlow placement as Titan's evaluation characterises it ("EF-F"): best-fit consolidation.

Gu et al., "ElasticFlow: An Elastic Serverless Training Platform for Distributed Deep
Learning", ASPLOS 2023, as a baseline of Titan (``docs/resolutions.md`` Titan §3.1; tags: [P]
the Titan paper, [R] our resolution). ElasticFlow places a job's workers on as few
machines as possible with best fit, sizes jobs in powers of two, and never spills a job
over fragments: it waits instead [P]. For a job of ``p`` workers, "free" counting GPUs
given to earlier jobs of the same call:

1. ``g = 2^ceil(log2 p)`` when ``pow2_round`` (default), else ``g = p`` [R, ⚠ A22].
2. If ``g`` is at most the largest machine's GPU count: among all machines (idle or not)
   with ``>= g`` free GPUs take the one with the fewest (best fit; ties by machine order);
   all ``p`` workers go there.
3. Otherwise: whole **idle** machines (largest first, ties by machine order) holding ``>= g``
   GPUs together, from one rack if some rack has enough (the rack needing the fewest
   machines, then with the least idle capacity, then in rack order), else from racks taken
   in decreasing idle capacity [R]. Ranks fill the machines in that order, each machine
   completely before the next (rank ``w`` on machine ``floor(w / K)`` for ``K`` GPUs each).
4. If neither is possible the job **waits** (it is absent from the result), even when
   enough GPUs are free in fragments [P; §5.2: a 16-worker job with one idle 8-GPU machine
   waits].

[R] Reservation: the ``g - p`` rounding GPUs cannot be expressed in a :class:`Placement`
(one slot per worker), so they are reserved only within one ``place`` call (later jobs of
the call cannot take them); a runner that wants to count them as busy across calls must do
so itself. With ``pow2_round=False`` nothing is reserved.

Queueing: ``pending`` in order; a job that cannot be placed waits and later jobs may still
be placed (no head-of-line blocking) unless ``strict_order=True``. The model is not read.
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


def pow2_ceil(p: int) -> int:
    """Smallest power of two ``>= p`` (``p >= 1``)."""
    return 1 << (p - 1).bit_length()


class ElasticFlowPolicy(InOrderPolicy):
    """Best-fit consolidation with power-of-two sizing; waits rather than splitting over fragments.

    Args:
        seed: unused (the policy is deterministic); kept for the common interface.
        pow2_round: round the GPU demand up to a power of two (ElasticFlow's sizing).
        strict_order: stop at the first pending job that cannot be placed.
    """

    name = "elasticflow"

    def __init__(self, seed: int = 0, pow2_round: bool = True, strict_order: bool = False):
        super().__init__(seed, strict_order)
        self.pow2_round = pow2_round

    def demand(self, workers: int) -> int:
        """GPUs the job takes: ``workers`` rounded up to a power of two when ``pow2_round``."""
        return pow2_ceil(workers) if self.pow2_round else workers

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot] | None:
        """Take the job's GPUs from ``tentative`` on the fewest machines by best fit, or None (it waits)."""
        workers = job.workers
        g = self.demand(workers)
        machines = [m.name for m in view.machines]
        if g <= max(m.gpus for m in view.machines):
            best = tentative.best_fit(machines, g)
            if best is None:
                return None
            taken = tentative.take(best, g)
            return taken[:workers]
        chosen = self._idle_machines(g, view, tentative)
        if chosen is None:
            return None
        slots: list[GpuSlot] = []
        for m in chosen:
            slots += tentative.take(m, tentative.n_free(m))      # the whole machine: reserved for the job
        return slots[:workers]

    @staticmethod
    def _idle_machines(g: int, view: ClusterView, tentative: Tentative) -> list[str] | None:
        """Idle machines holding ``>= g`` GPUs, from one rack when possible (see the module docstring)."""
        def take_largest(names: list[str]) -> list[str]:
            out, total = [], 0
            for m in sorted(names, key=lambda n: -view.machine(n).gpus):
                if total >= g:
                    break
                out.append(m)
                total += view.machine(m).gpus
            return out

        idle = {rack: [m for m in ms if tentative.is_idle(m)] for rack, ms in view.racks().items()}
        capacity = {rack: sum(view.machine(m).gpus for m in ms) for rack, ms in idle.items()}
        if sum(capacity.values()) < g:
            return None
        one_rack = [(len(take_largest(ms)), capacity[r], i, r) for i, (r, ms) in enumerate(idle.items())
                    if capacity[r] >= g]
        if one_rack:
            return take_largest(idle[min(one_rack)[3]])
        order = sorted(idle, key=lambda r: -capacity[r])
        return _fill_racks(order, idle, view, g)


def _fill_racks(order: list[str], idle: dict[str, list[str]], view: ClusterView, g: int) -> list[str]:
    """Whole racks' idle machines in ``order`` (largest machines first within a rack) until ``>= g`` GPUs."""
    out, total = [], 0
    for rack in order:
        for m in sorted(idle[rack], key=lambda n: -view.machine(n).gpus):
            if total >= g:
                return out
            out.append(m)
            total += view.machine(m).gpus
    return out
