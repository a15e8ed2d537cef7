"""Random placement: each worker on a GPU drawn uniformly from all free GPUs.

The lower-bound baseline: it ignores machines, racks and the network. Each job draws from its own
``random.Random`` seeded from the policy seed and the job name, so the same seed gives the same
placement for the same job and cluster state; :meth:`RandomPolicy.candidates` are the draws of
derived seeds, for a policy that ranks them (Cassini).

Queueing, seeding, candidates and how slots and ranks are laid out: ``docs/algorithms.md`` (Random
placement). Cost: O(F) per job, F the number of free GPUs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from placement.base import ClusterView, GpuSlot, InOrderPolicy, JobRequest, Placement, Tentative


class RandomPolicy(InOrderPolicy):
    """Place each worker on a uniformly random free GPU.

    Args:
        seed: base seed; combined with each job's name.
        strict_order: stop at the first pending job that does not fit (no later job starts).
    """

    name = "random"
    draw = 0
    """Which derived seed the draws use (0: the policy's own; see :meth:`candidates`)."""

    def candidates(self, pending: Sequence[JobRequest], view: ClusterView, k: int) -> list[list[Placement]]:
        """Up to ``k`` distinct draws: this policy's, then those of its derived seeds (``docs/algorithms.md``)."""
        out: list[list[Placement]] = []
        for draw in range(4 * k):
            if len(out) == k:
                break
            variant = RandomPolicy(self.seed, self.strict_order)
            variant.draw = draw
            placed = variant.place(pending, view)
            if placed not in out:
                out.append(placed)
        return out

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot]:
        """Take the job's GPUs uniformly at random among the free GPUs (seeded by policy seed and job)."""
        tag = f"{self.seed}" if not self.draw else f"{self.seed}/{self.draw}"
        rng = random.Random(f"random-policy:{tag}:{job.name}")
        free = [m.name for m in view.machines for _ in range(tentative.n_free(m.name))]
        counts: dict[str, int] = {}
        for machine in rng.sample(free, job.workers):
            counts[machine] = counts.get(machine, 0) + 1
        return [s for machine, n in counts.items() for s in tentative.take(machine, n)]
