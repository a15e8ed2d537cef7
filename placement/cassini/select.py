"""Cassini as a plug-in: rank a base scheduler's candidate placements, shift the winner's jobs
(spec §5, Algorithm 2; ``docs/resolutions.md`` Cassini §5).

:func:`choose` builds each candidate's affinity graph, discards those with a loop (§4.5 [T]; with
``merge`` links of one class count once, §4.5 [REC]), scores every shared link
(:func:`placement.cassini.compat.link_score`), aggregates (``mean`` or ``min``), and turns the
winner's per-link shifts into one shift per job. Resolutions of spec §9 #6, #8, #10, #11 [R].

The rules and resolutions in full, and the cost: ``docs/algorithms.md`` (Cassini's ranking of
candidates).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from placement.cassini.affinity import affinity_edges, has_loop, time_shifts
from placement.cassini.compat import DEFAULT_STEP_DEG, LinkFit, link_score
from placement.cassini.profile import Profile, quantised_ms

AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {"mean": statistics.fmean, "min": min}
"""How a candidate's link scores become its score: the thesis's mean, or the worst link (a tail)."""


@dataclasses.dataclass(frozen=True)
class CandidateScore:
    """One candidate as Cassini judged it.

    Attributes:
        index: its position in the base scheduler's order.
        score: the aggregate of its shared links' scores (None: discarded for a loop).
        links: each shared link (the first of its class) with its optimum.
        loop: True when its affinity graph has a loop (it was discarded).
        classes: each scored link, the shared links of its class (itself first).
    """

    index: int
    score: float | None
    links: dict[Hashable, LinkFit]
    loop: bool
    classes: dict[Hashable, tuple[Hashable, ...]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON form (the decision log)."""
        return {"index": self.index, "score": self.score, "loop": self.loop,
                "links": {str(link): {**fit.to_dict(), "class": [str(m) for m in self.classes.get(link, (link,))]}
                          for link, fit in self.links.items()}}


@dataclasses.dataclass(frozen=True)
class CassiniDecision:
    """A decision of Algorithm 2: every candidate's score, the chosen one and its jobs' shifts.

    Attributes:
        candidates: every candidate, in the base scheduler's order.
        chosen: the index of the chosen candidate.
        shifts_ms: each job of the chosen candidate's affinity graph, its time-shift (ms).
        fallback: True when every candidate had a loop and the first was kept unshifted.
        solver_s: wall seconds spent scoring and solving.
    """

    candidates: tuple[CandidateScore, ...]
    chosen: int
    shifts_ms: dict[str, float]
    fallback: bool
    solver_s: float

    @property
    def discarded(self) -> tuple[int, ...]:
        """The candidates discarded for a loop."""
        return tuple(c.index for c in self.candidates if c.loop)

    def to_dict(self) -> dict:
        """JSON form (one entry of the per-decision log)."""
        return {"chosen": self.chosen, "shifts_ms": dict(self.shifts_ms), "fallback": self.fallback,
                "discarded_loops": list(self.discarded), "solver_s": self.solver_s,
                "candidates": [c.to_dict() for c in self.candidates]}


def link_classes(edges: Iterable[tuple[str, Hashable]], capacity_gbps: Mapping[Hashable, float],
                 profile_of: Callable[[str, Hashable], Profile]) -> dict[Hashable, tuple[Hashable, ...]]:
    """The shared links grouped by what their optimisation sees: the same jobs with the same
    profiles on the same capacity; each class keyed by its first link (§4.5 [REC]). Profiles and
    capacities are compared to :data:`SAME_DIGITS` significant digits: a ring's ranks send chunks
    that differ by a few bytes where a bucket does not divide evenly, which is the same demand."""
    jobs_on: dict[Hashable, list[str]] = {}
    for job, link in edges:
        jobs_on.setdefault(link, []).append(job)
    classes: dict[tuple, list[Hashable]] = {}
    for link, jobs in jobs_on.items():
        key = tuple(sorted((j, _rounded(profile_of(j, link))) for j in jobs)) + (_sig(capacity_gbps[link]),)
        classes.setdefault(key, []).append(link)
    return {links[0]: tuple(links) for links in classes.values()}


SAME_DIGITS = 6
"""Significant digits to which two links' profiles must agree to be one link class."""


def _sig(x: float) -> float:
    return float(f"{x:.{SAME_DIGITS}g}")


def _rounded(profile: Profile) -> tuple:
    """A profile as a link class compares it (:func:`link_classes`)."""
    return (_sig(profile.iter_ms), tuple((_sig(p.start_ms), _sig(p.dur_ms), _sig(p.gbps)) for p in profile.phases))


Candidate = Mapping[str, Mapping[Hashable, Profile]]
"""A candidate placement as Cassini sees it: job -> link it crosses -> its profile there."""


def score_candidate(index: int, candidate: Candidate, capacity_gbps: Mapping[Hashable, float],
                    aggregate: str = "mean", step_deg: float = DEFAULT_STEP_DEG, quantum_ms: float = 1.0,
                    merge: bool = True, centre: bool = False) -> CandidateScore:
    """One candidate's score; with ``merge``, links of one class count once (see ``docs/algorithms.md``);
    ``centre``: each link's rotations centred in their optimal range (:func:`link_score`)."""

    def profile_of(job: str, link: Hashable) -> Profile:
        return candidate[job][link]

    edges = affinity_edges(candidate)
    if merge:
        classes = link_classes(edges, capacity_gbps, profile_of)
        edges = [(job, link) for job, link in edges if link in classes]
    else:
        classes = {link: (link,) for _, link in edges}
    if has_loop(edges):
        return CandidateScore(index, None, {}, True)
    jobs_on: dict[Hashable, list[str]] = {}
    for job, link in edges:
        jobs_on.setdefault(link, []).append(job)
    fits = {link: link_score({j: profile_of(j, link) for j in jobs}, capacity_gbps[link], step_deg, quantum_ms,
                             centre=centre)
            for link, jobs in jobs_on.items()}
    score = AGGREGATES[aggregate]([f.score for f in fits.values()]) if fits else 1.0
    return CandidateScore(index, score, fits, False, classes)


def choose(candidates: Sequence[Candidate], capacity_gbps: Mapping[Hashable, float], aggregate: str = "mean",
           step_deg: float = DEFAULT_STEP_DEG, quantum_ms: float = 1.0, merge: bool = True,
           centre: bool = False) -> CassiniDecision:
    """Algorithm 2 over the base scheduler's ``candidates`` (each: job -> link -> its profile there).

    Args:
        capacity_gbps: each link's capacity, in the profiles' unit.
        aggregate: a key of :data:`AGGREGATES`.
        merge: links of one class count once before the loop test (False: the thesis as written).
        centre: centre each link's rotations in their optimal range ([R], :func:`link_score`).

    Raises:
        ValueError: no candidate, or an unknown aggregate (the message lists the valid ones).
    """
    if not candidates:
        raise ValueError("cassini: no candidate placement to choose from")
    if aggregate not in AGGREGATES:
        raise ValueError(f"cassini: unknown aggregate {aggregate!r}; valid: {', '.join(AGGREGATES)}")
    t0 = time.perf_counter()
    scored = tuple(score_candidate(i, c, capacity_gbps, aggregate, step_deg, quantum_ms, merge, centre)
                   for i, c in enumerate(candidates))
    kept = [c for c in scored if not c.loop]
    if not kept:
        return CassiniDecision(scored, 0, {}, True, time.perf_counter() - t0)
    best = max(kept, key=lambda c: c.score)  # the first of equal scores: the base scheduler's order
    weights = {(job, link): fit.shifts_ms[job] for link, fit in best.links.items() for job in fit.shifts_ms}
    iter_ms = {job: candidates[best.index][job][link].iter_ms for (job, link) in weights}
    shifts = time_shifts(weights, {j: float(quantised_ms(t, quantum_ms)) for j, t in iter_ms.items()})
    return CassiniDecision(scored, best.index, shifts, False, time.perf_counter() - t0)
