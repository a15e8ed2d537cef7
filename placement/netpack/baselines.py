"""The NetPack paper's placement baselines (``docs/resolutions.md`` NetPack §4): GB, FB, LF, Optimus,
Tetris, Comb.

Zhao et al., ASPLOS '24, §6.1 (GB, FB, LF, Optimus, Tetris) and §6.4 (Comb, the ablation). Every
baseline but Optimus ranks the servers and then *fills* them in that order, lowest free GPU indices
first; Optimus deals GPUs round-robin over the fewest servers. The PS goes on the server with the
fewest flows ([Code]); INA stays on everywhere ([P]).

Each baseline's rank, and how the paper's one-line descriptions are resolved ([P], [Code], [Ours]:
``s.flows``, the PS, Tetris' score, Comb's key, the steady state, ties, queueing, rank order) and
their cost: ``docs/algorithms.md`` (NetPack's baselines).
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from common.errors import PlacementError
from placement.base import (
    ClusterView,
    GpuSlot,
    JobRequest,
    Placement,
    PlacementPolicy,
    Tentative,
    jobs_by_name,
)
from placement.netpack.network import Fabric, FabricCache, NetJob, access
from placement.netpack.state import Decision, Decisions
from placement.netpack.waterfill import SteadyState, waterfill

"""Every ToR's PAT in Gbit/s: the paper's simulator default, 1 Tb/s (spec §3.10)."""
TIE_DIGITS = 9
"""Decimals kept of a score or a bandwidth (Gbit/s) before sorting (see ``docs/algorithms.md``)."""


def endpoint_flows(jobs: Iterable[NetJob]) -> Counter[str]:
    """``s.flows`` by [Code]'s static count: one flow per worker server of each job, one for its PS."""
    flows: Counter[str] = Counter()
    for job in jobs:
        flows.update(job.servers)
        flows[job.ps] += 1
    return flows


def fewest_flows_server(machines: Sequence[str], flows: Mapping[str, int], workers: Iterable[str]) -> str:
    """The PS server: the machine with the fewest flows once ``workers`` count one each; ties by
    the order of ``machines``."""
    after = Counter(flows)
    after.update(workers)
    return min(machines, key=lambda m: after[m])


def fill(order: Iterable[str], demand: int, tentative: Tentative) -> list[GpuSlot]:
    """Walk ``order`` taking min(remaining demand, free GPUs) from each machine until ``demand``.

    Raises:
        PlacementError: the machines of ``order`` have fewer than ``demand`` free GPUs (nothing
            is taken then).
    """
    order = list(order)
    _check_room(order, demand, tentative)
    slots: list[GpuSlot] = []
    for machine in order:
        if len(slots) == demand:  # the rest of a large cluster's order has nothing to give
            break
        take = min(demand - len(slots), tentative.n_free(machine))
        if take > 0:
            slots += tentative.take(machine, take)
    return slots


def covering_prefix(order: Sequence[str], demand: int, tentative: Tentative) -> list[str]:
    """The shortest prefix of ``order`` whose free GPUs sum to at least ``demand``.

    Raises:
        PlacementError: all of ``order`` has fewer than ``demand`` free GPUs.
    """
    _check_room(order, demand, tentative)
    prefix, covered = [], 0
    for machine in order:
        if covered >= demand:
            break
        prefix.append(machine)
        covered += tentative.n_free(machine)
    return prefix


def deal(order: Sequence[str], demand: int, tentative: Tentative) -> list[GpuSlot]:
    """Optimus: one GPU at a time, round-robin over :func:`covering_prefix`, a machine skipped once
    it has no free GPU left."""
    prefix = covering_prefix(order, demand, tentative)
    slots: list[GpuSlot] = []
    while len(slots) < demand:
        for machine in prefix:
            if len(slots) < demand and tentative.n_free(machine) > 0:
                slots += tentative.take(machine, 1)
    return slots


def _check_room(order: Sequence[str], demand: int, tentative: Tentative) -> None:
    """Raise unless the machines of ``order`` have ``demand`` free GPUs between them."""
    room = 0
    for m in order:  # summed until it is enough: the whole order only when it is not
        if room >= demand:
            return
        room += tentative.n_free(m)
    if room < demand:
        raise PlacementError(f"{demand} GPUs asked for, {room} free on {', '.join(order) or 'no machine'}")


def _tie(x: float) -> float:
    """``x`` rounded for sorting (see ``TIE_DIGITS``)."""
    return round(x, TIE_DIGITS)


def _ratio(part: float, whole: float) -> float:
    """``part / whole``, 0 for an empty ``whole`` (a machine without GPUs or a link without capacity)."""
    return part / whole if whole > 0 else 0.0


class CallState:
    """What one :meth:`BaselinePolicy.place` call decides over, updated as it places jobs.

    Attributes:
        view: the cluster.
        fabric: its one-big-switch network (§2.2).
        tentative: the GPUs still free, counting the call's earlier placements.
        jobs: the multi-server jobs running plus those placed earlier in the call.
        flows: server -> ``s.flows`` over ``jobs`` (:func:`endpoint_flows`).
    """

    def __init__(self, view: ClusterView, fabric: Fabric, running: Sequence[NetJob]):
        self.view = view
        self.fabric = fabric
        self.tentative = Tentative(view)
        self.jobs = list(running)
        self.flows = endpoint_flows(running)
        self.machines = [m.name for m in view.machines]
        self._steady: SteadyState | None = None

    def steady(self) -> SteadyState:
        """The water-filling steady state of :attr:`jobs` (computed on first use after a change)."""
        if self._steady is None:
            self._steady = waterfill(self.fabric, self.jobs)
        return self._steady

    def add(self, job: NetJob) -> None:
        """Count a multi-server job placed in this call."""
        self.jobs.append(job)
        self.flows.update(endpoint_flows([job]))
        self._steady = None


class BaselinePolicy(PlacementPolicy):
    """A baseline of spec §4: choose the GPUs (:meth:`choose`), then the PS by the fewest-flows rule.

    Places the pending jobs in order (see ``docs/algorithms.md``) and remembers each decision, so that
    later calls count the PS of the jobs it placed.

    Args:
        seed: unused (the baselines are deterministic); kept for the common interface.
        strict_order: stop at the first pending job that does not fit (no later job starts).
    """

    pat_gbps: float | None = None
    """The ToRs' PAT of the estimated network (only Tetris and Comb read the steady state); None:
    the topology's (:meth:`placement.netpack.network.Fabric.from_graph`)."""

    def __init__(self, seed: int = 0, strict_order: bool = False):
        super().__init__(seed)
        self.strict_order = strict_order
        self.decisions = Decisions()
        self._cache: FabricCache | None = None

    def _fabrics(self, view: ClusterView) -> Fabric:
        """The fabric of ``view`` at this policy's PAT (cached while the cluster is the same)."""
        if self._cache is None or self._cache.pat_gbps != self.pat_gbps:
            self._cache = FabricCache(self.pat_gbps)
        return self._cache.of(view)

    @abc.abstractmethod
    def choose(self, job: JobRequest, state: CallState) -> list[GpuSlot]:
        """Take the job's GPUs from ``state.tentative``, in rank order.

        Called only when at least ``job.workers`` GPUs are still free.
        """

    def place(self, pending: Sequence[JobRequest], view: ClusterView) -> list[Placement]:
        """Place pending jobs in order; jobs that do not fit wait."""
        jobs_by_name(pending)
        fabric = self._fabrics(view)
        state = CallState(view, fabric, self.decisions.running(view, fabric))
        out = []
        for job in pending:
            placement = self._place_one(job, state)
            if placement is not None:
                out.append(placement)
            elif self.strict_order:
                break
        return out

    def _place_one(self, job: JobRequest, state: CallState) -> Placement | None:
        """Place one job and count it in ``state`` and the decisions; None when it does not fit."""
        if job.workers > state.tentative.total_free:
            return None
        slots = self.choose(job, state)
        servers = tuple(dict.fromkeys(s.machine for s in slots))
        every_rack = frozenset(state.fabric.racks)
        ps = None
        if len(servers) > 1:
            ps = fewest_flows_server(state.machines, state.flows, servers)
            state.add(NetJob(job.name, servers, ps, every_rack))
        self.decisions.record(job.name, Decision(ps, every_rack))
        return Placement(job.name, tuple(slots), ps_host=ps, ina_switches=None)


class RankFillPolicy(BaselinePolicy):
    """A baseline that ranks the servers (:meth:`rank`) and fills them in that order."""

    def choose(self, job: JobRequest, state: CallState) -> list[GpuSlot]:
        """Fill the ranked servers."""
        return fill(self.rank(job, state), job.workers, state.tentative)

    @abc.abstractmethod
    def rank(self, job: JobRequest, state: CallState) -> list[str]:
        """The servers in the order to fill them (a stable sort of ``state.machines``)."""


def by_free_gpus(state: CallState) -> list[str]:
    """The machines by free GPUs, descending (ties by machine order)."""
    return sorted(state.machines, key=lambda m: -state.tentative.n_free(m))


class GpuBalancePolicy(RankFillPolicy):
    """GB (spec §4): prefers servers with more free GPUs; sort by free GPUs descending, fill."""

    name = "gpu_balance"

    def rank(self, job: JobRequest, state: CallState) -> list[str]:
        """Free GPUs, descending."""
        return by_free_gpus(state)


class FlowBalancePolicy(RankFillPolicy):
    """FB (spec §4): prefers servers with fewer flows; sort by ``s.flows`` ascending, fill."""

    name = "flow_balance"

    def rank(self, job: JobRequest, state: CallState) -> list[str]:
        """``s.flows`` (static endpoint count), ascending."""
        return sorted(state.machines, key=lambda m: state.flows[m])


class LeastFragmentationPolicy(RankFillPolicy):
    """LF (spec §4): packs onto partly used servers first; sort by used GPUs descending (background
    work counts as used), full servers skipped, fill."""

    name = "least_fragmentation"

    def rank(self, job: JobRequest, state: CallState) -> list[str]:
        """Used GPUs, descending; servers without a free GPU left out."""
        tentative = state.tentative
        with_free = [m for m in state.machines if tentative.n_free(m) > 0]
        return sorted(with_free, key=lambda m: -(state.view.machine(m).gpus - tentative.n_free(m)))


class OptimusPolicy(BaselinePolicy):
    """Optimus (Peng et al., EuroSys '18; spec §4): the fewest servers, evenly loaded.

    Sort by free GPUs descending, take the smallest prefix that covers the demand and deal the GPUs
    round-robin over it (:func:`deal`). The PS goes on the fewest-flows server ([Code]).
    """

    name = "optimus"

    def choose(self, job: JobRequest, state: CallState) -> list[GpuSlot]:
        """Deal over the smallest covering prefix of the free-GPU order."""
        return deal(by_free_gpus(state), job.workers, state.tentative)


class _SteadyStatePolicy(RankFillPolicy):
    """A baseline that ranks by the estimated steady state: it takes the ToRs' PAT.

    Args:
        seed: unused (the baselines are deterministic); kept for the common interface.
        strict_order: stop at the first pending job that does not fit (no later job starts).
        pat_gbps: every ToR's PAT in Gbit/s (default: the topology's, else the paper's simulator
            value, 1 Tb/s).

    Raises:
        PlacementError: a negative or NaN ``pat_gbps``.
    """

    def __init__(self, seed: int = 0, strict_order: bool = False, pat_gbps: float | None = None):
        super().__init__(seed, strict_order)
        if pat_gbps is not None and not pat_gbps >= 0:
            raise PlacementError(f"{self.name}: pat_gbps must be >= 0 Gbit/s, got {pat_gbps}")
        self.pat_gbps = pat_gbps


class TetrisPolicy(_SteadyStatePolicy):
    """Tetris (Grandl et al., SIGCOMM '14; spec §4, [Ours]): fill by the alignment score, highest
    first. ``d_bw`` = the access link's capacity (see ``docs/algorithms.md``), unit weights."""

    name = "tetris"
    gpu_weight = 1.0
    bw_weight = 1.0

    def rank(self, job: JobRequest, state: CallState) -> list[str]:
        """Alignment score, descending."""
        steady = state.steady()
        return sorted(state.machines, key=lambda m: -_tie(self.score(job, m, state, steady)))

    def score(self, job: JobRequest, machine: str, state: CallState, steady: SteadyState) -> float:
        """``w_g·(free/G)·(min(g, G)/G) + w_b·(bw/C)·(d_bw/C)`` of ``machine`` for ``job``."""
        gpus = state.view.machine(machine).gpus
        capacity_gbps = state.fabric.access_gbps[machine]
        demand_gbps = capacity_gbps
        gpu = _ratio(state.tentative.n_free(machine), gpus) * _ratio(min(job.workers, gpus), gpus)
        bw = _ratio(steady.residual[access(machine)], capacity_gbps) * _ratio(demand_gbps, capacity_gbps)
        return self.gpu_weight * gpu + self.bw_weight * bw


class CombPolicy(_SteadyStatePolicy):
    """Comb (the paper's §6.4 ablation; spec §4, [Ours] reading of "first matched"): sort by free
    GPUs, then PAT left at the server's ToR, then residual access bandwidth, each descending; fill."""

    name = "comb"

    def rank(self, job: JobRequest, state: CallState) -> list[str]:
        """The lexicographic key, descending."""
        steady, rack_of = state.steady(), state.fabric.rack_of

        def key(m: str) -> tuple[int, float, float]:
            return (-state.tentative.n_free(m), -_tie(steady.pat_left[rack_of[m]]),
                    -_tie(steady.residual[access(m)]))

        return sorted(state.machines, key=key)
