"""MLTCP in the step-level engine (``SimOptions.mltcp``, ``sim.flowsim``) and its per-connection accounting
(``sim.mltcp.MltcpLedger``), against the exact one-link model of ``sim.mltcp`` and ``docs/resolutions.md`` (Cassini)
§6.3, and wired from a config (``experiment.run.simrun``).

The §6.3 setting on a routed fabric: two jobs of 2 ranks, one on each leaf of a 2-leaf fabric whose one
uplink per direction (50 Gbit/s) is their only shared link; a 100 ms iteration, 60 ms of compute and 40 ms
of ring allreduce at full rate (250 MB: two steps of 125 MB each way), the second job 1 ms behind. With
one warm-up iteration each connection has learned its bytes per iteration when the measured ones begin.
"""

from __future__ import annotations

import pytest

from common.errors import ConfigError
from experiment.config import schema as config
from experiment.run.simrun import SimulatorExperiment, mltcp_flows, sim_options
from sim.flowsim import SimJob, SimOptions, simulate
from sim.mltcp import FluidJob, MltcpFlows, MltcpLedger, MltcpParams, iterations_to_converge
from sim.mltcp import simulate as one_link
from topo import build_topology
from topo.leaf_spine import leaf_spine
from topo.schema import machines

UPLINK_MBPS = 50_000.0
BUCKET_BYTES = 250_000_000
COMPUTE_S = 0.060
ITER_MS = 100.0


def fabric():
    """2 leaves, 1 spine, 2 machines per leaf; machine links 20x the 50 Gbit/s uplinks."""
    g = leaf_spine(2, 1, 2)
    rates = {(u, v): UPLINK_MBPS if "machine" not in (g.nodes[u]["role"], g.nodes[v]["role"]) else 20 * UPLINK_MBPS
             for u, v in g.edges()}
    return g, rates


def section_6_3_on_the_fabric(mltcp: MltcpFlows | None, iterations: int = 30) -> list[list[float]]:
    """Per job, the first ``iterations - 3`` durations (ms) between its consecutive iteration ends (the slowest
    rank's): those of its last iterations, when the other job may have ended, are left out."""
    g, rates = fabric()
    m = machines(g)
    jobs = [SimJob("a", (m[0], m[2]), "ring", (BUCKET_BYTES,), COMPUTE_S, iterations, 1, 0.0),
            SimJob("b", (m[1], m[3]), "ring", (BUCKET_BYTES,), COMPUTE_S, iterations, 1, 0.001)]
    result = simulate(g, rates, jobs, SimOptions(mltcp=mltcp))
    ends: dict[str, dict[int, float]] = {"a": {}, "b": {}}
    for rec in result.records:
        end = rec.start_s + rec.iteration_s
        ends[rec.job][rec.iteration] = max(end, ends[rec.job].get(rec.iteration, 0.0))
    out = []
    for job in ("a", "b"):
        e = [ends[job][i] for i in sorted(ends[job])]
        out.append([(y - x) * 1000 for x, y in zip(e, e[1:], strict=False)][:iterations - 3])
    return out


def reference(params: MltcpParams, n: int) -> list[list[float]]:
    """The exact one-link model of the same setting (sim.mltcp.simulate)."""
    jobs = [FluidJob(COMPUTE_S * 1000, BUCKET_BYTES, 0.0), FluidJob(COMPUTE_S * 1000, BUCKET_BYTES, 1.0)]
    return one_link(jobs, UPLINK_MBPS / 1000, params, n)


def flows(params: MltcpParams, step: float = 0.01) -> MltcpFlows:
    return MltcpFlows(params, idle_gap_s=0.020, step=step)


def test_fair_sharing_on_the_fabric_stays_at_139_ms():
    """Max-min (no MLTCP) and MLTCP with slope 0 both keep the overlapping jobs at 139 ms (§6.3)."""
    for mltcp in (None, flows(MltcpParams.fair())):
        durations = section_6_3_on_the_fabric(mltcp, 12)
        assert all(d == pytest.approx(139.0, abs=1e-6) for job in durations for d in job)


@pytest.mark.parametrize(("slope", "iterations"), [(1.0, 10), (2.0, 6), (4.0, 4)])
def test_the_engine_converges_after_the_spec_counts_and_agrees_with_the_one_link_model(slope, iterations):
    """(S, I) = (1, 1), (2, 1), (4, 1): 10, 6, 4 iterations to 100 ms, as §6.3; every duration equals the exact
    one-link model's (with gamma 1 and no cap the weights' ratio on one link is constant while both send)."""
    params = MltcpParams(slope, 1.0)
    durations = section_6_3_on_the_fabric(flows(params))
    assert iterations_to_converge(durations, ITER_MS) == iterations
    ref = reference(params, len(durations[0]))
    for ours, theirs in zip(durations, ref, strict=True):
        assert ours == pytest.approx(theirs, rel=1e-8)  # rounding of the events over 27 iterations


@pytest.mark.parametrize("params", [MltcpParams(4.0, 1.0, gamma=0.5), MltcpParams(4.0, 1.0, cap=3.0)],
                         ids=["gamma-0.5", "cap-3"])
def test_weights_lag_progress_by_at_most_the_step(params):
    """Where the weights' ratio changes while flows send (gamma != 1, a cap), the engine's piecewise-constant
    weights approach the exact model as the step shrinks: within 0.3 ms of 100 at the default step 0.01,
    ten times closer than at step 0.1, and the same convergence count."""
    n = 12
    ref = reference(params, n)

    def error(step):
        durations = section_6_3_on_the_fabric(flows(params, step), n + 3)
        return max(abs(x - y) for ours, theirs in zip(durations, ref, strict=True)
                   for x, y in zip(ours, theirs, strict=False)), durations

    coarse, _ = error(0.1)
    fine, durations = error(0.01)
    assert fine < 0.3
    assert fine < coarse / 5
    assert iterations_to_converge(durations, ITER_MS) == iterations_to_converge(ref, ITER_MS)


def test_exactly_symmetric_jobs_never_separate():
    """Jobs started together are a fixed point of the fluid model (§6.3): equal weights, equal shares, every
    iteration, even at slope 20."""
    g, rates = fabric()
    m = machines(g)
    jobs = [SimJob(name, (m[i], m[i + 2]), "ring", (BUCKET_BYTES,), COMPUTE_S, 8, 1, 0.0)
            for i, name in enumerate("ab")]
    result = simulate(g, rates, jobs, SimOptions(mltcp=flows(MltcpParams(20.0, 1.0))))
    comm = [rec.comm_s for rec in result.records]
    assert len(comm) == 2 * 2 * 8
    assert comm == pytest.approx([0.080] * len(comm), rel=1e-9)  # 250 MB at 25 Gbit/s, every rank and iteration


# --- the ledger: the BPF program's accounting at transfer level ---

def test_the_ledger_learns_an_iteration_by_the_idle_gap_rule():
    """A connection's first iteration weighs the intercept; a transfer after more than the gap starts the next,
    whose ratio counts against the bytes of the one before; transfers within the gap continue an iteration."""
    ledger = MltcpLedger(MltcpFlows(MltcpParams(2.0, 1.0), idle_gap_s=0.010, step=0.25))
    ledger.send("c", 0.0)
    assert ledger.weight("c", 50.0) == 1.0  # nothing learned: F = intercept
    ledger.deliver("c", 100.0, 0.001)
    ledger.send("c", 0.005)  # within the gap: same iteration
    ledger.deliver("c", 100.0, 0.006)
    ledger.send("c", 0.020)  # 14 ms idle: a new iteration of 200 bytes learned
    assert ledger.conns["c"].iter_bytes == 200.0 and ledger.conns["c"].iterations == 1
    assert ledger.ratio("c", 50.0) == 0.25
    assert ledger.weight("c", 50.0) == 1.5
    assert ledger.bytes_to_next_step("c", 50.0) == pytest.approx(50.0)  # to ratio 0.5
    ledger.deliver("c", 300.0, 0.030)
    assert ledger.ratio("c") == 1.0  # capped
    assert ledger.bytes_to_next_step("c") == float("inf")


def test_a_gap_with_nothing_delivered_keeps_the_learned_bytes():
    """Two idle gaps in a row with no bytes between them do not unlearn the iteration's size."""
    ledger = MltcpLedger(MltcpFlows(MltcpParams(1.0, 1.0), idle_gap_s=0.010))
    ledger.send("c", 0.0)
    ledger.deliver("c", 80.0, 0.001)
    ledger.send("c", 0.1)
    ledger.send("c", 0.2)
    assert ledger.conns["c"].iter_bytes == 80.0


def test_bad_engine_settings_are_rejected():
    with pytest.raises(ConfigError, match="idle gap"):
        MltcpFlows(MltcpParams(1.0, 1.0), idle_gap_s=0.0)
    with pytest.raises(ConfigError, match="step"):
        MltcpFlows(MltcpParams(1.0, 1.0), idle_gap_s=0.01, step=0.0)


# --- from a config ---

def test_a_config_with_mltcp_gives_the_steps_engine_its_f():
    """congestion_control mltcp_reno: the simulator's options carry F and the idle gap in virtual seconds; the
    run says how links are shared; another congestion control leaves links max-min."""
    cfg = config.load("experiments/cassini_mltcp.yaml")
    g = build_topology(cfg.topology.kind, **cfg.topology.params)
    mltcp = sim_options(cfg, g).mltcp
    assert mltcp == MltcpFlows(MltcpParams(20.0, 1.0), idle_gap_s=0.020, step=0.01)
    said = []
    SimulatorExperiment().prepare(cfg, g, said.append)
    assert said and "in proportion to MLTCP's F" in said[0]
    assert mltcp_flows(config.load("experiments/cassini.yaml")) is None
