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

Slots: the draw picks how many workers go to each machine (uniform over all free GPUs);
on a machine the job takes the lowest-indexed free GPUs, since GPUs of one machine are
interchangeable. Ranks are grouped by machine (all ranks of a machine contiguous), machines
in the order they were first drawn, GPU indices ascending within a machine.

Cost: O(F) per job, F the number of free GPUs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from placement.base import ClusterView, JobRequest, Placement, PlacementPolicy, Tentative, jobs_by_name


class RandomPolicy(PlacementPolicy):
    """Place each worker on a uniformly random free GPU.

    Args:
        seed: base seed; combined with each job's name.
        strict_order: stop at the first pending job that does not fit (no later job starts).
    """

    name = "random"

    def __init__(self, seed: int = 0, strict_order: bool = False):
        super().__init__(seed)
        self.strict_order = strict_order

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """Place pending jobs in order on random free GPUs; jobs that do not fit wait."""
        jobs_by_name(pending)
        tentative = Tentative(view)
        out = []
        for job in pending:
            if job.workers > tentative.total_free:
                if self.strict_order:
                    break
                continue
            rng = random.Random(f"random-policy:{self.seed}:{job.name}")
            free = [m.name for m in view.machines for _ in range(tentative.n_free(m.name))]
            counts: dict[str, int] = {}
            for machine in rng.sample(free, job.workers):
                counts[machine] = counts.get(machine, 0) + 1
            slots = [s for machine, n in counts.items() for s in tentative.take(machine, n)]
            out.append(Placement(job.name, tuple(slots)))
        return out
