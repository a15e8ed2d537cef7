"""HiveD placement as Titan's evaluation characterises it ("HiveD-F"): fragments first.

Zhao et al., "HiveD: Sharing a GPU Cluster for Deep Learning with Guarantees", OSDI 2020, as a
baseline of Titan (``docs/resolutions.md`` Titan §3.2; [P] the Titan paper, [R] our resolution).
A job's workers fill partly used machines first, then whole idle machines [R, ⚠ A23, the only
simple rule that reproduces Titan's Fig. 1]; with ``rack_first`` (default) within the smallest rack
that holds the job [R]. A job that does not fit waits.

The rule in full, the rack cells, rank order and queueing: ``docs/algorithms.md`` (HiveD). The
model is not read. Cost: O(M^2) per job.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.base import (
    ClusterView,
    GpuSlot,
    InOrderPolicy,
    JobRequest,
    Tentative,
)


def fragment_first_plan(workers: int, machines: Sequence[str], tentative: Tentative,
                        gpus: dict[str, int]) -> list[tuple[str, int]]:
    """``(machine, GPUs)`` in choice order by the fill-fragments-exactly rule; may cover < ``workers``."""
    r = workers
    frag = [m for m in machines if not tentative.is_idle(m) and tentative.n_free(m) > 0]
    plan = []
    while r > 0 and frag:
        exact = [m for m in frag if tentative.n_free(m) <= r]
        s = max(exact, key=tentative.n_free) if exact else min(frag, key=tentative.n_free)
        t = min(tentative.n_free(s), r)
        plan.append((s, t))
        r -= t
        frag.remove(s)
    for m in machines:
        if r == 0:
            break
        if tentative.is_idle(m):
            t = min(gpus[m], r)
            plan.append((m, t))
            r -= t
    return plan


class HivedPolicy(InOrderPolicy):
    """Fragment-first placement within the smallest rack that fits (see ``docs/algorithms.md``).

    Args:
        seed: unused (the policy is deterministic); kept for the common interface.
        rack_first: confine a job to one rack when some rack can hold it (HiveD's cell levels).
        strict_order: stop at the first pending job that does not fit.
    """

    name = "hived"

    def __init__(self, seed: int = 0, rack_first: bool = True, strict_order: bool = False):
        super().__init__(seed, strict_order)
        self.rack_first = rack_first

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot]:
        """Take the job's GPUs from ``tentative``, fragments first."""
        gpus = {m.name: m.gpus for m in view.machines}
        plan = fragment_first_plan(job.workers, self._cell(job.workers, view, tentative), tentative, gpus)
        slots: list[GpuSlot] = []
        for machine, n in plan:
            slots += tentative.take(machine, n)
        return slots

    def _cell(self, workers: int, view: ClusterView, tentative: Tentative) -> list[str]:
        """Machines the job may use: the best-fit rack that holds it, else the whole cluster."""
        machines = [m.name for m in view.machines]
        if not self.rack_first:
            return machines
        fits = [(sum(tentative.n_free(m) for m in ms), i, ms) for i, ms in enumerate(view.racks().values())]
        fits = [f for f in fits if f[0] >= workers]
        return min(fits)[2] if fits else machines
