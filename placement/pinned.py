"""Pinned placement: each job on the machines its config names, the others consolidated.

For experiments that need a given placement, not a policy's choice (a validation suite, a paper's
figure, a bug report's): a job's config entry names the machine of each rank (``machines``), each
rank takes its machine's lowest free GPU, and a job not pinned is placed by
:class:`placement.consolidate.ConsolidatePolicy`'s rule. A pin naming a machine the cluster does not
have, or not one machine per worker, is a :class:`common.errors.PlacementError`.

An example and the rules: ``docs/algorithms.md`` (Pinned placement).
"""

from __future__ import annotations

from collections import Counter

from common.errors import PlacementError
from placement.base import ClusterView, GpuSlot, JobRequest, Tentative
from placement.consolidate import ConsolidatePolicy


class PinnedPolicy(ConsolidatePolicy):
    """Pinned jobs on their machines, the others by consolidation (``docs/algorithms.md``).

    Args:
        seed: unused (deterministic); kept for the common interface.
        strict_order: stop at the first pending job that does not fit.
    """

    name = "pinned"

    def __init__(self, seed: int = 0, strict_order: bool = False):
        super().__init__(seed, strict_order)

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot] | None:
        """The pinned machines' lowest free GPUs in rank order (None: not all free), or consolidation's
        choice for a job not pinned."""
        ranks = job.machines
        if not ranks:
            return super().choose(job, view, tentative)
        if len(ranks) != job.workers:
            raise PlacementError(f"pinned: job {job.name!r} has {job.workers} workers but is pinned to "
                                 f"{len(ranks)} machine(s) ({', '.join(ranks)})")
        unknown = sorted(set(ranks) - {m.name for m in view.machines})
        if unknown:
            raise PlacementError(f"pinned: job {job.name!r} is pinned to {', '.join(unknown)}, not machines of "
                                 f"this cluster")
        need = Counter(ranks)
        if any(tentative.n_free(m) < n for m, n in need.items()):
            return None
        taken = {m: iter(tentative.take(m, n)) for m, n in need.items()}
        return [next(taken[m]) for m in ranks]
