"""Cassini as a plug-in (``cassini,inner=<policy>``, spec §5 Algorithm 2) and its time shifts applied
by the step-level simulator (§5.4): the decision and its log, the centred rotations, running jobs in
later decisions, and two VGG19 jobs on one 2:1 bottleneck interleaving once shifted
(``experiments/cassini.yaml``)."""

from __future__ import annotations

import dataclasses
import io
import json
import math

import pytest

from common.errors import PlacementError
from experiment.config import schema as config
from experiment.reporting.timeline import read_timeline_csv
from experiment.run.driver import run_experiment
from experiment.run.policy import placement_context
from experiment.run.simrun import SimulatorExperiment, sim_backend, simulate_policy
from jobs.models import get_model
from placement import Cluster, JobRequest, make_policy
from placement.cassini.compat import link_score
from placement.cassini.profile import Profile
from sim.backend import FluidSimBackend
from topo import build_topology

CASSINI_YAML = "experiments/cassini.yaml"


def bottleneck():
    """experiments/cassini.yaml's fabric: two racks of two single-GPU machines, 25 Gbit/s hosts, 2:1 uplinks."""
    return build_topology("leaf_spine", n_leaf=2, n_spine=1, hosts_per_leaf=2, oversubscription=2.0,
                          gpus_per_machine=1, host_bw_mbps=25000)


def vgg19_pair():
    return [JobRequest("vgg19-a", "vgg19", 2), JobRequest("vgg19-b", "vgg19", 2)]


def test_centred_rotations_sit_in_the_middle_of_the_feasible_range():
    """§3.3's VGG16 pair: the reference's first optimum is 113.3 ms (feasible [114, 141] ms, 3.5 ms bins);
    centred, the shift is the middle of the optimal run, with slack on both sides; the score is the same."""
    vgg = Profile.of(255, [(141, 114, 45)])
    first = link_score({"a": vgg, "b": vgg}, 50.0, 5.0)
    centred = link_score({"a": vgg, "b": vgg}, 50.0, 5.0, centre=True)
    assert round(first.shifts_ms["b"], 1) == 113.3 and centred.score == first.score == 1.0
    assert 114 + 5 < centred.shifts_ms["b"] < 141 - 5
    assert centred.shifts_ms["b"] == pytest.approx((113.3 + 141.7) / 2, abs=3.6)


def test_the_decision_shifts_one_of_two_jobs_on_a_shared_bottleneck_and_logs_itself():
    """spread's one candidate puts each job across the racks; Cassini keeps it (score 1: their Up phases
    fit side by side) and shifts the second job by half the slack past the first one's Up phase."""
    g = bottleneck()
    policy = make_policy("cassini,inner=spread", seed=1)
    decision = policy.decide(vgg19_pair(), Cluster.from_topology(g).view())
    assert [p.job for p in decision.placements] == ["vgg19-a", "vgg19-b"]
    shifts = {s.job: s for s in decision.shifts}
    model = get_model("vgg19")
    period = shifts["vgg19-a"].period_s
    up = period - model.compute_time_s
    assert shifts["vgg19-a"].shift_s == 0.0 and shifts["vgg19-b"].period_s == period
    assert up < shifts["vgg19-b"].shift_s < period - up  # no overlap, either way round the circle
    assert shifts["vgg19-b"].shift_s == pytest.approx(period / 2, abs=0.02)
    log = decision.log
    assert log["chosen"] == 0 and log["inner"] == "spread" and log["discarded_loops"] == []
    (cand,) = log["candidates"]
    assert cand["score"] == 1.0 and set(cand["placements"]) == {"vgg19-a", "vgg19-b"}
    assert json.loads(json.dumps(log)) == log  # JSON as it is written to decisions.json


def test_the_best_scored_candidate_wins_and_running_jobs_join_later_decisions():
    """inner=random on a 4-rack leaf-spine: the chosen candidate has the best score of those without a
    loop; a job placed later is scored with the running one, and the shifts may retime it."""
    g = build_topology("leaf_spine", n_leaf=4, n_spine=1, hosts_per_leaf=2, oversubscription=2.0,
                       gpus_per_machine=1, host_bw_mbps=25000)
    cluster = Cluster.from_topology(g)
    policy = make_policy("cassini,inner=random,candidates=6", seed=4)
    first = policy.decide([JobRequest("a", "vgg19", 3)], cluster.view())
    scores = [c["score"] for c in first.log["candidates"] if not c["loop"]]
    assert len(first.log["candidates"]) == 6
    assert first.log["candidates"][first.log["chosen"]]["score"] == max(scores)
    for p in first.placements:
        cluster.apply(p)
    second = policy.decide([JobRequest("b", "vgg19", 3)], cluster.view())
    assert all(list(c["placements"]) == ["b"] for c in second.log["candidates"])
    scored_with_a = [c for c in second.log["candidates"]
                     if any(set(fit["shifts_ms"]) == {"a", "b"} for fit in c["links"].values())]
    assert scored_with_a, "some candidate puts b on a link of the running a, and scores them together"
    chosen = second.log["candidates"][second.log["chosen"]]
    if chosen in scored_with_a:
        assert {s.job for s in second.shifts} == {"a", "b"}  # the running job is retimed with b


def test_shift_false_ranks_without_shifting_and_bad_options_are_refused():
    g = bottleneck()
    decision = make_policy("cassini,inner=spread,shift=false").decide(vgg19_pair(), Cluster.from_topology(g).view())
    assert decision.shifts == () and len(decision.placements) == 2
    with pytest.raises(PlacementError, match="cannot be cassini"):
        make_policy("cassini,inner=cassini")
    with pytest.raises(PlacementError, match="unknown aggregate 'p99'; valid: mean, min"):
        make_policy("cassini,aggregate=p99")
    with pytest.raises(PlacementError, match="unknown placement policy 'nope'"):
        make_policy("cassini,inner=nope")
    with pytest.raises(PlacementError, match="context is not a spec keyword"):
        make_policy("cassini,context=1")


def cassini_cfg(**over):
    cfg = config.load(CASSINI_YAML)
    return dataclasses.replace(cfg, **{"iterations": 12, **over})


def test_the_simulator_interleaves_the_shifted_jobs_at_their_bound():
    """experiments/cassini.yaml, 12 iterations: unshifted (spread), each job's communication takes twice
    its bound (the uplink halved, max-min as in §7.1's example); shifted (cassini), exactly the bound,
    the phase of both jobs held within the drift threshold with no re-alignment, and far fewer ECN
    marks estimated. TCP's share of the shared uplink (the default) makes the unshifted case longer."""
    cfg = cassini_cfg()
    g = config.validate(cfg, "sim")
    tcp = simulate_policy(cfg, g, "spread").summary
    cfg = dataclasses.replace(cfg, simulator=dataclasses.replace(cfg.simulator, sharing="maxmin"))
    shared = simulate_policy(cfg, g, "spread").summary
    shifted = simulate_policy(cfg, g, "cassini,inner=spread").summary
    period = make_policy("cassini,inner=spread", context=placement_context(cfg)).decide(
        vgg19_pair(), Cluster.from_topology(g).view()).shifts[0].period_s
    bound = period - get_model("vgg19").compute_time_s
    for j in shifted.jobs:
        assert j.comm_mean_s == pytest.approx(bound, rel=1e-6)
        assert j.time_shift_s is not None and j.shift_held and j.realignments == 0
    for j in shared.jobs:
        assert j.comm_mean_s == pytest.approx(2 * bound, rel=0.01) and j.time_shift_s is None
        assert next(t for t in tcp.jobs if t.job == j.job).comm_mean_s > 1.05 * j.comm_mean_s
    assert shifted.ecn_marks < shared.ecn_marks / 10
    assert shared.jct_mean_s / shifted.jct_mean_s > 1.2


def test_a_run_writes_the_decision_log_and_the_time_shift_table(tmp_path):
    cfg = cassini_cfg(results_dir=str(tmp_path), iterations=4)
    out = io.StringIO()
    run_experiment(cfg, SimulatorExperiment(), policies=["cassini,inner=spread"], stream=out)
    (run_dir,) = tmp_path.iterdir()
    (entry,) = json.loads((run_dir / "cassini_inner=spread" / "decisions.json").read_text())
    assert entry["time_s"] == 0.0 and entry["shifts_applied"] and entry["started"] == ["vgg19-a", "vgg19-b"]
    assert [s["job"] for s in entry["log"]["shifts"]] == ["vgg19-a", "vgg19-b"]
    text = out.getvalue()
    with open(run_dir / "cassini_inner=spread" / "timeline.csv") as f:
        assert len(f.readlines()) == 1 + 2 * 4  # the two jobs' four iterations
    assert (run_dir / "timelines.png").exists()
    assert "Time shifts under cassini,inner=spread" in text
    assert "Interleaving under cassini,inner=spread" in text
    phases = read_timeline_csv(str(run_dir / "cassini_inner=spread" / "timeline.csv"))
    assert [p.up_overlap for p in phases] == [0.0] * 8  # interleaved from the first iteration
    assert "the phase of 2/2 shifted jobs stayed within the drift threshold" in text


def test_the_fluid_engine_says_it_applies_no_shift():
    cfg = cassini_cfg()
    g = config.validate(cfg, "sim")
    backend = sim_backend(dataclasses.replace(cfg, simulator=dataclasses.replace(cfg.simulator, mode="fluid")), g)
    assert isinstance(backend, FluidSimBackend) and backend.shift(()) is False
    assert not math.isnan(backend.now_s)


def test_the_drift_rule_comes_from_the_config():
    """``time_shifts``: a zero threshold (every start counts as drifted) without re-alignment leaves the
    shifted jobs unrealigned, the threshold reported as 0."""
    cfg = cassini_cfg(iterations=6, time_shifts=config.TimeShiftConfig(drift_floor_ms=0.0, drift_fraction=0.0,
                                                                       drift_window=1, realign=False))
    summary = simulate_policy(cfg, config.validate(cfg, "sim"), "cassini,inner=spread").summary
    assert all(j.realignments == 0 and j.drift_threshold_s == 0.0 for j in summary.jobs)
    loaded = config.from_dict({**config.to_dict(config.load(CASSINI_YAML)), "time_shifts": {"realign": False}})
    assert loaded.time_shifts.realign is False and loaded.time_shifts.drift_window == 10


def test_measured_timings_replace_the_models_in_the_profiles(tmp_path):
    """``python -m experiment.reporting.profiles`` measures each job's iteration (start to start) and Up phase
    from a run's timeline, as every run's ``<policy>/profiles.json`` does, which also says whom each job
    shared links with; ``cassini.profiles`` makes Cassini profile those jobs with them: the same
    bytes on each link over the measured Up phase, and the shift taken modulo the measured period."""
    from experiment.reporting.profiles import main as measure
    from placement.cassini.profiles import measured, read_timings

    cfg = cassini_cfg(results_dir=str(tmp_path), iterations=4)
    run_experiment(cfg, SimulatorExperiment(), policies=["consolidate", "spread"], stream=io.StringIO())
    (run_dir,) = tmp_path.iterdir()
    out = tmp_path / "profiles.json"
    assert measure([str(run_dir), "--policy", "consolidate", "--out", str(out)]) == 0
    timings = read_timings(str(out))
    # Every run keeps its own: consolidate placed each job in a rack of its own, spread put them on one uplink.
    kept = {p: json.loads((run_dir / p / "profiles.json").read_text())["jobs"] for p in ("consolidate", "spread")}
    assert read_timings(str(run_dir / "consolidate" / "profiles.json")) == timings
    assert [kept["consolidate"][j]["shared_with"] for j in ("vgg19-a", "vgg19-b")] == [[], []]
    assert [kept["spread"][j]["shared_with"] for j in ("vgg19-a", "vgg19-b")] == [["vgg19-b"], ["vgg19-a"]]
    assert {p.up_overlap for p in read_timeline_csv(str(run_dir / "spread" / "timeline.csv"))} == {1.0}
    assert {p.up_overlap for p in read_timeline_csv(str(run_dir / "consolidate" / "timeline.csv"))} == {None}
    bound_ms = 192.3456
    assert timings["vgg19-a"] == (pytest.approx(352.0 + bound_ms, abs=0.1), pytest.approx(bound_ms, abs=0.1))
    prof = Profile.of(500.0, [(300.0, 200.0, 10.0)])
    (again,) = measured({"l": prof}, 600.0, 250.0).values()
    assert again == Profile.of(600.0, [(350.0, 250.0, 8.0)])  # 10 Gbit/s x 200 ms = 8 x 250
    slow = dict(read_timings(str(out)))
    slow["vgg19-a"] = slow["vgg19-b"] = (600.0, 200.0)
    out.write_text(json.dumps({"jobs": {j: {"iter_ms": t[0], "up_ms": t[1]} for j, t in slow.items()}}))
    cfg = cassini_cfg(cassini=config.CassiniConfig(profiles=str(out)))
    shifts = make_policy("cassini,inner=spread", context=placement_context(cfg)).decide(
        vgg19_pair(), Cluster.from_topology(config.validate(cfg, "sim")).view()).shifts
    assert [s.period_s for s in shifts] == [pytest.approx(0.6)] * 2
    out.write_text("{}")
    with pytest.raises(config.ConfigError, match="config.cassini.profiles: profiles .*not a profiles.json"):
        config.validate(cfg, "sim")


def test_a_jobs_compute_time_replaces_its_models_in_the_run_and_in_cassinis_profile():
    """``jobs[].compute_ms``: the simulator computes that long per iteration and Cassini profiles the
    job's period with it (its Up phase unchanged), so the shift follows the job's period, not the model's."""
    cfg = cassini_cfg(iterations=4)
    g = config.validate(cfg, "sim")
    jobs = tuple(dataclasses.replace(j, compute_ms=200.0) for j in cfg.jobs)
    short = dataclasses.replace(cfg, jobs=jobs)
    own = make_policy("cassini,inner=spread", context=placement_context(cfg)).decide(
        vgg19_pair(), Cluster.from_topology(g).view()).shifts
    requests = [dataclasses.replace(r, compute_ms=200.0) for r in vgg19_pair()]
    set_ = make_policy("cassini,inner=spread", context=placement_context(short)).decide(
        requests, Cluster.from_topology(g).view()).shifts
    compute = get_model("vgg19").compute_time_s
    assert own[0].period_s - compute == pytest.approx(set_[0].period_s - 0.2, rel=1e-9)
    summary = simulate_policy(short, g, "spread").summary
    assert all(j.compute_mean_s == pytest.approx(0.2, rel=1e-9) for j in summary.jobs)
