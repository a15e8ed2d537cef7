"""Reproductions of the papers' headline results (:mod:`reproduce`, ``run_testbed.py reproduce``).

Every reproduction validates everything it would run, on every back end it offers. The short ones
run here in full, and their worked examples are exact: Titan's Fig. 1 (machines in use, traffic,
the reductions), Tiresias on its 60-job trace job by job against its authors' simulator, and
NetPack's Fig. 14 theory lines; Cassini's Fig. 4.2 runs on the simulator with its gap swept, and of
its Table 4.3 the snapshot of two identical jobs. The long
sweeps (NetPack's Figs. 9, 11, 12), the Cassini trace and MLTCP's slope sweep are `reproduce NAME`'s to
run; their comparisons are tested here on given statistics or timelines.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess

import pytest
from conftest import CLI, ROOT

from common.errors import ConfigError, EmulationError
from experiment import BACKENDS
from reproduce import REPRODUCTIONS, get
from reproduce.base import OWN_CLOCKS, Context, Figure, Reproduction
from reproduce.run import catalogue_lines, choose_backend, run_reproduction


@pytest.mark.parametrize("name,backend", [(n, b) for n, cls in REPRODUCTIONS.items() for b in cls.backends])
def test_every_reproduction_validates_what_it_would_run(name, backend):
    """Each reproduction's configs (every sweep point) are valid on each back end it offers, checked
    without running; the registry's keys are the reproductions' names."""
    repro = get(name)
    assert repro.name == name and repro.paper and repro.source and repro.claim
    assert repro.minutes is None or repro.minutes > 0
    assert set(repro.backends) <= {*BACKENDS, *OWN_CLOCKS}
    what = repro.check(backend)
    assert isinstance(what, str) and what


def test_unknown_names_and_back_ends_are_refused_with_the_valid_ones():
    with pytest.raises(ConfigError, match="valid: titan-fig1, titan-sim, titan-testbed, tiresias-60job, "
                                          "tiresias-480job, tiresias-table5, netpack-fig6"):
        get("titan-fig2")
    with pytest.raises(ConfigError, match="runs on durations, not 'sim'"):
        choose_backend(get("tiresias-60job"), "sim")
    assert choose_backend(get("titan-fig1"), None) == "sim"
    assert choose_backend(get("titan-fig1"), "emu") == "emu"


def test_a_figure_compares_with_the_nearest_end_of_the_papers_range():
    inside = Figure("q", 90.0, (87.0, 92.0), "Fig. 11")
    below = Figure("q", 43.5, (87.0, 92.0), "Fig. 11")
    above = Figure("q", 1.0, (0.5, 0.5), "Fig. 14b")
    zero = Figure("q", 0.2, (0.0, 0.0), "Fig. 1")
    assert (inside.ratio, inside.agrees, inside.paper_text()) == (1.0, True, "87-92")
    assert (below.ratio, below.agrees) == (0.5, False)
    assert (above.ratio, above.agrees, above.paper_text()) == (2.0, False, "0.5")
    assert (zero.ratio, zero.agrees) == (None, False)
    assert Figure("q", None, (1.0, 1.0), "x").agrees is None
    with pytest.raises(ValueError):
        Figure("q", 1.0, (2.0, 1.0), "x")


def _run(name: str, tmp_path, backend: str | None = None) -> tuple[dict, list[dict], str]:
    said: list[str] = []
    out = run_reproduction(name, str(tmp_path), backend, say=said.append, say_table=said.append)
    with open(os.path.join(out, "reproduction.json")) as f:
        data = json.load(f)
    with open(os.path.join(out, "reproduction.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(out, "status.json")) as f:
        assert json.load(f)["status"] == "complete"
    assert os.path.getsize(os.path.join(out, "reproduction.png")) > 10_000
    assert len(rows) == len(data["figures"]) > 0
    assert any(line.startswith(f"{name}: ") for line in said)
    return data, rows, out


def test_titan_fig1_comes_out_as_the_paper_gives_it(tmp_path):
    """Titan §5.1 on the simulator: 4/3/3 machines, 0/1.5M/M of traffic, 33.3% and 25% cut, all exact."""
    data, rows, out = _run("titan-fig1", tmp_path)
    by = {f["quantity"]: f for f in data["figures"]}
    assert by["cross-machine traffic per allreduce, HiveD"]["ours"] == pytest.approx(1.5)
    assert by["machines in use, ElasticFlow"]["ours"] == 4
    assert by["Titan's traffic reduction against HiveD"]["ours"] == pytest.approx(100 / 3)
    assert all(f["agrees"] for f in data["figures"]), data["figures"]
    assert data["runs"] == ["run"] and os.path.isfile(os.path.join(out, "run", "summary.json"))


def test_tiresias_reproduces_its_authors_simulator_job_by_job(tmp_path):
    """Every one of the 60 jobs has the authors' JCT under Tiresias-L (both timings) and Tiresias-G."""
    data, rows, out = _run("tiresias-60job", tmp_path)
    jobs = [f for f in data["figures"] if f["quantity"].startswith("jobs with")]
    assert [f["ours"] for f in jobs] == [60, 60, 60] and all(f["agrees"] for f in data["figures"])
    with open(os.path.join(out, "jct.csv"), newline="") as f:
        assert len(list(csv.DictReader(f))) == 60


def test_tiresias_480_job_workload_has_the_papers_mix_arrivals_and_range():
    """The testbed workload (§5.1): 240/40/80/90/25/5 jobs of 1/2/4/8/16/32 GPUs, 48 of each of the ten
    models, arrivals about 30 s apart, every training time in 2 min-2 h under both readings, the
    clipped reading's the real trace's own times; seeded."""
    from collections import Counter

    from experiment.config.tiresias_workload import DURATIONS, MODELS, in_range, testbed_jobs

    real = [60.0, 100.0, 150.0, 1000.0, 7000.0, 9000.0, 4_000_000.0]
    assert in_range(real, "clipped") == [150.0, 1000.0, 7000.0]
    scaled = in_range(real, "log-scaled")
    assert scaled[0] == pytest.approx(120.0) and scaled[-1] == pytest.approx(7200.0) and scaled == sorted(scaled)
    for reading in DURATIONS:
        rows = testbed_jobs(3, reading, real)
        assert Counter(r.num_gpu for r in rows) == {1: 240, 2: 40, 4: 80, 8: 90, 16: 25, 32: 5}
        assert Counter(r.model_name for r in rows) == dict.fromkeys(MODELS, 48)
        assert 20 < rows[-1].submit_time / (len(rows) - 1) < 40
        assert all(119.99 <= r.duration <= 7200.01 for r in rows)
        assert rows == testbed_jobs(3, reading, real) and rows != testbed_jobs(4, reading, real)
    with pytest.raises(ConfigError, match="durations must be one of clipped, log-scaled"):
        in_range(real, "scaled")


def test_tiresias_480_job_figures_are_each_scheduler_over_tiresias_l():
    """A scheduler's statistic over Tiresias-L's where the paper gives a factor, the statistic itself
    where it gives a value; the statistics from a run of the durations clock (JCT, makespan,
    queueing delay of distributed jobs only, preemptions)."""
    from experiment.config.tiresias_workload import WorkloadJob
    from reproduce.tiresias import SCHEDULERS, workload_figures, workload_stats

    rows = [WorkloadJob(0, 60, 0.0, "vgg16", 100.0, 0.0), WorkloadJob(1, 1, 10.0, "vgg16", 10.0, 10.0),
            WorkloadJob(2, 2, 20.0, "vgg16", 10.0, 10.0)]
    yarn = workload_stats(rows, "yarn_cs")  # the 60-GPU job holds the cluster for 100 s, the others wait
    assert yarn["jct_mean"] == pytest.approx((100 + 100 + 90) / 3) and yarn["makespan"] == pytest.approx(110.0)
    assert yarn["wait_mean"] == pytest.approx((0 + 80) / 2) and yarn["preemptions"] == 0  # the 60- and 2-GPU jobs
    las = workload_stats(rows, "tiresias")
    assert las["jct_mean"] < yarn["jct_mean"]
    stats = {label: {k: 2.0 if label == "YARN-CS" else 1.0 for k in yarn} for label, _ in SCHEDULERS}
    figures = {f.quantity: f.ours for f in workload_figures(stats)}
    assert figures["average JCT, YARN-CS over Tiresias-L"] == 2.0 and figures["makespan, Tiresias-L"] == 1.0
    assert figures["average JCT, SRTF over Tiresias-L"] == 1.0


def test_netpack_fig14_follows_the_papers_lines(tmp_path):
    data, rows, _ = _run("netpack-fig14", tmp_path)
    assert all(r["agrees"] == "True" for r in rows), rows
    two = {f["quantity"]: f["ours"] for f in data["figures"] if f["quantity"].startswith("two jobs")}
    assert two["two jobs' aggregation ratios at PAT ratio 1, the lower"] == pytest.approx(0.5)


def test_titan_sim_sets_each_policy_over_titan_beside_the_papers(tmp_path, monkeypatch):
    """Titan's simulation on the first 200 jobs of its trace: every figure is a policy's mean over Titan's
    (the paper's beside it: ElasticFlow's machines 334 / 174), read from the run's cluster figures."""
    import reproduce.titan as titan
    from reproduce.runs import load

    cfg = load(titan.SIM_CONFIG)
    small = tmp_path / "titan_sim.yaml"
    with open(os.path.join(ROOT, titan.SIM_CONFIG)) as f:
        text = f.read().replace("../traces/", os.path.join(ROOT, "traces") + "/")
    small.write_text(text.replace("  collective: hd\n", "  collective: hd\n  max_jobs: 200\n"))
    assert load(str(small)).trace.max_jobs == 200 and cfg.trace.collective == "hd"
    monkeypatch.setattr(titan, "SIM_CONFIG", str(small))
    data, rows, out = _run("titan-sim", tmp_path / "out")
    fig = {f["quantity"]: f for f in data["figures"]}
    assert fig["used machines, ElasticFlow over Titan"]["paper_low"] == pytest.approx(334 / 174)
    with open(os.path.join(out, "run", "summary.json")) as f:
        cluster = {p["policy"]: p["cluster"] for p in json.load(f)["policies"]}
    assert fig["used machines, HiveD over Titan"]["ours"] == pytest.approx(
        cluster["hived"]["used_machines_mean"] / cluster["titan"]["used_machines_mean"])
    assert fig["fragmentation rate, Titan"]["ours"] == cluster["titan"]["fragmentation_rate_mean"]


def test_titan_testbed_compares_at_the_papers_points_and_says_who_could_not_place(tmp_path):
    """On the simulator: Titan's testbed at 4-12 workers of ResNet-50 and VGG-16 under the four policies. With
    two idle machines ElasticFlow cannot place 10 or 12 workers (it needs three: docs/resolutions.md Titan
    §4.2), so its throughput at 12 is missing and said; Titan's default guard takes both idle machines
    at 12 workers, where the paper's Titan kept one (the spec: it needs a guard of 2.75 or more)."""
    data, rows, out = _run("titan-testbed", tmp_path, "sim")
    fig = {f["quantity"]: f for f in data["figures"]}
    assert fig["training throughput, ElasticFlow over Titan, resnet50 at 12 workers"]["ours"] is None
    assert "resnet50 at 12 workers: elasticflow could not place the job" in data["notes"]
    assert fig["idle machines Titan leaves at 12 workers (VGG-16)"]["ours"] == 0
    comm = fig["communication time per epoch, HiveD over Titan, vgg16 at 8 workers"]
    assert comm["paper_low"] == pytest.approx(12.0 / 8.7) and comm["ours"] > 1
    assert sorted(os.listdir(out)) == sorted([f"{m}-{w}" for m in ("resnet50", "vgg16") for w in (4, 6, 8, 10, 12)]
                                             + ["reproduction.csv", "reproduction.json", "reproduction.png",
                                                "reproduction.txt", "status.json"])


def test_fig7s_gains_are_each_baselines_jct_and_de_against_netpacks():
    """NetPack at JCT 10 s and DE 0.8; GB at 14.5 s and 0.5: a JCT reduction of 14.5 / 10 - 1 = 45% and a DE
    improvement of 0.8 / 0.5 - 1 = 60% in the paper's reading; a baseline without a JCT is left out."""
    from types import SimpleNamespace

    from reproduce.netpack import NetPackFig7

    def run(jct, de):
        return SimpleNamespace(summary=SimpleNamespace(jct_mean_s=jct, distribution_efficiency=de))

    out = SimpleNamespace(runs={"netpack": run(10.0, 0.8), "gpu_balance": run(14.5, 0.5), "tetris": run(None, None)})
    jct, de = NetPackFig7.gains(out)
    assert jct == {"gpu_balance": pytest.approx(45.0)} and de == {"gpu_balance": pytest.approx(60.0)}


def test_netpacks_average_reduction_is_the_mean_over_the_papers_five_baselines():
    """At 1:1, the five baselines at 1.08, 1.01, 1.30, 1.08, 1.01 of NetPack's JCT: in the paper's
    reading (the bar above NetPack's) (0.08 + 0.01 + 0.30 + 0.08 + 0.01) / 5 = 9.6%; read as the
    share saved, 8.0%. NetPack's own row, Comb (Fig. 13's alone) and a policy without a figure are
    left out; the sweeps run NetPack and the five."""
    from experiment.run.sweep import SweepStat
    from reproduce.netpack import OTHER_READING, PAPER_BASELINES, mean_reduction, paper_policies
    from reproduce.runs import load

    norms = {"netpack": 1.0, "gpu_balance": 1.08, "flow_balance": 1.01, "least_fragmentation": 1.30,
             "optimus": 1.08, "tetris": 1.01, "comb": 1.50, "broken": None}
    stats = [SweepStat(1, p, 10, 0, v, 0.0, None, None) for p, v in norms.items()]
    assert mean_reduction(stats, 1) == pytest.approx(9.6)
    share = 100 * sum(1 - 1 / norms[p] for p in PAPER_BASELINES) / 5
    assert mean_reduction(stats, 1, OTHER_READING) == pytest.approx(share) and 7.9 < share < 8.0
    assert mean_reduction(stats, 20) is None
    assert paper_policies(load("experiments/netpack_sim.yaml")).policies == ("netpack", *PAPER_BASELINES)


def test_netpacks_testbed_is_the_prototypes_trace_on_one_rack_of_five_2_gpu_servers():
    """experiments/netpack_testbed.yaml: the injector's 20 demands one second apart, each job's model
    the draw of random.Random(1) from the paper's pool, on one 100 Gbit/s rack of 5 x 2 GPUs; Fig. 11's
    gap is swept at its own setting, PAT 0."""
    import random

    from reproduce.netpack import CONFIG_TESTBED, NetPackFig11
    from reproduce.runs import load

    cfg = load(CONFIG_TESTBED)
    demands = [3, 1, 1, 2, 2, 3, 5, 2, 3, 2, 2, 5, 2, 1, 3, 3, 1, 3, 1, 2]
    draw = random.Random(1)
    pool = ["vgg11", "vgg16", "vgg19", "alexnet", "resnet50", "resnet101"]
    assert [(j.workers, j.model, j.arrival_s, j.collective) for j in cfg.jobs] == [
        (d, draw.choice(pool), float(i), "ina") for i, d in enumerate(demands)]
    t = cfg.topology.params
    assert (t["n_leaf"], t["hosts_per_leaf"], t["gpus_per_machine"], t["host_bw_mbps"]) == (1, 5, 2, 100_000)
    assert cfg.ina.results == "multicast" and cfg.iterations == 10
    s = NetPackFig11.sensitivity
    assert s.base(NetPackFig11().base()).ina.pat_gbps == 0 and NetPackFig11().base().ina.pat_gbps == 100


def test_fig13s_workloads_are_the_real_demands_and_the_prototypes_poisson_and_normal_draws():
    """Poisson(2) and Normal(2, 2) from numpy's default_rng(1), cast to int, each between 1 and the rack's
    10 GPUs; the real workload is the trace's own demands. Fig. 13 runs NetPack and Comb on each."""
    import numpy as np

    from reproduce.netpack import NetPackFig13, workload_demands

    real = [3, 1, 1, 2, 2, 3, 5, 2, 3, 2, 2, 5, 2, 1, 3, 3, 1, 3, 1, 2]
    assert workload_demands("real", real, 10) == real
    poisson = [min(10, max(1, int(d))) for d in np.random.default_rng(1).poisson(2.0, 20)]
    normal = [min(10, max(1, int(d))) for d in np.random.default_rng(1).normal(2.0, 2.0, 20).astype(int)]
    assert workload_demands("poisson", real, 10) == poisson and workload_demands("normal", real, 10) == normal
    assert min(normal) == 1 and any(d <= 0 for d in np.random.default_rng(1).normal(2.0, 2.0, 20).astype(int))
    configs = NetPackFig13().configs()
    assert [c.policies for c in configs.values()] == [("netpack", "comb")] * 3
    assert [j.workers for j in configs["poisson"].jobs] == poisson
    with pytest.raises(ValueError, match="unknown workload 'uniform'"):
        workload_demands("uniform", real, 10)


def test_a_sweeps_trust_is_every_policy_runs_verdict_and_none_on_the_simulator(tmp_path):
    """Each point's summary.json holds its policies' verdicts: counted over the sweep, each flagged one
    named with its point and reasons; a sweep whose runs carry no verdict (the simulator's) has no line."""
    from reproduce.netpack import CONFIG_TESTBED
    from reproduce.runs import load, sweep_trust_note

    cfg = load(CONFIG_TESTBED)
    verdicts = {"pat_gbps=0/seed-1": [("netpack", True, []), ("comb", False, ["CPU saturated"])],
                "pat_gbps=50/seed-1": [("netpack", True, []), ("comb", True, [])]}
    for path, policies in verdicts.items():
        os.makedirs(tmp_path / path)
        (tmp_path / path / "summary.json").write_text(json.dumps({"policies": [
            {"policy": p, "trustworthy": ok, "fidelity_reasons": why} for p, ok, why in policies]}))
    assert sweep_trust_note(cfg, "ina.pat_gbps=0,50", (1,), str(tmp_path), "emu") == (
        "the fidelity monitor trusted 3 of the sweep's 4 policy runs; flagged: pat_gbps=0/seed-1 comb (CPU saturated)")
    for path in verdicts:
        (tmp_path / path / "summary.json").write_text(json.dumps({"policies": [
            {"policy": "netpack", "trustworthy": None, "fidelity_reasons": []}]}))
    assert sweep_trust_note(cfg, "ina.pat_gbps=0,50", (1,), str(tmp_path), "sim") is None


def test_cassinis_speedup_is_themis_pooled_iteration_times_over_the_policys():
    """Iteration times pooled over jobs (each iteration from its first start to its last end), their
    mean and p99, and Themis's over the policy's; the Ideal run's jobs that overlapped are counted."""
    from types import SimpleNamespace

    from experiment.reporting.timeline import UpPhase
    from reproduce.cassini import iteration_times, overlapping, speedups, stats

    timeline = (UpPhase("a", 0, 0.0, 0.5, 1.0), UpPhase("b", 0, 0.2, 0.4, 3.2), UpPhase("a", 1, 1.0, 1.5, 3.0))
    assert iteration_times(timeline) == [1.0, 3.0, 2.0]
    themis, cassini = stats([100.0, 200.0, 300.0]), stats([50.0, 100.0, 150.0])
    assert themis["mean"] == 200.0 and themis["p99"] == pytest.approx(298.0)
    assert speedups(themis, cassini) == {"mean": pytest.approx(2.0), "p99": pytest.approx(2.0)}
    assert speedups(themis, stats([])) == {"mean": None, "p99": None}
    jobs = [SimpleNamespace(start_s=s, end_s=e) for s, e in ((0, 10), (20, 30), (25, 40), (50, 60))]
    assert overlapping(SimpleNamespace(jobs=jobs)) == 1
    jobs = [SimpleNamespace(start_s=s, end_s=e) for s, e in ((0, 100), (20, 30), (40, 50), (100, 110))]
    assert overlapping(SimpleNamespace(jobs=jobs)) == 2


def test_cassini_fig411_runs_three_seeds_of_the_theses_jobs_on_its_13_switch_fabric():
    """Fig. 4.11 runs the thesis's setup: 24 single-GPU machines under 6 ToRs of 2 uplinks, 4
    aggregation switches and 3 cores (13 switches, 48 links), three seeds of a 40-job trace whose jobs
    have 200-1,000 iterations and 1-12 workers, each with its Ideal (every job alone)."""
    from experiment.config import schema as config
    from reproduce.cassini import BASE, CassiniFig411
    from topo.schema import switches

    runs = CassiniFig411().configs()
    assert [seed for seed, _, _ in runs] == [1, 2, 3]
    assert len({cfg.trace.file for _, cfg, _ in runs}) == 3
    for seed, cfg, alone in runs:
        g = config.validate(cfg, backend="sim")
        assert (len(switches(g)), g.number_of_edges()) == (13, 48)
        assert all(g.degree(t) == 4 + 2 for t in switches(g) if g.nodes[t]["tier"] == "edge")  # 2:1
        with open(cfg.trace.file, newline="") as f:
            jobs = list(csv.DictReader(f))
        assert len(jobs) == 40 and all(200 <= int(j["iterations"]) <= 1000 and 1 <= int(j["num_gpu"]) <= 12
                                       for j in jobs)
        assert alone.policies == (BASE,) and alone.trace.file == cfg.trace.file and alone.seed == seed


def test_cassini_fig411s_gap_is_swept_over_the_jobs_compute_time(tmp_path, monkeypatch):
    """The gap's sweep runs the first seed's Themis and Th+Cassini at each compute time: one mean speed-up
    per value, against the paper's mean, and the p99s in words; the faster the GPUs, the shorter
    Themis's iterations."""
    from reproduce import cassini
    from reproduce.runs import sweep_timelines

    fig = cassini.CassiniFig411()
    seed, cfg, alone = fig.configs()[0]
    trace = tmp_path / "two.csv"  # two 4-GPU jobs of about 20 iterations, the second 1 s after the first
    trace.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                     "0,4,0.0,20,vgg16,5.56,0.0\n1,4,1.0,20,vgg19,7.04,1.0\n")
    small = dataclasses.replace(cfg, trace=dataclasses.replace(cfg.trace, file=str(trace)))
    monkeypatch.setattr(cassini.CassiniFig411, "configs", lambda self: [(seed, small, alone)])
    monkeypatch.setattr(cassini, "FIG411_SENSITIVITY",
                        dataclasses.replace(cassini.FIG411_SENSITIVITY, vary="trace.compute_scale=1,0.5"))
    figure = Figure(cassini.MEAN_SPEEDUP, 1.0, (1.6, 1.6), cassini.SOURCE, "x")
    explanation, sweep_dir, p99s = fig.explain(Context(str(tmp_path), lambda line: None), figure)
    assert explanation.target == 1.6 and [x for x, _ in explanation.points] == [1.0, 0.5]
    assert all(y is not None and y > 0 for _, y in explanation.points)
    assert p99s.startswith("1: ") and "; 0.5: " in p99s
    themis = {value: sum(p.end_s - p.start_s for p in t) / len(t) for value, _, t in sweep_timelines(
        dataclasses.replace(small, policies=(cassini.BASE, cassini.CASSINI)), "trace.compute_scale=1,0.5", (1,),
        sweep_dir, cassini.BASE, "sim")}
    assert themis[0.5] < themis[1]


def test_cassini_fig42_shift_beats_no_shift_at_p90_on_each_job(tmp_path):
    """Fig. 4.2 on the simulator: Cassini's shift lowers each job's and the pooled p90 iteration time
    below the unshifted run's, by the same for both identical jobs; the shift is on one job only, half
    its period (the rotation that interleaves two identical jobs); no trust verdict off the emulator.
    Its gap swept: the faster the links, the smaller the share of an iteration spent communicating
    and the gain; the paper's 1.26 is reached inside the swept range."""
    data, rows, out = _run("cassini-fig4.2", tmp_path, "sim")
    by = {f["quantity"]: f for f in data["figures"]}
    p90 = [f["ours"] for q, f in by.items() if q.startswith("p90 iteration time")]
    assert len(p90) == 3 and all(g > 1.2 for g in p90) and p90[0] == pytest.approx(p90[1])
    (shift,) = [f for q, f in by.items() if q.startswith("Cassini's time shift")]
    assert shift["paper_low"] == 120.0 and shift["ours"] > 0
    (period,) = [n for n in data["notes"] if n.startswith("Cassini profiled")]
    assert "at a period of 544 ms and shifted vgg19-b by 272 ms, 0.50 of it" in period
    assert not any("fidelity monitor" in n for n in data["notes"]) and data["runs"] == ["run", "sensitivity"]
    (swept,) = data["explanations"]
    shares, gains = zip(*swept["points"], strict=True)
    assert swept["quantity"] == "p90 iteration time, no shift over Cassini's shift, pooled"
    assert list(shares) == sorted(shares, reverse=True) and list(gains) == sorted(gains, reverse=True)
    assert gains[0] == pytest.approx(p90[2]) and shares[-1] < swept["reaches"] < shares[0]


def test_cassinis_snapshots_are_table_4_3_with_the_compute_times_table_3_1_implies():
    """Table 4.3's five snapshots, scores and gains; a job's compute time is its fair iteration time in
    Table 3.1 less its Themis communication time where Table 3.1 has it (snapshots 1, 2 and 5), else 0
    (the profile's); each snapshot's jobs share one uplink of one machine's rate."""
    from reproduce.cassini_snapshots import SNAPSHOTS

    assert [s.score for s in SNAPSHOTS] == [1.0, 1.0, 0.9, 0.8, 0.6]
    compute = {(s.index, j.name): j.compute_ms for s in SNAPSHOTS for j in s.jobs}
    assert compute[1, "wide_resnet101"] == 89 and compute[1, "vgg16"] == 95 and compute[2, "resnet50"] == 112
    assert compute[5, "bert"] == 107 and compute[3, "vgg19"] == compute[4, "roberta-a"] == 0
    assert SNAPSHOTS[0].gain == pytest.approx((206 / 138 + 199 / 148) / 2)
    assert SNAPSHOTS[4].settings()[:2] == ["topology.hosts_per_leaf=3", "topology.oversubscription=3"]


def test_a_snapshot_of_two_identical_jobs_is_fully_compatible_and_interleaves(tmp_path):
    """Snapshot 4 (two RoBERTa jobs) on the simulator: score 1, the second job shifted by half its
    period, and each job's communication time halved against the unshifted run's (the uplink no
    longer shared); every shift is in the decision log."""
    from reproduce.base import Context
    from reproduce.cassini import logged_shifts
    from reproduce.cassini_snapshots import SHIFTED, UNSHIFTED, CassiniTable43, comm_gains, score, shifts_ms
    from reproduce.runs import run_config

    (snap, cfg), = [(s, c) for s, c in CassiniTable43().configs() if s.index == 4]
    out = run_config(cfg, Context(str(tmp_path), lambda _: None), "snapshot4")
    shifted = out.runs[SHIFTED]
    period = {s["job"]: s["period_s"] for s in logged_shifts(shifted)}
    assert score(shifted) == 1.0
    assert shifts_ms(shifted)["roberta-b"] == pytest.approx(period["roberta-b"] * 1e3 / 2, rel=0.05)
    assert all(g > 1.9 for g in comm_gains(out.runs[UNSHIFTED], shifted).values())


def test_mltcp_counts_interleaving_and_gains_over_a_pooled_timeline():
    """Two jobs that overlap fully for 3 iterations and then not at all are interleaved from the 4th
    (both jobs; none while one never is); iteration times are start to start, pooled; gains are the
    base's mean and p99 over the other's; the slope trend may not grow, 'never' counting as the most."""
    from experiment.reporting.timeline import UpPhase
    from reproduce.mltcp import gains, pair, slope_trend

    def job(name, period, overlaps, marks=2.0):
        return [UpPhase(name, i, i * period, i * period + 0.5, (i + 1) * period, marks, x)
                for i, x in enumerate(overlaps)]

    mltcp = pair(job("a", 1.0, [1, 1, 1] + [0] * 6) + job("b", 1.0, [1, 1, 0.5] + [0.01] * 6))
    assert mltcp.interleaved_from == 3 and mltcp.times == (1.0,) * 16 and mltcp.marks == 2.0
    assert mltcp.overlap_last == pytest.approx(0.005)
    base = pair(job("a", 2.0, [1] * 9) + job("b", 2.0, [1] * 9))
    assert base.interleaved_from is None and base.overlap_mean == 1.0
    assert pair(job("a", 1.0, [0] * 9) + job("b", 1.0, [1] * 9)).interleaved_from is None
    assert gains(base, mltcp) == {"mean": pytest.approx(2.0), "p99": pytest.approx(2.0)}
    assert slope_trend([(0, None), (1, 12), (0.5, 19), (20, 4), (8, 4)])
    assert not slope_trend([(0, None), (1, 12), (2, 14)]) and not slope_trend([(1, None), (0, 10)])


def test_the_command_lists_runs_and_refuses_in_one_line(tmp_path):
    listing = subprocess.run([*CLI, "reproduce", "--list"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0 and all(name in listing.stdout for name in REPRODUCTIONS)
    assert "\n".join(catalogue_lines()) in listing.stdout
    ran = subprocess.run([*CLI, "reproduce", "tiresias-60job", "--results", str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "jobs with the reference's JCT, Tiresias-G" in ran.stdout and "reproduction.png" in ran.stdout
    for argv in (["reproduce", "titan-fig2"], ["reproduce", "tiresias-60job", "--backend", "emu"]):
        bad = subprocess.run([*CLI, *argv, "--results", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("error: "), bad.stderr
    assert len(os.listdir(tmp_path)) == 1  # the refused ones made no directory


class _Refused(Reproduction):
    """Refused by the machine before it runs anything (as the emulator refuses a user who is not root)."""

    name, paper, source, claim, minutes = "refused", "-", "-", "-", 0.01

    def check(self, backend):
        return "nothing"

    def run(self, ctx):
        raise EmulationError("this machine cannot run it")


class _Failed(_Refused):
    """Fails after its run wrote something."""

    name = "failed"

    def run(self, ctx):
        with open(ctx.path("partial.csv"), "w") as f:
            f.write("x\n")
        raise EmulationError("the run failed")


def test_a_refused_reproduction_leaves_no_directory_and_a_failed_one_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(REPRODUCTIONS, "refused", _Refused)
    monkeypatch.setitem(REPRODUCTIONS, "failed", _Failed)
    with pytest.raises(EmulationError, match="cannot run it"):
        run_reproduction("refused", str(tmp_path), say=lambda m: None)
    assert os.listdir(tmp_path) == []
    with pytest.raises(EmulationError, match="the run failed"):
        run_reproduction("failed", str(tmp_path), say=lambda m: None)
    (kept,) = os.listdir(tmp_path)
    with open(tmp_path / kept / "status.json") as f:
        status = json.load(f)
    assert status["status"] == "failed" and "the run failed" in status["detail"]
    assert sorted(os.listdir(tmp_path / kept)) == ["partial.csv", "status.json"]


class _Backends(_Refused):
    """Says which back end it ran on."""

    name, backends = "backends", ("emu", "sim")

    def run(self, ctx):
        from reproduce.base import Outcome

        return Outcome((Figure(f"ran on {ctx.backend}", 1.0, (1.0, 1.0), "-"),))


class _DurationsOnly(_Backends):
    name, backends = "durations-only", ("durations",)


def test_all_runs_each_on_the_back_end_asked_where_it_offers_it(tmp_path, monkeypatch, capsys):
    """`reproduce all --backend sim` runs an emulator-first reproduction on the simulator and one that
    runs on durations alone on durations; named, that one is refused."""
    import reproduce
    import run_testbed

    monkeypatch.setattr(reproduce, "REPRODUCTIONS", {"backends": _Backends, "durations-only": _DurationsOnly})
    assert run_testbed.main(["reproduce", "all", "--backend", "sim", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ran on sim" in out and "ran on durations" in out and "ran on emu" not in out
    assert run_testbed.main(["reproduce", "durations-only", "--backend", "sim", "--results", str(tmp_path)]) == 2


def test_a_gap_is_swept_to_where_ours_reaches_the_papers():
    """Ours at 6, 15, 40 and 70 across four values: the paper's 52 is reached 40% of the way from
    the third value to the fourth; the first value on the target is that value; a series that
    never reaches it gives None (and says so); a missing point is stepped over."""
    from reproduce.sensitivity import Explanation, Sensitivity, reaching

    points = ((100.0, 6.0), (40.0, 15.0), (25.0, 40.0), (10.0, 70.0))
    assert reaching(points, 52.0) == pytest.approx(25.0 + (10.0 - 25.0) * 0.4)
    assert reaching(points, 6.0) == 100.0 and reaching(points, 80.0) is None
    assert reaching(((1.0, 90.0), (2.0, None), (3.0, 50.0)), 70.0) == pytest.approx(2.0)
    s = Sensitivity("average JCT reduction at 1:1", "the link rate (Gbit/s)", "topology.host_bw_mbps=1,2", (1,),
                    "not stated for its simulator")
    e = Explanation(s, 52.0, points)
    assert e.text() == ("average JCT reduction at 1:1: with the link rate (Gbit/s) swept (100: 6, 40: 15, 25: 40, "
                        "10: 70), ours reaches the paper's 52 at 19; the paper: not stated for its simulator")
    assert e.to_dict()["reaches"] == pytest.approx(19.0) and e.to_dict()["points"][0] == [100.0, 6.0]
    assert "does not reach the paper's 80 in this range" in Explanation(s, 80.0, points).text()


class _Explained(_Refused):
    """Compares one figure and explains its gap."""

    name = "explained"

    def run(self, ctx):
        from reproduce.base import Outcome
        from reproduce.sensitivity import Explanation, Sensitivity

        s = Sensitivity("x", "p", "a.b=1,2", (1,), "not stated")
        return Outcome((Figure("x", 1.0, (2.0, 2.0), "Fig. 1"),), ("a note",),
                       explanations=(Explanation(s, 2.0, ((1.0, 1.0), (2.0, 3.0))),))


def test_the_summary_counts_each_papers_figures_close_explained_different_or_missing(tmp_path):
    """Within 20% of the paper's nearest end is close (1.15, and an exact 0 on a 0); far but reached by
    its swept parameter is explained; far and not reached, or not swept, differs; None is not measured.
    Per paper, the counts and minutes add up."""
    from reproduce.run import summary_lines, summary_rows, verdict

    explained = [{"quantity": "b", "reaches": 30.0}, {"quantity": "c", "reaches": None}]

    def fig(q, ours, ratio, agrees):
        return {"quantity": q, "ours": ours, "ratio": ratio, "agrees": agrees}

    figures = [fig("a", 1.15, 1.15, False), fig("z", 0.0, None, True), fig("b", 10.0, 0.2, False),
               fig("c", 10.0, 0.2, False), fig("d", 3.0, 3.0, False), fig("e", None, None, None)]
    assert [verdict(f, explained) for f in figures] == ["close", "close", "explained", "differs", "differs",
                                                         "not measured"]
    dirs = []
    for name, paper, wall_s in (("one", "P", 60.0), ("two", "P", 30.0), ("three", "Q", 6.0)):
        d = tmp_path / name
        d.mkdir()
        (d / "reproduction.json").write_text(json.dumps({"name": name, "paper": paper, "backend": "sim",
                                                         "wall_s": wall_s, "figures": figures,
                                                         "explanations": explained}))
        dirs.append(str(d))
    rows = summary_rows(dirs)
    assert [(r["close"], r["explained"], r["differs"], r["not measured"]) for r in rows] == [(2, 1, 2, 1)] * 3
    lines = summary_lines(rows)
    assert any(line.split()[:8] == ["all", "of", "P", "P", "1.5", "4", "2", "4"] for line in lines), lines


def test_an_explained_gap_is_printed_and_written(tmp_path, monkeypatch):
    monkeypatch.setitem(REPRODUCTIONS, "explained", _Explained)
    printed = []
    out = run_reproduction("explained", str(tmp_path), say=lambda m: None, say_table=printed.append)
    with open(os.path.join(out, "reproduction.json")) as f:
        (explanation,) = json.load(f)["explanations"]
    assert explanation["reaches"] == pytest.approx(1.5) and explanation["paper_says"] == "not stated"
    assert "- the gap, swept: x: with p swept (1: 1, 2: 3), ours reaches the paper's 2 at 1.5; the paper: not stated" \
        in printed
