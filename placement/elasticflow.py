"""ElasticFlow placement as Titan's evaluation characterises it ("EF-F"): best-fit consolidation.

Gu et al., "ElasticFlow: An Elastic Serverless Training Platform for Distributed Deep Learning",
ASPLOS 2023, as a baseline of Titan (``docs/resolutions.md`` Titan §3.1; [P] the Titan paper, [R]
our resolution). A job, rounded up to a power of two (``pow2_round``, [R, ⚠ A22]), goes on one
machine by best fit, else on whole idle machines, from one rack if it can [R]; it never spills over
fragments but waits [P; §5.2]. The rounding GPUs are reserved within one ``place`` call only [R].

The steps, the reservation, rank order and queueing: ``docs/algorithms.md`` (ElasticFlow). The
model is not read. Cost: O(M log M) per job for M machines.
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
        """Idle machines holding ``>= g`` GPUs, from one rack when possible (see ``docs/algorithms.md``)."""
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
