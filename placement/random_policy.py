"""Random placement: each worker on a GPU drawn uniformly from all free GPUs.

The lower-bound baseline: it ignores machines, racks and the network.

Queueing: ``pending`` is processed in order. A job needing more GPUs than are still free
(counting GPUs given to earlier jobs of the same call) waits, i.e. is absent from the result,
and later smaller jobs may still be placed: there is no head-of-line blocking unless
``strict_order=True``, which stops at the first job that does not fit.

Randomness: each job gets its own ``random.Random`` seeded from the policy seed and the job
name (a string seed, which ``random`` hashes with SHA-512, so it is stable across processes).
The same seed therefore gives the same placement for the same job and cluster state,
whatever the policy was asked before.

Candidates (:meth:`RandomPolicy.candidates`, for a policy that ranks them, Cassini): the ``i``-th
is the draw of the same policy with the ``i``-th derived seed (the 0th is :meth:`place`'s);
random placement has no objective, so every draw is as good as another. Repeated draws are
skipped, so fewer than ``k`` come back when the cluster allows fewer.

Slots: the draw picks how many workers go to each machine (uniform over all free GPUs);
on a machine the job takes the lowest-indexed free GPUs, since GPUs of one machine are
interchangeable. Ranks are grouped by machine (all ranks of a machine contiguous), machines
in the order they were first drawn, GPU indices ascending within a machine.

Cost: O(F) per job, F the number of free GPUs.
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
        """Up to ``k`` distinct draws: this policy's, then those of its derived seeds (module docstring)."""
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
