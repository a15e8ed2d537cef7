"""NetPack's placement (``docs/resolutions.md`` NetPack §3, Algorithm 2): batch, value servers, pack
workers, place the PS, then turn INA on where it gains most.

One :meth:`NetPackPolicy.place` call is one batch period (§3.2): a 0/1 knapsack picks the jobs
(Step ❶), a job that fits one server goes there, the others get candidate worker plans from the
steady state and a 2-D knapsack (Step ❷), the PS by Eq. 1 with a hot-spot bonus (Step ❸), and INA
by aggregation efficiency within each ToR's PAT (Step ❹, §3.7). Resolutions of §6 #14-#24, #33 are
ours where the paper is silent.

Each step, the scores and the server value (``value=paper|code``): ``docs/algorithms.md`` (NetPack);
an overview: ``docs/netpack.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from common.errors import PlacementError
from placement.base import ClusterView, GpuSlot, JobRequest, Placement, PlacementPolicy, Tentative, jobs_by_name
from placement.netpack.knapsack import ServerItem, WorkerPlan, select_jobs, worker_plans
from placement.netpack.network import EPS, Fabric, FabricCache, NetJob, job_flows
from placement.netpack.state import Decision, Decisions
from placement.netpack.waterfill import SteadyState, waterfill

VALUES = ("paper", "code")


def server_value(bw: float, capacity: float, flows: int, kind: str = "paper") -> float:
    """A server's value (§3.4; see ``docs/algorithms.md``): 100, 10 and -25 for the paper's idle,
    1-flow-60-used and saturated-3-flow examples at C = 100."""
    if kind == "code":
        return bw - capacity / (flows + 1)
    return bw - (capacity - bw) / (flows + 1)


@dataclasses.dataclass(frozen=True)
class PsChoice:
    """The winning (worker plan, PS server) pair and its Eq. 1 score."""

    plan: WorkerPlan
    ps: str
    score: float


def choose_ps(plans: Sequence[WorkerPlan], fabric: Fabric, state: SteadyState, servers: Sequence[str],
              capacity: float) -> PsChoice | None:
    """Step ❸: the best (plan, PS) pair by Eq. 1 with the hot-spot bonus (``docs/algorithms.md``, point 4);
    on equal scores a PS in one of the plan's racks (ours: the paper gives no tie rule), then the
    first plan and server.

    Every (plan, server) pair is a candidate, but a server's score is at most ``V + s.bw −
    (C − s.bw)/(s.flows + 2) + C/(f + 1)`` (ε = 1 and the hot-spot term at its largest), so each
    plan scans the servers by that bound, best first, and stops where it falls below the best
    score found: the same choice as scoring every pair, in O(plans × the servers that could win)
    after one sort of the servers.
    """
    flows, up_flows = state.server_flows(), state.uplink_flows()
    order = {s: i for i, s in enumerate(servers)}
    own = {s: state.residual[("access", s)]
           - (fabric.access_gbps[s] - state.residual[("access", s)]) / (flows.get(s, 0) + 2) for s in servers}
    by_bound = sorted(servers, key=lambda s: (-own[s], order[s]))
    best: PsChoice | None = None
    best_local = False
    for plan in plans:
        chosen = set(plan.servers)
        racks = {fabric.rack_of[w] for w in plan.servers}
        top = best.score if best is not None else float("-inf")
        reach = plan.value + capacity / (plan.flows + 1)
        scored, classes = [], set()
        for s in by_bound:
            if reach + own[s] < top - EPS:
                break
            r = fabric.rack_of[s]
            if r not in racks:  # outside the plan's racks a server scores as any other of its class: the first wins
                cls = (own[s], flows.get(s, 0), fabric.access_gbps[s], up_flows.get(r, 0), fabric.uplink_gbps[r])
                if cls in classes:
                    continue
                classes.add(cls)
            eps = 0 if s in chosen else 1
            f_s = flows.get(s, 0)
            bw = state.residual[("access", s)]
            hot = min(capacity / (max(plan.flows, f_s + eps) + 1), _rack_share(fabric, plan.servers, s, up_flows))
            score = plan.value + bw - (fabric.access_gbps[s] - bw) / (f_s + eps + 1) + hot
            scored.append((order[s], s, score))
            top = max(top, score)
        for _, s, score in sorted(scored):  # the servers that could win, in the servers' order
            local = fabric.rack_of[s] in racks
            if best is None or score > best.score + EPS or (score > best.score - EPS and local and not best_local):
                best, best_local = PsChoice(plan, s, score), local
    return best


def _rack_share(fabric: Fabric, servers: Sequence[str], ps: str, up_flows: Mapping[str, int]) -> float:
    """The job's share of the most contended rack uplink it would cross (§3.8, ours: a min over
    the racks crossed, ``C_rack/(FC_r + n_r)``; infinity when it stays in one rack)."""
    p = fabric.rack_of[ps]
    leaves = {fabric.rack_of[w] for w in servers} - {p}
    if not leaves:
        return float("inf")
    adds = {r: 1 for r in leaves}
    adds[p] = len(leaves)
    return min(fabric.uplink_gbps[r] / (up_flows.get(r, 0) + n) for r, n in adds.items())


def interchangeable_first(items: Sequence[ServerItem], top: int) -> list[ServerItem]:
    """``items`` with each class of interchangeable servers (same free GPUs, value and flows) cut
    to the first ``ceil(top / free)``: no plan of at most ``top`` GPUs holds more of a class, and
    the DP keeps the first of equal plans, so its plans are the same, found over fewer items."""
    seen: dict[tuple[int, float, int], int] = {}
    out = []
    for it in items:
        key = (it.free, round(it.value, 9), it.flows)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= -(-top // it.free):
            out.append(it)
    return out


def trim(plan: Sequence[tuple[str, int]], need: int, ps: str | None = None) -> list[tuple[str, int]]:
    """The plan's (server, GPUs) with the GPUs beyond ``need`` released (§3.5, the authors' code):
    from the server giving the most GPUs that can absorb the whole excess, else from the largest
    givers in turn; a server left with none is dropped. Ties (§6 #18, ours): not the PS's server
    (it keeps its workers next to the PS), then the last in the plan (rank 0's server stays)."""
    excess = sum(n for _, n in plan) - need
    out = list(plan)
    while excess > 0:
        able = [i for i, (_, n) in enumerate(out) if n >= excess] or list(range(len(out)))
        i = max(able, key=lambda k: (out[k][1], out[k][0] != ps, k))
        cut = min(excess, out[i][1])
        out[i] = (out[i][0], out[i][1] - cut)
        excess -= cut
    return [(s, n) for s, n in out if n > 0]


class NetPackPolicy(PlacementPolicy):
    """NetPack (see ``docs/algorithms.md``).

    Args:
        seed: unused (NetPack is deterministic).
        pat_gbps: every ToR's Peak Aggregation Throughput (§1.6). 0: no INA anywhere; NetPack
            still balances GPUs and bandwidth (§6.3, Fig. 11). Default: the topology's (each INA
            switch's, which an experiment sets from its ``ina.pat_gbps``), else the paper's
            simulator's 1 Tb/s (:meth:`placement.netpack.network.Fabric.from_graph`).
        value: the server value, ``paper`` or ``code`` (``docs/algorithms.md``).
        min_fan_in: the fan-in a ToR needs to aggregate a job (§6 #12).
        selective_ina: Step ❹; False leaves INA on for every job (as the baselines run).
        ps_loopback: a worker on its job's PS server reaches the PS over loopback, using no network
            and no fan-in at its ToR, as in this testbed's fabric (ours, §6 #33; default: the
            paper's model, where it is one more flow).

    Raises:
        PlacementError: an unknown value kind, a negative PAT or a fan-in below 1.
    """

    name = "netpack"

    def __init__(self, seed: int = 0, pat_gbps: float | None = None, value: str = "paper", min_fan_in: int = 2,
                 selective_ina: bool = True, ps_loopback: bool = False):
        super().__init__(seed)
        if value not in VALUES:
            raise PlacementError(f"netpack: unknown value {value!r}; valid: {', '.join(VALUES)}")
        if (pat_gbps is not None and not pat_gbps >= 0) or min_fan_in < 1:
            raise PlacementError(f"netpack: need pat_gbps >= 0 and min_fan_in >= 1, got {pat_gbps} and {min_fan_in}")
        self.pat_gbps = None if pat_gbps is None else float(pat_gbps)
        self.value, self.min_fan_in, self.selective_ina = value, min_fan_in, selective_ina
        self.ps_loopback = ps_loopback
        self.decisions = Decisions()
        self.fabrics = FabricCache(self.pat_gbps)
        self.job_values: dict[str, float] = {}
        self._steady: tuple[Fabric, tuple[NetJob, ...], SteadyState] | None = None  # the last one estimated

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """One batch period (see ``docs/algorithms.md``)."""
        jobs_by_name(pending)
        fabric = self.fabrics.of(view)
        running = self.decisions.running(view, fabric)
        values = [self.job_values.get(j.name, 1.0) for j in pending]
        chosen = select_jobs([j.workers for j in pending], values, view.total_free)
        for i, j in enumerate(pending):
            if i not in chosen:
                self.job_values[j.name] = values[i] + 1.0  # anti-starvation (§3.2)
        order = sorted(chosen, key=lambda i: (-values[i], i))
        tentative = Tentative(view)
        placed: list[tuple[JobRequest, list[GpuSlot], str | None]] = []
        batch: list[NetJob] = []
        for i in order:
            job = pending[i]
            got = self._place_one(job, view, fabric, tentative, running + batch)
            if got is None:
                continue
            slots, ps = got
            placed.append((job, slots, ps))
            self.job_values.pop(job.name, None)
            if ps is not None:
                servers = tuple(dict.fromkeys(s.machine for s in slots))
                batch.append(NetJob(job.name, servers, ps, frozenset(fabric.racks)))
        ina = self._select_ina(fabric, running, batch)
        out = []
        for job, slots, ps in placed:
            racks = ina.get(job.name, frozenset())
            self.decisions.record(job.name, Decision(ps, racks))
            out.append(Placement(job.name, tuple(slots), ps, tuple(r for r in fabric.racks if r in racks)))
        return out

    def _place_one(self, job: JobRequest, view: ClusterView, fabric: Fabric, tentative: Tentative,
                   jobs: list[NetJob]) -> tuple[list[GpuSlot], str | None] | None:
        """One job's GPUs (taken from ``tentative``, in rank order) and PS (None: one server);
        None when it cannot be placed."""
        need = job.workers
        state = self._steady_state(fabric, jobs)
        flows = state.server_flows()
        free = tentative.free_counts()
        servers = list(free)
        fits = [(n, i, s) for i, (s, n) in enumerate(free.items()) if n >= need]
        if fits:
            least = min(n for n, _, _ in fits)  # best fit: the smallest leftover, then more flows, more bw
            _, s = min(((-flows.get(s, 0), -state.residual[("access", s)], i), s) for n, i, s in fits if n == least)
            return tentative.take(s, need), None
        per_server = max(m.gpus for m in view.machines)
        items = [ServerItem(s, n, server_value(state.residual[("access", s)], fabric.access_gbps[s], flows.get(s, 0),
                                               self.value), flows.get(s, 0))
                 for s, n in free.items() if n > 0]
        plans = worker_plans(interchangeable_first(items, need + per_server), need, per_server)
        capacity = max(fabric.access_gbps.values())
        best = choose_ps(plans, fabric, state, servers, capacity)
        if best is None:
            return None
        plan = trim([(s, tentative.n_free(s)) for s in best.plan.servers], need, best.ps)
        return [slot for s, n in plan for slot in tentative.take(s, n)], best.ps

    def _steady_state(self, fabric: Fabric, jobs: list[NetJob]) -> SteadyState:
        """:func:`waterfill` of ``jobs`` on ``fabric``, the last one kept: a batch's jobs placed on one
        server, and the calls between which no multi-server job started or ended, leave the jobs as
        they were, and the estimate is a function of them (read, never changed)."""
        key = tuple(jobs)
        if self._steady is None or self._steady[0] is not fabric or self._steady[1] != key:
            self._steady = (fabric, key, waterfill(fabric, jobs, self.min_fan_in, ps_loopback=self.ps_loopback))
        return self._steady[2]

    def _select_ina(self, fabric: Fabric, running: list[NetJob], batch: list[NetJob]) -> dict[str, frozenset[str]]:
        """Step ❹: the racks where each of the batch's jobs gets INA (``docs/algorithms.md``, point 5)."""
        if not batch:
            return {}
        state = self._steady_state(fabric, running + batch)
        trees = {j.name: job_flows(fabric, j, fabric.pat_gbps, self.min_fan_in, self.ps_loopback) for j in batch}
        if not self.selective_ina:
            return {j.name: trees[j.name].aggregating for j in batch}
        left = {r: float(fabric.pat_gbps[r]) for r in fabric.racks}
        for j in running:
            for r, a in state.aggregated.get(j.name, {}).items():
                left[r] -= a
        efficiency = {j.name: state.rate[j.name] * sum(trees[j.name].fan_in[r] for r in trees[j.name].aggregating)
                      for j in batch}
        out: dict[str, frozenset[str]] = {}
        for j in sorted(batch, key=lambda j: -efficiency[j.name]):
            rate, on = state.rate[j.name], set()
            for r in sorted(trees[j.name].aggregating, key=fabric.racks.index):
                if left[r] + EPS >= rate > EPS:
                    on.add(r)
                    left[r] -= rate
            out[j.name] = frozenset(on)
        return out
