"""Themis-like placement: each job on as few racks, then as few machines, as hold it; and the
alternatives of equal objective that Cassini ranks (``docs/resolutions.md`` Cassini §5.1, §8.4).

Themis (Mahajan et al., NSDI'20) models the network only as a slowdown for workers spread across
racks (§5.1 [T]), so its placement is locality first: objective ``(racks, machines)`` spanned, the
last rack and machine by best fit; a job that does not fit waits. :meth:`ThemisPolicy.candidates`
draws seeded alternatives with the same objective for every job. [R]: worker counts are the jobs'
own; Themis's auctions are not modelled (the scheduler side is :mod:`scheduling.themis`).

The rule, rank order and how candidates are drawn: ``docs/algorithms.md`` (Themis' placement).
Cost: O(R log R + M log M) per job for R racks and M machines; candidates ``k`` to ``8k`` times that.
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
    """Locality first, racks then machines; equal-objective candidates (see ``docs/algorithms.md``).

    Args:
        seed: seeds the candidates' random choices (the 0th candidate has none).
        strict_order: stop at the first pending job that does not fit (no later job starts).
    """

    name = "themis"
    rng: random.Random | None = None
    """The random choices of a candidate (None: :meth:`place`'s deterministic rule)."""

    def choose(self, job: JobRequest, view: ClusterView, tentative: Tentative) -> list[GpuSlot] | None:
        """The fewest racks, then the fewest machines in each (``docs/algorithms.md``)."""
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
        """Up to ``k`` distinct decisions of the 0th's objective (``docs/algorithms.md``), the 0th first."""
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
