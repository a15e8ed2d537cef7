"""Titan: non-idle-machine-aware worker placement.

Fang, Zhao, Xu, Luo, Yao, Xie, "Non-Idle Machine-Aware Worker Placement for Efficient Distributed
Training in GPU Clusters", as ``docs/resolutions.md`` (Titan) resolves it. Objectives, lexicographic
(§1.6): (O1) fewest *idle* machines, (O2) fewest machines; we add (O3) cross-machine traffic ``X``
(§1.4, §6 A9). ``variant="r"`` (default) is Titan-R, our resolution (§2.4, [R]): per count of idle
machines, a max-coverage greedy over fragments, PACK + REFINE, and a traffic guard against the best
consolidated plan; ``variant="paper"`` is the paper's two-pass greedy read literally (§2.3). A ring
is packed on two block trees and the cheaper kept (a named deviation from §2.4.2, ``ring_grouping``).

Each variant step by step, the generalisation to machines of any size [R], the bandwidth modes (C3,
§2.4.4), complexity (§2.4.5) and measured times: ``docs/algorithms.md`` (Titan).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import deque
from collections.abc import Sequence

from common.errors import PlacementError, unknown_name
from jobs.models import get_model
from placement.base import (
    ClusterView,
    JobRequest,
    Placement,
    PlacementPolicy,
    Tentative,
    jobs_by_name,
)
from placement.titan_patterns import RING_GROUPINGS, Block, CommPattern, comm_pattern, ring_trees
from topo.routing import ecmp_path

DEFAULT_BW_MBPS = 100_000.0
"""Uniform machine-pair bandwidth assumed when the view carries no topology (100 Gbps, §4.1)."""
VARIANTS = ("r", "paper")
BW_MODES = ("off", "per_step_pair", "per_step_nic")
_REL_EPS = 1e-9  # traffic comparisons are relative to M: ring volumes M/p are inexact floats


@dataclasses.dataclass(frozen=True)
class MachineState:
    """What Titan knows about one machine at decision time.

    Attributes:
        name: machine name.
        free: free GPUs ``R_s``.
        gpus: GPUs on the machine (``K`` when the cluster is uniform).
        rack: rack (edge switch) name.
        order: position in the cluster's stable machine order (the "machine id" of ties).
    """

    name: str
    free: int
    gpus: int
    rack: str
    order: int

    @property
    def idle(self) -> bool:
        """Every GPU free (``s ∈ S_n``)."""
        return self.free == self.gpus

    @property
    def fragment(self) -> bool:
        """Non-idle but can still host a worker (``s ∈ S_f⁺``, §1.1 [R])."""
        return 1 <= self.free < self.gpus


@dataclasses.dataclass(frozen=True)
class TitanPlan:
    """A placement decided by Titan for one job.

    Attributes:
        assign: machine name of each worker, in rank order.
        cross_bytes: cross-machine traffic ``X`` of one allreduce (§1.4).
        idle_used: idle machines used (O1).
        machines_used: machines used (O2).
        budget_bytes: the guard ``X_cons + gamma·M`` (``inf`` when unguarded or the paper variant).
    """

    assign: tuple[str, ...]
    cross_bytes: float
    idle_used: int
    machines_used: int
    budget_bytes: float


@dataclasses.dataclass(frozen=True)
class TitanParams:
    """Tunables of Titan-R (§2.5). See :class:`TitanPolicy` for their meaning."""

    gamma: float = 1.0
    bw_mode: str = "off"
    beta: float = 0.5
    passes: int = 20
    swaps_max_p: int = 64
    strict: bool = False
    ring_grouping: str = "both"


# ----------------------------------------------------------------------------------------------
# PACK and REFINE (§2.4.1)


def pack(tree: Block, capacities: Sequence[int]) -> list[int]:
    """PACK: pattern-aware first fit with splitting (§2.4.1 [R]).

    Blocks are taken from a queue starting at the root; a block goes whole to the first machine
    (in ``capacities`` order) with room for it, else its children replace it at the front of the
    queue. Singletons always fit when the total capacity suffices.

    Returns:
        The machine index (into ``capacities``) of each worker.

    Raises:
        PlacementError: the capacities hold fewer workers than the tree.
    """
    if sum(capacities) < len(tree.ranks):
        raise PlacementError(f"pack: {len(tree.ranks)} workers do not fit capacities {list(capacities)}")
    rem = list(capacities)
    assign = [-1] * len(tree.ranks)
    queue = deque([tree])
    while queue:
        block = queue.popleft()
        target = next((i for i, r in enumerate(rem) if r >= len(block.ranks)), None)
        if target is None:
            queue.extendleft(reversed(block.children))
            continue
        rem[target] -= len(block.ranks)
        for r in block.ranks:
            assign[r] = target
    return assign


def _affinity(assign: Sequence[int], nbrs: Sequence[dict[int, float]]) -> list[dict[int, float]]:
    """``aff[n][s] = Σ_{v on s, v ≠ n} w(n, v)``."""
    out = []
    for partners in nbrs:
        sums: dict[int, float] = {}
        for v, w in partners.items():
            sums[assign[v]] = sums.get(assign[v], 0.0) + w
        out.append(sums)
    return out


def refine(assign: Sequence[int], capacities: Sequence[int], nbrs: Sequence[dict[int, float]],
           passes: int, swaps: bool, tie_order: Sequence[int] | None = None, accept=None) -> list[int]:
    """REFINE: steepest-descent local search on the cross traffic (§2.4.1 [R]).

    Operations: move one worker to another machine that already hosts workers of the job and
    has room (never opening a machine), or swap two workers on different machines. Each pass
    applies the single best strictly improving operation; ties: moves before swaps, then smaller
    worker id, then smaller target machine (by ``tie_order``), then smaller second worker.

    The change in ``X`` of a move of ``n`` from ``a`` to ``b`` is ``aff[n][a] - aff[n][b]``, with
    ``aff[n][s] = Σ_{v on s, v≠n} w(n,v)``; of a swap of ``n ∈ a`` and ``m ∈ b`` it is
    ``aff[n][a] - aff[n][b] + aff[m][b] - aff[m][a] + 2·w(n,m)``. (The spec writes the swap with
    its sums already excluding ``n`` and ``m`` *and* adds ``2·w(n,m)``, which counts the pair twice;
    this form is checked against recomputing ``X`` in the tests.)

    Args:
        assign: machine index of each worker (not changed).
        capacities: workers each machine index can hold.
        nbrs: ``w`` as adjacency (:meth:`CommPattern.neighbours`).
        passes: maximum number of improving operations.
        swaps: consider swaps (O(p²) per pass).
        tie_order: rank of each machine index for ties (default: the index itself).
        accept: optional predicate on a candidate assignment (C3); rejected operations are skipped.

    Returns:
        The refined assignment (a new list).
    """
    x = list(assign)
    p = len(x)
    order = list(tie_order) if tie_order is not None else list(range(len(capacities)))
    scale = max((w for partners in nbrs for w in partners.values()), default=0.0)
    eps = _REL_EPS * scale
    count = [0] * len(capacities)
    for s in x:
        count[s] += 1
    aff = _affinity(x, nbrs)  # kept up to date by _move below
    for _ in range(passes):
        cands = []
        for n in range(p):
            a = x[n]
            here = aff[n].get(a, 0.0)
            for b, there in aff[n].items():
                if b != a and count[b] < capacities[b] and here - there < -eps:
                    cands.append((here - there, 0, n, order[b], -1, b))
        if swaps:
            for n in range(p):
                for m in range(n + 1, p):
                    a, b = x[n], x[m]
                    if a == b:
                        continue
                    delta = (aff[n].get(a, 0.0) - aff[n].get(b, 0.0) + aff[m].get(b, 0.0)
                             - aff[m].get(a, 0.0) + 2 * nbrs[n].get(m, 0.0))
                    if delta < -eps:
                        cands.append((delta, 1, n, order[b], m, b))
        applied = False
        for _, kind, n, _, m, b in sorted(cands, key=lambda c: (round(c[0] / scale, 9),) + c[1:5]):
            y = list(x)
            if kind == 0:
                y[n] = b
            else:
                y[n], y[m] = x[m], x[n]
            if accept is None or accept(y):
                for v in ((n,) if kind == 0 else (n, m)):
                    _move(v, x[v], y[v], nbrs, aff, count)
                x, applied = y, True
                break
        if not applied:
            break
    return x


def _move(n: int, a: int, b: int, nbrs: Sequence[dict[int, float]], aff: list[dict[int, float]],
          count: list[int]) -> None:
    """Update ``aff`` and ``count`` for worker ``n`` moving from machine ``a`` to ``b``."""
    count[a] -= 1
    count[b] += 1
    for v, w in nbrs[n].items():
        aff[v][a] -= w
        aff[v][b] = aff[v].get(b, 0.0) + w


# ----------------------------------------------------------------------------------------------
# Titan-R (§2.4)


def select_idle(machines: Sequence[MachineState], need_gpus: int) -> list[MachineState]:
    """SELECT_IDLE (§2.4.1 [R]): idle machines, in locality order, until they hold ``need_gpus``.

    Prefers a single rack whose idle machines suffice (the one with the fewest idle machines:
    rack-level best fit); otherwise racks with the most idle machines first. Within a rack and
    between equal racks: machine order. Returns every idle machine if together they fall short.
    """
    racks: dict[str, list[MachineState]] = {}
    for m in machines:
        if m.idle:
            racks.setdefault(m.rack, []).append(m)
    groups = [sorted(ms, key=lambda m: m.order) for ms in racks.values()]
    fits = [g for g in groups if sum(m.gpus for m in g) >= need_gpus]
    if fits:
        ordered = [min(fits, key=lambda g: (len(g), g[0].order))]
    else:
        ordered = sorted(groups, key=lambda g: (-len(g), g[0].order))
    out, total = [], 0
    for m in (m for g in ordered for m in g):
        if total >= need_gpus:
            break
        out.append(m)
        total += m.gpus
    return out


class _Job:
    """The per-job data of one Titan-R run: pattern, block tree, affinity, C3 limits."""

    def __init__(self, pattern: CommPattern, params: TitanParams, pair_limit_bytes=None,
                 nic_limit_bytes=None):
        self.pattern = pattern
        self.params = params
        self.trees = ring_trees(pattern, params.ring_grouping)
        self.nbrs = pattern.neighbours()
        self.pairs = [(a, b, w) for (a, b), w in pattern.weights().items()]  # X = Σ over cut pairs of w
        self.size = float(pattern.size_bytes) or 1.0
        self.pair_limit_bytes = pair_limit_bytes  # (name, name) -> bytes, or None
        self.nic_limit_bytes = nic_limit_bytes  # name -> bytes, or None
        self.checks_bw = pair_limit_bytes is not None or nic_limit_bytes is not None

    def cross(self, assign: Sequence) -> float:
        """``X`` (§1.4) from the pair weights: cheaper than summing the steps (ring has p² entries)."""
        return sum(w for a, b, w in self.pairs if assign[a] != assign[b])

    def bw_ok(self, assign: Sequence[str | None]) -> bool:
        """C3 per step and machine pair (§1.6, §2.4.4); always true with ``bw_mode=off``.

        Workers whose machine is None (not placed yet) are ignored.
        """
        if not self.checks_bw:
            return True
        for step in self.pattern.steps:
            vols: dict[tuple[str, str], float] = {}
            for (a, b), vol in step.items():
                sa, sb = assign[a], assign[b]
                if sa is not None and sb is not None and sa != sb:
                    key = (min(sa, sb), max(sa, sb))
                    vols[key] = vols.get(key, 0.0) + vol
            if self.pair_limit_bytes is not None:
                if any(vol > self.pair_limit_bytes(*key) * (1 + _REL_EPS) for key, vol in vols.items()):
                    return False
            if self.nic_limit_bytes is not None:
                egress: dict[str, float] = {}
                for (sa, sb), vol in vols.items():
                    egress[sa] = egress.get(sa, 0.0) + vol
                    egress[sb] = egress.get(sb, 0.0) + vol
                if any(vol > self.nic_limit_bytes(m) * (1 + _REL_EPS) for m, vol in egress.items()):
                    return False
        return True

    def _least_traffic(self, caps: Sequence[int], tie_order=None, accept=None) -> list[int]:
        """REFINE(PACK(B, caps)) for each block tree of the job; the assignment with the least ``X``.

        An assignment that ``accept`` (C3) rejects ranks after every one it accepts. Ties go to
        the first tree (the spec's), so the clustered ring chain only changes a plan it makes
        cheaper (:func:`placement.titan_patterns.ring_trees`).
        """
        swaps = self.pattern.p <= self.params.swaps_max_p
        best, best_key = None, None
        for tree in self.trees:
            x = refine(pack(tree, caps), caps, self.nbrs, self.params.passes, swaps, tie_order, accept)
            rejected = len(self.trees) > 1 and accept is not None and not accept(x)
            key = (rejected, _key(self.cross(x), self.size))
            if best is None or key < best_key:
                best, best_key = x, key
        return best

    def map_workers(self, ms: Sequence[MachineState]) -> list[str]:
        """REFINE(PACK(B, MS)) with capacities ``R_s``; machine names per worker."""
        caps = [m.free for m in ms]
        names = [m.name for m in ms]
        accept = None
        if self.checks_bw:
            def accept(y):
                return self.bw_ok([names[i] for i in y])
        x = self._least_traffic(caps, [m.order for m in ms], accept)
        return [names[i] for i in x]

    def consolidated_bytes(self, k: int) -> float:
        """``X_cons``: traffic of REFINE(PACK(B, ceil(p/K) virtual machines of K GPUs)) (§2.4.1 line 7)."""
        return self.cross(self._least_traffic([k] * math.ceil(self.pattern.p / k)))


def _key(bytes_: float, size: float) -> float:
    """Traffic in units of M, rounded so that float noise does not decide ties."""
    return round(bytes_ / size, 9)


def _locality(s: MachineState, racks: set[str]) -> tuple[int, int]:
    """Tie rank: a machine in a rack the job already uses first, then machine order."""
    return (0 if s.rack in racks else 1, s.order)


def _cover_fragments(job: _Job, ms: list[MachineState], frags: Sequence[MachineState], r: int):
    """Lines 12-19 of §2.4.1: max-coverage greedy over fragments with best fit and look-ahead."""
    ms = list(ms)
    while r > 0:
        used = {m.name for m in ms}
        cand = [s for s in frags if s.name not in used]
        if not cand:
            break
        gain = max(min(s.free, r) for s in cand)
        racks = {m.rack for m in ms}
        reps: dict[int, MachineState] = {}
        for s in sorted((s for s in cand if min(s.free, r) == gain), key=lambda s: _locality(s, racks)):
            reps.setdefault(s.free, s)  # one representative per distinct R_s
        lookahead = gain == r and len(reps) > 1  # only on the completing pick

        def score(s: MachineState, racks=racks, ms=ms, lookahead=lookahead):
            xi = _key(job.cross(job.map_workers(ms + [s])), job.size) if lookahead else 0.0
            return (xi, s.free) + _locality(s, racks)

        best = min(reps.values(), key=score)
        ms.append(best)
        r -= gain
    return ms, r


def titan_r(pattern: CommPattern, machines: Sequence[MachineState],
            params: TitanParams = TitanParams(), pair_limit_bytes=None,
            nic_limit_bytes=None) -> TitanPlan | None:
    """Titan-R (§2.4.1): the placement of one job, or None to WAIT.

    Args:
        pattern: the job's ``C^t`` (``pattern.p`` workers).
        machines: every machine with its free GPUs, in cluster order.
        params: tunables (§2.5).
        pair_limit_bytes: C3 limit ``P_{s,s'}`` as a function of two machine names, or None (off).
        nic_limit_bytes: per-step NIC egress limit as a function of a machine name, or None (off).

    Returns:
        The plan, or None when the job cannot be placed (too few free GPUs; ``strict`` and no
        plan within the budget; C3 rejects every plan).
    """
    p = pattern.p
    if p > sum(m.free for m in machines):
        return None
    job = _Job(pattern, params, pair_limit_bytes, nic_limit_bytes)
    frags = [m for m in machines if m.fragment]
    frag_gpus = sum(m.free for m in frags)
    phi_n = select_idle(machines, p)
    k = max(m.gpus for m in machines)
    budget = job.consolidated_bytes(k) + params.gamma * job.size if params.gamma != math.inf else math.inf
    best: TitanPlan | None = None
    for u in range(len(phi_n) + 1):
        ms = phi_n[:u]
        r = p - sum(m.free for m in ms)
        if r > frag_gpus:
            continue  # u < u_min: fragments cannot cover the rest
        ms, r = _cover_fragments(job, ms, frags, r)
        if r > 0:
            continue
        assign = job.map_workers(ms)
        if not job.bw_ok(assign):
            continue
        names = set(assign)
        plan = TitanPlan(tuple(assign), job.cross(assign),
                         sum(1 for m in ms if m.idle and m.name in names), len(names), budget)
        if best is None or _key(plan.cross_bytes, job.size) < _key(best.cross_bytes, job.size):
            best = plan
        if _key(plan.cross_bytes, job.size) <= _key(budget, job.size):
            return plan
    return None if params.strict else best


# ----------------------------------------------------------------------------------------------
# The paper's literal two-pass greedy (§2.3, text semantics)


def titan_paper(pattern: CommPattern, machines: Sequence[MachineState], rng: random.Random,
                pair_limit_bytes=None, nic_limit_bytes=None) -> TitanPlan | None:
    """Alg. 3 of the paper with Alg. 2's text semantics and max-coverage gain (§2.3, §6 A16-A19 [R]).

    Pass 1 picks idle machines by largest coverage ``min(R_s, r)`` until the job is covered
    (``Φ_n``); pass 2 re-runs the same greedy over ``S_f⁺ ∪ Φ_n``. Ties: non-idle first, then
    smaller ``R_s``, then machine order. Workers, in a seeded random order (the paper's "random
    distribution"), fill the picked machines in pick order. With C3 on, a pick is refused if the
    workers it would take break the per-step pair limit against those already placed (Alg. 1).
    """
    p = pattern.p
    if p > sum(m.free for m in machines):
        return None
    workers = list(range(p))
    rng.shuffle(workers)
    job = _Job(pattern, TitanParams(), pair_limit_bytes, nic_limit_bytes)

    def greedy(pool: Sequence[MachineState]) -> tuple[list[tuple[MachineState, list[int]]], list[int]]:
        """Max-coverage picks over ``pool`` and the workers left uncovered."""
        picks: list[tuple[MachineState, list[int]]] = []
        left = list(workers)
        pool = list(pool)
        while left and pool:
            need = len(left)
            for s in sorted(pool, key=lambda s: (-min(s.free, need), s.idle, s.free, s.order)):
                take = left[:min(s.free, len(left))]
                trial = {n: m.name for m, ns in picks for n in ns}
                trial.update((n, s.name) for n in take)
                # Alg. 1 checks a worker against already placed workers only: unplaced ones are None.
                if job.bw_ok([trial.get(n) for n in range(p)]):
                    picks.append((s, take))
                    left = left[len(take):]
                    pool.remove(s)
                    break
            else:
                break  # C3 refuses every remaining machine
        return picks, left

    # Pass 1 may fall short of the job when idle GPUs are scarce; pass 2 adds the fragments.
    phi_n = [s for s, _ in greedy([m for m in machines if m.idle])[0]]
    picks, left = greedy([m for m in machines if m.fragment] + phi_n)
    if left:
        return None
    assign = [""] * p
    for s, ns in picks:
        for n in ns:
            assign[n] = s.name
    names = set(assign)
    return TitanPlan(tuple(assign), job.cross(assign), sum(1 for s, ns in picks if s.idle and ns),
                     len(names), math.inf)


# ----------------------------------------------------------------------------------------------
# The policy


def _bottleneck_mbps(graph, a: str, b: str) -> float:
    """Smallest ``bw_mbps`` on the ECMP path from ``a`` to ``b``."""
    path = ecmp_path(graph, a, b)
    return min(graph.edges[u, v]["bw_mbps"] for u, v in zip(path, path[1:], strict=False))


def _nic_mbps(graph, machine: str) -> float:
    """Bandwidth of a machine's single link."""
    return max(d["bw_mbps"] for _, _, d in graph.edges(machine, data=True))


class TitanPolicy(PlacementPolicy):
    """Titan placement (see ``docs/algorithms.md``).

    Args:
        seed: seeds the paper variant's random initial split; Titan-R does not use it.
        variant: ``r`` (Titan-R, §2.4) or ``paper`` (the literal two-pass greedy, §2.3).
        gamma: traffic guard ``X <= X_cons + gamma·M``, in units of ``M`` (§2.4.4); ``inf`` turns it off.
        labelling: halving-doubling partner order assumed for ``hd`` jobs, ``gloo`` (what the
            testbed runs) or ``paper`` (Fig. 1(a)).
        bw_mode: ``off``, ``per_step_pair`` or ``per_step_nic`` (C3, §2.4.4).
        beta: C3 step budget in units of ``M`` on the fastest path.
        passes: REFINE iterations.
        swaps_max_p: REFINE considers swaps only for jobs of at most this many workers.
        strict: WAIT instead of placing the least-traffic plan when no plan meets the guard.
        ring_grouping: block trees packed for a ring: ``both`` (default: the spec's balanced
            tree and the clustered chain, keep the cheaper), ``balanced`` (the spec literally)
            or ``chain`` (see :func:`placement.titan_patterns.ring_trees`).
    """

    name = "titan"

    def __init__(self, seed: int = 0, variant: str = "r", gamma: float = 1.0, labelling: str = "gloo",
                 bw_mode: str = "off", beta: float = 0.5, passes: int = 20, swaps_max_p: int = 64,
                 strict: bool = False, ring_grouping: str = "both"):
        super().__init__(seed)
        if variant not in VARIANTS:
            raise PlacementError(unknown_name("titan variant", variant, VARIANTS))
        if bw_mode not in BW_MODES:
            raise PlacementError(unknown_name("titan bw_mode", bw_mode, BW_MODES))
        if ring_grouping not in RING_GROUPINGS:
            raise PlacementError(unknown_name("titan ring_grouping", ring_grouping, RING_GROUPINGS))
        if labelling not in ("gloo", "paper"):
            raise PlacementError(unknown_name("titan labelling", labelling, ("gloo", "paper")))
        for key, value in (("gamma", gamma), ("beta", beta)):
            if not value >= 0:
                raise PlacementError(f"titan: {key} must be >= 0, got {value}")
        if passes < 0 or swaps_max_p < 0:
            raise PlacementError(f"titan: passes and swaps_max_p must be >= 0, got {passes}, {swaps_max_p}")
        self.variant = variant
        self.labelling = labelling
        self.params = TitanParams(gamma=gamma, bw_mode=bw_mode, beta=beta, passes=passes,
                                  swaps_max_p=swaps_max_p, strict=strict, ring_grouping=ring_grouping)

    def pattern_for(self, job: JobRequest) -> CommPattern:
        """The job's ``C^t``: its collective over ``M`` = the model's parameter bytes.

        Every decision is invariant to scaling ``M`` (the guard and the C3 limit are multiples of
        ``M``), so the emulator's byte scale factor need not be applied here.
        """
        size = get_model(job.model).param_bytes
        return comm_pattern(job.collective, job.workers, size, self.labelling)

    def _limits(self, view: ClusterView, size_bytes: float):
        """C3 limits ``(pair, nic)`` as cached functions of machine names; None where the mode is off.

        Pair: ``beta·M·b_{s,s'}/b_max``; NIC: ``beta·M·B_s/b_max``; without a graph every
        bandwidth is :data:`DEFAULT_BW_MBPS`, so both are ``beta·M``.
        """
        mode, budget = self.params.bw_mode, self.params.beta * size_bytes
        if mode == "off":
            return None, None
        graph = view.graph
        if graph is None:
            flat = lambda *_: budget  # noqa: E731
            return (flat, None) if mode == "per_step_pair" else (None, flat)
        b_max = max(_nic_mbps(graph, m.name) for m in view.machines)
        if mode == "per_step_nic":
            nic = {m.name: budget * _nic_mbps(graph, m.name) / b_max for m in view.machines}
            return None, nic.__getitem__
        cache: dict[tuple[str, str], float] = {}

        def pair(a: str, b: str) -> float:
            if (a, b) not in cache:
                bw = min(_bottleneck_mbps(graph, a, b), _bottleneck_mbps(graph, b, a))
                cache[(a, b)] = budget * bw / b_max
            return cache[(a, b)]

        return pair, None

    def plan(self, job: JobRequest, view: ClusterView,
             tentative: Tentative | None = None) -> TitanPlan | None:
        """Titan's plan for one job over ``view`` (minus GPUs already taken in ``tentative``), or None."""
        tentative = tentative or Tentative(view)
        machines = [MachineState(m.name, tentative.n_free(m.name), m.gpus, m.rack, i)
                    for i, m in enumerate(view.machines)]
        pattern = self.pattern_for(job)
        pair, nic = self._limits(view, pattern.size_bytes)
        if self.variant == "paper":
            rng = random.Random(f"{self.seed}:{job.name}")
            return titan_paper(pattern, machines, rng, pair, nic)
        return titan_r(pattern, machines, self.params, pair, nic)

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """Place pending jobs in order, each by Titan; jobs without a plan wait (no head-of-line blocking)."""
        jobs_by_name(pending)
        tentative = Tentative(view)
        out = []
        for job in pending:
            plan = self.plan(job, view, tentative)
            if plan is None:
                continue
            gpus = {m: iter(tentative.take(m, plan.assign.count(m))) for m in dict.fromkeys(plan.assign)}
            out.append(Placement(job.name, tuple(next(gpus[m]) for m in plan.assign)))
        return out
