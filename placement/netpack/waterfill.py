"""NetPack's steady-state estimation: INA-aware water-filling (spec §2.3, Algorithm 1).

Every active job's per-worker rate rises by the same step each round; a link loses the step times
its flows, an aggregating ToR the step per job from its PAT. A round ends where the first link
saturates (its jobs freeze) or a ToR's PAT runs out (from then on it passes flows unaggregated).
The spec's resolutions of the paper's pseudocode (§6 #4, #7-#12) apply; at most ``|links| + |ToRs|``
rounds, a bound of twice that reported (``bound_hit``).

The rules and resolutions in full: ``docs/algorithms.md`` (NetPack's steady state). Cost per round
O(jobs × their links).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from placement.netpack.network import EPS, Fabric, JobFlows, Link, NetJob, flows_on, job_flows


@dataclasses.dataclass(frozen=True)
class SteadyState:
    """The estimated steady state.

    Attributes:
        rate: job -> its per-worker rate (Gbit/s).
        aggregated: job -> rack -> the part of its rate aggregated at that ToR.
        residual: link -> bandwidth left (``s.bw`` for a server's access link).
        pat_left: rack -> PAT left.
        flows: job -> its last flows (those of the round it froze in).
        rounds: rounds run.
        bound_hit: the round bound stopped it (every job still active is reported at its rate so far).
    """

    rate: Mapping[str, float]
    aggregated: Mapping[str, Mapping[str, float]]
    residual: Mapping[Link, float]
    pat_left: Mapping[str, float]
    flows: Mapping[str, JobFlows]
    rounds: int
    bound_hit: bool = False

    def aggregation_ratio(self, job: str, rack: str) -> float:
        """Aggregated over total rate of ``job`` at ``rack`` (0 for a job that does not move)."""
        rate = self.rate.get(job, 0.0)
        return self.aggregated.get(job, {}).get(rack, 0.0) / rate if rate > EPS else 0.0

    def server_flows(self) -> dict[str, int]:
        """server -> flows on its access link, over every job (``s.flows``, §3.4)."""
        return flows_on(self.flows.values(), "access")

    def uplink_flows(self) -> dict[str, int]:
        """rack -> flows on its uplink, over every job (``FC_r``, §3.8)."""
        return flows_on(self.flows.values(), "uplink")


def waterfill(fabric: Fabric, jobs: Sequence[NetJob], min_fan_in: int = 2,
              max_rounds: int | None = None, ps_loopback: bool = False) -> SteadyState:
    """The steady state of ``jobs`` on ``fabric`` (see ``docs/algorithms.md``).

    Args:
        fabric: the network.
        jobs: the placed multi-server jobs (single-server jobs use no network: leave them out).
        min_fan_in: the fan-in a ToR needs to aggregate a job.
        max_rounds: the round bound (default ``2 × (links + ToRs) + 2``).
        ps_loopback: a worker on its job's PS server uses no network
            (:func:`placement.netpack.network.job_flows`).
    """
    bw = fabric.links()
    pat = {r: float(fabric.pat_gbps.get(r, 0.0)) for r in fabric.racks}
    rate = {j.name: 0.0 for j in jobs}
    aggr: dict[str, dict[str, float]] = {j.name: {} for j in jobs}
    last: dict[str, JobFlows] = {}
    active = [j for j in jobs if j.servers]
    bound = max_rounds if max_rounds is not None else 2 * (len(bw) + len(pat)) + 2
    rounds = 0
    while active:
        if rounds >= bound:
            return SteadyState(rate, aggr, bw, pat, last, rounds, bound_hit=True)
        rounds += 1
        flows = {j.name: job_flows(fabric, j, pat, min_fan_in, ps_loopback) for j in active}
        last.update(flows)
        # A job whose flows now cross a full link (a ToR's PAT ran out and its flows spilled onto
        # one) cannot rise any more: it freezes before the step.
        active = [j for j in active if not _blocked(flows[j.name], bw)]
        if not active:
            break
        load: dict[Link, int] = {}
        users: dict[str, int] = {}
        for f in (flows[j.name] for j in active):
            for link, k in f.flows.items():
                load[link] = load.get(link, 0) + k
            for r in f.aggregating:
                users[r] = users.get(r, 0) + 1
        shares = [bw[link] / k for link, k in load.items() if k > 0 and bw[link] > EPS]
        shares += [pat[r] / k for r, k in users.items() if pat[r] > EPS]
        if not shares:
            break
        delta = min(shares)
        for j in active:
            rate[j.name] += delta
            for r in flows[j.name].aggregating:  # charged once per (job, ToR): §6 #7
                pat[r] = max(0.0, pat[r] - delta)
                aggr[j.name][r] = aggr[j.name].get(r, 0.0) + delta
        for link, k in load.items():
            bw[link] = max(0.0, bw[link] - delta * k)
        active = [j for j in active if not _blocked(flows[j.name], bw)]
    return SteadyState(rate, aggr, bw, pat, last, rounds)


def _blocked(f: JobFlows, bw: Mapping[Link, float]) -> bool:
    """Whether a job's flows cross a saturated link."""
    return any(k > 0 and bw[link] <= EPS for link, k in f.flows.items())
