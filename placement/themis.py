"""Themis-like placement: each job on as few racks, then as few machines, as hold it; and the
alternatives of equal objective that Cassini ranks (``docs/resolutions.md`` Cassini §5.1, §8.4).

Themis (Mahajan et al., NSDI'20) allocates GPUs by auctions for finish-time fairness; its only
network model is a slowdown for workers spread across racks (§5.1 [T]). Its placement is
therefore locality first: the objective of a job's placement is ``(racks it spans, machines it
spans)``, fewer being better, and a job whose workers do not fit in the free GPUs waits. For a
job of ``w`` workers, with "free" counting GPUs given to earlier jobs of this call:

1. Racks, by free GPUs decreasing (ties by the cluster's order): the smallest prefix holding
   ``w`` gives the fewest racks ``r``. The first ``r - 1`` are taken whole; the rest of the job
   goes to one more rack that holds it, the one with the fewest free GPUs among those (best fit).
2. Within each chosen rack, machines the same way: the fewest machines, the last best fit.

Ranks follow the cluster's machine order (racks are contiguous in it), lowest free GPU indices
first within a machine, so a ring crosses each rack boundary as few times as it can and two
candidates on the same GPUs are the same candidate.

Candidates (:meth:`ThemisPolicy.candidates`, §5.1 step 1: "all candidates reach the same
finish-time fairness; they differ only in which physical servers the workers land on"): the
0th is :meth:`place`'s decision; the others replace every tie-break and every best fit by a
seeded random choice among the racks and machines that keep the objective (any rack or machine
that holds the rest, the largest ones taken whole in a random order among equals). A candidate
counts only if it places the same jobs with the same objective for every one of them as the
0th (a random choice for an early job can cost a later one a rack), and each candidate is
distinct. With ``k`` = 10 (the thesis's N), up to ``8k`` draws are tried.

Simplification ([R]): worker counts are the jobs' own (the experiment fixes them); Themis's
auctions that change them are not modelled. The scheduler side (leases, auctions, finish-time
fairness) is :mod:`scheduling.themis`.

Cost: O(R log R + M log M) per job for R racks and M machines; candidates cost ``k`` to ``8k``
times that per job.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from placement.base import ClusterView, GpuSlot, InOrderPolicy, JobRequest, Placement, Tentative


def fewest_groups(free: Sequence[tuple[str, int]], need: int, rng: random.Random | None) -> list[tuple[str, int]]:
    """Take ``need`` from as few groups as hold it: ``[(group, taken)]`` in the order taken, or []
    when they do not hold it.

    Groups by free count decreasing (ties in the given order, shuffled with ``rng``); the smallest
    prefix holding ``need`` gives the count ``c``; the first ``c - 1`` are taken whole, and the
    rest from one more group that holds it: the one with the fewest free (ties by order), or a
    random one of them with ``rng``.
    """
    groups = [(g, n) for g, n in free if n > 0]
    if sum(n for _, n in groups) < need:
        return []
    if rng is not None:
        rng.shuffle(groups)
    ranked = sorted(groups, key=lambda gn: -gn[1])
    total, count = 0, 0
    for _, n in ranked:
        total, count = total + n, count + 1
        if total >= need:
            break
    whole = ranked[:count - 1]
    if rng is not None and count > 1:  # the whole ones: any of those as large as the (c-1)-th
        cut = ranked[count - 2][1]
        larger = [gn for gn in ranked if gn[1] > cut]
        equal = [gn for gn in ranked if gn[1] == cut]
        whole = larger + rng.sample(equal, count - 1 - len(larger))
    rest = need - sum(n for _, n in whole)
    taken = {g for g, _ in whole}
    fits = [gn for gn in groups if gn[0] not in taken and gn[1] >= rest]
    if not fits:  # the whole ones drawn left no single group for the rest; keep the ranked prefix
        whole = ranked[:count - 1]
        rest = need - sum(n for _, n in whole)
        taken = {g for g, _ in whole}
        fits = [gn for gn in groups if gn[0] not in taken and gn[1] >= rest]
    last = rng.choice(fits) if rng is not None else min(fits, key=lambda gn: gn[1])
    return [*whole, (last[0], rest)] if rest > 0 else list(whole)


class ThemisPolicy(InOrderPolicy):
    """Locality first, racks then machines; equal-objective candidates (see the module docstring).

    Args:
        seed: seeds the candidates' random choices (the 0th candidate has none).
        strict_order: stop at the first pending job that does not fit (no later job starts).
    """

    name = "themis"
    rng: random.Random | None = None
    """The random choices of a candidate (None: :meth:`place`'s deterministic rule)."""

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot] | None:
        """The fewest racks, then the fewest machines in each (module docstring)."""
        racks = view.racks()
        per_rack = fewest_groups([(r, sum(tentative.n_free(m) for m in ms)) for r, ms in racks.items()],
                                 job.workers, self.rng)
        if not per_rack:
            return None
        slots: list[GpuSlot] = []
        for rack, n in per_rack:
            for machine, k in fewest_groups([(m, tentative.n_free(m)) for m in racks[rack]], n, self.rng):
                slots.extend(tentative.take(machine, k))
        order = {m.name: i for i, m in enumerate(view.machines)}
        return sorted(slots, key=lambda s: (order[s.machine], s.gpu))

    def candidates(self, pending: Sequence[JobRequest], view: ClusterView, k: int) -> list[list[Placement]]:
        """Up to ``k`` distinct decisions of the 0th's objective (module docstring), the 0th first."""
        first = self.place(pending, view)
        out, want = [first], objective(first, view)
        for draw in range(1, 8 * k):
            if len(out) >= k:
                break
            variant = ThemisPolicy(self.seed, self.strict_order)
            variant.rng = random.Random(f"themis:{self.seed}:{draw}")
            placed = variant.place(pending, view)
            if placed not in out and objective(placed, view) == want:
                out.append(placed)
        return out


def objective(placements: Sequence[Placement], view: ClusterView) -> dict[str, tuple[int, int]]:
    """Each placed job's ``(racks, machines)``: what Themis's locality rates (fewer is better)."""
    return {p.job: (len({view.machine(m).rack for m in p.machines}), len(p.machines)) for p in placements}
