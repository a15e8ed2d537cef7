"""HiveD placement as Titan's evaluation characterises it ("HiveD-F"): fragments first.

Zhao et al., "HiveD: Sharing a GPU Cluster for Deep Learning with Guarantees", OSDI 2020,
as a baseline of Titan (``docs/resolutions.md`` Titan §3.2; [P] the Titan paper, [R] our
resolution). HiveD-F uses fragmented GPUs first, so a job's workers spread over partly used
machines: fewer machines are left fragmented, at the price of cross-machine traffic [P].

Rule for a job of ``p`` workers, "free" counting GPUs given to earlier jobs of the call,
"fragment" a machine that is partly used and has a free GPU [R, ⚠ A23, the only simple rule
that reproduces Titan's Fig. 1]::

    r = p; frag = fragments in machine order
    while r > 0 and frag:
        F = fragments with free <= r
        s = F's fragment with the most free GPUs (fills it completely)   if F
            else frag's fragment with the fewest free GPUs (best fit for the tail)
        take min(free(s), r) GPUs of s; drop s from frag
    then whole idle machines in machine order, min(gpus, r) GPUs each
    the job waits if fewer than p GPUs are free

Multi-level cells [R] (HiveD allocates buddy cells GPU < machine < rack): with
``rack_first`` (default) the job is confined to the smallest rack cell that can hold it,
i.e. the rack with the fewest free GPUs ``>= p`` (ties by rack order), and the rule above
runs over that rack's machines; only when no single rack can hold it does the rule run over
the whole cluster. The real HiveD keeps a gang inside one buddy cell and never splits it
over arbitrary fragments; like Titan's paper we implement the simplification.

Ranks go machine by machine in the order the machines were chosen, lowest free GPU indices
first. Queueing: ``pending`` in order; a job that does not fit waits and later jobs may
still be placed unless ``strict_order=True``. The model is not read. Cost: O(M^2) per job.
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
    """Fragment-first placement within the smallest rack that fits (see the module docstring).

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
