"""``cassini,inner=<policy>``: Cassini as a plug-in over another policy's candidates (spec §5,
Algorithm 2; ``docs/resolutions.md`` Cassini §5).

At every decision the inner policy offers up to ``candidates`` placements it rates equal; each,
with the running jobs where they run, becomes every job's profile on every link it loads
(:func:`placement.cassini.profiles.job_profiles`), :func:`placement.cassini.select.choose` keeps the
best, its jobs get their time shifts (§5.4) and the decision is logged (§8.6).

The spec string's keys, measured profiles and the resolutions where the spec is silent [R]:
``docs/algorithms.md`` (Cassini as a plug-in); usage: ``docs/cassini.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence

from common.errors import PlacementError
from jobs.models import job_model, scaled_buckets
from placement.base import (
    ClusterView,
    JobRequest,
    Placement,
    PlacementContext,
    PlacementDecision,
    PlacementPolicy,
    TimeShift,
    jobs_by_name,
)
from placement.cassini.compat import DEFAULT_STEP_DEG
from placement.cassini.profile import Profile
from placement.cassini.profiles import job_profiles, measured
from placement.cassini.select import AGGREGATES, choose
from topo.routing import EcmpRoutes

Link = tuple[str, str]


class CassiniPolicy(PlacementPolicy):
    """Rank the inner policy's candidates by link compatibility and shift the winner's jobs.

    Args:
        seed: the inner policy's seed.
        inner: the registered policy whose candidates are ranked.
        candidates: how many candidates to ask for (>= 1).
        aggregate: how link scores make a candidate's (a key of ``select.AGGREGATES``).
        step_deg: the angle grid, degrees.
        quantum_ms: the iteration-time grid, ms.
        merge: merge identical links before the loop test.
        centre: centre the rotations in their optimal range.
        shift: give the chosen candidate's jobs their time shifts.
        context: the run's costing of transfers (headers at its MTU, per-message latency, scale),
            which the profiles follow so that their iteration times are the back end's, and the
            jobs' measured timings.
        make_policy: the registry's builder (:func:`placement.make_policy`, which passes itself), for
            the inner policy.

    Raises:
        PlacementError: an unknown inner policy or aggregate, ``cassini`` as its own inner
            policy, or a non-positive count or grid.
    """

    name = "cassini"

    def __init__(self, seed: int = 0, inner: str = "themis", candidates: int = 10, aggregate: str = "mean",
                 step_deg: float = DEFAULT_STEP_DEG, quantum_ms: float = 1.0, merge: bool = True, centre: bool = True,
                 shift: bool = True, context: PlacementContext = PlacementContext(),
                 make_policy: Callable[..., PlacementPolicy] | None = None):
        super().__init__(seed)
        if make_policy is None:
            raise PlacementError("cassini: built by the registry (placement.make_policy), which builds its inner "
                                 "policy")
        if inner == self.name:
            raise PlacementError("cassini: the inner policy cannot be cassini itself")
        if candidates < 1 or not step_deg > 0 or not quantum_ms > 0:
            raise PlacementError(f"cassini: candidates, step_deg and quantum_ms must be > 0, got {candidates}, "
                                 f"{step_deg}, {quantum_ms}")
        if aggregate not in AGGREGATES:
            raise PlacementError(f"cassini: unknown aggregate {aggregate!r}; valid: {', '.join(AGGREGATES)}")
        self.inner = make_policy(inner, seed=seed, context=context)
        self.context = context
        self.n_candidates, self.aggregate, self.step_deg = candidates, aggregate, step_deg
        self.quantum_ms, self.merge, self.centre, self.shift = quantum_ms, merge, centre, shift
        self.running: dict[str, tuple[JobRequest, Placement]] = {}  # jobs this policy placed, while they run
        self._profiles: dict[tuple, dict[Link, Profile]] = {}
        self._fabric: tuple[object, EcmpRoutes, dict[Link, float]] | None = None  # graph, routes, capacities

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """The chosen candidate's placements (:meth:`decide` has its shifts and log too)."""
        return list(self.decide(pending, view).placements)

    def decide(self, pending: Sequence[JobRequest], view: ClusterView) -> PlacementDecision:
        """Algorithm 2 over the inner policy's candidates (see ``docs/algorithms.md``).

        Raises:
            PlacementError: the view has no topology to route the jobs on.
        """
        requests = jobs_by_name(pending)
        held = view.job_machines()
        self.running = {j: rp for j, rp in self.running.items() if j in held}
        t0 = time.perf_counter()
        options = self.inner.candidates(pending, view, self.n_candidates)
        if not any(options):
            return PlacementDecision(tuple(options[0]) if options else ())
        g = view.graph
        if g is None:
            raise PlacementError("cassini: the cluster has no topology to route its jobs on")
        profiled = [self._profiled(c, requests, g) for c in options]
        decision = choose(profiled, self._fabric_of(g)[2], self.aggregate, self.step_deg, self.quantum_ms,
                          self.merge, self.centre)
        chosen = options[decision.chosen]
        for p in chosen:
            self.running[p.job] = (requests[p.job], p)
        shifts = ()
        if self.shift:
            period = {j: next(iter(profiled[decision.chosen][j].values())).iter_ms for j in decision.shifts_ms}
            shifts = tuple(TimeShift(j, (t % period[j]) / 1e3, period[j] / 1e3)
                           for j, t in sorted(decision.shifts_ms.items()))
        log = {"pending": [r.name for r in pending], "inner": self.inner.name,
               "candidates": [{**score.to_dict(), "placements": {p.job: list(p.machines) for p in option}}
                              for score, option in zip(decision.candidates, options, strict=True)],
               "chosen": decision.chosen, "fallback": decision.fallback,
               "discarded_loops": list(decision.discarded), "shifts": [s.to_dict() for s in shifts],
               "solver_s": decision.solver_s, "decision_s": time.perf_counter() - t0}
        return PlacementDecision(tuple(chosen), shifts, log)

    def candidates(self, pending: Sequence[JobRequest], view: ClusterView, k: int) -> list[list[Placement]]:
        """Cassini's choice, alone: it ranks candidates rather than offering them (and a choice it
        only offers is not one it placed: its running jobs are left as they were)."""
        running = dict(self.running)
        try:
            return [self.place(pending, view)]
        finally:
            self.running = running

    def _profiled(self, option: Sequence[Placement], requests: Mapping[str, JobRequest],
                  g) -> dict[str, dict[Hashable, Profile]]:
        """Every running job's and every placed job's profile per link, under one candidate."""
        out = {job: self._profile(req, p, g) for job, (req, p) in self.running.items()}
        out.update((p.job, self._profile(requests[p.job], p, g)) for p in option)
        return {job: links for job, links in out.items() if links}

    def _fabric_of(self, g) -> tuple[object, EcmpRoutes, dict[Link, float]]:
        """The graph's kept routes and every directed link's capacity (Gbit/s), made once per graph."""
        if self._fabric is None or self._fabric[0] is not g:
            capacity = {(u, v): float(d["bw_mbps"]) / 1000.0 for a, b, d in g.edges(data=True)
                        for u, v in ((a, b), (b, a))}
            self._fabric = (g, EcmpRoutes(g), capacity)
        return self._fabric

    def _profile(self, req: JobRequest, p: Placement, g) -> dict[Link, Profile]:
        """The job's profile on each link under placement ``p`` (memoised by model, collective, machines)."""
        machines = tuple(s.machine for s in p.slots)
        timing = self.context.timings.get(req.name)
        key = (req.model, req.compute_ms, req.collective, machines, timing)
        if key not in self._profiles:
            model, ctx = job_model(req.model, req.compute_ms), self.context
            buckets = scaled_buckets(model, ctx.scale) if ctx.scale != 1 else model.bucket_bytes
            links = job_profiles(g, machines, req.collective, buckets, model.compute_time_s, ctx.mtu,
                                 self._fabric_of(g)[1], ctx.latency_s, ctx.scale)
            self._profiles[key] = measured(links, *timing) if timing and links else links
        return self._profiles[key]
